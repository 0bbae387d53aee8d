package heap

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

// fakeClock is a Backend clock that moves only when told.
type fakeClock struct{ ms int64 }

func (c *fakeClock) now() int64 { return c.ms }

func newClocked(r keygroup.Range, clock *fakeClock) *Backend[string] {
	return NewWithOptions(r, codec.String(), Options{Clock: clock.now})
}

func mustCodec[T any](t testing.TB) codec.Codec[T] {
	t.Helper()
	c, err := codec.Of[T]()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// op is one random operation on a state; each kind reads the fields it
// needs.
type op struct {
	code int
	v    int64
	vs   []int64
	uk   string
	m    map[string]int64
	ns   string
}

// kindState is a registered state of some kind, driven through ops, with
// the current key's content as a model value M.
type kindState[M any] interface {
	do(o op)
	// read returns the current key's content, and false when it has none.
	read() (M, bool)
	// load makes the current key hold m (present) through the public
	// methods, to build a reference backend.
	load(m M)
}

// kindCase describes a kind for the generic tests.
type kindCase[M any] struct {
	name     string
	register func(b *Backend[string]) (kindState[M], error)
	gen      func(rng *rand.Rand) op
	// model returns what the current key holds after o; it must not
	// modify m (snapshots of the model share values).
	model func(m M, ok bool, o op) (M, bool)
	ttl   bool // entries carry timestamps: snapshots are not byte-comparable to a reference
}

func randVec(rng *rand.Rand) []int64 {
	return []int64{rng.Int64N(100), rng.Int64N(100), rng.Int64N(100)}
}

func randInts(rng *rand.Rand, max int) []int64 {
	vs := make([]int64, rng.IntN(max))
	for i := range vs {
		vs[i] = rng.Int64N(1000)
	}
	return vs
}

func randMap(rng *rand.Rand) map[string]int64 {
	m := map[string]int64{}
	for range rng.IntN(3) {
		m[fmt.Sprint("u", rng.IntN(8))] = rng.Int64N(1000)
	}
	return m
}

// --- list ---

type listKind struct{ s state.List[int64] }

func (k listKind) do(o op) {
	switch o.code {
	case 0:
		k.s.Add(o.v)
	case 1:
		k.s.AddAll(o.vs)
	case 2:
		k.s.Update(o.vs)
	case 3:
		k.s.Clear()
	}
}

func (k listKind) read() ([]int64, bool) { l := k.s.Get(); return l, l != nil }
func (k listKind) load(m []int64)        { k.s.Update(m) }

func genList(rng *rand.Rand) op {
	codes := []int{0, 0, 0, 0, 1, 1, 2, 3}
	return op{code: codes[rng.IntN(len(codes))], v: rng.Int64N(1000), vs: randInts(rng, 4)}
}

func modelList(m []int64, ok bool, o op) ([]int64, bool) {
	var out []int64
	switch o.code {
	case 0:
		out = slices.Concat(m, []int64{o.v})
	case 1:
		out = slices.Concat(m, o.vs)
	case 2:
		out = slices.Clone(o.vs)
	case 3:
	}
	if len(out) == 0 {
		return nil, false
	}
	return out, true
}

func listCase(opts ...Option) kindCase[[]int64] {
	return kindCase[[]int64]{
		name: "list",
		register: func(b *Backend[string]) (kindState[[]int64], error) {
			s, err := NewListState(b, "s", codec.Int64(), opts...)
			return listKind{s}, err
		},
		gen: genList, model: modelList, ttl: len(opts) > 0,
	}
}

// --- map ---

type mapKind struct{ s state.Map[string, int64] }

func (k mapKind) do(o op) {
	switch o.code {
	case 0:
		k.s.Put(o.uk, o.v)
	case 1:
		k.s.Remove(o.uk)
	case 2:
		k.s.PutAll(o.m)
	case 3:
		k.s.Clear()
	}
}

// read reads through every method and fails loudly if they disagree.
func (k mapKind) read() (map[string]int64, bool) {
	m := maps.Collect(k.s.All())
	keys := slices.Sorted(k.s.Keys())
	if !slices.Equal(keys, slices.Sorted(maps.Keys(m))) || k.s.Len() != len(m) || k.s.IsEmpty() != (len(m) == 0) {
		panic(fmt.Sprintf("map methods disagree: All %v, Keys %v, Len %d, IsEmpty %v", m, keys, k.s.Len(), k.s.IsEmpty()))
	}
	for uk, uv := range m {
		if v, ok := k.s.Get(uk); !ok || v != uv || !k.s.Contains(uk) {
			panic(fmt.Sprintf("Get(%q) = %d, %v; All has %d", uk, v, ok, uv))
		}
	}
	if len(m) == 0 {
		return nil, false
	}
	return m, true
}

func (k mapKind) load(m map[string]int64) { k.s.PutAll(m) }

func genMap(rng *rand.Rand) op {
	codes := []int{0, 0, 0, 0, 1, 1, 2, 3}
	return op{code: codes[rng.IntN(len(codes))], uk: fmt.Sprint("u", rng.IntN(8)), v: rng.Int64N(1000), m: randMap(rng)}
}

func modelMap(m map[string]int64, ok bool, o op) (map[string]int64, bool) {
	out := maps.Clone(m)
	switch o.code {
	case 0:
		if out == nil {
			out = map[string]int64{}
		}
		out[o.uk] = o.v
	case 1:
		delete(out, o.uk)
	case 2:
		if out == nil {
			out = map[string]int64{}
		}
		maps.Copy(out, o.m)
	case 3:
		out = nil
	}
	if len(out) == 0 {
		return nil, false
	}
	return out, true
}

func mapCase() kindCase[map[string]int64] {
	return kindCase[map[string]int64]{
		name: "map",
		register: func(b *Backend[string]) (kindState[map[string]int64], error) {
			s, err := NewMapState(b, "s", codec.String(), codec.Int64())
			return mapKind{s}, err
		},
		gen: genMap, model: modelMap,
	}
}

// clearOneIn returns 1 (clear) once in n, else 0 (add).
func clearOneIn(rng *rand.Rand, n int) int {
	if rng.IntN(n) == 0 {
		return 1
	}
	return 0
}

// --- reducing: vectors summed in place ---

// addVec adds v to acc in place, as a reduce function that reuses its
// accumulator does: the state must give it a copy while a snapshot holds
// acc.
func addVec(acc, v []int64) []int64 {
	for i := range acc {
		acc[i] += v[i]
	}
	return acc
}

type reducingKind struct{ s state.Reducing[[]int64] }

func (k reducingKind) do(o op) {
	if o.code == 0 {
		k.s.Add(o.vs)
	} else {
		k.s.Clear()
	}
}

func (k reducingKind) read() ([]int64, bool) { return k.s.Get() }
func (k reducingKind) load(m []int64)        { k.s.Add(slices.Clone(m)) }

func reducingCase(t testing.TB) kindCase[[]int64] {
	c := mustCodec[[]int64](t)
	return kindCase[[]int64]{
		name: "reducing",
		register: func(b *Backend[string]) (kindState[[]int64], error) {
			s, err := NewReducingState(b, "s", addVec, c)
			return reducingKind{s}, err
		},
		gen: func(rng *rand.Rand) op { return op{code: clearOneIn(rng, 6), vs: randVec(rng)} },
		model: func(m []int64, ok bool, o op) ([]int64, bool) {
			if o.code != 0 {
				return nil, false
			}
			if !ok {
				return slices.Clone(o.vs), true
			}
			return addVec(slices.Clone(m), o.vs), true
		},
	}
}

// --- aggregating: a pointer accumulator changed in place ---

type avgAcc struct{ Sum, Count int64 }

type avgFunc struct{}

func (avgFunc) CreateAccumulator() *avgAcc { return &avgAcc{} }
func (avgFunc) Add(v int64, acc *avgAcc) *avgAcc {
	acc.Sum += v
	acc.Count++
	return acc
}
func (avgFunc) GetResult(acc *avgAcc) avgAcc { return *acc }
func (avgFunc) Merge(a, b *avgAcc) *avgAcc {
	a.Sum += b.Sum
	a.Count += b.Count
	return a
}

type aggregatingKind struct {
	s state.Aggregating[int64, avgAcc]
}

func (k aggregatingKind) do(o op) {
	if o.code == 0 {
		k.s.Add(o.v)
	} else {
		k.s.Clear()
	}
}

func (k aggregatingKind) read() (avgAcc, bool) { return k.s.Get() }

// load adds m.Sum once and zeros Count-1 times.
func (k aggregatingKind) load(m avgAcc) {
	k.s.Add(m.Sum)
	for range m.Count - 1 {
		k.s.Add(0)
	}
}

func aggregatingCase(t testing.TB) kindCase[avgAcc] {
	c := mustCodec[*avgAcc](t)
	return kindCase[avgAcc]{
		name: "aggregating",
		register: func(b *Backend[string]) (kindState[avgAcc], error) {
			s, err := NewAggregatingState(b, "s", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), c)
			return aggregatingKind{s}, err
		},
		gen: func(rng *rand.Rand) op { return op{code: clearOneIn(rng, 6), v: rng.Int64N(100)} },
		model: func(m avgAcc, ok bool, o op) (avgAcc, bool) {
			if o.code != 0 {
				return avgAcc{}, false
			}
			return avgAcc{m.Sum + o.v, m.Count + 1}, true
		},
	}
}

