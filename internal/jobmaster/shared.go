package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// sharedRegistry counts the references to the files under the job's
// shared/ directory (the data files of incremental checkpoints) and says
// when one may be deleted. It is a pure core: events in, file names out;
// the job master deletes what it returns.
//
// A shared file is needed while
//
//   - a retained checkpoint refers to it (Complete .. Discard), or
//   - a pending checkpoint refers to it (an acknowledgement listed it, and
//     the checkpoint neither completed nor aborted yet), or
//   - a task may still refer to it in an acknowledgement not received yet.
//
// The last case is why a file is not deleted as soon as its last retained
// checkpoint is discarded. A task reuses only the shared files of its base:
// the last checkpoint it knows complete (KeyedStateHandle.Base), which
// lags behind the coordinator (the notification is a mail; a barrier may
// overtake it). Every completed checkpoint that lists a file raises the
// file's lastUsed, and every acknowledgement reports its task's base, which
// only grows; so once every task reported a base above a file's lastUsed,
// no acknowledgement to come can list it. Tasks that did not report in the
// current attempt can only refer to the files of the checkpoint the attempt
// restored (the floor), which stays retained until every task acknowledged
// later checkpoints.
//
// Files uploaded for a checkpoint that then aborted are known to no other
// checkpoint (tasks reuse only files of complete checkpoints): Abort returns
// them at once. What a task uploaded without ever acknowledging (it failed
// mid-upload) the job master finds by listing shared/ when an attempt ends,
// when nothing is pending and no task runs (Unreferenced).
type sharedRegistry struct {
	files    map[string]*sharedEntry
	retained map[int64][]string // completed checkpoint -> files it lists
	pending  map[int64][]string // pending checkpoint -> files acknowledged so far
	pinned   map[string]bool    // listed by checkpoints the job does not manage
	bases    map[string]int64   // task -> the last base it reported in this attempt
	floor    int64              // the base of tasks that did not report yet
	// gone holds the most recent names returned for deletion (goneOrder
	// oldest first, at most maxGone): an acknowledgement listing one
	// refers to a file that is no longer there (Gone).
	gone      map[string]bool
	goneOrder []string
}

// maxGone bounds the deleted names the registry remembers.
const maxGone = 1 << 14

type sharedEntry struct {
	refs     int   // retained checkpoints listing the file
	lastUsed int64 // highest completed checkpoint listing it
}

func newSharedRegistry() *sharedRegistry {
	return &sharedRegistry{
		files:    make(map[string]*sharedEntry),
		retained: make(map[int64][]string),
		pending:  make(map[int64][]string),
		pinned:   make(map[string]bool),
		bases:    make(map[string]int64),
		gone:     make(map[string]bool),
	}
}

// Gone returns those of files that the registry returned for deletion: a
// task must never list one in an acknowledgement (it reuses only files of
// checkpoints it knows complete, which are kept), so one that does would
// complete a checkpoint that cannot be restored.
func (r *sharedRegistry) Gone(files []string) []string {
	var out []string
	for _, f := range files {
		if r.gone[f] {
			out = append(out, f)
		}
	}
	return out
}

// deleted remembers names returned for deletion and returns them.
func (r *sharedRegistry) deleted(names []string) []string {
	for _, n := range names {
		if r.gone[n] {
			continue
		}
		r.gone[n] = true
		r.goneOrder = append(r.goneOrder, n)
	}
	for len(r.goneOrder) > maxGone {
		delete(r.gone, r.goneOrder[0])
		r.goneOrder = r.goneOrder[1:]
	}
	return names
}

// Pin protects files listed by checkpoints the job master does not manage
// (left by an earlier process and not recovered): they are never returned.
func (r *sharedRegistry) Pin(files []string) {
	for _, f := range files {
		r.pinned[f] = true
	}
}

// NewAttempt starts an attempt that restored checkpoint floor (0: none).
// Nothing is pending when an attempt starts.
func (r *sharedRegistry) NewAttempt(floor int64) {
	clear(r.bases)
	clear(r.pending)
	r.floor = floor
}

