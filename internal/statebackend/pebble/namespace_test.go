package pebble

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/state"
)

// nsValue is the method set the namespaced value states of both backends
// share.
type nsValue[K comparable, N comparable, V any] interface {
	state.Value[V]
	SetCurrentNamespace(N)
	CurrentNamespace() N
	Namespaces() iter.Seq[N]
	ClearAllNamespaces()
	Entries() iter.Seq2[K, N]
}

var (
	_ nsValue[string, int64, int] = (*NamespacedValueState[string, int64, int])(nil)
	_ nsValue[string, int64, int] = (*heap.NamespacedValueState[string, int64, int])(nil)
)

// TestNamespacedValueEntries runs the same writes on a heap and a pebble
// namespaced value state (timers' shape: namespace = timestamp, with a TTL
// on a second state) and compares reads, Namespaces, Entries and snapshot
// bytes.
func TestNamespacedValueEntries(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	var now int64 = 1000
	clock := func() int64 { return now }
	hb := heap.NewWithOptions(r, kc, heap.Options{Clock: clock})
	pb := newPebble(t, r, kc, Options{Clock: clock})
	type states struct {
		b   statebackend.KeyedBackend[string]
		v   nsValue[string, int64, int]
		ttl nsValue[string, int64, int]
	}
	hv, err := heap.NewNamespacedValueState(hb, "timers", codec.Int64(), codec.Int())
	must(t, err)
	hs, err := heap.NewNamespacedValueState(hb, "ttl", codec.Int64(), codec.Int(), heap.WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	pv, err := NewNamespacedValueState(pb, "timers", codec.Int64(), codec.Int())
	must(t, err)
	ps, err := NewNamespacedValueState(pb, "ttl", codec.Int64(), codec.Int(), WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	both := []states{{hb, hv, hs}, {pb, pv, ps}}

	keys := []string{"a", "b", "c", "d", "e", "f"}
	for i := range 60 {
		k := keys[i%len(keys)]
		for _, s := range both {
			s.b.SetCurrentKey(k, groupOf(kc, k))
			s.v.SetCurrentNamespace(int64(i % 7))
			s.v.Update(i)
			s.ttl.SetCurrentNamespace(int64(i % 5))
			s.ttl.Update(i)
		}
		now++
	}
	// Clear some namespaces and all of one key's.
	for _, s := range both {
		s.b.SetCurrentKey("a", groupOf(kc, "a"))
		s.v.SetCurrentNamespace(0)
		s.v.Clear()
		s.b.SetCurrentKey("b", groupOf(kc, "b"))
		s.v.ClearAllNamespaces()
		if got := slices.Collect(s.v.Namespaces()); len(got) != 0 {
			t.Errorf("%s: namespaces of b after ClearAllNamespaces: %v", s.b.Kind(), got)
		}
	}
	now += 5 // some of the TTL state's entries expire
	describe := func(s states) string {
		var out bytes.Buffer
		for _, k := range keys {
			s.b.SetCurrentKey(k, groupOf(kc, k))
			ns := slices.Sorted(s.v.Namespaces())
			fmt.Fprintf(&out, "%s: %v", k, ns)
			for _, n := range ns {
				s.v.SetCurrentNamespace(n)
				v, ok := s.v.Value()
				fmt.Fprintf(&out, " %d=%d,%v", n, v, ok)
			}
			fmt.Fprintf(&out, " ttl %v\n", slices.Sorted(s.ttl.Namespaces()))
		}
		type kn struct {
			k string
			n int64
		}
		collect := func(sq iter.Seq2[string, int64]) []kn {
			var l []kn
			for k, n := range sq {
				l = append(l, kn{k, n})
			}
			slices.SortFunc(l, func(a, b kn) int {
				if a.k != b.k {
					return bytes.Compare([]byte(a.k), []byte(b.k))
				}
				return int(a.n - b.n)
			})
			return l
		}
		fmt.Fprintf(&out, "entries %v\nttl entries %v\n", collect(s.v.Entries()), collect(s.ttl.Entries()))
		return out.String()
	}
	want := describe(both[0])
	if got := describe(both[1]); got != want {
		t.Errorf("pebble:\n%s\nheap:\n%s", got, want)
	}
	if !bytes.Contains([]byte(want), []byte("ttl entries [{")) {
		t.Errorf("no live TTL entries left to compare:\n%s", want)
	}

	// Entries may be stopped early.
	n := 0
	for range pv.Entries() {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("Entries stopped after %d entries, want 3", n)
	}
	// The loop may write another state.
	for _, s := range both {
		for k, ns := range s.v.Entries() {
			if ns == 3 {
				s.b.SetCurrentKey(k, groupOf(kc, k))
				s.ttl.SetCurrentNamespace(ns)
				s.ttl.Update(1)
			}
		}
	}
	hf := checkpointTo(t, hb, 1)
	pf := checkpointTo(t, pb, 1)
	if !bytes.Equal(hf.data, pf.data) {
		t.Errorf("snapshots differ:\nheap   %s\npebble %s", dump(hf), dump(pf))
	}

	// Restore each backend's snapshot into the other and compare again.
	hb2 := heap.NewWithOptions(r, kc, heap.Options{Clock: clock})
	_, err = restoreFiles[string](hb2, []file{pf})
	must(t, err)
	pb2 := newPebble(t, r, kc, Options{Clock: clock})
	_, err = restoreFiles[string](pb2, []file{hf})
	must(t, err)
	hv2, err := heap.NewNamespacedValueState(hb2, "timers", codec.Int64(), codec.Int())
	must(t, err)
	hs2, err := heap.NewNamespacedValueState(hb2, "ttl", codec.Int64(), codec.Int(), heap.WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	pv2, err := NewNamespacedValueState(pb2, "timers", codec.Int64(), codec.Int())
	must(t, err)
	ps2, err := NewNamespacedValueState(pb2, "ttl", codec.Int64(), codec.Int(), WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	want = describe(states{hb, hv, hs})
	for _, s := range []states{{hb2, hv2, hs2}, {pb2, pv2, ps2}} {
		if got := describe(s); got != want {
			t.Errorf("%s restored:\n%s\nwant\n%s", s.b.Kind(), got, want)
		}
	}
	if got := maps.Collect(pv2.Entries()); len(got) == 0 {
		t.Error("restored pebble state has no entries")
	}
}
