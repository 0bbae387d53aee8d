package incremental

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

// Backend is what the lifecycle needs of the pebble keyed backend
// (*pebble.Backend[K] for any K).
type Backend interface {
	// SnapshotIncremental takes a native checkpoint (hard links) into dir.
	SnapshotIncremental(id int64, dir string) ([]string, error)
	// RestoreNative opens the native checkpoints given and returns the
	// index of the one adopted as the database (-1: none).
	RestoreNative(cps []pebble.NativeCheckpoint) (base int, err error)
	// ReplayChangelog applies changelog segments to the native checkpoint
	// in dir.
	ReplayChangelog(dir string, segments []string) error
	// SetChangelog, FlushWriteCache and CutChangelog attach, feed and cut
	// the changelog (changelog mode only).
	SetChangelog(c *pebble.Changelog)
	FlushWriteCache() error
	CutChangelog() (pebble.ChangelogSegment, error)
}

var _ Backend = (*pebble.Backend[string])(nil)

// Target is where a checkpoint goes: its directory in the checkpoint
// storage (<job>/chk-<n>; shared files go to the sibling shared/).
type Target struct {
	Store storage.Store
	Dir   string
}

// Snapshot is what the synchronous part of a checkpoint leaves to do.
type Snapshot struct {
	// Async uploads what the checkpoint needs, appends the keyed state
	// handle to st and returns the bytes it uploaded. It runs on another
	// goroutine, once.
	Async func(ctx context.Context, st *checkpoint.SubtaskState) (uploaded int64, err error)
	// Release runs on the task goroutine once Async ended or was
	// abandoned.
	Release func()
}

// Source is the checkpoint (or savepoint) a restore reads.
type Source struct {
	ID        int64
	Savepoint bool // self-contained: no shared files, no local copy
	Store     storage.Store
	Dir       string
}

// RestoreStats says how a restore got its files.
type RestoreStats struct {
	Local      int   // handles restored from the local copy
	Downloaded int   // handles downloaded
	Bytes      int64 // bytes downloaded
	Replayed   int   // changelog segments replayed
}

// Lifecycle is the checkpoint lifecycle of one operator instance's pebble
// keyed state: incremental (or changelog-based) snapshots, their uploads,
// local recovery, the notifications that make a checkpoint the base of the
// next ones, and restores.
//
// Snapshot, NotifyComplete, NotifyAborted, Restore and Close run on the
// task goroutine; a Snapshot's Async on another one. Pending and
// MaterializedBytes may be called from any goroutine. Close waits for the
// background materialization, if one runs.
type Lifecycle struct {
	b   Backend
	inc *incrementalState
	cl  *changelogState // nil unless Options.Changelog.Enabled
}

// New returns the lifecycle of the instance whose backend is b. No
// goroutine starts here; a changelog materialization's runs under ctx
// (and Close).
func New(ctx context.Context, b Backend, opts Options) (*Lifecycle, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	l := &Lifecycle{b: b, inc: newIncrementalState(opts, hex.EncodeToString(rb[:]))}
	if opts.Changelog.Enabled {
		if ctx == nil {
			ctx = context.Background()
		}
		l.cl = newChangelogState(ctx, l.inc, opts)
	}
	return l, nil
}

// Snapshot runs the synchronous part of checkpoint id (never a savepoint:
// those are canonical full snapshots).
func (l *Lifecycle) Snapshot(id int64, t Target) (Snapshot, error) {
	if l.cl != nil {
		return l.cl.snapshot(l.b, id, t)
	}
	return l.inc.snapshot(l.b.SnapshotIncremental, id, t)
}

// NotifyComplete records that checkpoint id completed: its files become
// the base of the next checkpoints, and what it subsumed goes.
func (l *Lifecycle) NotifyComplete(id int64) {
	if l.cl != nil {
		l.cl.complete(id)
		return
	}
	l.inc.complete(id)
}

// NotifyAborted records that checkpoint id aborted.
func (l *Lifecycle) NotifyAborted(id int64) {
	if l.cl != nil {
		l.cl.aborted(id)
		return
	}
	l.inc.aborted(id)
}

// Restore loads the incremental handles into the backend; workDir is a
// directory of the backend's own, on the same device as its database.
func (l *Lifecycle) Restore(ctx context.Context, from Source, handles []checkpoint.KeyedStateHandle, workDir string) (RestoreStats, error) {
	st, err := l.inc.restore(ctx, from, handles, workDir, l.b.RestoreNative, l.b.ReplayChangelog)
	if err == nil && l.cl != nil {
		l.cl.restored(l.inc.base())
	}
	return st, err
}

// Close stops a background materialization and removes the local files
// no restore can use.
func (l *Lifecycle) Close() {
	if l.cl != nil {
		l.cl.close()
	}
	l.inc.close()
}

// Pending returns the number of checkpoints uploaded and not yet known
// complete or aborted.
func (l *Lifecycle) Pending() int {
	if l.cl != nil {
		return l.cl.pendingCount()
	}
	return l.inc.pendingCount()
}

// MaterializedBytes returns the bytes changelog materializations uploaded
// so far (0 without the changelog).
func (l *Lifecycle) MaterializedBytes() int64 {
	if l.cl == nil {
		return 0
	}
	return l.cl.materializedBytes()
}

// LocalCheckpointDir is the local directory of checkpoint id's native
// checkpoint.
func (l *Lifecycle) LocalCheckpointDir(id int64) string { return l.inc.checkpointDir(id) }

// IsDataFile tells the immutable data files of a pebble checkpoint, which
// are shared, from the files rewritten by every checkpoint.
func IsDataFile(name string) bool { return isDataFile(name) }
