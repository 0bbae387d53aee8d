package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
)

// SavepointPointersName is the directory, under a job's checkpoint
// directory, of the pointers to the job's savepoints: one object
// "savepoint-<id>" per savepoint, holding its URL. A savepoint lives in a
// store of its own (its target directory); the pointer is how
// LatestRestorable finds it among the job's checkpoints (DESIGN.md §8:
// "latest" is the newest of the completed checkpoints and the savepoints
// the job took).
const SavepointPointersName = "savepoints"

// SavepointPointer names the pointer to the job's savepoint id.
func (s CheckpointStorage) SavepointPointer(id int64) string {
	return join(join(s.JobID, SavepointPointersName), savepointPref+strconv.FormatInt(id, 10))
}

// WriteSavepointPointer records that the job took savepoint id at url (a
// value ResolveRestore accepts), and removes the pointers to its older
// savepoints: only the newest can be newer than every checkpoint.
func (s CheckpointStorage) WriteSavepointPointer(ctx context.Context, id int64, url string) error {
	name := s.SavepointPointer(id)
	w, err := s.Store.Create(ctx, name)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer w.Abort()
	if _, err := fmt.Fprintln(w, url); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	ptrs, err := s.SavepointPointers(ctx)
	if err != nil {
		return err
	}
	for _, p := range ptrs {
		if p < id {
			if err := s.Store.Delete(ctx, s.SavepointPointer(p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// SavepointPointers returns the ids of the job's savepoint pointers,
// ascending.
func (s CheckpointStorage) SavepointPointers(ctx context.Context) ([]int64, error) {
	dir := join(s.JobID, SavepointPointersName)
	names, err := s.Store.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list savepoint pointers of %q: %w", s.JobID, err)
	}
	var ids []int64
	for _, n := range names {
		digits, ok := strings.CutPrefix(path.Base(n), savepointPref)
		if !ok {
			continue
		}
		if id, err := strconv.ParseInt(digits, 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// readPointer returns the URL a savepoint pointer holds.
func (s CheckpointStorage) readPointer(ctx context.Context, id int64) (string, error) {
	b, err := readAll(ctx, s.Store, s.SavepointPointer(id))
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(b)), nil
}

// Restorable is what LatestRestorable found: a checkpoint of the job's
// store, or a savepoint in a store of its own.
type Restorable struct {
	Store    Store
	Dir      string
	Metadata *checkpoint.Metadata
}

// LatestRestorable is Latest with the job's savepoints: the newest of the
// checkpoints Latest finds and of the savepoints the pointers name (a
// savepoint newer than the newest checkpoint wins). A pointer whose
// savepoint is gone or damaged is skipped and listed in skipped ("savepoint
// 9 (URL): why"), as a damaged checkpoint is; an error of the store ends
// the search. ErrNoCheckpoint means nothing is restorable.
func (s CheckpointStorage) LatestRestorable(ctx context.Context) (Restorable, []error, error) {
	dir, m, skipped, err := s.Latest(ctx)
	if err != nil && !errors.Is(err, ErrNoCheckpoint) {
		return Restorable{}, skipped, err
	}
	var best Restorable
	if err == nil {
		best = Restorable{Store: s.Store, Dir: dir, Metadata: m}
	}
	ptrs, perr := s.SavepointPointers(ctx)
	if perr != nil {
		return Restorable{}, skipped, perr
	}
	for _, id := range slices.Backward(ptrs) {
		if best.Metadata != nil && id <= best.Metadata.ID {
			break
		}
		url, rerr := s.readPointer(ctx, id)
		if rerr != nil {
			if errors.Is(rerr, ErrNotFound) {
				continue // removed meanwhile by a newer pointer
			}
			return Restorable{}, skipped, rerr
		}
		st, spDir, md, rerr := ResolveRestore(ctx, url)
		if rerr != nil {
			// ResolveRestore wraps ErrNotCheckpoint: damage, not a store
			// error, as for a checkpoint.
			skipped = append(skipped, fmt.Errorf("savepoint %d (%s): %w", id, url, rerr))
			continue
		}
		return Restorable{Store: st, Dir: spDir, Metadata: md}, skipped, nil
	}
	if best.Metadata == nil {
		return Restorable{}, skipped, err
	}
	return best, skipped, nil
}