// Ack records an acknowledgement of pending checkpoint id by task: the
// shared files it lists, and the base of its incremental handles (hasBase
// false when it has none: such a task constrains nothing).
func (r *sharedRegistry) Ack(id int64, task string, files []string, base int64, hasBase bool) {
	r.pending[id] = append(r.pending[id], files...)
	if hasBase {
		r.bases[task] = max(r.bases[task], base)
	}
}

// Complete records that checkpoint id completed and is retained, listing
// the files its acknowledgements listed (or files, for a checkpoint
// recovered from storage, when not nil).
func (r *sharedRegistry) Complete(id int64, files []string) {
	if files == nil {
		files = r.pending[id]
	}
	delete(r.pending, id)
	files = slices.Compact(slices.Sorted(slices.Values(files)))
	if _, dup := r.retained[id]; dup {
		return
	}
	r.retained[id] = files
	for _, f := range files {
		e := r.files[f]
		if e == nil {
			e = &sharedEntry{}
			r.files[f] = e
		}
		e.refs++
		e.lastUsed = max(e.lastUsed, id)
	}
}

// Discard records that retained checkpoint id was discarded.
func (r *sharedRegistry) Discard(id int64) {
	files, ok := r.retained[id]
	if !ok {
		return
	}
	delete(r.retained, id)
	for _, f := range files {
		r.files[f].refs--
	}
}

// Abort records that pending checkpoint id aborted and returns the files
// only it listed: uploaded for it, never to be referenced.
func (r *sharedRegistry) Abort(id int64) []string {
	files := r.pending[id]
	delete(r.pending, id)
	var out []string
	for _, f := range slices.Compact(slices.Sorted(slices.Values(files))) {
		if r.files[f] == nil && !r.pinned[f] && !r.pendingRef(f) {
			out = append(out, f)
		}
	}
	return r.deleted(out)
}

// Collect returns the files no retained or pending checkpoint lists and no
// task can list any more, and forgets them: the caller deletes them.
func (r *sharedRegistry) Collect() []string {
	low := r.minBase()
	var out []string
	for f, e := range r.files {
		if e.refs == 0 && e.lastUsed < low && !r.pinned[f] && !r.pendingRef(f) {
			out = append(out, f)
			delete(r.files, f)
		}
	}
	slices.Sort(out)
	return r.deleted(out)
}

// Unreferenced returns those of listed (the names found under shared/) that
// no retained checkpoint lists, forgetting them: to be called when no task
// runs and nothing is pending (between attempts), when every file that no
// retained checkpoint lists is garbage.
func (r *sharedRegistry) Unreferenced(listed []string) []string {
	var out []string
	for _, f := range listed {
		if e := r.files[f]; (e == nil || e.refs == 0) && !r.pinned[f] {
			out = append(out, f)
			delete(r.files, f)
		}
	}
	return r.deleted(out)
}

