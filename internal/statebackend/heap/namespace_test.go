package heap

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

// TestNamespaceScoping: every namespaced kind keeps (key, namespace) pairs
// apart, and changing the key keeps the namespace.
func TestNamespaceScoping(t *testing.T) {
	b := New(keygroup.Range{Start: 0, End: 2}, codec.String())
	ns := codec.String()
	val := must[*NamespacedValueState[string, string, int]](t)(NewNamespacedValueState(b, "value", ns, codec.Int()))
	list := must[*NamespacedListState[string, string, int]](t)(NewNamespacedListState(b, "list", ns, codec.Int()))
	mp := must[*NamespacedMapState[string, string, string, int]](t)(NewNamespacedMapState(b, "map", ns, codec.String(), codec.Int()))
	red := must[*NamespacedReducingState[string, string, int]](t)(NewNamespacedReducingState(b, "red", sum, ns, codec.Int()))
	agg := must[*NamespacedAggregatingState[string, string, int64, *avgAcc, avgAcc]](t)(NewNamespacedAggregatingState(b, "agg", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), ns, mustCodec[*avgAcc](t)))
	setNS := func(n string) {
		val.SetCurrentNamespace(n)
		list.SetCurrentNamespace(n)
		mp.SetCurrentNamespace(n)
		red.SetCurrentNamespace(n)
		agg.SetCurrentNamespace(n)
	}
	read := func() string {
		v, _ := val.Value()
		r, _ := red.Get()
		a, _ := agg.Get()
		return fmt.Sprint(v, list.Get(), maps.Collect(mp.All()), r, a.Sum)
	}
	writes := []struct {
		key, ns string
		group   int
		v       int
	}{
		{"k1", "w1", 0, 1},
		{"k1", "w2", 0, 2},
		{"k2", "w1", 1, 3},
		{"k1", "w1", 0, 4},
	}
	for _, w := range writes {
		b.SetCurrentKey(w.key, w.group)
		setNS(w.ns)
		val.Update(w.v)
		list.Add(w.v)
		mp.Put(w.ns, w.v)
		red.Add(w.v)
		agg.Add(int64(w.v))
	}
	want := []struct {
		key, ns string
		group   int
		want    string
	}{
		{"k1", "w1", 0, "4 [1 4] map[w1:4] 5 5"},
		{"k1", "w2", 0, "2 [2] map[w2:2] 2 2"},
		{"k2", "w1", 1, "3 [3] map[w1:3] 3 3"},
		{"k2", "w2", 1, "0 [] map[] 0 0"},
		{"k3", "w1", 0, "0 [] map[] 0 0"},
	}
	for _, w := range want {
		b.SetCurrentKey(w.key, w.group)
		setNS(w.ns)
		if got := read(); got != w.want {
			t.Errorf("(%s, %s): %s, want %s", w.key, w.ns, got, w.want)
		}
	}
	// The namespace stays when the key changes.
	b.SetCurrentKey("k1", 0)
	setNS("w2")
	b.SetCurrentKey("k2", 1)
	if val.CurrentNamespace() != "w2" {
		t.Errorf("namespace %q after SetCurrentKey", val.CurrentNamespace())
	}
}

