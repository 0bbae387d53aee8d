package heap

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

type keyNS struct{ key, ns string }

func entrySet(s *NamespacedValueState[string, string, int]) []keyNS {
	var out []keyNS
	for k, n := range s.Entries() {
		out = append(out, keyNS{k, n})
	}
	slices.SortFunc(out, func(a, b keyNS) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.ns, b.ns)
	})
	return out
}

// TestEntries: Entries yields every (key, namespace) of every key group,
// follows clears, survives a snapshot and a restore into a smaller range
// (rescaling: only the groups restored), and keeps the current key and
// namespace.
func TestEntries(t *testing.T) {
	kc := codec.String()
	full := keygroup.Range{Start: 0, End: maxPar}
	b := New(full, kc)
	s := must[*NamespacedValueState[string, string, int]](t)(NewNamespacedValueState(b, "timers", codec.String(), codec.Int()))
	if got := entrySet(s); len(got) != 0 {
		t.Fatalf("empty state yields %v", got)
	}
	var want []keyNS
	for i := range 20 {
		k := fmt.Sprint("k", i)
		b.SetCurrentKey(k, groupOf(kc, k))
		for j := range i % 3 {
			s.SetCurrentNamespace(fmt.Sprint("n", j))
			s.Update(i)
			want = append(want, keyNS{k, fmt.Sprint("n", j)})
		}
	}
	slices.SortFunc(want, func(a, b keyNS) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.ns, b.ns)
	})
	b.SetCurrentKey("k5", groupOf(kc, "k5"))
	s.SetCurrentNamespace("n1")
	if got := entrySet(s); !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	if b.CurrentKey() != "k5" || s.CurrentNamespace() != "n1" {
		t.Fatalf("Entries changed the current key or namespace: %q %q", b.CurrentKey(), s.CurrentNamespace())
	}
	// Clearing an entry (k5, n1) and all namespaces of k4 removes them.
	s.Clear()
	b.SetCurrentKey("k4", groupOf(kc, "k4"))
	s.ClearAllNamespaces()
	want = slices.DeleteFunc(want, func(e keyNS) bool { return e == keyNS{"k5", "n1"} || e.key == "k4" })
	if got := entrySet(s); !slices.Equal(got, want) {
		t.Fatalf("after clears: Entries = %v, want %v", got, want)
	}
	// Stopping early stops.
	n := 0
	for range s.Entries() {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("break after one: %d yields", n)
	}

	f := checkpointTo(t, b, 1)
	for _, r := range []keygroup.Range{full, keygroup.RangeFor(maxPar, 3, 1)} {
		rb, _ := restore(t, r, kc, []file{f})
		rs := must[*NamespacedValueState[string, string, int]](t)(NewNamespacedValueState(rb, "timers", codec.String(), codec.Int()))
		var wantHere []keyNS
		for _, e := range want {
			if r.Contains(groupOf(kc, e.key)) {
				wantHere = append(wantHere, e)
			}
		}
		if got := entrySet(rs); !slices.Equal(got, wantHere) {
			t.Fatalf("restored into %v: Entries = %v, want %v", r, got, wantHere)
		}
	}
}

// TestEntriesSkipsExpired: with a TTL, Entries leaves expired entries out
// without removing them.
func TestEntriesSkipsExpired(t *testing.T) {
	clock := &fakeClock{ms: 0}
	b := newClocked(keygroup.Range{Start: 0, End: 1}, clock)
	s := must[*NamespacedValueState[string, string, int]](t)(NewNamespacedValueState(b, "v", codec.String(), codec.Int(),
		WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond})))
	b.SetCurrentKey("a", 0)
	s.SetCurrentNamespace("old")
	s.Update(1)
	clock.ms = 5
	s.SetCurrentNamespace("new")
	s.Update(2)
	clock.ms = 12
	got := maps.Collect(s.Entries())
	if len(got) != 1 || got["a"] != "new" {
		t.Fatalf("Entries at 12 ms = %v, want only (a, new)", got)
	}
	if s.Len() != 2 {
		t.Fatalf("Entries removed an expired entry: Len = %d", s.Len())
	}
}