// --- namespaced list and map: the content of a key is by namespace ---

var namespaces = []string{"w1", "w2", "w3"}

type nsListKind struct {
	s *NamespacedListState[string, string, int64]
}

func (k nsListKind) do(o op) {
	k.s.SetCurrentNamespace(o.ns)
	if o.code == 4 {
		k.s.ClearAllNamespaces()
		return
	}
	listKind{k.s}.do(o)
}

func (k nsListKind) read() (map[string][]int64, bool) {
	out := map[string][]int64{}
	for ns := range k.s.Namespaces() {
		k.s.SetCurrentNamespace(ns)
		out[ns] = k.s.Get()
	}
	return out, len(out) > 0
}

func (k nsListKind) load(m map[string][]int64) {
	for ns, l := range m {
		k.s.SetCurrentNamespace(ns)
		k.s.Update(l)
	}
}

func nsListCase() kindCase[map[string][]int64] {
	return kindCase[map[string][]int64]{
		name: "namespaced list",
		register: func(b *Backend[string]) (kindState[map[string][]int64], error) {
			s, err := NewNamespacedListState(b, "s", codec.String(), codec.Int64())
			return nsListKind{s}, err
		},
		gen: func(rng *rand.Rand) op {
			o := genList(rng)
			if rng.IntN(20) == 0 {
				o.code = 4
			}
			o.ns = namespaces[rng.IntN(len(namespaces))]
			return o
		},
		model: func(m map[string][]int64, ok bool, o op) (map[string][]int64, bool) {
			if o.code == 4 {
				return nil, false
			}
			out := maps.Clone(m)
			if out == nil {
				out = map[string][]int64{}
			}
			cur, has := out[o.ns]
			if l, ok := modelList(cur, has, o); ok {
				out[o.ns] = l
			} else {
				delete(out, o.ns)
			}
			return out, len(out) > 0
		},
	}
}