func TestNamespacesAndClearAll(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			r := keygroup.Range{Start: 0, End: 1}
			b := New(r, codec.String())
			s := must[*NamespacedListState[string, int, string]](t)(NewNamespacedListState(b, "s", codec.Int(), codec.String()))
			set := func(key string, ns ...int) {
				b.SetCurrentKey(key, 0)
				for _, n := range ns {
					s.SetCurrentNamespace(n)
					s.Add(fmt.Sprint(key, n))
				}
			}
			names := func(key string) []int {
				b.SetCurrentKey(key, 0)
				return slices.Sorted(s.Namespaces())
			}
			set("a", 1, 2, 3, 4, 5)
			set("b", 3)
			if got := names("a"); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
				t.Errorf("a: %v", got)
			}
			if got := names("c"); len(got) != 0 {
				t.Errorf("c: %v", got)
			}
			var snap interface{ Release() }
			var frozen func() file
			if snapshot {
				sn, _ := b.Snapshot(1)
				snap, frozen = sn, func() file { return write(t, sn, "f") }
			}

			// Clearing the namespaces not reached yet: they are not yielded.
			b.SetCurrentKey("a", 0)
			var yielded []int
			for n := range s.Namespaces() {
				yielded = append(yielded, n)
				for other := range 6 {
					if !slices.Contains(yielded, other) {
						s.SetCurrentNamespace(other)
						s.Clear()
					}
				}
			}
			if len(yielded) != 1 || !slices.Equal(names("a"), yielded) {
				t.Errorf("yielded %v; a has %v", yielded, names("a"))
			}
			set("a", 7, 8)
			b.SetCurrentKey("a", 0)
			s.ClearAllNamespaces()
			if got := names("a"); len(got) != 0 {
				t.Errorf("a after ClearAllNamespaces: %v", got)
			}
			if got := names("b"); !slices.Equal(got, []int{3}) {
				t.Errorf("b after a's ClearAllNamespaces: %v", got)
			}
			if snapshot {
				// The snapshot holds the namespaces as they were.
				b2, _ := restore(t, r, codec.String(), []file{frozen()})
				s2 := must[*NamespacedListState[string, int, string]](t)(NewNamespacedListState(b2, "s", codec.Int(), codec.String()))
				for key, want := range map[string][]int{"a": {1, 2, 3, 4, 5}, "b": {3}} {
					b2.SetCurrentKey(key, 0)
					if got := slices.Sorted(s2.Namespaces()); !slices.Equal(got, want) {
						t.Errorf("snapshot: %s has %v, want %v", key, got, want)
					}
					for _, n := range want {
						s2.SetCurrentNamespace(n)
						if got := s2.Get(); !slices.Equal(got, []string{fmt.Sprint(key, n)}) {
							t.Errorf("snapshot: (%s, %d) = %v", key, n, got)
						}
					}
				}
				snap.Release()
			}
		})
	}
}

// TestMergeNamespaces merges windows of the mergeable kinds while a
// snapshot holds them: the live state is merged, the snapshot unchanged.
func TestMergeNamespaces(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	b := New(r, codec.String())
	nsc := codec.String()
	list := must[*NamespacedListState[string, string, int]](t)(NewNamespacedListState(b, "list", nsc, codec.Int()))
	red := must[*NamespacedReducingState[string, string, []int64]](t)(NewNamespacedReducingState(b, "red", addVec, nsc, mustCodec[[]int64](t)))
	agg := must[*NamespacedAggregatingState[string, string, int64, *avgAcc, avgAcc]](t)(NewNamespacedAggregatingState(b, "agg", state.AggregateFunction[int64, *avgAcc, avgAcc](avgFunc{}), nsc, mustCodec[*avgAcc](t)))
	b.SetCurrentKey("k", 0)
	for i, w := range []string{"w1", "w2", "w3", "w1"} {
		list.SetCurrentNamespace(w)
		red.SetCurrentNamespace(w)
		agg.SetCurrentNamespace(w)
		list.Add(i)
		red.Add([]int64{int64(i), 1, 0})
		agg.Add(int64(i))
	}
	before := checkpointTo(t, b, 1)
	snap, _ := b.Snapshot(2)

	list.SetCurrentNamespace("w9") // merging leaves the current namespace alone
	list.MergeNamespaces("w1", "w2", "w3", "absent")
	red.MergeNamespaces("w2", "w3", "w2", "w1") // target among the sources
	agg.MergeNamespaces("new", "w1", "w2", "w3")

	if list.CurrentNamespace() != "w9" {
		t.Errorf("current namespace %q after merging", list.CurrentNamespace())
	}
	list.SetCurrentNamespace("w1")
	if got := list.Get(); !slices.Equal(got, []int{0, 3, 1, 2}) {
		t.Errorf("merged list %v", got)
	}
	if got := slices.Sorted(list.Namespaces()); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("list namespaces after merging: %v", got)
	}
	red.SetCurrentNamespace("w2")
	if got, _ := red.Get(); !slices.Equal(got, []int64{6, 4, 0}) {
		t.Errorf("merged reducing %v", got)
	}
	if got := slices.Sorted(red.Namespaces()); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("reducing namespaces after merging: %v", got)
	}
	agg.SetCurrentNamespace("new")
	if got, _ := agg.Get(); got != (avgAcc{6, 4}) {
		t.Errorf("merged aggregate %+v", got)
	}
	if got := slices.Sorted(agg.Namespaces()); !slices.Equal(got, []string{"new"}) {
		t.Errorf("aggregating namespaces after merging: %v", got)
	}

	// The snapshot taken before the merge is what the state was.
	during := write(t, snap, "during")
	if string(during.data) != string(before.data) {
		t.Error("merging changed the state of a snapshot in flight")
	}
}
