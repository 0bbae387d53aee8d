package heap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

// oneGroup is a backend over one key group; tests set keys in it directly.
func oneGroup(t testing.TB) *Backend[string] {
	t.Helper()
	return New(keygroup.Range{Start: 0, End: 1}, codec.String())
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestListStateSemantics(t *testing.T) {
	b := oneGroup(t)
	s := must[*ListState[string, int]](t)(NewListState(b, "l", codec.Int()))
	steps := []struct {
		key  string
		op   string // add, addAll, update, clear
		vs   []int
		want []int
	}{
		{"a", "get", nil, nil},
		{"a", "add", []int{1}, []int{1}},
		{"a", "add", []int{2}, []int{1, 2}},
		{"b", "get", nil, nil},
		{"b", "addAll", []int{7, 8}, []int{7, 8}},
		{"a", "get", nil, []int{1, 2}},
		{"a", "addAll", nil, []int{1, 2}},
		{"a", "addAll", []int{3, 4}, []int{1, 2, 3, 4}},
		{"a", "update", []int{9}, []int{9}},
		{"a", "update", nil, nil},
		{"a", "add", []int{5}, []int{5}},
		{"a", "clear", nil, nil},
		{"a", "clear", nil, nil},
		{"b", "get", nil, []int{7, 8}},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key, 0)
		switch st.op {
		case "add":
			s.Add(st.vs[0])
		case "addAll":
			s.AddAll(st.vs)
		case "update":
			s.Update(st.vs)
		case "clear":
			s.Clear()
		}
		if got := s.Get(); !slices.Equal(got, st.want) || (got == nil) != (st.want == nil) {
			t.Fatalf("step %d (%s %s %v): Get() = %v, want %v", i, st.key, st.op, st.vs, got, st.want)
		}
	}
	if s.s.len() != 1 {
		t.Errorf("%d entries stored, want 1 (empty lists are not stored)", s.s.len())
	}
}

// TestListGetIsStable: the slice Get returns is clipped and keeps its
// elements through later writes; the caller's slices are not retained.
func TestListGetIsStable(t *testing.T) {
	b := oneGroup(t)
	s := must[*ListState[string, int]](t)(NewListState(b, "l", codec.Int()))
	b.SetCurrentKey("a", 0)
	in := []int{1, 2, 3}
	s.Update(in)
	in[0] = 100 // not retained by Update
	s.AddAll(in)
	in[1] = 200 // nor by AddAll
	got := s.Get()
	if cap(got) != len(got) {
		t.Errorf("Get: len %d, cap %d: not clipped", len(got), cap(got))
	}
	_ = append(got, 42) // copies: the state does not change
	s.Add(4)
	s.Add(5)
	if want := []int{1, 2, 3, 100, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("an earlier Get changed to %v, want %v", got, want)
	}
	if want := []int{1, 2, 3, 100, 2, 3, 4, 5}; !slices.Equal(s.Get(), want) {
		t.Errorf("Get = %v, want %v", s.Get(), want)
	}
}

// TestListAddIsAmortizedConstant: Add appends in place, with no snapshot
// in flight and with one (after the key group's table was copied once).
func TestListAddIsAmortizedConstant(t *testing.T) {
	b := New(keygroup.Range{Start: 0, End: 4}, codec.String())
	s := must[*ListState[string, int]](t)(NewListState(b, "l", codec.Int()))
	b.SetCurrentKey("a", 2)
	for i := range 1000 {
		s.Add(i)
	}
	if allocs := testing.AllocsPerRun(10000, func() { s.Add(1) }); allocs > 0.01 {
		t.Errorf("%.3f allocations per Add with no snapshot", allocs)
	}
	snap, _ := b.Snapshot(1)
	defer snap.Release()
	s.Add(1) // copies the key group's table once
	if allocs := testing.AllocsPerRun(10000, func() { s.Add(1) }); allocs > 0.01 {
		t.Errorf("%.3f allocations per Add with a snapshot in flight", allocs)
	}
}