type nsMapKind struct {
	s *NamespacedMapState[string, string, string, int64]
}

func (k nsMapKind) do(o op) {
	k.s.SetCurrentNamespace(o.ns)
	if o.code == 4 {
		k.s.ClearAllNamespaces()
		return
	}
	mapKind{k.s}.do(o)
}

func (k nsMapKind) read() (map[string]map[string]int64, bool) {
	out := map[string]map[string]int64{}
	for ns := range k.s.Namespaces() {
		k.s.SetCurrentNamespace(ns)
		out[ns], _ = mapKind{k.s}.read()
	}
	return out, len(out) > 0
}

func (k nsMapKind) load(m map[string]map[string]int64) {
	for ns, um := range m {
		k.s.SetCurrentNamespace(ns)
		k.s.PutAll(um)
	}
}

func nsMapCase(opts ...Option) kindCase[map[string]map[string]int64] {
	return kindCase[map[string]map[string]int64]{
		name: "namespaced map",
		register: func(b *Backend[string]) (kindState[map[string]map[string]int64], error) {
			s, err := NewNamespacedMapState(b, "s", codec.String(), codec.String(), codec.Int64(), opts...)
			return nsMapKind{s}, err
		},
		gen: func(rng *rand.Rand) op {
			o := genMap(rng)
			if rng.IntN(20) == 0 {
				o.code = 4
			}
			o.ns = namespaces[rng.IntN(len(namespaces))]
			return o
		},
		model: func(m map[string]map[string]int64, ok bool, o op) (map[string]map[string]int64, bool) {
			if o.code == 4 {
				return nil, false
			}
			out := maps.Clone(m)
			if out == nil {
				out = map[string]map[string]int64{}
			}
			cur, has := out[o.ns]
			if um, ok := modelMap(cur, has, o); ok {
				out[o.ns] = um
			} else {
				delete(out, o.ns)
			}
			return out, len(out) > 0
		},
		ttl: len(opts) > 0,
	}
}

