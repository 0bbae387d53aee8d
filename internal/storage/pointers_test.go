package storage

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestLatestRestorableSavepoints: "latest" is the newest of the job's
// checkpoints and of the savepoints its pointers name; a pointer to a
// savepoint that is gone is skipped and reported, and only the newest
// pointer is kept.
func TestLatestRestorableSavepoints(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cs := CheckpointStorage{Store: fileStoreAt(t, filepath.Join(root, "ck")), JobID: "job"}
	spStore := fileStoreAt(t, filepath.Join(root, "sp"))
	sp := func(id int64) string {
		dir := SavepointDir("", id)
		writeCheckpointIn(t, CheckpointStorage{Store: spStore}, dir, id, checkpoint.KindSavepoint, map[string]string{"a.keyed": "state"})
		return "file://" + filepath.Join(root, "sp", dir)
	}
	latest := func() (Restorable, []error) {
		t.Helper()
		r, skipped, err := cs.LatestRestorable(ctx)
		if err != nil {
			t.Fatalf("LatestRestorable: %v (skipped %v)", err, skipped)
		}
		return r, skipped
	}

	if _, _, err := cs.LatestRestorable(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("LatestRestorable of nothing = %v, want ErrNoCheckpoint", err)
	}
	writeCheckpoint(t, cs, 3, map[string]string{"a.keyed": "x"})
	sp2 := sp(2)
	if err := cs.WriteSavepointPointer(ctx, 2, sp2); err != nil {
		t.Fatal(err)
	}
	if r, _ := latest(); r.Metadata.ID != 3 || r.Store != cs.Store {
		t.Fatalf("with chk-3 and an older savepoint 2: got %d in %s", r.Metadata.ID, r.Store.URL())
	}
	sp5 := sp(5)
	if err := cs.WriteSavepointPointer(ctx, 5, sp5); err != nil {
		t.Fatal(err)
	}
	if ids, _ := cs.SavepointPointers(ctx); !slices.Equal(ids, []int64{5}) {
		t.Fatalf("pointers after a newer savepoint: %v, want [5]", ids)
	}
	r, _ := latest()
	if r.Metadata.ID != 5 || r.Metadata.Kind != checkpoint.KindSavepoint || "file://"+filepath.Join(root, "sp", r.Dir) != sp5 {
		t.Fatalf("with chk-3 and savepoint 5: got %d %v %s", r.Metadata.ID, r.Metadata.Kind, r.Dir)
	}
	// The savepoint removed: back to chk-3, saying why.
	if err := spStore.DeletePrefix(ctx, filepath.Base(sp5)+"/"); err != nil {
		t.Fatal(err)
	}
	r, skipped := latest()
	if r.Metadata.ID != 3 || len(Damaged(skipped)) != 1 {
		t.Fatalf("savepoint 5 gone: got %d, skipped %v; want chk-3 and savepoint 5 reported", r.Metadata.ID, skipped)
	}
}
