package pebble_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/statebackend/statetest"
)

// withWriteCache returns the suite's pebble factory with a write cache of
// budget bytes (negative: none); restore, when set, restores every new
// backend from native checkpoints before the states are registered.
func withWriteCache(budget int64, restore []pebble.NativeCheckpoint) statetest.Factory {
	f := statetest.Pebble
	f.Kind = fmt.Sprintf("pebble (write cache %d)", budget)
	f.New = func(t testing.TB, r keygroup.Range, clock func() int64) statebackend.KeyedBackend[string] {
		t.Helper()
		b := statetest.NewPebble(t, r, clock, pebble.Options{WriteCacheSize: budget})
		if restore != nil {
			if _, err := b.RestoreNative(restore); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	return f
}

// TestSuiteTinyWriteCache runs the conformance suite with a write cache so
// small that nearly every access evicts dirty entries, and with none.
func TestSuiteTinyWriteCache(t *testing.T) {
	t.Run("tiny", func(t *testing.T) { statetest.Run(t, withWriteCache(600, nil), statetest.Heap) })
	t.Run("off", func(t *testing.T) { statetest.Run(t, withWriteCache(-1, nil), statetest.Heap) })
}

// TestWriteCacheModel is a randomized model test of the write cache: the
// pebble backend with a write cache of a random budget (from one that
// evicts at every access to one that never evicts) and the heap backend
// take the same random operations of every kind of state, and between
// rounds of them a full snapshot restored into fresh backends of both
// kinds, or (pebble) an incremental snapshot restored natively while heap
// restores a full one, or a rescale of the full snapshot into two halves
// and back; after each, both must read the same, and the full snapshots of
// both must be byte-identical. WEIR_CACHE_MODEL_SEEDS sets the number of
// seeds (default 4).
func TestWriteCacheModel(t *testing.T) {
	seeds := 4
	if n, err := strconv.Atoi(os.Getenv("WEIR_CACHE_MODEL_SEEDS")); err == nil {
		seeds = n
	}
	if testing.Short() {
		seeds = 1
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { modelRun(t, seed) })
	}
}

func modelRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	budgets := []int64{300, 2 << 10, 16 << 10, 32 << 20}
	budget := budgets[r.IntN(len(budgets))]
	if v, err := strconv.ParseInt(os.Getenv("WEIR_CACHE_MODEL_BUDGET"), 10, 64); err == nil {
		budget = v
	}
	t.Logf("write cache budget %d bytes", budget)
	clock := &statetest.Clock{Ms: 1_000_000}
	full := keygroup.Range{Start: 0, End: statetest.MaxParallelism}
	f := withWriteCache(budget, nil)
	a, b := statetest.NewHarness(t, f, full, clock), statetest.NewHarness(t, statetest.Heap, full, clock)
	step := 0
	run := func(steps int, a, b *statetest.Harness) {
		t.Helper()
		var keys []string
		for _, k := range statetest.Keys {
			if a.B.KeyGroups().Contains(statetest.GroupOf(k)) {
				keys = append(keys, k)
			}
		}
		for range steps {
			step++
			k := keys[r.IntN(len(keys))]
			n := statetest.Namespaces[r.IntN(len(statetest.Namespaces))]
			op := statetest.Ops[r.IntN(len(statetest.Ops))]
			arg := statetest.RandomArg(r)
			if r.IntN(12) == 0 {
				clock.Ms += int64(r.IntN(9))
			}
			var outs [2]string
			for i, h := range []*statetest.Harness{a, b} {
				h.SetKey(k)
				h.SetNamespace(n)
				outs[i] = op.Do(h, arg)
			}
			if outs[0] != outs[1] {
				t.Fatalf("step %d, %s on key %q, namespace %q, args %+v at %d ms:\npebble: %s\nheap:   %s",
					step, op.Name, k, n, arg, clock.Ms, outs[0], outs[1])
			}
		}
	}
	same := func(what string, a, b *statetest.Harness) {
		t.Helper()
		if ga, gb := a.Dump(), b.Dump(); ga != gb {
			t.Fatalf("%s, after step %d: pebble reads\n%s\nheap reads\n%s", what, step, ga, gb)
		}
	}
	id := int64(0)
	for round := range 6 {
		run(150+r.IntN(150), a, b)
		id++
		switch r.IntN(3) {
		case 0: // full snapshot, restored by both kinds
			fa, fb := statetest.Snapshot(t, a.B, id), statetest.Snapshot(t, b.B, id)
			if string(fa.Data) != string(fb.Data) {
				t.Fatalf("round %d: snapshots differ:\npebble: %s\nheap:   %s", round, statetest.Describe(fa), statetest.Describe(fb))
			}
			a, b = statetest.NewHarness(t, f, full, clock, fa), statetest.NewHarness(t, statetest.Heap, full, clock, fb)
			same("full snapshot restored", a, b)
		case 1: // incremental snapshot on pebble, restored natively
			dir := filepath.Join(t.TempDir(), fmt.Sprint("chk-", id))
			if _, err := a.B.(*pebble.Backend[string]).SnapshotIncremental(id, dir); err != nil {
				t.Fatal(err)
			}
			fb := statetest.Snapshot(t, b.B, id)
			a = statetest.NewHarness(t, withWriteCache(budget, []pebble.NativeCheckpoint{{Dir: dir, Groups: full}}), full, clock)
			b = statetest.NewHarness(t, statetest.Heap, full, clock, fb)
			same("incremental snapshot restored", a, b)
		case 2: // rescale: halves, some operations, back to the whole
			fa := statetest.Snapshot(t, a.B, id)
			lo, hi := keygroup.Range{Start: 0, End: 60}, keygroup.Range{Start: 60, End: statetest.MaxParallelism}
			aLo, bLo := statetest.NewHarness(t, f, lo, clock, fa), statetest.NewHarness(t, statetest.Heap, lo, clock, fa)
			aHi, bHi := statetest.NewHarness(t, f, hi, clock, fa), statetest.NewHarness(t, statetest.Heap, hi, clock, fa)
			run(100, aLo, bLo)
			run(100, aHi, bHi)
			id++
			l1, l2 := statetest.Snapshot(t, aLo.B, id), statetest.Snapshot(t, bLo.B, id)
			h1, h2 := statetest.Snapshot(t, aHi.B, id), statetest.Snapshot(t, bHi.B, id)
			if string(l1.Data) != string(l2.Data) || string(h1.Data) != string(h2.Data) {
				t.Fatalf("round %d: snapshots of the halves differ", round)
			}
			a, b = statetest.NewHarness(t, f, full, clock, l1, h1), statetest.NewHarness(t, statetest.Heap, full, clock, h2, l2)
			same("halves restored into the whole", a, b)
		}
	}
	id++
	fa, fb := statetest.Snapshot(t, a.B, id), statetest.Snapshot(t, b.B, id)
	if string(fa.Data) != string(fb.Data) {
		t.Fatalf("final snapshots differ:\npebble: %s\nheap:   %s", statetest.Describe(fa), statetest.Describe(fb))
	}
}
