package statetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Run runs the conformance suite against the backend of f, comparing it
// with the backend of ref (another kind, or the same): every kind of state,
// with and without namespaces and TTL, driven by the same random
// operations on both, must read the same, write byte-identical snapshots,
// and restore each other's snapshots, whole or by key-group ranges.
func Run(t *testing.T, f, ref Factory) {
	t.Run("Differential", func(t *testing.T) {
		seeds := []uint64{1, 2, 3}
		if testing.Short() {
			seeds = seeds[:1]
		}
		for _, seed := range seeds {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testDifferential(t, f, ref, seed) })
		}
	})
	t.Run("Semantics", func(t *testing.T) { testSemantics(t, f) })
	t.Run("TTL", func(t *testing.T) { testTTL(t, f) })
	t.Run("RegisterChecks", func(t *testing.T) { testRegisterChecks(t, f, ref) })
}

var full = keygroup.Range{Start: 0, End: MaxParallelism}

// stepper applies random operations to pairs of harnesses.
type stepper struct {
	t     *testing.T
	r     *rand.Rand
	clock *Clock
	n     int
}

func (s *stepper) run(steps int, a, b *Harness) {
	s.t.Helper()
	var keys []string
	for _, k := range Keys {
		if a.B.KeyGroups().Contains(GroupOf(k)) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		s.t.Fatalf("no key of the suite is in key groups %v", a.B.KeyGroups())
	}
	for range steps {
		s.n++
		k := keys[s.r.IntN(len(keys))]
		n := Namespaces[s.r.IntN(len(Namespaces))]
		op := Ops[s.r.IntN(len(Ops))]
		arg := RandomArg(s.r)
		if s.r.IntN(10) == 0 {
			s.clock.Ms += int64(s.r.IntN(7))
		}
		var outs [2]string
		for i, h := range []*Harness{a, b} {
			h.SetKey(k)
			h.SetNamespace(n)
			outs[i] = op.Do(h, arg)
		}
		if outs[0] != outs[1] {
			s.t.Fatalf("step %d, %s on key %q, namespace %q, args %+v at %d ms:\n%s: %s\n%s: %s",
				s.n, op.Name, k, n, arg, s.clock.Ms, a.F.Kind, outs[0], b.F.Kind, outs[1])
		}
	}
}

// sameSnapshots takes snapshot id of a and b and checks that they are
// byte-identical.
func sameSnapshots(t *testing.T, id int64, a, b *Harness) (File, File) {
	t.Helper()
	fa, fb := Snapshot(t, a.B, id), Snapshot(t, b.B, id)
	if !bytes.Equal(fa.Data, fb.Data) {
		t.Fatalf("snapshot %d differs:\n%s: %s\n%s: %s", id, a.F.Kind, Describe(fa), b.F.Kind, Describe(fb))
	}
	return fa, fb
}

// Describe summarizes a snapshot file: its states and entry counts.
func Describe(f File) string {
	file, err := format.Open(f.H, f.Data)
	if err != nil {
		return err.Error()
	}
	counts := map[string]int{}
	for g := f.H.StartGroup; g < f.H.EndGroup; g++ {
		blk, err := file.Block(g)
		if err != nil {
			return err.Error()
		}
		for _, s := range blk.States {
			counts[s.Name] += s.Entries
		}
	}
	return fmt.Sprintf("%d bytes, version %d, entries %v", len(f.Data), file.Version(), counts)
}

func sameDumps(t *testing.T, what string, hs ...*Harness) {
	t.Helper()
	want := hs[0].Dump()
	for i, h := range hs[1:] {
		if got := h.Dump(); got != want {
			gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
			for j := range min(len(gl), len(wl)) {
				if gl[j] != wl[j] {
					t.Fatalf("%s: backend %d (%s) reads\n%s\nbackend 0 (%s) reads\n%s", what, i+1, h.F.Kind, gl[j], hs[0].F.Kind, wl[j])
				}
			}
			t.Fatalf("%s: backend %d (%s) reads\n%s\nbackend 0 (%s) reads\n%s", what, i+1, h.F.Kind, got, hs[0].F.Kind, want)
		}
	}
}

