package incremental

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/statebackend/snapshot"
	"github.com/weirstream/weir/internal/storage"
)

// incrementalState is the incremental-checkpoint side of one instance.
// complete, aborted, snapshot and restore run on the task goroutine; the
// asynchronous part records its uploads under mu.
type incrementalState struct {
	fs        vfs.FS
	groups    keygroup.Range
	localDir  string
	prefix    string // for object names
	instance  string // random, unique per instance
	keepLocal bool   // LocalRecovery
	workers   int

	// mu guards ledger, the pure core that decides the base, the
	// pending checkpoints and the local directories to remove
	// (internal/statebackend/snapshot): this type carries out its answers.
	mu     sync.Mutex
	ledger *snapshot.Ledger
}

// sharedFile is a data file in <job>/shared/.
type sharedFile = snapshot.SharedFile

func newIncrementalState(opts Options, instance string) *incrementalState {
	return &incrementalState{
		fs:        opts.FS,
		groups:    opts.Groups,
		localDir:  opts.LocalDir,
		prefix:    opts.Prefix,
		instance:  instance,
		keepLocal: opts.LocalRecovery,
		workers:   opts.Workers,
		ledger:    snapshot.NewLedger(opts.LocalRecovery),
	}
}

func (s *incrementalState) checkpointDir(id int64) string {
	return filepath.Join(s.localDir, "chk-"+strconv.FormatInt(id, 10))
}

func isDataFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// snapshot runs the synchronous part of incremental checkpoint id.
func (s *incrementalState) snapshot(take func(id int64, dir string) ([]string, error), id int64, t Target) (Snapshot, error) {
	dir := s.checkpointDir(id)
	if err := s.fs.MkdirAll(s.localDir, 0o755); err != nil {
		return Snapshot{}, fmt.Errorf("incremental checkpoint %d: local state directory: %w", id, err)
	}
	if err := s.fs.RemoveAll(dir); err != nil { // left by an earlier attempt
		return Snapshot{}, fmt.Errorf("incremental checkpoint %d: %w", id, err)
	}
	if _, err := take(id, dir); err != nil {
		return Snapshot{}, err
	}
	base := s.base()
	return Snapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			return s.upload(ctx, id, dir, base, t, st)
		},
		Release: func() {
			s.mu.Lock()
			remove := s.ledger.Released(id)
			s.mu.Unlock()
			if remove {
				_ = s.fs.RemoveAll(dir)
			}
		},
	}, nil
}

// upload is the asynchronous part: it uploads what base does not hold and
// records the handle. It returns the bytes uploaded.
func (s *incrementalState) upload(ctx context.Context, id int64, dir string, base snapshot.Upload, t Target, st *checkpoint.SubtaskState) (int64, error) {
	sharedDir := path.Join(path.Dir(t.Dir), storage.SharedDirName)
	reuse := base.Files != nil && base.Store == any(t.Store)
	h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: s.groups.Start, EndGroup: s.groups.End}
	var reusable map[string]sharedFile
	if reuse {
		h.Base = base.ID
		reusable = base.Files
	}
	up, err := s.uploadDir(ctx, dir, reusable, t.Store, sharedDir, func(name string, data bool) string {
		if data {
			return path.Join(sharedDir, fmt.Sprintf("%s-%s-c%d-%s", s.prefix, s.instance, id, name))
		}
		return path.Join(t.Dir, s.prefix+"-"+name)
	})
	if err != nil {
		return 0, fmt.Errorf("incremental checkpoint %d: %w", id, err)
	}
	for _, f := range up.files {
		h.Size += f.Size
	}
	h.Files = up.files
	if s.keepLocal {
		// Best effort: without the record, a local restore reads every
		// file to check its CRC instead.
		_ = s.writeLocalRecord(dir, up.files)
	}
	st.Keyed = append(st.Keyed, h)
	s.mu.Lock()
	s.ledger.Uploaded(snapshot.Upload{ID: id, Store: t.Store, Files: up.data})
	s.mu.Unlock()
	return up.written, nil
}

// base returns the upload the next checkpoint refers to.
func (s *incrementalState) base() snapshot.Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Base()
}

// complete makes checkpoint id's files the base, once id is known complete.
func (s *incrementalState) complete(id int64) {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Complete(id, local)
	s.mu.Unlock()
	s.removeLocal(remove)
}

