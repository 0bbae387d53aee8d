package pebble

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/internal/statebackend/heap"
)

type deviceKey struct {
	Region string
	ID     int64
}

type reading struct {
	Celsius float64
	Tags    []string
}

// TestSameBytesAsHeap loads the same state into a heap backend and a pebble
// backend, in different orders and with overwrites and clears on the way,
// and checks that their snapshots are the same bytes with the same handle:
// savepoints do not depend on the backend.
func TestSameBytesAsHeap(t *testing.T) {
	kc, err := codec.Of[deviceKey]()
	must(t, err)
	for _, r := range []keygroup.Range{{Start: 0, End: maxPar}, {Start: 37, End: 81}, {Start: 5, End: 5}} {
		t.Run(r.String(), func(t *testing.T) {
			hb := heap.New(r, kc)
			pb := newPebble(t, r, kc, Options{})
			type op struct {
				key   deviceKey
				count int
				rd    *reading // nil: clear
			}
			var ops []op
			for i := range 5000 {
				k := deviceKey{Region: []string{"eu", "us", "ap", ""}[i%4], ID: int64(i*7919) - 10000}
				if !r.Contains(groupOf(kc, k)) {
					continue
				}
				ops = append(ops, op{key: k, count: i, rd: &reading{Celsius: float64(i) / 3, Tags: []string{k.Region, fmt.Sprint(i)}}})
				if i%7 == 0 {
					ops = append(ops, op{key: k, count: -i}) // cleared later on
				}
			}
			// The heap sees the operations in order, pebble per key in
			// order but keys shuffled, plus junk it overwrites first.
			apply := func(b statebackend.KeyedBackend[deviceKey], ops []op, junk bool) {
				counts := mustValue[deviceKey, int](t, b, "count")
				readings := mustValue[deviceKey, reading](t, b, "reading")
				mustValue[deviceKey, string](t, b, "never-written")
				for _, o := range ops {
					b.SetCurrentKey(o.key, groupOf(kc, o.key))
					if junk {
						counts.Update(1 << 40)
						readings.Update(reading{Tags: []string{"junk"}})
					}
					if o.rd == nil {
						readings.Clear()
						counts.Update(o.count)
						continue
					}
					counts.Update(o.count)
					readings.Update(*o.rd)
				}
			}
			apply(hb, ops, false)
			byKey := map[deviceKey][]op{}
			for _, o := range ops {
				byKey[o.key] = append(byKey[o.key], o)
			}
			keys := slices.Collect(maps.Keys(byKey))
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			var shuffled []op
			for _, k := range keys {
				shuffled = append(shuffled, byKey[k]...)
			}
			apply(pb, shuffled, true)

			hf, pf := checkpointTo(t, hb, 1), checkpointTo(t, pb, 1)
			if !bytes.Equal(hf.data, pf.data) {
				t.Fatalf("heap wrote %d bytes, pebble %d: they differ", len(hf.data), len(pf.data))
			}
			if hf.h.Backend != "heap" || pf.h.Backend != "pebble" {
				t.Errorf("backends %q, %q", hf.h.Backend, pf.h.Backend)
			}
			hf.h.Backend = pf.h.Backend
			if !equalHandles(hf.h, pf.h) {
				t.Errorf("handles differ:\n%+v\n%+v", hf.h, pf.h)
			}
			if r.Len() > 0 && len(ops) == 0 {
				t.Fatal("no operations")
			}
		})
	}
}

func equalHandles(a, b checkpoint.KeyedStateHandle) bool {
	return a.Backend == b.Backend && a.Path == b.Path && a.Size == b.Size && a.CRC == b.CRC &&
		a.StartGroup == b.StartGroup && a.EndGroup == b.EndGroup && slices.Equal(a.Offsets, b.Offsets)
}

