package jobmaster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// storageCtx is the context of one storage call: not cancelled with the
// job (a cancelled job still discards its checkpoints), with a deadline.
func (jm *JobMaster) storageCtx(scale time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), jm.opts.StorageTimeout*scale)
}

// bounded runs one storage call with a deadline and returns by it even
// when the store ignores its context (a hung write): the call's goroutine
// is then left to end when the store returns.
func bounded[T any](jm *JobMaster, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := jm.storageCtx(1)
	defer cancel()
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() {
		v, err := f(ctx)
		ch <- out{v, err}
	}()
	select {
	case o := <-ch:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("checkpoint storage %s did not answer within %v (Options.StorageTimeout): %w", jm.opts.Storage.URL(), jm.opts.StorageTimeout, ctx.Err())
	}
}

func boundedErr(jm *JobMaster, f func(ctx context.Context) error) error {
	_, err := bounded(jm, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// pointToSavepoint leaves a pointer to savepoint id in the job's
// checkpoint directory, so that Restore "latest" finds it when it is newer
// than every checkpoint (a stop with a savepoint takes no checkpoint
// after it, and its sinks commit on it).
func (jm *JobMaster) pointToSavepoint(id int64) {
	opts := jm.targets[id]
	if opts == nil {
		return
	}
	url := joinURL(opts.Store.URL(), opts.Dir)
	if err := boundedErr(jm, func(ctx context.Context) error { return jm.cs.WriteSavepointPointer(ctx, id, url) }); err != nil {
		jm.log.Error("cannot record the savepoint in the checkpoint directory: a restore from \"latest\" will not find it; restore it by its path", "savepoint", id, "path", url, "err", err)
	}
}

func joinURL(base, p string) string {
	if base == "" {
		return p
	}
	if len(base) > 0 && base[len(base)-1] == '/' {
		return base + p
	}
	return base + "/" + p
}

// idBlock is how many checkpoint ids one write of the id counter reserves.
const idBlock = 100

// counterName is the object holding the highest reserved checkpoint id.
func (jm *JobMaster) counterName() string { return path.Join(jm.cs.JobDir(), "checkpoint-ids") }

// reserveID makes id durable as used before any barrier of it leaves
// (ids must never repeat, even after a crash: exactly-once sinks name
// their transactions by checkpoint id). It reserves ids in blocks, so
// storage is written once every idBlock checkpoints.
func (jm *JobMaster) reserveID(id int64) error {
	if id <= jm.reserved {
		return nil
	}
	next := id + idBlock - 1
	if c := jm.opts.IDCounter; c != nil {
		if err := boundedErr(jm, func(ctx context.Context) error { return c.Reserve(ctx, next) }); err != nil {
			return err
		}
		jm.reserved = next
		return nil
	}
	err := boundedErr(jm, func(ctx context.Context) error {
		w, err := jm.opts.Storage.Create(ctx, jm.counterName())
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%d\n", next); err != nil {
			w.Abort()
			return err
		}
		return w.Commit()
	})
	if err != nil {
		return err
	}
	jm.reserved = next
	return nil
}

// readReserved returns the highest reserved id, 0 when none was recorded.
func (jm *JobMaster) readReserved(ctx context.Context) (int64, error) {
	if c := jm.opts.IDCounter; c != nil {
		return c.Reserved(ctx)
	}
	r, err := jm.opts.Storage.Open(ctx, jm.counterName())
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	if _, err := fmt.Fscan(r, &n); err != nil {
		return 0, fmt.Errorf("%s: %w", jm.counterName(), err)
	}
	return n, nil
}

func (jm *JobMaster) writeMetadata(d checkpoint.WriteMetadata) {
	opts := jm.targets[d.ID]
	if opts == nil {
		jm.metaDone <- metaResult{id: d.ID, err: fmt.Errorf("checkpoint %d has no target", d.ID)}
		return
	}
	md := &checkpoint.Metadata{
		Version: checkpoint.MetadataVersion, JobID: jm.opts.JobID, ID: d.ID, Kind: d.Kind, Timestamp: d.TriggeredAt,
	}
	byUID := map[string]*checkpoint.OperatorState{}
	var order []string
	for _, a := range d.Acks {
		var ops []runtime.OperatorStateResult
		if err := json.Unmarshal(a.Snapshot.Handle, &ops); err != nil {
			jm.metaDone <- metaResult{id: d.ID, err: fmt.Errorf("task %s's acknowledgement: %w", a.Task, err)}
			return
		}
		for _, o := range ops {
			os := byUID[o.UID]
			if os == nil {
				os = &checkpoint.OperatorState{UID: o.UID, Name: o.Name, Parallelism: o.Parallelism,
					Subtasks: make([]checkpoint.SubtaskState, o.Parallelism)}
				byUID[o.UID] = os
				order = append(order, o.UID)
			}
			st := o.State
			st.Subtask = o.Subtask
			if o.Subtask < len(os.Subtasks) {
				os.Subtasks[o.Subtask] = st
			}
		}
	}
	sort.Strings(order)
	for _, uid := range order {
		md.Operators = append(md.Operators, *byUID[uid])
	}
	md.MaxParallelism = jm.opts.MaxParallelism
	jm.metaWG.Go(func() {
		err := boundedErr(jm, func(ctx context.Context) error {
			return storage.CheckpointStorage{Store: opts.Store}.WriteMetadata(ctx, opts.Dir, md)
		})
		if c := jm.opts.CompletedStore; err == nil && c != nil {
			// The checkpoint counts only once the store recorded it
			// (as Flink's CompletedCheckpointStore.addCheckpoint).
			url := joinURL(opts.Store.URL(), opts.Dir)
			if serr := boundedErr(jm, func(ctx context.Context) error {
				return c.AddCompleted(ctx, d.ID, url, d.Kind == checkpoint.KindSavepoint)
			}); serr != nil {
				err = fmt.Errorf("%w: %w", checkpoint.ErrNotRecorded, serr)
			}
		}
		jm.metaDone <- metaResult{id: d.ID, err: err}
	})
}

func (jm *JobMaster) discardDir(store storage.Store, dir string) {
	if err := boundedErr(jm, func(ctx context.Context) error { return store.DeletePrefix(ctx, dir+"/") }); err != nil {
		jm.log.Warn("could not discard checkpoint files", "dir", dir, "err", err)
	}
}

// rememberEnded keeps the target of an aborted checkpoint or savepoint for
// a while, so that state a late acknowledgement wrote there is found.
func (jm *JobMaster) rememberEnded(id int64, opts *target) {
	if jm.ended == nil {
		jm.ended = make(map[int64]*target)
	}
	jm.ended[id] = opts
	for len(jm.ended) > 128 {
		oldest := id
		for k := range jm.ended {
			oldest = min(oldest, k)
		}
		delete(jm.ended, oldest)
	}
}

func (jm *JobMaster) discardTaskState(d checkpoint.DiscardTaskState) {
	var ops []runtime.OperatorStateResult
	if json.Unmarshal(d.Handle, &ops) != nil {
		return
	}
	store, dir := jm.opts.Storage, jm.cs.CheckpointDir(d.ID)
	if opts := jm.targets[d.ID]; opts != nil {
		store, dir = opts.Store, opts.Dir
	} else if opts := jm.ended[d.ID]; opts != nil {
		store, dir = opts.Store, opts.Dir
	}
	for _, o := range ops {
		paths := []string{}
		for _, h := range o.State.Keyed {
			paths = append(paths, h.Path)
		}
		if c := o.State.Channels; c != nil {
			paths = append(paths, c.Path)
		}
		for _, p := range paths {
			if p != "" {
				name := path.Join(dir, p)
				if err := boundedErr(jm, func(ctx context.Context) error { return store.Delete(ctx, name) }); err != nil {
					jm.log.Warn("could not discard task state", "checkpoint", d.ID, "task", d.Task, "err", err)
				}
			}
		}
	}
}

func (jm *JobMaster) discardAll() {
	for _, c := range jm.coord.Retained() {
		if c.Kind == checkpoint.KindCheckpoint {
			jm.discardDir(jm.opts.Storage, jm.cs.CheckpointDir(c.ID))
			jm.shared.reg.Discard(c.ID)
		}
	}
	jm.sweepShared()
}