func TestMapStateSemantics(t *testing.T) {
	b := oneGroup(t)
	s := must[*MapState[string, string, int64]](t)(NewMapState(b, "m", codec.String(), codec.Int64()))
	steps := []struct {
		key  string
		op   string // put, putAll, remove, clear, get
		uk   string
		v    int64
		all  map[string]int64 // PutAll's argument
		want map[string]int64
	}{
		{key: "a", op: "get", uk: "x"},
		{key: "a", op: "put", uk: "x", v: 1, want: map[string]int64{"x": 1}},
		{key: "a", op: "put", uk: "y", v: 2, want: map[string]int64{"x": 1, "y": 2}},
		{key: "a", op: "put", uk: "x", v: 3, want: map[string]int64{"x": 3, "y": 2}},
		{key: "b", op: "get", uk: "x"},
		{key: "b", op: "putAll", all: map[string]int64{"p": 1, "q": 2}, want: map[string]int64{"p": 1, "q": 2}},
		{key: "b", op: "putAll", all: nil, want: map[string]int64{"p": 1, "q": 2}},
		{key: "a", op: "remove", uk: "nope", want: map[string]int64{"x": 3, "y": 2}},
		{key: "a", op: "remove", uk: "x", want: map[string]int64{"y": 2}},
		{key: "a", op: "remove", uk: "y"},
		{key: "a", op: "remove", uk: "y"},
		{key: "a", op: "put", uk: "z", v: 0, want: map[string]int64{"z": 0}},
		{key: "b", op: "clear"},
		{key: "a", op: "get", uk: "z", want: map[string]int64{"z": 0}},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key, 0)
		switch st.op {
		case "put":
			s.Put(st.uk, st.v)
		case "putAll":
			s.PutAll(st.all)
		case "remove":
			s.Remove(st.uk)
		case "clear":
			s.Clear()
		}
		got, _ := mapKind{s}.read() // checks that every method agrees
		if len(got) != len(st.want) || !maps.Equal(got, st.want) {
			t.Fatalf("step %d (%s %s %q): map = %v, want %v", i, st.key, st.op, st.uk, got, st.want)
		}
		v, ok := s.Get(st.uk)
		if wv, wok := st.want[st.uk]; v != wv || ok != wok || s.Contains(st.uk) != wok {
			t.Fatalf("step %d: Get(%q) = %d, %v; want %d, %v", i, st.uk, v, ok, wv, wok)
		}
	}
	if s.s.len() != 1 {
		t.Errorf("%d entries stored, want 1 (empty maps are not stored)", s.s.len())
	}
}

// TestMapIterationWhileWriting: entries removed before they are reached are
// not yielded, updated ones are yielded with their new value — whether the
// map is written in place or copied because a snapshot holds it.
func TestMapIterationWhileWriting(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			b := oneGroup(t)
			s := must[*MapState[string, int, int]](t)(NewMapState(b, "m", codec.Int(), codec.Int()))
			b.SetCurrentKey("a", 0)
			for i := range 100 {
				s.Put(i, i)
			}
			if snapshot {
				snap, _ := b.Snapshot(1)
				defer snap.Release()
			}
			first := -1
			seen := map[int]int{}
			for uk, uv := range s.All() {
				if first < 0 {
					// Remove the other odd keys, change the other even ones.
					first = uk
					for k := range 100 {
						switch {
						case k == uk:
						case k%2 == 1:
							s.Remove(k)
						default:
							s.Put(k, k+1000)
						}
					}
				}
				if _, dup := seen[uk]; dup {
					t.Fatalf("%d yielded twice", uk)
				}
				seen[uk] = uv
			}
			want := map[int]int{first: first}
			for k := 0; k < 100; k += 2 {
				if k != first {
					want[k] = k + 1000
				}
			}
			if !maps.Equal(seen, want) {
				t.Errorf("yielded %v, want %v", seen, want)
			}
		})
	}
}

func TestReducingStateSemantics(t *testing.T) {
	b := oneGroup(t)
	s := must[*ReducingState[string, int]](t)(NewReducingState(b, "r", func(acc, v int) int { return acc*10 + v }, codec.Int()))
	steps := []struct {
		key   string
		op    string // add, clear, get
		v     int
		want  int
		found bool
	}{
		{"a", "get", 0, 0, false},
		{"a", "add", 1, 1, true},
		{"a", "add", 2, 12, true},
		{"b", "add", 5, 5, true},
		{"a", "add", 3, 123, true},
		{"a", "clear", 0, 0, false},
		{"a", "add", 4, 4, true},
		{"b", "get", 0, 5, true},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key, 0)
		switch st.op {
		case "add":
			s.Add(st.v)
		case "clear":
			s.Clear()
		}
		if v, ok := s.Get(); v != st.want || ok != st.found {
			t.Fatalf("step %d: Get() = %d, %v; want %d, %v", i, v, ok, st.want, st.found)
		}
	}
}