// TestDifferential runs the same random operations on both backends and
// compares every read, then snapshots, and restores each backend's snapshot
// into the other kind.
func TestDifferential(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			kc := codec.String()
			r := keygroup.RangeFor(maxPar, 3, int(seed%3))
			hb, pb := heap.New(r, kc), newPebble(t, r, kc, Options{})
			var keys []string
			for i := 0; len(keys) < 300; i++ {
				if k := fmt.Sprint("u", seed, "-", i); r.Contains(groupOf(kc, k)) {
					keys = append(keys, k)
				}
			}
			hs := []any{mustValue[string, int](t, hb, "a"), mustValue[string, string](t, hb, "b")}
			ps := []any{mustValue[string, int](t, pb, "a"), mustValue[string, string](t, pb, "b")}
			for step := range 20000 {
				k := keys[rng.IntN(len(keys))]
				g := groupOf(kc, k)
				hb.SetCurrentKey(k, g)
				pb.SetCurrentKey(k, g)
				which, op := rng.IntN(2), rng.IntN(10)
				var got, want string
				switch h, p := hs[which], ps[which]; which {
				case 0:
					want, got = doOp(h.(interface {
						Value() (int, bool)
						Update(int)
						Clear()
					}), op, step), doOp(p.(interface {
						Value() (int, bool)
						Update(int)
						Clear()
					}), op, step)
				case 1:
					want, got = doOp(h.(interface {
						Value() (string, bool)
						Update(string)
						Clear()
					}), op, fmt.Sprint(step)), doOp(p.(interface {
						Value() (string, bool)
						Update(string)
						Clear()
					}), op, fmt.Sprint(step))
				}
				if got != want {
					t.Fatalf("step %d: state %d, op %d on %s: pebble %s, heap %s", step, which, op, k, got, want)
				}
			}
			hf, pf := checkpointTo(t, hb, 1), checkpointTo(t, pb, 1)
			if !bytes.Equal(hf.data, pf.data) {
				t.Fatal("snapshots differ")
			}
			// Across kinds: heap's file into pebble and back into heap.
			p2 := newPebble(t, r, kc, Options{})
			if _, err := restoreFiles(p2, []file{hf}); err != nil {
				t.Fatal(err)
			}
			p2f := checkpointTo(t, p2, 2)
			h2 := heap.New(r, kc)
			if _, err := restoreFiles(h2, []file{p2f}); err != nil {
				t.Fatal(err)
			}
			mustValue[string, int](t, h2, "a")
			if h2f := checkpointTo(t, h2, 3); !bytes.Equal(h2f.data, hf.data) || !bytes.Equal(p2f.data, hf.data) {
				t.Fatal("state changed crossing backends")
			}
		})
	}
}

func doOp[V comparable](s interface {
	Value() (V, bool)
	Update(V)
	Clear()
}, op int, v V) string {
	switch {
	case op < 4:
		s.Update(v)
		return ""
	case op < 6:
		s.Clear()
		return ""
	}
	got, ok := s.Value()
	return fmt.Sprint(got, ok)
}

// slowWriter sleeps on every Write, so that the task goroutine's writes
// interleave with the snapshot's.
type slowWriter struct {
	buf    bytes.Buffer
	delay  time.Duration
	writes int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	w.writes++
	return w.buf.Write(p)
}

