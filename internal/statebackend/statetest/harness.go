package statetest

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/state"
)

// MaxParallelism is the suite's number of key groups.
const MaxParallelism = 128

// GroupOf is the key group of k.
func GroupOf(k string) int { return keygroup.Of(keyCdc.Append(nil, k), MaxParallelism) }

// Clock is a processing-time clock that moves only when told.
type Clock struct{ Ms int64 }

// Now returns the time.
func (c *Clock) Now() int64 { return c.Ms }

// Harness is a backend with one state of every kind and variant: without
// namespaces, namespaced, and namespaced with a TTL (OnCreateAndWrite for
// some kinds, OnReadAndWrite for others), plus a value and a map without
// namespaces with a TTL.
type Harness struct {
	F Factory
	B statebackend.KeyedBackend[string]

	Value    state.Value[int]
	NSValue  NSValue
	TValue   NSValue
	PValue   state.Value[int] // TTL, OnReadAndWrite, no namespaces
	List     state.List[string]
	NSList   NSList
	TList    NSList
	Map      state.Map[string, int]
	NSMap    NSMap
	TMap     NSMap
	PMap     state.Map[string, int] // TTL, OnCreateAndWrite, no namespaces
	Red      state.Reducing[int]
	NSRed    NSReducing
	TRed     NSReducing
	Agg      state.Aggregating[int64, Avg]
	NSAgg    NSAggregating
	TAgg     NSAggregating
	nsStates []Namespaced
}

// TTL is the suite's time to live: 50 ms.
const TTL = 50 * time.Millisecond

var (
	onWrite = &state.TTLConfig{TTL: TTL, Update: state.OnCreateAndWrite}
	onRead  = &state.TTLConfig{TTL: TTL, Update: state.OnReadAndWrite}
)

// NewHarness registers the states on a new backend of f for the key
// groups r. If files is not empty, the backend restores them first.
func NewHarness(t testing.TB, f Factory, r keygroup.Range, clock *Clock, files ...File) *Harness {
	t.Helper()
	h := &Harness{F: f, B: f.New(t, r, clock.Now)}
	if len(files) > 0 {
		if err := Restore(h.B, files); err != nil {
			t.Fatalf("%s: restore: %v", f.Kind, err)
		}
	}
	var err error
	must := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	h.Value, err = f.Value(h.B, "value", nil)
	var e error
	h.NSValue, e = f.NSValue(h.B, "ns-value", nil)
	must(e)
	h.TValue, e = f.NSValue(h.B, "ttl-value", onWrite)
	must(e)
	h.PValue, e = f.Value(h.B, "ttl-plain-value", onRead)
	must(e)
	h.List, e = f.List(h.B, "list", nil)
	must(e)
	h.NSList, e = f.NSList(h.B, "ns-list", nil)
	must(e)
	h.TList, e = f.NSList(h.B, "ttl-list", onRead)
	must(e)
	h.Map, e = f.Map(h.B, "map", nil)
	must(e)
	h.NSMap, e = f.NSMap(h.B, "ns-map", nil)
	must(e)
	h.TMap, e = f.NSMap(h.B, "ttl-map", onRead)
	must(e)
	h.PMap, e = f.Map(h.B, "ttl-plain-map", onWrite)
	must(e)
	h.Red, e = f.Reducing(h.B, "red", nil)
	must(e)
	h.NSRed, e = f.NSReducing(h.B, "ns-red", nil)
	must(e)
	h.TRed, e = f.NSReducing(h.B, "ttl-red", onWrite)
	must(e)
	h.Agg, e = f.Aggregating(h.B, "agg", nil)
	must(e)
	h.NSAgg, e = f.NSAggregating(h.B, "ns-agg", nil)
	must(e)
	h.TAgg, e = f.NSAggregating(h.B, "ttl-agg", onRead)
	must(e)
	if err != nil {
		t.Fatalf("%s: register: %v", f.Kind, err)
	}
	h.nsStates = []Namespaced{h.NSValue, h.TValue, h.NSList, h.TList, h.NSMap, h.TMap, h.NSRed, h.TRed, h.NSAgg, h.TAgg}
	return h
}

// SetKey sets the current key.
func (h *Harness) SetKey(k string) { h.B.SetCurrentKey(k, GroupOf(k)) }