// Referenced returns the files retained checkpoints list, sorted.
func (r *sharedRegistry) Referenced() []string {
	var out []string
	for f, e := range r.files {
		if e.refs > 0 {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func (r *sharedRegistry) pendingRef(f string) bool {
	for _, files := range r.pending {
		if slices.Contains(files, f) {
			return true
		}
	}
	return false
}

// minBase is the lowest base a task may still refer to.
func (r *sharedRegistry) minBase() int64 {
	if len(r.bases) == 0 {
		return r.floor
	}
	low := int64(math.MaxInt64)
	for b := range maps.Values(r.bases) {
		low = min(low, b)
	}
	return low
}

// --- the job master's side ----------------------------------------------------

// sharedState is the job master's shared-state registry and whether it may
// sweep shared/ (not when a checkpoint's metadata could not be read: the
// files it lists are unknown).
type sharedState struct {
	reg      *sharedRegistry
	noSweep  string // why shared/ is never swept, "" when it may be
	restored int64  // the checkpoint the current attempt restored
}

// sharedInit builds the registry at the start of Run: the checkpoints
// handed to the coordinator as retained (recovered) are registered with
// the shared files their metadata lists, those of every other checkpoint
// directory with metadata are pinned, and then shared/ is swept of what no
// checkpoint lists (uploads of checkpoints an earlier process never
// completed).
func (jm *JobMaster) sharedInit(ctx context.Context, recovered []checkpoint.CompletedCheckpoint) {
	jm.shared.reg = newSharedRegistry()
	isRecovered := map[int64]bool{}
	for _, c := range recovered {
		isRecovered[c.ID] = true
	}
	ids, err := jm.cs.Checkpoints(ctx)
	if err != nil {
		jm.shared.noSweep = fmt.Sprintf("cannot list checkpoints: %v", err)
		jm.log.Warn("shared state: cannot list checkpoints; shared files will not be swept", "err", err)
		return
	}
	for _, id := range ids {
		dir := jm.cs.CheckpointDir(id)
		md, err := jm.cs.ReadMetadata(ctx, dir)
		if errors.Is(err, storage.ErrNotFound) {
			continue // incomplete: lists nothing
		}
		var refs []string
		if err == nil {
			refs, err = storage.SharedRefs(dir, md)
		}
		if err != nil {
			jm.shared.noSweep = fmt.Sprintf("checkpoint %d: %v", id, err)
			jm.log.Warn("shared state: cannot read a checkpoint's metadata; shared files will not be swept", "checkpoint", id, "err", err)
			continue
		}
		if isRecovered[id] {
			jm.shared.reg.Complete(id, append([]string{}, refs...))
		} else {
			jm.shared.reg.Pin(refs)
		}
	}
	jm.sweepShared()
}

// sweepShared deletes the files of shared/ that no retained checkpoint
// lists: only when no task runs and nothing is pending.
func (jm *JobMaster) sweepShared() {
	if jm.shared.noSweep != "" {
		return
	}
	names, err := bounded(jm, func(ctx context.Context) ([]string, error) { return jm.opts.Storage.List(ctx, jm.cs.SharedDir()) })
	if err != nil {
		jm.log.Warn("shared state: cannot list shared files", "err", err)
		return
	}
	jm.deleteShared(jm.shared.reg.Unreferenced(names))
}

// sharedAck records the shared files and bases of an acknowledgement of a
// checkpoint (savepoints never list shared files). It returns an error,
// recording nothing, when the acknowledgement of a pending checkpoint
// lists a shared file already deleted: the checkpoint must then be
// declined, not completed without its state.
func (jm *JobMaster) sharedAck(ack Acknowledge) error {
	opts := jm.targets[ack.Checkpoint]
	late := opts == nil
	if late {
		opts = jm.ended[ack.Checkpoint] // a late acknowledgement: its uploads are released at once
	}
	if opts == nil || opts.Kind != checkpoint.KindCheckpoint {
		return nil
	}
	var files []string
	var base int64 = math.MaxInt64
	hasBase := false
	for _, o := range ack.Operators {
		for _, h := range o.State.Keyed {
			if !h.Incremental() {
				continue
			}
			refs, err := storage.HandleSharedRefs(opts.Dir, h)
			if err != nil {
				jm.log.Warn("shared state: bad path in an acknowledgement", "checkpoint", ack.Checkpoint, "task", ack.Task, "err", err)
				continue
			}
			files = append(files, refs...)
			base, hasBase = min(base, h.Base), true
		}
	}
	if gone := jm.shared.reg.Gone(files); len(gone) > 0 && !late {
		jm.log.Error("shared state: an acknowledgement lists shared files already deleted; declining the checkpoint",
			"checkpoint", ack.Checkpoint, "task", ack.Task, "files", gone)
		return fmt.Errorf("its state refers to shared file(s) %v, deleted earlier as referenced by no checkpoint (a bug in the keyed state's reuse of files)", gone)
	}
	jm.shared.reg.Ack(ack.Checkpoint, ack.Task, files, base, hasBase)
	return nil
}

// deleteShared deletes shared files the registry released.
func (jm *JobMaster) deleteShared(names []string) {
	for _, name := range names {
		if err := boundedErr(jm, func(ctx context.Context) error { return jm.opts.Storage.Delete(ctx, name) }); err != nil {
			jm.log.Warn("shared state: could not delete a shared file", "file", name, "err", err)
		}
	}
}