func TestAggregatingStateSemantics(t *testing.T) {
	b := oneGroup(t)
	s := must[*AggregatingState[string, int64, *avgAcc, avgAcc]](t)(
		NewAggregatingState(b, "g", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), mustCodec[*avgAcc](t)))
	steps := []struct {
		key   string
		op    string
		v     int64
		want  avgAcc
		found bool
	}{
		{"a", "get", 0, avgAcc{}, false},
		{"a", "add", 4, avgAcc{4, 1}, true},
		{"a", "add", 6, avgAcc{10, 2}, true},
		{"b", "add", 1, avgAcc{1, 1}, true},
		{"a", "clear", 0, avgAcc{}, false},
		{"a", "add", 0, avgAcc{0, 1}, true},
		{"b", "get", 0, avgAcc{1, 1}, true},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key, 0)
		switch st.op {
		case "add":
			s.Add(st.v)
		case "clear":
			s.Clear()
		}
		if v, ok := s.Get(); v != st.want || ok != st.found {
			t.Fatalf("step %d: Get() = %+v, %v; want %+v, %v", i, v, ok, st.want, st.found)
		}
	}
}

func TestConstructorErrors(t *testing.T) {
	b := oneGroup(t)
	c := codec.Int()
	if _, err := NewValueState(b, "dup", c); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		new  func() error
		want string
	}{
		{"duplicate first", func() error { _, err := NewListState[string, int](b, "dup", nil); return err }, `state "dup" is registered twice`},
		{"nil list codec", func() error { _, err := NewListState[string, int](b, "l", nil); return err }, `state "l": nil element codec`},
		{"nil map codec", func() error { _, err := NewMapState[string, string, int](b, "m", codec.String(), nil); return err }, `state "m": nil user key or user value codec`},
		{"nil reduce", func() error { _, err := NewReducingState(b, "r", nil, c); return err }, `state "r": nil reduce function`},
		{"nil aggregate function", func() error {
			_, err := NewAggregatingState[string, int, int, int](b, "g", nil, c)
			return err
		}, `state "g": nil aggregate function`},
		{"nil namespace codec", func() error { _, err := NewNamespacedValueState[string, string](b, "n", nil, c); return err }, `state "n": nil namespace codec`},
		{"zero TTL", func() error { _, err := NewValueState(b, "t", c, WithTTL(state.TTLConfig{})); return err }, `state "t": TTLConfig.TTL is 0s: it must be at least 1ms`},
		{"bad TTL update", func() error {
			_, err := NewValueState(b, "t", c, WithTTL(state.TTLConfig{TTL: 5e6, Update: 7}))
			return err
		}, `state "t": TTLConfig.Update is TTLUpdate(7)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.new(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// stateEntries returns the entries of state name in the single-group file
// f, with the file's description of the state.
func stateEntries(t testing.TB, f file, group int, name string) (format.StateInfo, [][2][]byte) {
	t.Helper()
	ff, err := format.Open(f.h, f.data)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ff.Block(group)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range blk.States {
		if sb.Name != name {
			continue
		}
		var out [][2][]byte
		sb.ForEach(func(k, v []byte) error {
			out = append(out, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
		return sb.Info, out
	}
	t.Fatalf("no state %q in key group %d", name, group)
	return format.StateInfo{}, nil
}

// TestEntryBytes checks the canonical bytes of every kind against what
// format/doc.go promises: list values are codec.Of[[]T]'s bytes, map values
// codec.Of[map[UK]UV]'s, entry keys the key's bytes then the namespace's,
// TTL values prefixed with the 8-byte timestamp.
func TestEntryBytes(t *testing.T) {
	clock := &fakeClock{ms: 1_700_000_000_123}
	b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
	list := must[*ListState[string, string]](t)(NewListState(b, "list", codec.String()))
	mp := must[*MapState[string, string, int64]](t)(NewMapState(b, "map", codec.String(), codec.Int64()))
	red := must[*ReducingState[string, int64]](t)(NewReducingState(b, "red", func(a, v int64) int64 { return a + v }, codec.Int64()))
	agg := must[*AggregatingState[string, int64, *avgAcc, avgAcc]](t)(NewAggregatingState(b, "agg", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), mustCodec[*avgAcc](t)))
	nsv := must[*NamespacedValueState[string, int64, string]](t)(NewNamespacedValueState(b, "nsv", codec.Int64(), codec.String()))
	ttl := must[*ValueState[string, string]](t)(NewValueState(b, "ttl", codec.String(), WithTTL(state.TTLConfig{TTL: 1e9})))
	plain := must[*ValueState[string, string]](t)(NewValueState(b, "plain", codec.String()))

	b.SetCurrentKey("key", 0)
	list.AddAll([]string{"b", "a", "c"})
	mp.PutAll(map[string]int64{"zz": 1, "b": 2, "aa": 3, "": 4})
	red.Add(3)
	red.Add(4)
	agg.Add(5)
	agg.Add(7)
	nsv.SetCurrentNamespace(-2)
	nsv.Update("minus two")
	nsv.SetCurrentNamespace(9)
	nsv.Update("nine")
	ttl.Update("expiring")
	plain.Update("p")
	f := checkpointTo(t, b, 1)

	key := codec.String().Append(nil, "key")
	one := func(name string, want format.StateInfo, value []byte) {
		t.Helper()
		info, es := stateEntries(t, f, 0, name)
		if info != want {
			t.Errorf("%s: described as %+v, want %+v", name, info, want)
		}
		if len(es) != 1 || !bytes.Equal(es[0][0], key) || !bytes.Equal(es[0][1], value) {
			t.Errorf("%s: entries %x, want key %x value %x", name, es, key, value)
		}
	}
	one("list", format.StateInfo{Name: "list", Kind: format.KindList}, mustCodec[[]string](t).Append(nil, []string{"b", "a", "c"}))
	one("map", format.StateInfo{Name: "map", Kind: format.KindMap}, mustCodec[map[string]int64](t).Append(nil, map[string]int64{"zz": 1, "b": 2, "aa": 3, "": 4}))
	one("red", format.StateInfo{Name: "red", Kind: format.KindReducing}, codec.Int64().Append(nil, 7))
	one("agg", format.StateInfo{Name: "agg", Kind: format.KindAggregating}, mustCodec[*avgAcc](t).Append(nil, &avgAcc{12, 2}))
	one("ttl", format.StateInfo{Name: "ttl", Kind: format.KindValue, TTL: true}, codec.String().Append(format.AppendTTL(nil, clock.ms), "expiring"))
	one("plain", format.PlainInfo("plain"), codec.String().Append(nil, "p"))

	info, es := stateEntries(t, f, 0, "nsv")
	if want := (format.StateInfo{Name: "nsv", Kind: format.KindValue, Namespaced: true}); info != want {
		t.Errorf("nsv: described as %+v", info)
	}
	want := [][2][]byte{ // sorted by key then namespace bytes: -2 sorts before 9
		{codec.Int64().Append(slices.Clone(key), -2), codec.String().Append(nil, "minus two")},
		{codec.Int64().Append(slices.Clone(key), 9), codec.String().Append(nil, "nine")},
	}
	if !reflect.DeepEqual(es, want) {
		t.Errorf("nsv entries %x, want %x", es, want)
	}

	// Only the non-plain states are described.
	ff, _ := format.Open(f.h, f.data)
	var names []string
	for _, in := range ff.Infos() {
		names = append(names, in.Name)
	}
	if want := []string{"agg", "list", "map", "nsv", "red", "ttl"}; !slices.Equal(names, want) || ff.Version() != 2 {
		t.Errorf("version %d describes %v, want %v", ff.Version(), names, want)
	}
}

// TestValueOnlyFilesStayVersion1: a backend with plain value states only
// writes version-1 files, byte for byte what it wrote before other kinds
// existed (the golden file was written by that code).
func TestValueOnlyFilesStayVersion1(t *testing.T) {
	data, err := os.ReadFile("testdata/v1-value.wkst")
	if err != nil {
		t.Fatal(err)
	}
	hj, err := os.ReadFile("testdata/v1-value.handle.json")
	if err != nil {
		t.Fatal(err)
	}
	var h checkpoint.KeyedStateHandle
	if err := json.Unmarshal(hj, &h); err != nil {
		t.Fatal(err)
	}
	r := keygroup.Range{Start: 0, End: 8}
	b, _ := restore(t, r, codec.String(), []file{{h, data}})
	count := mustValue[string, int](t, b, "count")
	last := mustValue[string, reading](t, b, "last")
	wantCount, wantLast := map[string]int{}, map[string]reading{}
	for i := range 60 {
		k := fmt.Sprint("k", i)
		if !r.Contains(keygroup.Of(codec.String().Append(nil, k), 8)) {
			continue
		}
		wantCount[k] = i
		if i%3 == 0 {
			wantLast[k] = reading{Celsius: float64(i) / 2, Tags: []string{"t", k}}
		}
	}
	gotCount, gotLast := map[string]int{}, map[string]reading{}
	for i := range 60 {
		k := fmt.Sprint("k", i)
		if g := keygroup.Of(codec.String().Append(nil, k), 8); r.Contains(g) {
			b.SetCurrentKey(k, g)
			if v, ok := count.Value(); ok {
				gotCount[k] = v
			}
			if v, ok := last.Value(); ok {
				gotLast[k] = v
			}
		}
	}
	if len(wantCount) < 20 {
		t.Fatalf("only %d keys", len(wantCount))
	}
	equal(t, "count", gotCount, wantCount)
	equal(t, "last", gotLast, wantLast)
	f := checkpointTo(t, b, 2)
	if !bytes.Equal(f.data, data) || f.h.CRC != h.CRC {
		t.Error("a value-only backend no longer writes the version-1 bytes")
	}
	if data[len(format.Magic)] != 1 {
		t.Errorf("golden file has version %d", data[len(format.Magic)])
	}
	// Its states are value states to every other kind.
	b2, _ := restore(t, r, codec.String(), []file{{h, data}})
	if _, err := NewListState(b2, "count", codec.Int()); err == nil || !strings.Contains(err.Error(), `state "count" was written as a value state and is registered as a list state`) {
		t.Errorf("err = %v", err)
	}
}

// TestRegisterMismatch: a state restored into a registration of another
// kind, or with namespaces or TTL added or dropped, fails, naming the state.
func TestRegisterMismatch(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	ttl := WithTTL(state.TTLConfig{TTL: 1e9})
	type reg func(b *Backend[string]) error
	value := func(opts ...Option) reg {
		return func(b *Backend[string]) error { _, err := NewValueState(b, "s", codec.Int(), opts...); return err }
	}
	list := func(opts ...Option) reg {
		return func(b *Backend[string]) error { _, err := NewListState(b, "s", codec.Int(), opts...); return err }
	}
	nsValue := func(b *Backend[string]) error {
		_, err := NewNamespacedValueState(b, "s", codec.Int(), codec.Int())
		return err
	}
	reducing := func(b *Backend[string]) error {
		_, err := NewReducingState(b, "s", func(a, v int) int { return a + v }, codec.Int())
		return err
	}
	tests := []struct {
		name        string
		write, read reg
		want        string
	}{
		{"value as list", value(), list(), `state "s" was written as a value state and is registered as a list state`},
		{"list as value", list(), value(), `state "s" was written as a list state and is registered as a value state`},
		{"value as reducing", value(), reducing, `state "s" was written as a value state and is registered as a reducing state`},
		{"TTL dropped", value(ttl), value(), `state "s" was written with a TTL and is registered without one`},
		{"TTL added", list(), list(ttl), `state "s" was written without a TTL and is registered with one`},
		{"namespace added", value(), nsValue, `state "s" was written without namespaces and is registered with a namespace codec`},
		{"namespace dropped", nsValue, value(), `state "s" was written with namespaces and is registered without`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(r, codec.String())
			if err := tc.write(b); err != nil {
				t.Fatal(err)
			}
			// Write something through whichever state it is.
			switch s := b.states["s"].typed.(type) {
			case *store[string, noNamespace, int]:
				b.SetCurrentKey("k", 0)
				s.set(struct{}{}, 1)
			case *store[string, noNamespace, []int]:
				b.SetCurrentKey("k", 0)
				s.set(struct{}{}, []int{1})
			case *store[string, int, int]:
				b.SetCurrentKey("k", 0)
				s.set(3, 1)
			default:
				t.Fatalf("unexpected store %T", s)
			}
			f := checkpointTo(t, b, 1)
			b2, _ := restore(t, r, codec.String(), []file{f})
			err := tc.read(b2)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			// The restored bytes stay: the right registration still works.
			if err := tc.write(b2); err != nil {
				t.Fatalf("registering as written after the error: %v", err)
			}
		})
	}
}

// TestCorruptKindValues: entries whose values do not hold what their kind
// promises fail registration with the state's name, without panicking.
func TestCorruptKindValues(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	key := codec.String().Append(nil, "k")
	file1 := func(info format.StateInfo, value []byte) file {
		var buf bytes.Buffer
		w := format.NewWriter(&buf, r)
		w.Describe(info)
		w.StartGroup(0, 1)
		w.StartState(info.Name, 1)
		w.Entry(key, value)
		w.EndGroup()
		h, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		h.Path = "f"
		return file{h, buf.Bytes()}
	}
	list := format.StateInfo{Name: "s", Kind: format.KindList}
	mp := format.StateInfo{Name: "s", Kind: format.KindMap}
	uv := binary.AppendUvarint
	str := func(s string) []byte { return codec.String().Append(nil, s) }
	tests := []struct {
		name  string
		info  format.StateInfo
		value []byte
		want  string
	}{
		{"empty list", list, uv(nil, 0), "empty list"},
		{"list count beyond bytes", list, uv(nil, 1<<40), "list of 1099511627776 elements in 0 bytes"},
		{"list element truncated", list, append(uv(nil, 2), str("a")...), "element 1 of 2"},
		{"list bytes left over", list, append(append(uv(nil, 1), str("a")...), 0), "1 bytes left over after 1 elements"},
		{"empty map", mp, uv(nil, 0), "empty map"},
		{"map count beyond bytes", mp, uv(nil, 5), "map of 5 entries in 0 bytes"},
		{"map keys unsorted", mp, slices.Concat(uv(nil, 2), str("b"), str("x"), str("a"), str("y")), "user keys are not sorted or repeat"},
		{"map keys repeated", mp, slices.Concat(uv(nil, 2), str("a"), str("x"), str("a"), str("y")), "user keys are not sorted or repeat"},
		{"ttl prefix short", format.StateInfo{Name: "s", Kind: format.KindList, TTL: true}, []byte{1, 2}, "fewer than its 8-byte timestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := restore(t, r, codec.String(), []file{file1(tc.info, tc.value)})
			var err error
			switch {
			case tc.info.Kind == format.KindList:
				var opts []Option
				if tc.info.TTL {
					opts = append(opts, WithTTL(state.TTLConfig{TTL: 1e9}))
				}
				_, err = NewListState(b, "s", codec.String(), opts...)
			case tc.info.Kind == format.KindMap:
				_, err = NewMapState(b, "s", codec.String(), codec.String())
			}
			if err == nil || !strings.Contains(err.Error(), `restore state "s", key group 0`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestRestoreInconsistentDescriptions: two handles of one checkpoint that
// describe a state differently are corrupt.
func TestRestoreInconsistentDescriptions(t *testing.T) {
	kc := codec.String()
	var files []file
	for sub, asList := range []bool{true, false} {
		r := keygroup.RangeFor(maxPar, 2, sub)
		b := New(r, kc)
		var k string
		for i := 0; ; i++ {
			if k = fmt.Sprint("k", i); r.Contains(groupOf(kc, k)) {
				break
			}
		}
		b.SetCurrentKey(k, groupOf(kc, k))
		if asList {
			must[*ListState[string, int]](t)(NewListState(b, "s", codec.Int())).Add(1)
		} else {
			mustValue[string, int](t, b, "s").Update(1)
		}
		files = append(files, checkpointTo(t, b, 1))
	}
	b := New(keygroup.Range{Start: 0, End: maxPar}, kc)
	handles := []checkpoint.KeyedStateHandle{files[0].h, files[1].h}
	err := b.Restore(handles, func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		return files[slices.IndexFunc(files, func(f file) bool { return f.h.Path == h.Path })].data, nil
	})
	if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), `state "s" is described as value state, but as list state in another key group`) {
		t.Fatalf("err = %v", err)
	}
}
