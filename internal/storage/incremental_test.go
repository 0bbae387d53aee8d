package storage

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// incrementalCheckpoint writes checkpoint id of job "job" with one
// incremental handle: shared files (in job/shared) and one exclusive file.
func incrementalCheckpoint(t *testing.T, cs CheckpointStorage, id int64, kind checkpoint.Kind, dir string, shared map[string]string) *checkpoint.Metadata {
	t.Helper()
	h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: 0, EndGroup: 128}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range shared {
			if !yield(k) {
				return
			}
		}
	}) {
		body := shared[name]
		put(t, cs.Store, "job/shared/"+name, body)
		h.Files = append(h.Files, checkpoint.StateFile{Name: name, Path: "../shared/" + name,
			Size: int64(len(body)), CRC: Checksum([]byte(body)), Shared: true})
		h.Size += int64(len(body))
	}
	put(t, cs.Store, dir+"/op-0-MANIFEST-1", "manifest")
	h.Files = append(h.Files, checkpoint.StateFile{Name: "MANIFEST-1", Path: "op-0-MANIFEST-1", Size: 8, CRC: Checksum([]byte("manifest"))})
	h.Size += 8
	m := &checkpoint.Metadata{JobID: "job", ID: id, Kind: kind, Operators: []checkpoint.OperatorState{{
		UID: "op", Parallelism: 1, Subtasks: []checkpoint.SubtaskState{{Keyed: []checkpoint.KeyedStateHandle{h}}}}}}
	if err := cs.WriteMetadata(context.Background(), dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVerifyIncremental(t *testing.T) {
	ctx := context.Background()
	cs := CheckpointStorage{Store: NewMemoryStore(), JobID: "job"}
	m := incrementalCheckpoint(t, cs, 1, checkpoint.KindCheckpoint, cs.CheckpointDir(1), map[string]string{"a-1.sst": "one", "a-2.sst": "two"})
	if err := cs.Verify(ctx, cs.CheckpointDir(1), m); err != nil {
		t.Fatalf("intact: %v", err)
	}
	refs, err := SharedRefs(cs.CheckpointDir(1), m)
	if err != nil || !slices.Equal(refs, []string{"job/shared/a-1.sst", "job/shared/a-2.sst"}) {
		t.Fatalf("SharedRefs = %v, %v", refs, err)
	}
	dir, got, _, err := cs.Latest(ctx)
	if err != nil || dir != "job/chk-1" || got.Version != 2 {
		t.Fatalf("Latest = %q %+v %v", dir, got, err)
	}

	put(t, cs.Store, "job/shared/a-2.sst", "twO")
	if err := cs.Verify(ctx, cs.CheckpointDir(1), m); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a shared file with a flipped bit: %v", err)
	}
	if err := cs.Store.Delete(ctx, "job/shared/a-2.sst"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Verify(ctx, cs.CheckpointDir(1), m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing shared file: %v", err)
	}
	if _, _, _, err := cs.Latest(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest with a shared file missing: %v", err)
	}

	// A handle whose size does not add up, and one without files.
	bad := *m
	bad.Operators = slices.Clone(m.Operators)
	put(t, cs.Store, "job/shared/a-2.sst", "two")
	h := m.Operators[0].Subtasks[0].Keyed[0]
	h.Size++
	bad.Operators[0].Subtasks = []checkpoint.SubtaskState{{Keyed: []checkpoint.KeyedStateHandle{h}}}
	if err := cs.Verify(ctx, cs.CheckpointDir(1), &bad); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("sizes that do not add up: %v", err)
	}
	h.Files = nil
	bad.Operators[0].Subtasks = []checkpoint.SubtaskState{{Keyed: []checkpoint.KeyedStateHandle{h}}}
	if err := cs.Verify(ctx, cs.CheckpointDir(1), &bad); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("no files: %v", err)
	}

	// A savepoint must not refer to shared files.
	sp := incrementalCheckpoint(t, cs, 2, checkpoint.KindSavepoint, "job/savepoint-2-abcdef", map[string]string{"a-1.sst": "one"})
	sp.Kind = checkpoint.KindSavepoint
	if err := cs.Verify(ctx, "job/savepoint-2-abcdef", sp); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a savepoint referring to shared files: %v", err)
	}
}