// aborted forgets checkpoint id.
func (s *incrementalState) aborted(id int64) {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Aborted(id, local)
	s.mu.Unlock()
	s.removeLocal(remove)
}

// close removes the local checkpoints, but, with LocalRecovery, the
// base's and newer ones: one of them may have completed at the job master
// without the notice having reached this task before it closed (a failure
// in between), and the restore takes it. A local copy is used only after
// every file is checked against the checkpoint's metadata; the next
// completion removes the others.
func (s *incrementalState) close() {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Close(local)
	s.mu.Unlock()
	s.removeLocal(remove)
	if !s.keepLocal {
		_ = s.fs.Remove(s.localDir) // only if empty
	}
}

// pendingCount returns the number of checkpoints uploaded and not yet
// known complete or aborted.
func (s *incrementalState) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ledger.Pending())
}

// localCheckpoints lists the ids of the local checkpoint directories.
func (s *incrementalState) localCheckpoints() []int64 {
	names, err := s.fs.List(s.localDir)
	if err != nil {
		return nil
	}
	var ids []int64
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, "chk-")
		id, err := strconv.ParseInt(digits, 10, 64)
		if ok && err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// removeLocal removes the local checkpoint directories of ids.
func (s *incrementalState) removeLocal(ids []int64) {
	for _, id := range ids {
		_ = s.fs.RemoveAll(s.checkpointDir(id))
	}
}

// restore loads the incremental handles into the backend through
// restoreNative; workDir is a directory of the backend's own (on the same
// device as its database).
//
// A handle with changelog segments (KeyedStateHandle.Changelog) is
// downloaded whole, never restored locally, and replay applies its
// segments, in order, to its native checkpoint before the restore.
func (s *incrementalState) restore(ctx context.Context, from Source, handles []checkpoint.KeyedStateHandle, workDir string,
	restoreNative func([]pebble.NativeCheckpoint) (int, error), replay func(dir string, segments []string) error) (RestoreStats, error) {
	var stats RestoreStats
	var cps []pebble.NativeCheckpoint
	defer func() {
		for _, cp := range cps {
			_ = s.fs.RemoveAll(cp.Dir) // those not adopted
		}
	}()
	for i, h := range handles {
		if !h.Incremental() {
			return stats, fmt.Errorf("checkpoint %s mixes incremental and full keyed state handles for one operator", from.Dir)
		}
		dir := filepath.Join(workDir, fmt.Sprintf("restore-%d", i))
		if err := s.fs.RemoveAll(dir); err != nil {
			return stats, fmt.Errorf("restore into %s: %w", dir, err)
		}
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return stats, fmt.Errorf("restore into %s: %w", dir, err)
		}
		if h.Changelog == 0 && s.restoreLocal(from, h, dir) {
			stats.Local++
		} else {
			n, err := s.download(ctx, from, h, dir)
			if err != nil {
				return stats, fmt.Errorf("download key groups [%d, %d): %w", h.StartGroup, h.EndGroup, err)
			}
			stats.Downloaded++
			stats.Bytes += n
		}
		if h.Changelog != 0 {
			if err := s.replayHandle(h, dir, replay); err != nil {
				return stats, fmt.Errorf("key groups [%d, %d): %w", h.StartGroup, h.EndGroup, err)
			}
			stats.Replayed += h.Changelog
		}
		cps = append(cps, pebble.NativeCheckpoint{Dir: dir, Groups: keygroup.Range{Start: h.StartGroup, End: h.EndGroup}})
	}
	base, err := restoreNative(cps)
	if err != nil {
		return stats, err
	}
	if base < 0 || from.Savepoint {
		return stats, nil
	}
	up := snapshot.Upload{ID: from.ID, Store: from.Store, Files: make(map[string]sharedFile)}
	for _, f := range handles[base].Files {
		if !f.Shared {
			continue
		}
		object, err := storage.ResolveStatePath(from.Dir, f.Path, false)
		if err != nil {
			return stats, err
		}
		up.Files[f.Name] = sharedFile{Object: object, Size: f.Size, CRC: f.CRC}
	}
	s.mu.Lock()
	s.ledger.Restored(up)
	s.mu.Unlock()
	return stats, nil
}