// longTTL never expires during a test, but renews on every read: reads
// write timestamps, through copy-on-write.
var longTTL = WithTTL(state.TTLConfig{TTL: time.Hour, Update: state.OnReadAndWrite})

// --- generic drivers ---

// driver applies random operations to one registered state and keeps the
// model.
type driver[M any] struct {
	t     testing.TB
	kc    kindCase[M]
	b     *Backend[string]
	st    kindState[M]
	clock *fakeClock
	model map[string]M
	rng   *rand.Rand
}

func newDriver[M any](t testing.TB, kc kindCase[M], r keygroup.Range, clock *fakeClock, seed uint64) *driver[M] {
	b := newClocked(r, clock)
	st, err := kc.register(b)
	if err != nil {
		t.Fatal(err)
	}
	return &driver[M]{t: t, kc: kc, b: b, st: st, clock: clock, model: map[string]M{}, rng: rand.New(rand.NewPCG(seed, 7))}
}

func (d *driver[M]) key(k string) { d.b.SetCurrentKey(k, groupOf(d.b.keyCodec, k)) }

// apply applies one random operation to k, checks the state against the
// model and moves the clock by a millisecond.
func (d *driver[M]) apply(k string) {
	d.key(k)
	o := d.kc.gen(d.rng)
	d.st.do(o)
	cur, ok := d.model[k]
	if next, ok := d.kc.model(cur, ok, o); ok {
		d.model[k] = next
	} else {
		delete(d.model, k)
	}
	d.check(d.st, k, d.model)
	d.clock.ms++
}

// check compares what st holds for k with want[k].
func (d *driver[M]) check(st kindState[M], k string, want map[string]M) {
	d.t.Helper()
	d.key(k)
	got, ok := st.read()
	w, wok := want[k]
	if ok != wok || (ok && !reflect.DeepEqual(got, w)) {
		d.t.Fatalf("%s: key %s holds %v (present %v), want %v (present %v)", d.kc.name, k, got, ok, w, wok)
	}
}

// checkAll compares every key of keys that lies in st's range with want.
func (d *driver[M]) checkAll(b *Backend[string], st kindState[M], keys []string, want map[string]M) {
	d.t.Helper()
	saved := d.b
	d.b = b
	defer func() { d.b = saved }()
	for _, k := range keys {
		if b.groups.Contains(groupOf(b.keyCodec, k)) {
			d.check(st, k, want)
		}
	}
}

func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	return keys
}

// testCopyOnWrite is TestCopyOnWriteKeepsSnapshotFrozen for any kind: the
// task keeps changing the state while a slow WriteState reads it; the live
// state must have every change, the snapshot exactly the state at
// Snapshot, byte for byte what a backend holding that state writes.
func testCopyOnWrite[M any](t *testing.T, kc kindCase[M]) {
	r := keygroup.Range{Start: 0, End: maxPar}
	keys := keyNames(3000)
	clock := &fakeClock{ms: 1_000_000}
	d := newDriver(t, kc, r, clock, 1)
	for range 4 * len(keys) {
		d.apply(keys[d.rng.IntN(len(keys))])
	}
	atSnapshot := maps.Clone(d.model) // model values are never modified
	snap, err := d.b.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	w := &slowWriter{delay: 100 * time.Microsecond}
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(w)
		done <- result{h, err}
	}()
	var res result
	ops := 0
	for running := true; running; ops++ {
		select {
		case res = <-done:
			running = false
		default:
		}
		d.apply(keys[d.rng.IntN(len(keys))])
	}
	snap.Release()
	if res.err != nil {
		t.Fatal(res.err)
	}
	if w.writes < maxPar || ops < 500 {
		t.Fatalf("only %d writes and %d operations interleaved", w.writes, ops)
	}
	t.Logf("%d operations during %d writes", ops, w.writes)

	d.checkAll(d.b, d.st, keys, d.model)

	res.h.Path = "chk-1"
	b2, _ := restoreClocked(t, r, clock, []file{{res.h, w.buf.Bytes()}})
	st2, err := kc.register(b2)
	if err != nil {
		t.Fatal(err)
	}
	d.checkAll(b2, st2, keys, atSnapshot)

	if kc.ttl {
		return
	}
	ref := newClocked(r, clock)
	refSt, err := kc.register(ref)
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range atSnapshot {
		ref.SetCurrentKey(k, groupOf(ref.keyCodec, k))
		refSt.load(m)
	}
	if f := checkpointTo(t, ref, 1); !bytes.Equal(f.data, w.buf.Bytes()) {
		t.Error("the snapshot's bytes differ from those of the state at snapshot time")
	}
}