// SetNamespace sets the current namespace of every namespaced state.
func (h *Harness) SetNamespace(n string) {
	for _, s := range h.nsStates {
		s.SetCurrentNamespace(n)
	}
}

// Op is one operation of the random test: what it does, given a random
// source, on the current key and namespace; it returns what it read.
type Op struct {
	Name string
	Do   func(h *Harness, arg OpArg) string
}

// OpArg are an operation's random arguments, the same for both backends.
type OpArg struct {
	V       int
	Vs      []int
	UK      string
	Sources []string
	Target  string
}

func list(vs []int) []string {
	var l []string
	for _, v := range vs {
		l = append(l, fmt.Sprint(v))
	}
	return l
}

func show[T any](v T, ok bool) string { return fmt.Sprint(v, ok) }

func sortedNS(s Namespaced) string { return fmt.Sprint(slices.Sorted(s.Namespaces())) }

func mapString(m state.Map[string, int]) string {
	all := maps.Collect(m.All())
	keys := slices.Sorted(m.Keys())
	return fmt.Sprint(all, keys, m.Len(), m.IsEmpty())
}

// Ops are the random test's operations: every method of every kind.
var Ops = []Op{
	{"value.update", func(h *Harness, a OpArg) string { h.Value.Update(a.V); return "" }},
	{"value.get", func(h *Harness, a OpArg) string { return show(h.Value.Value()) }},
	{"value.clear", func(h *Harness, a OpArg) string { h.Value.Clear(); return "" }},
	{"nsvalue.update", func(h *Harness, a OpArg) string { h.NSValue.Update(a.V); return "" }},
	{"nsvalue.get", func(h *Harness, a OpArg) string { return show(h.NSValue.Value()) }},
	{"nsvalue.clear", func(h *Harness, a OpArg) string { h.NSValue.Clear(); return "" }},
	{"nsvalue.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.NSValue) }},
	{"nsvalue.clearall", func(h *Harness, a OpArg) string { h.NSValue.ClearAllNamespaces(); return "" }},
	{"ttlvalue.update", func(h *Harness, a OpArg) string { h.TValue.Update(a.V); return "" }},
	{"ttlvalue.get", func(h *Harness, a OpArg) string { return show(h.TValue.Value()) }},
	{"ttlvalue.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.TValue) }},
	{"ttlvalue.clear", func(h *Harness, a OpArg) string { h.TValue.Clear(); return "" }},
	{"plainttl.update", func(h *Harness, a OpArg) string { h.PValue.Update(a.V); return "" }},
	{"plainttl.get", func(h *Harness, a OpArg) string { return show(h.PValue.Value()) }},

	{"list.add", func(h *Harness, a OpArg) string { h.List.Add(fmt.Sprint(a.V)); return "" }},
	{"list.addall", func(h *Harness, a OpArg) string { h.List.AddAll(list(a.Vs)); return "" }},
	{"list.update", func(h *Harness, a OpArg) string { h.List.Update(list(a.Vs)); return "" }},
	{"list.get", func(h *Harness, a OpArg) string { return fmt.Sprint(h.List.Get()) }},
	{"list.clear", func(h *Harness, a OpArg) string { h.List.Clear(); return "" }},
	{"nslist.add", func(h *Harness, a OpArg) string { h.NSList.Add(fmt.Sprint(a.V)); return "" }},
	{"nslist.addall", func(h *Harness, a OpArg) string { h.NSList.AddAll(list(a.Vs)); return "" }},
	{"nslist.get", func(h *Harness, a OpArg) string { return fmt.Sprint(h.NSList.Get()) }},
	{"nslist.merge", func(h *Harness, a OpArg) string {
		h.NSList.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"nslist.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.NSList) }},
	{"ttllist.add", func(h *Harness, a OpArg) string { h.TList.Add(fmt.Sprint(a.V)); return "" }},
	{"ttllist.update", func(h *Harness, a OpArg) string { h.TList.Update(list(a.Vs)); return "" }},
	{"ttllist.get", func(h *Harness, a OpArg) string { return fmt.Sprint(h.TList.Get()) }},
	{"ttllist.merge", func(h *Harness, a OpArg) string {
		h.TList.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"ttllist.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.TList) }},

	{"map.put", func(h *Harness, a OpArg) string { h.Map.Put(a.UK, a.V); return "" }},
	{"map.putall", func(h *Harness, a OpArg) string {
		m := map[string]int{}
		for _, v := range a.Vs {
			m[fmt.Sprint("u", v%7)] = v
		}
		h.Map.PutAll(m)
		return ""
	}},
	{"map.get", func(h *Harness, a OpArg) string { return show(h.Map.Get(a.UK)) }},
	{"map.contains", func(h *Harness, a OpArg) string { return fmt.Sprint(h.Map.Contains(a.UK)) }},
	{"map.remove", func(h *Harness, a OpArg) string { h.Map.Remove(a.UK); return "" }},
	{"map.all", func(h *Harness, a OpArg) string { return mapString(h.Map) }},
	{"map.clear", func(h *Harness, a OpArg) string { h.Map.Clear(); return "" }},
	{"nsmap.put", func(h *Harness, a OpArg) string { h.NSMap.Put(a.UK, a.V); return "" }},
	{"nsmap.remove", func(h *Harness, a OpArg) string { h.NSMap.Remove(a.UK); return "" }},
	{"nsmap.all", func(h *Harness, a OpArg) string { return mapString(h.NSMap) }},
	{"nsmap.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.NSMap) }},
	{"nsmap.clearall", func(h *Harness, a OpArg) string { h.NSMap.ClearAllNamespaces(); return "" }},
	{"ttlmap.put", func(h *Harness, a OpArg) string { h.TMap.Put(a.UK, a.V); return "" }},
	{"ttlmap.get", func(h *Harness, a OpArg) string { return show(h.TMap.Get(a.UK)) }},
	{"ttlmap.remove", func(h *Harness, a OpArg) string { h.TMap.Remove(a.UK); return "" }},
	{"ttlmap.isempty", func(h *Harness, a OpArg) string { return fmt.Sprint(h.TMap.IsEmpty()) }},
	{"ttlmap.namespaces", func(h *Harness, a OpArg) string { return sortedNS(h.TMap) }},
	{"plainttlmap.put", func(h *Harness, a OpArg) string { h.PMap.Put(a.UK, a.V); return "" }},
	{"plainttlmap.remove", func(h *Harness, a OpArg) string { h.PMap.Remove(a.UK); return "" }},
	{"plainttlmap.all", func(h *Harness, a OpArg) string { return mapString(h.PMap) }},

	{"red.add", func(h *Harness, a OpArg) string { h.Red.Add(a.V); return "" }},
	{"red.get", func(h *Harness, a OpArg) string { return show(h.Red.Get()) }},
	{"red.clear", func(h *Harness, a OpArg) string { h.Red.Clear(); return "" }},
	{"nsred.add", func(h *Harness, a OpArg) string { h.NSRed.Add(a.V); return "" }},
	{"nsred.get", func(h *Harness, a OpArg) string { return show(h.NSRed.Get()) }},
	{"nsred.merge", func(h *Harness, a OpArg) string {
		h.NSRed.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"ttlred.add", func(h *Harness, a OpArg) string { h.TRed.Add(a.V); return "" }},
	{"ttlred.get", func(h *Harness, a OpArg) string { return show(h.TRed.Get()) }},
	{"ttlred.merge", func(h *Harness, a OpArg) string {
		h.TRed.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"agg.add", func(h *Harness, a OpArg) string { h.Agg.Add(int64(a.V)); return "" }},
	{"agg.get", func(h *Harness, a OpArg) string { return show(h.Agg.Get()) }},
	{"agg.clear", func(h *Harness, a OpArg) string { h.Agg.Clear(); return "" }},
	{"nsagg.add", func(h *Harness, a OpArg) string { h.NSAgg.Add(int64(a.V)); return "" }},
	{"nsagg.get", func(h *Harness, a OpArg) string { return show(h.NSAgg.Get()) }},
	{"nsagg.merge", func(h *Harness, a OpArg) string {
		h.NSAgg.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"ttlagg.add", func(h *Harness, a OpArg) string { h.TAgg.Add(int64(a.V)); return "" }},
	{"ttlagg.get", func(h *Harness, a OpArg) string { return show(h.TAgg.Get()) }},
	{"ttlagg.merge", func(h *Harness, a OpArg) string {
		h.TAgg.MergeNamespaces(a.Target, a.Sources...)
		return ""
	}},
	{"ttlagg.clearall", func(h *Harness, a OpArg) string { h.TAgg.ClearAllNamespaces(); return "" }},
}

// Keys are the random test's keys; Namespaces its namespaces.
var (
	Keys       = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "", "k"}
	Namespaces = []string{"w0", "w1", "w2", "w3"}
)

// RandomArg draws an operation's arguments.
func RandomArg(r *rand.Rand) OpArg {
	a := OpArg{V: r.IntN(1000) - 100, UK: fmt.Sprint("u", r.IntN(7)), Target: Namespaces[r.IntN(len(Namespaces))]}
	for range r.IntN(4) {
		a.Vs = append(a.Vs, r.IntN(1000))
	}
	for range r.IntN(3) + 1 {
		a.Sources = append(a.Sources, Namespaces[r.IntN(len(Namespaces))])
	}
	return a
}

// Dump reads every key's content in every state, for the keys whose key
// group is in the backend's range, and returns it as text. Reads renew
// the TTL of OnReadAndWrite states (as they would on any backend) and drop
// expired entries.
func (h *Harness) Dump() string {
	var out strings.Builder
	groups := h.B.KeyGroups()
	entries := map[string][]string{}
	for k, n := range h.NSValue.Entries() {
		entries["ns-value"] = append(entries["ns-value"], k+"/"+n)
	}
	for k, n := range h.TValue.Entries() {
		entries["ttl-value"] = append(entries["ttl-value"], k+"/"+n)
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		l := entries[name]
		slices.Sort(l)
		fmt.Fprintf(&out, "entries %s: %v\n", name, l)
	}
	for _, k := range Keys {
		if !groups.Contains(GroupOf(k)) {
			continue
		}
		h.SetKey(k)
		fmt.Fprintf(&out, "key %q:", k)
		fmt.Fprint(&out, " value ", show(h.Value.Value()))
		fmt.Fprint(&out, " plain-ttl ", show(h.PValue.Value()))
		fmt.Fprint(&out, " list ", h.List.Get())
		fmt.Fprint(&out, " map ", mapString(h.Map))
		fmt.Fprint(&out, " plain-ttl-map ", mapString(h.PMap))
		fmt.Fprint(&out, " red ", show(h.Red.Get()))
		fmt.Fprint(&out, " agg ", show(h.Agg.Get()))
		for i, s := range h.nsStates {
			for _, n := range slices.Sorted(s.Namespaces()) {
				h.SetNamespace(n)
				fmt.Fprintf(&out, " [%d %s: ", i, n)
				switch s := s.(type) {
				case NSValue:
					fmt.Fprint(&out, show(s.Value()))
				case NSList:
					fmt.Fprint(&out, s.Get())
				case NSMap:
					fmt.Fprint(&out, mapString(s))
				case NSReducing:
					fmt.Fprint(&out, show(s.Get()))
				case NSAggregating:
					fmt.Fprint(&out, show(s.Get()))
				}
				fmt.Fprint(&out, "]")
			}
		}
		fmt.Fprintln(&out)
	}
	return out.String()
}

// File is a written snapshot.
type File struct {
	H    checkpoint.KeyedStateHandle
	Data []byte
}

// Snapshot takes snapshot id of b and writes it on another goroutine, as
// the runtime does, then releases it.
func Snapshot(t testing.TB, b statebackend.KeyedBackend[string], id int64) File {
	t.Helper()
	snap, err := b.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(&buf)
		done <- result{h, err}
	}()
	r := <-done
	snap.Release()
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.h.Path = fmt.Sprintf("chk-%d/%s-%v", id, b.Kind(), b.KeyGroups())
	return File{r.h, buf.Bytes()}
}

// Restore restores b from files.
func Restore(b statebackend.KeyedBackend[string], files []File) error {
	handles := make([]checkpoint.KeyedStateHandle, len(files))
	byPath := map[string][]byte{}
	for i, f := range files {
		handles[i] = f.H
		byPath[f.H.Path] = f.Data
	}
	return b.Restore(handles, func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		return byPath[h.Path], nil
	})
}
