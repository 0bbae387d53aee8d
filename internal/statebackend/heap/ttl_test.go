package heap

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

func ttlOf(ms int64, u state.TTLUpdate) Option {
	return WithTTL(state.TTLConfig{TTL: time.Duration(ms) * time.Millisecond, Update: u})
}

// ttlKind drives one state of some kind through a TTL scenario: write
// creates the entry (or adds to it), read reports what the current key
// holds as a string ("" for nothing).
type ttlKind struct {
	name  string
	setup func(b *Backend[string], opt Option) (write func(v int), read func() string, entries func() int)
}

func sum(a, v int) int { return a + v }

var avgCodec, _ = codec.Of[*avgAcc]()

var ttlKinds = []ttlKind{
	{"value", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewValueState(b, "s", codec.Int(), opt)
		return s.Update, func() string { return show(s.Value()) }, s.Len
	}},
	{"list", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewListState(b, "s", codec.Int(), opt)
		return s.Add, func() string { return showList(s.Get()) }, s.s.len
	}},
	{"map", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewMapState(b, "s", codec.Int(), codec.Int(), opt)
		return func(v int) { s.Put(v, v) }, func() string {
			if s.IsEmpty() {
				return ""
			}
			return fmt.Sprint(slices.Sorted(s.Keys()))
		}, s.s.len
	}},
	{"reducing", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewReducingState(b, "s", sum, codec.Int(), opt)
		return s.Add, func() string { return show(s.Get()) }, s.a.s.len
	}},
	{"aggregating", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewAggregatingState(b, "s", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), avgCodec, opt)
		return func(v int) { s.Add(int64(v)) }, func() string {
			if acc, ok := s.Get(); ok {
				return fmt.Sprint(acc.Sum, "/", acc.Count)
			}
			return ""
		}, s.a.s.len
	}},
	{"namespaced list", func(b *Backend[string], opt Option) (func(int), func() string, func() int) {
		s, _ := NewNamespacedListState(b, "s", codec.String(), codec.Int(), opt)
		s.SetCurrentNamespace("w")
		return s.Add, func() string { return showList(s.Get()) }, s.listCore.s.len
	}},
}

func show[T any](v T, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

func showList(l []int) string {
	if l == nil {
		return ""
	}
	return fmt.Sprint(l)
}

// TestTTLExpiry: an entry is returned until its TTL has passed since its
// last write, never after; the read that finds it expired removes it, and
// a write after expiry starts from nothing.
func TestTTLExpiry(t *testing.T) {
	want := map[string][3]string{ // after write(1), write(2) at 105, write(5) after expiry
		"value":           {"1", "2", "5"},
		"list":            {"[1]", "[1 2]", "[5]"},
		"map":             {"[1]", "[1 2]", "[5]"},
		"reducing":        {"1", "3", "5"},
		"aggregating":     {"1/1", "3/2", "5/1"},
		"namespaced list": {"[1]", "[1 2]", "[5]"},
	}
	for _, k := range ttlKinds {
		t.Run(k.name, func(t *testing.T) {
			clock := &fakeClock{ms: 100}
			b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
			write, read, entries := k.setup(b, ttlOf(10, state.OnCreateAndWrite))
			w := want[k.name]
			steps := []struct {
				at    int64
				write int // 0: read only
				want  string
			}{
				{100, 1, w[0]},
				{105, 2, w[1]}, // renews: expires at 115
				{114, 0, w[1]}, // reads do not renew
				{115, 0, ""},
				{116, 5, w[2]},
			}
			b.SetCurrentKey("a", 0)
			for i, st := range steps {
				clock.ms = st.at
				if st.write != 0 {
					write(st.write)
				}
				if got := read(); got != st.want {
					t.Fatalf("step %d at %d: read %q, want %q", i, st.at, got, st.want)
				}
				if st.want == "" && entries() != 0 {
					t.Fatalf("step %d: %d entries stored after an expired read", i, entries())
				}
			}
		})
	}
}

// TestTTLOnReadAndWrite: reads renew the entry.
func TestTTLOnReadAndWrite(t *testing.T) {
	for _, k := range ttlKinds {
		t.Run(k.name, func(t *testing.T) {
			clock := &fakeClock{ms: 0}
			b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
			write, read, _ := k.setup(b, ttlOf(10, state.OnReadAndWrite))
			b.SetCurrentKey("a", 0)
			write(1)
			for _, at := range []int64{9, 18, 27} { // each read renews for 10 ms
				clock.ms = at
				if read() == "" {
					t.Fatalf("at %d: expired despite the read at %d", at, at-9)
				}
			}
			clock.ms = 37
			if got := read(); got != "" {
				t.Fatalf("at 37: read %q, 10 ms after the last read", got)
			}
		})
	}
}

// TestTTLSnapshot: a snapshot leaves out the entries expired at the time it
// was taken (not when it is written), keeps the last-access times of the
// others, and a restore drops what expired since.
func TestTTLSnapshot(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 16}
	clock := &fakeClock{}
	b := newClocked(r, clock)
	s := must[*ValueState[string, int]](t)(NewValueState(b, "s", codec.Int(), ttlOf(10, state.OnCreateAndWrite)))
	kc := codec.String()
	keys := make([]string, 0, 100)
	for i := 0; len(keys) < cap(keys); i++ {
		if k := fmt.Sprint("k", i); r.Contains(groupOf(kc, k)) {
			keys = append(keys, k)
		}
	}
	for i, k := range keys { // key i written at time i: expires at i+10
		clock.ms = int64(i)
		b.SetCurrentKey(k, groupOf(kc, k))
		s.Update(i)
	}
	clock.ms = 50
	snap, err := b.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	clock.ms = 1000 // WriteState uses the time of Snapshot
	f := write(t, snap, "chk-1")
	if s.Len() != 100 {
		t.Errorf("the snapshot removed live entries: %d left", s.Len())
	}

	// The file holds keys 41.. with their last-access times.
	ff, err := format.Open(f.h, f.data)
	must[*format.File](t)(ff, err)
	written := map[string]int64{}
	for g := r.Start; g < r.End; g++ {
		blk, _ := ff.Block(g)
		for _, sb := range blk.States {
			sb.ForEach(func(kb, vb []byte) error {
				k, _, _ := kc.Decode(kb)
				last, rest, err := format.SplitTTL(vb)
				if err != nil {
					t.Fatal(err)
				}
				if v, _, _ := codec.Int().Decode(rest); int64(v) != last {
					t.Errorf("key %s: value %d, last access %d", k, v, last)
				}
				written[k] = last
				return nil
			})
		}
	}
	want := map[string]int64{}
	for i, k := range keys[41:] {
		want[k] = int64(41 + i)
	}
	if !maps.Equal(written, want) {
		t.Errorf("snapshot holds %d entries %v, want %d", len(written), written, len(want))
	}

	restoreAt := func(at, ttl int64) *ValueState[string, int] {
		clock.ms = at
		b2, _ := restoreClocked(t, r, clock, []file{f})
		return must[*ValueState[string, int]](t)(NewValueState(b2, "s", codec.Int(), ttlOf(ttl, state.OnCreateAndWrite)))
	}
	// At 80, the entries last written before 71 expired: dropped at
	// registration, never returned.
	s2 := restoreAt(80, 10)
	if s2.Len() != 29 {
		t.Errorf("restored at 80: %d entries, want 29", s2.Len())
	}
	for i, k := range keys {
		s2.s.b.SetCurrentKey(k, groupOf(kc, k))
		v, ok := s2.Value()
		if wantOK := i >= 71; ok != wantOK || (ok && v != i) {
			t.Errorf("restored at 80: key %d = %d, %v", i, v, ok)
		}
	}
	// The TTL may change across a restore: with 100 ms, all written
	// entries live at 80.
	if s3 := restoreAt(80, 100); s3.Len() != 59 {
		t.Errorf("restored with a longer TTL: %d entries, want 59", s3.Len())
	}
	// Long after: nothing is left, and the snapshot of it is empty.
	s4 := restoreAt(5000, 10)
	if s4.Len() != 0 {
		t.Errorf("restored at 5000: %d entries", s4.Len())
	}
	empty := checkpointTo(t, s4.s.b, 2)
	if ef, _ := format.Open(empty.h, empty.data); ef.Version() != 1 || len(ef.Infos()) != 0 {
		t.Errorf("a state without entries is described: version %d, %v", ef.Version(), ef.Infos())
	}
}