// restoreClocked is restore for a backend with a fake clock.
func restoreClocked(t testing.TB, r keygroup.Range, clock *fakeClock, files []file) (*Backend[string], []string) {
	t.Helper()
	b := newClocked(r, clock)
	var opened []string
	handles := make([]checkpoint.KeyedStateHandle, len(files))
	byPath := map[string][]byte{}
	for i, f := range files {
		handles[i] = f.h
		byPath[f.h.Path] = f.data
	}
	err := b.Restore(handles, func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		opened = append(opened, h.Path)
		return byPath[h.Path], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, opened
}

// testKindRescale writes state from 4 subtasks over [0, 128) and restores
// it into 3, into 1 and back into 4 (byte for byte the same files).
func testKindRescale[M any](t *testing.T, kc kindCase[M]) {
	keys := keyNames(2000)
	clock := &fakeClock{ms: 5_000}
	model := map[string]M{}
	var files []file
	for sub := range 4 {
		d := newDriver(t, kc, keygroup.RangeFor(maxPar, 4, sub), clock, uint64(sub))
		for range 3 {
			for _, k := range keys {
				if d.b.groups.Contains(groupOf(d.b.keyCodec, k)) {
					d.apply(k)
				}
			}
		}
		maps.Copy(model, d.model)
		files = append(files, checkpointTo(t, d.b, 3))
	}
	if len(model) < len(keys)/2 {
		t.Fatalf("only %d of %d keys hold state", len(model), len(keys))
	}
	for _, par := range []int{3, 1, 4} {
		for sub := range par {
			r := keygroup.RangeFor(maxPar, par, sub)
			b, _ := restoreClocked(t, r, clock, files)
			st, err := kc.register(b)
			if err != nil {
				t.Fatal(err)
			}
			// Before reading: reads renew TTL timestamps (OnReadAndWrite).
			if par == 4 {
				if f := checkpointTo(t, b, 4); !bytes.Equal(f.data, files[sub].data) {
					t.Errorf("p=4 subtask %d: restored state snapshots to different bytes", sub)
				}
			}
			d := &driver[M]{t: t, kc: kc, b: b}
			d.checkAll(b, st, keys, model)
		}
	}
}

func TestCopyOnWriteEveryKind(t *testing.T) {
	t.Run("list", func(t *testing.T) { testCopyOnWrite(t, listCase()) })
	t.Run("list with TTL", func(t *testing.T) { testCopyOnWrite(t, listCase(longTTL)) })
	t.Run("map", func(t *testing.T) { testCopyOnWrite(t, mapCase()) })
	t.Run("reducing", func(t *testing.T) { testCopyOnWrite(t, reducingCase(t)) })
	t.Run("aggregating", func(t *testing.T) { testCopyOnWrite(t, aggregatingCase(t)) })
	t.Run("namespaced list", func(t *testing.T) { testCopyOnWrite(t, nsListCase()) })
	t.Run("namespaced map", func(t *testing.T) { testCopyOnWrite(t, nsMapCase()) })
	t.Run("namespaced map with TTL", func(t *testing.T) { testCopyOnWrite(t, nsMapCase(longTTL)) })
}

func TestRescaleEveryKind(t *testing.T) {
	t.Run("list", func(t *testing.T) { testKindRescale(t, listCase()) })
	t.Run("list with TTL", func(t *testing.T) { testKindRescale(t, listCase(longTTL)) })
	t.Run("map", func(t *testing.T) { testKindRescale(t, mapCase()) })
	t.Run("reducing", func(t *testing.T) { testKindRescale(t, reducingCase(t)) })
	t.Run("aggregating", func(t *testing.T) { testKindRescale(t, aggregatingCase(t)) })
	t.Run("namespaced list", func(t *testing.T) { testKindRescale(t, nsListCase()) })
	t.Run("namespaced map", func(t *testing.T) { testKindRescale(t, nsMapCase()) })
	t.Run("namespaced map with TTL", func(t *testing.T) { testKindRescale(t, nsMapCase(longTTL)) })
}
