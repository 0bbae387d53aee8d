package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// recoverCheckpoints hands the coordinator the complete checkpoints an
// earlier process of this job left, when the job resumes from one of them,
// so that retention goes on deleting the old ones; directories a crash cut
// short (no _metadata) are removed. Checkpoints newer than the one restored,
// and those of a job started without restoring, are left alone.
func (jm *JobMaster) recoverCheckpoints(ctx context.Context, restore *Restored) []checkpoint.CompletedCheckpoint {
	if restore == nil || restore.Metadata.Kind != checkpoint.KindCheckpoint || restore.Store != jm.opts.Storage {
		return nil
	}
	ids, err := jm.cs.Checkpoints(ctx)
	if err != nil {
		jm.log.Warn("cannot list earlier checkpoints", "err", err)
		return nil
	}
	var out []checkpoint.CompletedCheckpoint
	for _, id := range ids {
		if id > restore.Metadata.ID {
			break
		}
		dir := jm.cs.CheckpointDir(id)
		md, err := jm.cs.ReadMetadata(ctx, dir)
		switch {
		case err == nil:
			out = append(out, checkpoint.CompletedCheckpoint{ID: id, Kind: md.Kind, TriggeredAt: md.Timestamp})
		case errors.Is(err, storage.ErrNotFound):
			jm.log.Info("removing an incomplete checkpoint left by an earlier run", "checkpoint", id)
			jm.discardDir(jm.opts.Storage, dir)
		default:
			jm.log.Warn("keeping a damaged checkpoint directory", "checkpoint", id, "err", err)
		}
	}
	return out
}

func (jm *JobMaster) initialRestore(ctx context.Context) (*Restored, error) {
	switch jm.opts.Restore {
	case "":
		return nil, nil
	case "latest":
		r, skipped, err := jm.cs.LatestRestorable(ctx)
		for _, s := range skipped {
			jm.log.Warn("skipping broken checkpoint", "err", s)
		}
		if damaged := storage.Damaged(skipped); errors.Is(err, storage.ErrNoCheckpoint) && len(damaged) > 0 {
			// Starting without state would repeat everything the sinks
			// committed on them: the user decides.
			var b strings.Builder
			for _, d := range damaged {
				b.WriteString("; ")
				b.WriteString(d.Error())
			}
			return nil, fmt.Errorf("restore latest: %d checkpoint(s) of job %q in %s completed, but none can be restored%s: %w: repair them, restore an older checkpoint or savepoint by its path, or start without state (Restore \"\"; weir run --restore none) if repeating the output they committed is acceptable",
				len(damaged), jm.opts.JobID, jm.opts.Storage.URL(), b.String(), ErrNoRestorableCheckpoint)
		}
		if errors.Is(err, storage.ErrNoCheckpoint) {
			jm.log.Info("no checkpoint to restore; starting without state")
			if jm.opts.OnRestore != nil {
				jm.opts.OnRestore(nil, false)
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return newRestored(r.Metadata, r.Store, r.Dir), nil
	default:
		store, dir, md, err := storage.ResolveRestore(ctx, jm.opts.Restore)
		if err != nil {
			return nil, err
		}
		return newRestored(md, store, dir), nil
	}
}

// restartPoint is the newest valid completed checkpoint, or the state the
// job last started from when none completed since.
//
// After an attempt that completed a checkpoint, the candidates are checked
// shallowly (metadata, and the sizes of their state files: the restore reads
// and checks the files anyway); after one that restored and then failed
// before completing any, deeply (every state file read for its checksum), so
// restartPoint is the newest valid completed checkpoint, or the state the
// job last started from when none completed since.
//
// After an attempt that completed a checkpoint (quick), the candidates are
// checked shallowly (metadata, and the sizes of their state files: the
// restore reads and checks the files anyway); after one that restored and
// then failed before completing any, deeply (every state file read for its
// checksum), so that a checkpoint whose files are damaged is skipped instead
// of restored again and again. everCompleted: a checkpoint completed in
// this job, so starting without state is refused.
func (jm *JobMaster) restartPoint(ctx context.Context, quick, everCompleted bool) (*Restored, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*jm.opts.StorageTimeout)
	defer cancel()
	latest := jm.cs.Latest
	if quick {
		latest = jm.cs.LatestQuick
	}
	dir, md, skipped, err := latest(ctx)
	for _, s := range skipped {
		jm.log.Warn("skipping broken checkpoint", "err", s)
	}
	switch {
	case err == nil:
		if jm.lastRestored == nil || md.ID >= jm.lastRestored.Metadata.ID || jm.lastRestored.Metadata.Kind == checkpoint.KindCheckpoint {
			return newRestored(md, jm.opts.Storage, dir), nil
		}
		return jm.lastRestored, nil
	case errors.Is(err, storage.ErrNoCheckpoint):
		if everCompleted {
			return nil, errors.New("no valid checkpoint is left to restore from, although one completed: refusing to start over without state (it would repeat committed output)")
		}
		return jm.lastRestored, nil
	default:
		return nil, err
	}
}

// completedAfter returns the ids above id of the job's checkpoints that
// have a _metadata (complete, damaged or not) and of its savepoint
// pointers, ascending. Errors of the store are logged: the list is then
// what could be read.
func (jm *JobMaster) completedAfter(id int64) []int64 {
	ctx, cancel := jm.storageCtx(10)
	defer cancel()
	var out []int64
	ids, err := jm.cs.Checkpoints(ctx)
	if err != nil {
		jm.log.Warn("cannot list the checkpoints newer than the one restored", "err", err)
	}
	for _, c := range ids {
		if c <= id {
			continue
		}
		if _, err := jm.opts.Storage.Stat(ctx, path.Join(jm.cs.CheckpointDir(c), storage.MetadataName)); err == nil {
			out = append(out, c)
		}
	}
	ptrs, err := jm.cs.SavepointPointers(ctx)
	if err != nil {
		jm.log.Warn("cannot list the savepoints newer than the one restored", "err", err)
	}
	for _, p := range ptrs {
		if p > id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
