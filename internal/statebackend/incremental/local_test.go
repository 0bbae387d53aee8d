package incremental

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

// TestIncrementalRestoreLocal takes an incremental checkpoint with local
// recovery and restores it into a fresh backend: from the local copy,
// without reading its data files, when the copy is intact; by download when
// a data file was truncated or put in another's place, or a small file was
// damaged. Without the record of the data files, the local copy is used
// after every file's CRC is checked. Every restore has the checkpoint's
// values.
func TestIncrementalRestoreLocal(t *testing.T) {
	const keys = 2000
	groups := keygroup.Range{Start: 0, End: 8}
	for _, tc := range []struct {
		name      string
		damage    func(t *testing.T, local string, ssts []string)
		wantLocal bool
	}{
		{"intact", func(*testing.T, string, []string) {}, true},
		{"no record", func(t *testing.T, local string, _ []string) {
			if err := os.Remove(filepath.Join(local, localRecordName)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"truncated data file", func(t *testing.T, local string, ssts []string) {
			name := filepath.Join(local, ssts[0])
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(name, fi.Size()-1); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"swapped data file", func(t *testing.T, local string, ssts []string) {
			// Another file of the same size, the same bytes but one, in
			// its place: only the recorded modification time tells.
			name := filepath.Join(local, ssts[0])
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xff
			tmp := name + ".new"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime().Add(time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, name); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"missing local checkpoint", func(t *testing.T, local string, _ []string) {
			if err := os.RemoveAll(local); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"damaged manifest", func(t *testing.T, local string, _ []string) {
			entries, err := os.ReadDir(local)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "MANIFEST-") {
					f, err := os.OpenFile(filepath.Join(local, e.Name()), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					f.WriteString("x")
					f.Close()
					return
				}
			}
			t.Fatalf("no MANIFEST in %s", local)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Groups: groups, LocalDir: dir + "/local/op-0", Prefix: "op-0", LocalRecovery: true}
			b := newIncTestBackend(t, dir+"/a", groups)
			v, err := pebble.NewValueState(b, "v", codec.String())
			if err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				incTestSetKey(b, i, groups.End)
				v.Update(fmt.Sprint("value-", i))
			}
			lc, err := New(context.Background(), b, opts)
			if err != nil {
				t.Fatal(err)
			}
			store := storage.NewMemoryStore()
			snap, err := lc.Snapshot(1, Target{Store: store, Dir: "job/chk-1"})
			if err != nil {
				t.Fatal(err)
			}
			var st checkpoint.SubtaskState
			if _, err := snap.Async(context.Background(), &st); err != nil {
				t.Fatal(err)
			}
			snap.Release()
			lc.NotifyComplete(1)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			local := lc.LocalCheckpointDir(1)
			var ssts []string
			for _, f := range st.Keyed[0].Files {
				if isDataFile(f.Name) {
					ssts = append(ssts, f.Name)
				}
			}
			if len(ssts) == 0 {
				t.Fatalf("checkpoint has no data file: %+v", st.Keyed[0].Files)
			}
			if rec, err := lc.inc.readLocalRecord(local); err != nil || len(rec) != len(ssts) {
				t.Fatalf("record of the local copy: %v, %v; want its %d data files", rec, err, len(ssts))
			}
			tc.damage(t, local, ssts)

			// A new instance of the operator, as after a failure.
			b2 := newIncTestBackend(t, dir+"/b", groups)
			from := Source{ID: 1, Store: store, Dir: "job/chk-1"}
			lc2, err := New(context.Background(), b2, opts)
			if err != nil {
				t.Fatal(err)
			}
			stats, err := lc2.Restore(context.Background(), from, st.Keyed, dir+"/b")
			if err != nil {
				t.Fatal(err)
			}
			if got := stats.Local == 1; got != tc.wantLocal || stats.Local+stats.Downloaded != 1 {
				t.Fatalf("restore stats %+v, want local %t", stats, tc.wantLocal)
			}
			v2, err := pebble.NewValueState(b2, "v", codec.String())
			if err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				incTestSetKey(b2, i, groups.End)
				if got, ok := v2.Value(); !ok || got != fmt.Sprint("value-", i) {
					t.Fatalf("key %d after the restore: %q, %t", i, got, ok)
				}
			}
		})
	}
}

func newIncTestBackend(t *testing.T, dir string, groups keygroup.Range) *pebble.Backend[string] {
	t.Helper()
	b, err := pebble.New[string](groups, codec.String(), pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func incTestSetKey(b *pebble.Backend[string], i, maxPar int) {
	k := fmt.Sprint("key-", i)
	b.SetCurrentKey(k, keygroup.Of(codec.String().Append(nil, k), maxPar))
}

// TestUnwritableLocalDir: a local directory that cannot be created (a
// file is in the way) fails the snapshot, in both modes, with an error
// naming the path; nothing is uploaded.
func TestUnwritableLocalDir(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		t.Run(fmt.Sprint("changelog=", changelog), func(t *testing.T) {
			dir := t.TempDir()
			groups := keygroup.Range{Start: 0, End: 8}
			if err := os.WriteFile(filepath.Join(dir, "local"), []byte("not a directory"), 0o644); err != nil {
				t.Fatal(err)
			}
			b := newIncTestBackend(t, filepath.Join(dir, "db"), groups)
			opts := Options{Groups: groups, LocalDir: filepath.Join(dir, "local", "op-0"), Prefix: "op-0"}
			opts.Changelog.Enabled = changelog
			lc, err := New(context.Background(), b, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer lc.Close()
			store := storage.NewMemoryStore()
			_, err = lc.Snapshot(1, Target{Store: store, Dir: "job/chk-1"})
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "local")) {
				t.Fatalf("snapshot with an unwritable local directory: %v; want an error naming %s", err, filepath.Join(dir, "local"))
			}
			if names, _ := store.List(context.Background(), ""); len(names) != 0 {
				t.Fatalf("uploaded %v", names)
			}
		})
	}
}