func testDifferential(t *testing.T, f, ref Factory, seed uint64) {
	clock := &Clock{Ms: 1_000_000}
	s := &stepper{t: t, r: rand.New(rand.NewPCG(seed, 7)), clock: clock}
	a, b := NewHarness(t, f, full, clock), NewHarness(t, ref, full, clock)
	s.run(1500, a, b)

	// Snapshots are byte-identical, and each restores into the other kind.
	fa, fb := sameSnapshots(t, 1, a, b)
	t.Log(Describe(fa))
	a2 := NewHarness(t, f, full, clock, fb)
	b2 := NewHarness(t, ref, full, clock, fa)
	sameDumps(t, "after a cross restore", a, b, a2, b2)
	s.run(1000, a2, b2)
	fa, _ = sameSnapshots(t, 2, a2, b2)

	// Rescaling: each half of the key groups restores from the whole, and
	// the whole from the halves of different kinds.
	lo, hi := keygroup.Range{Start: 0, End: 50}, keygroup.Range{Start: 50, End: MaxParallelism}
	aLo, bLo := NewHarness(t, f, lo, clock, fa), NewHarness(t, ref, lo, clock, fa)
	aHi, bHi := NewHarness(t, f, hi, clock, fa), NewHarness(t, ref, hi, clock, fa)
	sameDumps(t, "key groups [0, 50) restored", aLo, bLo)
	sameDumps(t, "key groups [50, 128) restored", aHi, bHi)
	s.run(300, aLo, bLo)
	s.run(300, aHi, bHi)
	loFile, _ := sameSnapshots(t, 3, aLo, bLo)
	_, hiFile := sameSnapshots(t, 3, aHi, bHi)
	a3 := NewHarness(t, f, full, clock, loFile, hiFile)
	b3 := NewHarness(t, ref, full, clock, hiFile, loFile)
	sameDumps(t, "halves restored into the whole", a3, b3)
	s.run(500, a3, b3)
	f4, _ := sameSnapshots(t, 4, a3, b3)
	t.Log(Describe(f4))
}