// TestSnapshotIsFrozen writes, clears and reads the state on the task
// goroutine while WriteState streams the snapshot on another, with small
// memtables so that flushes and compactions run meanwhile; the snapshot has
// exactly the state at Snapshot, byte for byte what a heap backend holding
// it writes.
func TestSnapshotIsFrozen(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	b := newPebble(t, r, kc, Options{MemTableSize: 64 << 10})
	count := mustValue[string, int](t, b, "count")
	live := map[string]int{}
	for i := range 20000 {
		k := fmt.Sprint("k", i)
		set(b, kc, count, k, i)
		live[k] = i
	}
	atSnapshot := maps.Clone(live)
	snap, err := b.Snapshot(1)
	must(t, err)

	w := &slowWriter{delay: time.Millisecond}
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(w)
		done <- result{h, err}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var res result
	ops := 0
	for running := true; running; ops++ {
		select {
		case res = <-done:
			running = false
		default:
		}
		k := fmt.Sprint("k", rng.IntN(25000))
		if rng.IntN(3) == 0 {
			b.SetCurrentKey(k, groupOf(kc, k))
			count.Clear()
			delete(live, k)
		} else {
			set(b, kc, count, k, -ops)
			live[k] = -ops
		}
		want, wantOK := live[k]
		if v, ok := get(b, kc, count, k); v != want || ok != wantOK {
			t.Fatalf("live read of %s = %d, %v; want %d, %v", k, v, ok, want, wantOK)
		}
	}
	snap.Release()
	must(t, res.err)
	if w.writes < maxPar || ops < 500 {
		t.Fatalf("only %d writes and %d operations interleaved", w.writes, ops)
	}
	t.Logf("%d operations during %d writes", ops, w.writes)

	ref := heap.New(r, kc)
	refCount := mustValue[string, int](t, ref, "count")
	for k, v := range atSnapshot {
		set(ref, kc, refCount, k, v)
	}
	if f := checkpointTo(t, ref, 1); !bytes.Equal(f.data, w.buf.Bytes()) {
		t.Error("the snapshot's bytes differ from those of the state at snapshot time")
	}
	// And the live state is all there.
	for k, v := range live {
		if got, ok := get(b, kc, count, k); got != v || !ok {
			t.Fatalf("live %s = %d, %v; want %d", k, got, ok, v)
		}
	}
}

// TestConcurrentSnapshots writes several snapshots at once on their own
// goroutines while the task keeps writing (run it with -race).
func TestConcurrentSnapshots(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 32}
	kc := codec.Int()
	b := newPebble(t, r, kc, Options{})
	s := mustValue[int, int](t, b, "v")
	type taken struct {
		snap statebackend.Snapshot
		want []byte
	}
	var snaps []taken
	state := map[int]int{}
	for round := range 4 {
		for i := range 2000 {
			k := i*7 + round
			if !r.Contains(groupOf(kc, k)) {
				continue
			}
			set(b, kc, s, k, round)
			state[k] = round
		}
		ref := heap.New(r, kc)
		rs := mustValue[int, int](t, ref, "v")
		for k, v := range state {
			set(ref, kc, rs, k, v)
		}
		snap, err := b.Snapshot(int64(round))
		must(t, err)
		snaps = append(snaps, taken{snap, checkpointTo(t, ref, 0).data})
	}
	type result struct {
		i    int
		data []byte
		err  error
	}
	done := make(chan result)
	for i, tk := range snaps {
		go func() {
			var buf bytes.Buffer
			_, err := tk.snap.WriteState(&buf)
			done <- result{i, buf.Bytes(), err}
		}()
	}
	for i := range 3000 { // meanwhile
		if r.Contains(groupOf(kc, i)) {
			set(b, kc, s, i, -i)
		}
	}
	for range snaps {
		res := <-done
		must(t, res.err)
		if !bytes.Equal(res.data, snaps[res.i].want) {
			t.Errorf("snapshot %d differs from the state at its time", res.i)
		}
		snaps[res.i].snap.Release()
	}
}