// TestTTLNamespaces: Namespaces skips and removes expired entries.
func TestTTLNamespaces(t *testing.T) {
	clock := &fakeClock{}
	b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
	s := must[*NamespacedValueState[string, int, string]](t)(NewNamespacedValueState(b, "s", codec.Int(), codec.String(), ttlOf(10, state.OnCreateAndWrite)))
	b.SetCurrentKey("a", 0)
	for ns := range 5 {
		clock.ms = int64(ns) * 5 // namespace ns expires at 5ns+10
		s.SetCurrentNamespace(ns)
		s.Update(fmt.Sprint("v", ns))
	}
	clock.ms = 20
	if got := slices.Sorted(s.Namespaces()); !slices.Equal(got, []int{3, 4}) {
		t.Errorf("Namespaces at 20 = %v, want [3 4]", got)
	}
	if s.Len() != 2 {
		t.Errorf("%d entries after Namespaces, want the 2 live ones", s.Len())
	}
	clock.ms = 40
	if got := slices.Collect(s.Namespaces()); len(got) != 0 || s.Len() != 0 {
		t.Errorf("Namespaces at 40 = %v, %d entries", got, s.Len())
	}
}

// TestTTLMapIsOneEntry: the TTL covers a key's whole map; any write renews
// it.
func TestTTLMapIsOneEntry(t *testing.T) {
	clock := &fakeClock{}
	b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
	s := must[*MapState[string, string, int]](t)(NewMapState(b, "s", codec.String(), codec.Int(), ttlOf(10, state.OnCreateAndWrite)))
	b.SetCurrentKey("a", 0)
	s.Put("x", 1)
	clock.ms = 8
	s.Put("y", 2) // renews x too
	clock.ms = 15
	if s.Len() != 2 {
		t.Fatalf("at 15: %d entries, want 2", s.Len())
	}
	clock.ms = 17
	s.Remove("y") // a write too
	clock.ms = 26
	if v, ok := s.Get("x"); !ok || v != 1 {
		t.Fatalf("at 26: x = %d, %v", v, ok)
	}
	clock.ms = 27
	if s.Contains("x") {
		t.Fatal("at 27: x outlived its TTL")
	}
}
