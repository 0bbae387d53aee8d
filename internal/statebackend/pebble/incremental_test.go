package pebble

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// TestIncrementalSnapshot checks the hooks incremental checkpoints will be
// built on: a checkpoint directory holds the whole state at its time (the
// name↔id map included), later checkpoints share the unchanged files (the
// same files: hard links), and checkpoints outlive Close.
func TestIncrementalSnapshot(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	// A small write cache, so that the writes reach the database (and make
	// several files) before the checkpoint, as a large state's would.
	b := newPebble(t, r, kc, Options{MemTableSize: 256 << 10, WriteCacheSize: 64 << 10})
	s := mustValue[string, string](t, b, "s")
	mustValue[string, int](t, b, "unused")
	want := map[string]string{}
	for i := range 20000 {
		k := fmt.Sprint("k", i)
		set(b, kc, s, k, strings.Repeat("v", i%100))
		want[k] = strings.Repeat("v", i%100)
	}
	root := t.TempDir()
	dir1 := filepath.Join(root, "chk-1")
	files1, err := b.SnapshotIncremental(1, dir1)
	must(t, err)
	if len(files1) < 2 {
		t.Fatalf("checkpoint 1 has files %v", files1)
	}
	for _, f := range files1 {
		if !strings.HasSuffix(f, ".sst") {
			t.Errorf("data file %q", f)
		}
	}

	// More writes: a few keys of a few groups, so most files stay.
	for i := range 50 {
		set(b, kc, s, fmt.Sprint("new", i), "x")
	}
	dir2 := filepath.Join(root, "chk-2")
	files2, err := b.SnapshotIncremental(2, dir2)
	must(t, err)
	var shared, added []string
	for _, f := range files2 {
		if slices.Contains(files1, f) {
			shared = append(shared, f)
			a, err1 := os.Stat(filepath.Join(dir1, f))
			c, err2 := os.Stat(filepath.Join(dir2, f))
			if err1 != nil || err2 != nil || !os.SameFile(a, c) {
				t.Errorf("%s is in both checkpoints but not the same file (%v, %v)", f, err1, err2)
			}
		} else {
			added = append(added, f)
		}
	}
	if len(shared) == 0 || len(added) == 0 {
		t.Fatalf("checkpoint 2: shared %v, new %v", shared, added)
	}
	t.Logf("checkpoint 1: %d files; checkpoint 2: %d shared, %d new", len(files1), len(shared), len(added))

	if _, err := b.SnapshotIncremental(3, dir2); err == nil {
		t.Error("a checkpoint into an existing directory succeeded")
	}
	must(t, b.Close())

	// Checkpoint 1 is the state at its time, and says which id is which
	// state, after the backend and its database are gone.
	db, err := pebble.Open(dir1, &pebble.Options{ReadOnly: true, Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	must(t, err)
	defer db.Close()
	ids := map[string]uint64{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: metaStatePrefix, UpperBound: prefixEnd(metaStatePrefix)})
	must(t, err)
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(metaStatePrefix):])
		id, info, err := parseMetaState(name, it.Value())
		must(t, err)
		if !info.Plain() {
			t.Errorf("state %q: %v", name, info)
		}
		ids[name] = id
	}
	must(t, it.Close())
	if len(ids) != 2 || ids["s"] == ids["unused"] {
		t.Fatalf("meta: %v", ids)
	}
	n := 0
	it, err = db.NewIter(&pebble.IterOptions{UpperBound: []byte{metaPrefix}})
	must(t, err)
	for it.First(); it.Valid(); it.Next() {
		g, id, ek, err := splitEntryKey(it.Key())
		must(t, err)
		k, _, err := kc.Decode(ek)
		must(t, err)
		v, _, err := codec.String().Decode(it.Value())
		must(t, err)
		if id != ids["s"] || g != groupOf(kc, k) || want[k] != v {
			t.Fatalf("entry %s (group %d, state %d) = %q, want %q", k, g, id, v, want[k])
		}
		n++
	}
	must(t, it.Close())
	if n != len(want) {
		t.Errorf("checkpoint 1 has %d entries, want %d", n, len(want))
	}
	if _, err := os.Stat(filepath.Join(dir2, files2[0])); err != nil {
		t.Error(err)
	}
}
