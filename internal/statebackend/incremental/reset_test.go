package incremental

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

// TestChangelogLogFailureStartsOver fails one write of the local changelog
// (through Options.FS): the checkpoint whose cut meets the failure does not
// decline, it materializes the state synchronously and a new log starts;
// the next checkpoint refers to that materialization and the new log only,
// and restores to exactly the state written. Before, one failed write made
// every later checkpoint decline.
func TestChangelogLogFailureStartsOver(t *testing.T) {
	ctx := context.Background()
	groups := keygroup.Range{Start: 0, End: 16}
	dir := t.TempDir()
	var failNext, failed atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileWrite && strings.Contains(op.Path, pebble.ChangelogSegmentPrefix) && failNext.CompareAndSwap(true, false) {
			failed.Store(true)
			return errors.New("injected write error")
		}
		return nil
	}))
	b := newIncTestBackend(t, filepath.Join(dir, "db"), groups)
	v, err := pebble.NewValueState(b, "v", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := New(ctx, b, Options{Groups: groups, LocalDir: filepath.Join(dir, "local", "op-0"), Prefix: "op-0", FS: fs,
		Changelog: ChangelogOptions{Enabled: true, MaterializationInterval: -1, MaterializationLogRatio: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	store := storage.NewMemoryStore()
	want := map[int]string{}
	put := func(from, to int, prefix string) {
		for i := from; i < to; i++ {
			incTestSetKey(b, i, groups.End)
			v.Update(fmt.Sprint(prefix, i))
			want[i] = fmt.Sprint(prefix, i)
		}
	}
	take := func(id int64) checkpoint.KeyedStateHandle {
		t.Helper()
		snap, err := lc.Snapshot(id, Target{Store: store, Dir: fmt.Sprint("job/chk-", id)})
		if err != nil {
			t.Fatalf("checkpoint %d: %v", id, err)
		}
		var st checkpoint.SubtaskState
		if _, err := snap.Async(ctx, &st); err != nil {
			t.Fatalf("checkpoint %d: %v", id, err)
		}
		snap.Release()
		lc.NotifyComplete(id)
		return st.Keyed[0]
	}

	put(0, 1000, "a")
	if h := take(1); h.Changelog != 0 {
		t.Fatalf("checkpoint 1 lists %d segments, want a materialization only", h.Changelog)
	}
	put(0, 100, "b")
	if h := take(2); h.Changelog != 1 {
		t.Fatalf("checkpoint 2 lists %d segments, want 1", h.Changelog)
	}
	failNext.Store(true)
	put(100, 200, "c")
	h3 := take(3)
	if !failed.Load() {
		t.Fatal("the injected write error did not fire")
	}
	if h3.Changelog != 0 {
		t.Fatalf("checkpoint 3, after the log failed, lists %d segments: want a new materialization only", h3.Changelog)
	}
	put(200, 300, "d")
	h4 := take(4)
	if h4.Changelog != 1 {
		t.Fatalf("checkpoint 4 lists %d segments, want the new log's 1", h4.Changelog)
	}

	// Every materialization's local directory went once it was uploaded;
	// the log's directory holds the open segment and those the last
	// checkpoint refers to only.
	local := filepath.Join(dir, "local", "op-0")
	if names, err := vfs.Default.List(local); err != nil || len(names) != 1 || names[0] != "changelog" {
		t.Errorf("local directory %s holds %v (%v); want the changelog only", local, names, err)
	}
	if segs, err := vfs.Default.List(filepath.Join(local, "changelog")); err != nil || len(segs) != 2 {
		t.Errorf("changelog directory holds %v (%v); want the segment checkpoint 4 lists and the open one", segs, err)
	}

	rdir := t.TempDir()
	b2 := newIncTestBackend(t, filepath.Join(rdir, "b"), groups)
	if _, err := newRestorer(t, b2, rdir, groups).Restore(ctx, Source{ID: 4, Store: store, Dir: "job/chk-4"},
		[]checkpoint.KeyedStateHandle{h4}, filepath.Join(rdir, "b")); err != nil {
		t.Fatal(err)
	}
	v2, err := pebble.NewValueState(b2, "v", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		incTestSetKey(b2, i, groups.End)
		if got, ok := v2.Value(); !ok || got != w {
			t.Fatalf("key %d after the restore: %q, %t; want %q", i, got, ok, w)
		}
	}
}