func expect(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

// testSemantics checks what each kind does, on f alone.
func testSemantics(t *testing.T, f Factory) {
	clock := &Clock{Ms: 1000}
	h := NewHarness(t, f, full, clock)
	h.SetKey("k")
	h.SetNamespace("w1")

	expect(t, "empty list", h.List.Get(), []string(nil))
	h.List.Add("a")
	h.List.AddAll([]string{"b", "c"})
	h.List.AddAll(nil)
	expect(t, "list", h.List.Get(), []string{"a", "b", "c"})
	got := h.List.Get()
	_ = append(got, "d") // appending to the result changes nothing in the state
	h.List.Add("e")
	expect(t, "list returned before an Add", got, []string{"a", "b", "c"})
	h.List.Update([]string{"a", "b", "c"})
	h.List.Update([]string{"x"})
	expect(t, "list after Update", h.List.Get(), []string{"x"})
	h.List.Update(nil)
	expect(t, "list after Update(nil)", h.List.Get(), []string(nil))

	// Lists merge in the order of the sources, the target in its place.
	for _, n := range []string{"w1", "w2", "w3"} {
		h.SetNamespace(n)
		h.NSList.AddAll([]string{n + "a", n + "b"})
	}
	h.NSList.MergeNamespaces("w2", "w3", "w2", "w1", "w0")
	h.SetNamespace("w2")
	expect(t, "merged list", h.NSList.Get(), []string{"w3a", "w3b", "w2a", "w2b", "w1a", "w1b"})
	expect(t, "list namespaces after merge", slices.Sorted(h.NSList.Namespaces()), []string{"w2"})
	expect(t, "current namespace after merge", h.NSList.CurrentNamespace(), "w2")

	h.Map.Put("b", 2)
	h.Map.PutAll(map[string]int{"a": 1, "c": 3})
	expect(t, "map get", fmt.Sprint(h.Map.Get("a")), "1 true")
	expect(t, "map missing", fmt.Sprint(h.Map.Get("z")), "0 false")
	expect(t, "map keys", slices.Sorted(h.Map.Keys()), []string{"a", "b", "c"})
	h.Map.Remove("b")
	h.Map.Remove("z")
	expect(t, "map after remove", mapString(h.Map), "map[a:1 c:3] [a c] 2 false")
	// All tolerates writes during the loop: a removed entry not reached is
	// not yielded, an updated one is yielded with its new value.
	h.Map.Put("b", 2)
	var after []string // yielded after the writes
	first := true
	for uk, uv := range h.Map.All() {
		if first {
			first = false
			h.Map.Remove("c")
			h.Map.Put("b", 20)
			continue
		}
		after = append(after, fmt.Sprint(uk, "=", uv))
	}
	if slices.Contains(after, "c=3") || slices.Contains(after, "b=2") {
		t.Errorf("map All yielded %v after removing c and updating b", after)
	}
	h.Map.Remove("c")
	h.Map.Remove("a")
	h.Map.Remove("b")
	expect(t, "map after removing every entry", mapString(h.Map), "map[] [] 0 true")

	h.SetNamespace("w1")
	h.NSMap.Put("x", 1)
	h.SetNamespace("w2")
	h.NSMap.Put("y", 2)
	expect(t, "map namespaces", slices.Sorted(h.NSMap.Namespaces()), []string{"w1", "w2"})
	h.NSMap.Remove("y")
	expect(t, "map namespaces after emptying one", slices.Sorted(h.NSMap.Namespaces()), []string{"w1"})
	h.NSMap.ClearAllNamespaces()
	expect(t, "map namespaces after ClearAllNamespaces", slices.Sorted(h.NSMap.Namespaces()), []string(nil))

	for i, n := range []string{"w0", "w1", "w2"} {
		h.SetNamespace(n)
		h.NSRed.Add(i + 1)
		h.NSRed.Add(10)
		h.NSAgg.Add(int64(i))
		h.NSAgg.Add(int64(2 * i))
	}
	h.NSRed.MergeNamespaces("w3", "w0", "w1")
	h.NSAgg.MergeNamespaces("w2", "w0", "w1")
	h.SetNamespace("w3")
	expect(t, "merged reducing", fmt.Sprint(h.NSRed.Get()), "23 true")
	h.SetNamespace("w2")
	expect(t, "merged aggregating", fmt.Sprint(h.NSAgg.Get()), "{9 6} true")
	expect(t, "reducing namespaces", slices.Sorted(h.NSRed.Namespaces()), []string{"w2", "w3"})

	// Namespaces may be cleared while they are iterated.
	var yielded []string
	for n := range h.NSRed.Namespaces() {
		yielded = append(yielded, n)
		h.NSRed.ClearAllNamespaces()
	}
	expect(t, "namespaces yielded while clearing", len(yielded), 1)

	// Entries spans every key group.
	for i, k := range Keys {
		h.SetKey(k)
		h.SetNamespace(Namespaces[i%len(Namespaces)])
		h.NSValue.Update(i)
	}
	var entries []string
	for k, n := range h.NSValue.Entries() {
		entries = append(entries, k+"/"+n)
	}
	expect(t, "entries", len(entries), len(Keys))
}

// testTTL checks expiry, renewal and snapshots of TTL states, on f alone.
func testTTL(t *testing.T, f Factory) {
	clock := &Clock{Ms: 1000}
	h := NewHarness(t, f, full, clock)
	ttl := TTL.Milliseconds()
	h.SetKey("k")
	h.SetNamespace("w")

	h.TValue.Update(1)   // OnCreateAndWrite
	h.PValue.Update(2)   // OnReadAndWrite
	h.TMap.Put("a", 1)   // OnReadAndWrite, the whole map
	h.PMap.Put("a", 1)   // OnCreateAndWrite
	h.TList.Add("x")     // OnReadAndWrite
	h.TRed.Add(5)        // OnCreateAndWrite
	clock.Ms += ttl - 10 // 40 ms later: reads renew OnReadAndWrite states
	expect(t, "value before expiry", fmt.Sprint(h.TValue.Value()), "1 true")
	expect(t, "read-renewed value", fmt.Sprint(h.PValue.Value()), "2 true")
	expect(t, "read-renewed map", fmt.Sprint(h.TMap.Get("a")), "1 true")
	expect(t, "read-renewed list", h.TList.Get(), []string{"x"})
	h.PMap.Put("b", 2) // a write renews the whole map
	clock.Ms += 10     // the TTL since the first writes: those not renewed expire
	expect(t, "expired value", fmt.Sprint(h.TValue.Value()), "0 false")
	expect(t, "expired reducing", fmt.Sprint(h.TRed.Get()), "0 false")
	expect(t, "renewed value", fmt.Sprint(h.PValue.Value()), "2 true")
	expect(t, "write-renewed map", mapString(h.PMap), "map[a:1 b:2] [a b] 2 false")
	expect(t, "namespaces of an expired value", slices.Sorted(h.TValue.Namespaces()), []string(nil))

	// An expired list is replaced, not appended to; an expired map too.
	clock.Ms += ttl
	h.TList.Add("y")
	expect(t, "list added to after expiry", h.TList.Get(), []string{"y"})
	h.TMap.Put("b", 2)
	expect(t, "map put after expiry", mapString(h.TMap), "map[b:2] [b] 1 false")

	// Snapshots leave expired entries out, and a restored backend has
	// exactly the live ones.
	h.TValue.Update(7)
	h.SetKey("other")
	h.TValue.Update(8)
	clock.Ms += ttl / 2
	h.SetKey("k")
	h.TValue.Update(9) // renewed
	clock.Ms += ttl / 2
	file := Snapshot(t, h.B, 1)
	r := NewHarness(t, f, full, clock, file)
	var live []string
	for k, n := range r.TValue.Entries() {
		live = append(live, k+"/"+n)
	}
	expect(t, "entries restored", live, []string{"k/w"})
	// Expired entries are not in the snapshot at all.
	clock.Ms += 10 * ttl
	if d := Describe(Snapshot(t, h.B, 2)); bytes.Contains([]byte(d), []byte("ttl-")) {
		t.Errorf("snapshot after every TTL entry expired: %s", d)
	}
}

// testRegisterChecks: registering a restored state as another kind, with
// or without namespaces or TTL, fails with the same message on both
// backends, and the state stays restorable.
func testRegisterChecks(t *testing.T, f, ref Factory) {
	clock := &Clock{Ms: 1000}
	h := NewHarness(t, ref, full, clock)
	h.SetKey("k")
	h.List.Add("a")
	h.NSMap.Put("a", 1)
	h.TValue.Update(1)
	file := Snapshot(t, h.B, 1)
	for _, fac := range []Factory{f, ref} {
		var msgs []string
		b := fac.New(t, full, clock.Now)
		if err := Restore(b, []File{file}); err != nil {
			t.Fatal(err)
		}
		_, err := fac.Map(b, "list", nil)
		msgs = append(msgs, fmt.Sprint(err))
		_, err = fac.Map(b, "ns-map", nil)
		msgs = append(msgs, fmt.Sprint(err))
		_, err = fac.NSValue(b, "ttl-value", nil)
		msgs = append(msgs, fmt.Sprint(err))
		_, err = fac.NSMap(b, "ns-map", onRead)
		msgs = append(msgs, fmt.Sprint(err))
		want := []string{
			`state "list" was written as a list state and is registered as a map state: register it as a list state, or give the new state another name`,
			`state "ns-map" was written with namespaces and is registered without: register it with a namespace codec`,
			`state "ttl-value" was written with a TTL and is registered without one: register it with a state.TTLConfig, or give the new state another name`,
			`state "ns-map" was written without a TTL and is registered with one: register it without a TTL, or give the new state another name`,
		}
		expect(t, fac.Kind+" messages", msgs, want)
		// The right registration still finds the entries.
		l, err := fac.List(b, "list", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.SetCurrentKey("k", GroupOf("k"))
		expect(t, fac.Kind+" list after failed registrations", l.Get(), []string{"a"})
		_, err = fac.List(b, "list", nil)
		expect(t, fac.Kind+" second registration", err, `state "list" is registered twice: state names must be unique per operator`)
	}
}