// TestCarriesOtherKinds restores a version-2 file with states the pebble
// backend cannot register yet (a list state, a value state with TTL, a
// namespaced value state) and checks that both backends carry them into
// their snapshots byte for byte, and refuse to register them as plain value
// states with the same message.
func TestCarriesOtherKinds(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 4}
	kc := codec.String()
	var buf bytes.Buffer
	fw := format.NewWriter(&buf, r)
	infos := []format.StateInfo{
		{Name: "list", Kind: format.KindList},
		{Name: "plain", Kind: format.KindValue},
		{Name: "ttl", Kind: format.KindValue, TTL: true},
		{Name: "windows", Kind: format.KindValue, Namespaced: true},
	}
	must(t, fw.Describe(infos...))
	future := time.Now().Add(time.Hour).UnixMilli()
	for g := range 4 {
		must(t, fw.StartGroup(g, 4))
		key := kc.Append(nil, fmt.Sprint("key", g))
		must(t, fw.StartState("list", 1))
		list := codec.Int().Append(codec.Int().Append([]byte{2}, 10), 20)
		must(t, fw.Entry(key, list))
		must(t, fw.StartState("plain", 1))
		must(t, fw.Entry(key, codec.Int().Append(nil, g)))
		must(t, fw.StartState("ttl", 1))
		must(t, fw.Entry(key, codec.Int().Append(format.AppendTTL(nil, future), g)))
		must(t, fw.StartState("windows", 2))
		must(t, fw.Entry(codec.Int64().Append(slices.Clone(key), 100), codec.Int().Append(nil, 1)))
		must(t, fw.Entry(codec.Int64().Append(slices.Clone(key), 200), codec.Int().Append(nil, 2)))
		must(t, fw.EndGroup())
	}
	h, err := fw.Finish()
	must(t, err)
	orig := file{h, buf.Bytes()}
	orig.h.Path = "v2"

	var errs []string
	for _, kind := range kinds {
		b := newBackend(t, kind, r, kc)
		if _, err := restoreFiles(b, []file{orig}); err != nil {
			t.Fatal(err)
		}
		_, err := valueState(b, "list", codec.Int())
		if err == nil {
			t.Fatalf("%s: a list state registered as a value state", kind)
		}
		errs = append(errs, err.Error())
		if _, err := valueState(b, "ttl", codec.Int()); err == nil || !strings.Contains(err.Error(), "written with a TTL") {
			t.Fatalf("%s: ttl: %v", kind, err)
		}
		mustValue[string, int](t, b, "plain")
		f := checkpointTo(t, b, 1)
		if !bytes.Equal(f.data, orig.data) {
			t.Errorf("%s: carried state changed", kind)
		}
		// Only part of the range: the descriptions follow the states present.
		sub := newBackend(t, kind, keygroup.Range{Start: 1, End: 2}, kc)
		if _, err := restoreFiles(sub, []file{orig}); err != nil {
			t.Fatal(err)
		}
		ff, err := format.Open(checkpointTo(t, sub, 2).h, checkpointTo(t, sub, 3).data)
		must(t, err)
		if ff.Version() != 2 || len(ff.Infos()) != 3 {
			t.Errorf("%s: sub-range file has version %d, infos %v", kind, ff.Version(), ff.Infos())
		}
	}
	if errs[0] != errs[1] {
		t.Errorf("the backends refuse differently:\n%s\n%s", errs[0], errs[1])
	}
}

// TestFailedLargeRestoreLeavesNothing fails a restore after several batches
// were committed: the backend is left empty, and a restore can follow.
func TestFailedLargeRestoreLeavesNothing(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.Int()
	src := newPebble(t, r, kc, Options{})
	s := mustValue[int, []byte](t, src, "big")
	value := bytes.Repeat([]byte("x"), 1000)
	for i := range 9000 { // 9 MB: two batches committed before the failure
		set(src, kc, s, i, value)
	}
	good := checkpointTo(t, src, 1)
	// A copy of the same file covering the same groups: the second handle
	// overlaps the first, after the first was loaded.
	dup := good
	dup.h.Path = "dup"

	b := newPebble(t, r, kc, Options{})
	_, err := restoreFiles(b, []file{good, dup})
	if err == nil || !strings.Contains(err.Error(), "handles overlap") {
		t.Fatalf("err = %v", err)
	}
	if len(b.states) != 0 || len(b.names) != 0 {
		t.Fatalf("states left: %v", b.names)
	}
	it, err := b.db.NewIter(nil)
	must(t, err)
	if it.First() {
		t.Errorf("the database still has %x", it.Key())
	}
	must(t, it.Close())
	if _, err := restoreFiles(b, []file{good}); err != nil {
		t.Fatal(err)
	}
	mustValue[int, []byte](t, b, "big")
	if f := checkpointTo(t, b, 2); !bytes.Equal(f.data, good.data) {
		t.Error("restored state differs")
	}
}
