package heap

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

// viewContents returns the entries (and last-access times) a snapshot's
// view of a flat table holds.
func viewContents[K comparable, E any](v flatView[K, E]) (map[K]E, map[K]int64) {
	got, ts := map[K]E{}, map[K]int64{}
	for i := range v.all {
		got[v.slots[i].key] = v.slots[i].val
		if v.ts != nil {
			ts[v.slots[i].key] = v.ts[i]
		}
	}
	return got, ts
}

// TestFlatTableCopyOnWriteModel runs random updates, inserts (growing the
// table), deletes (shifting entries back) and TTL renewals against a Go map,
// with up to four snapshots outstanding, released in random order. After
// every operation each outstanding snapshot must still see exactly the
// entries of its capture, and the live table exactly the model's. A hash
// with few distinct values makes long probe runs, so that deletes move
// entries across them and around the end of the table.
func TestFlatTableCopyOnWriteModel(t *testing.T) {
	hashes := map[string]func(int64) uint64{
		"good":     nil, // the backend's own
		"clusters": func(k int64) uint64 { return uint64(k % 5) },
		"wrapping": func(k int64) uint64 { return ^uint64(k % 3) },
	}
	for name, hash := range hashes {
		for _, ttl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ttl=%v", name, ttl), func(t *testing.T) {
				testFlatModel(t, hash, ttl, 1)
				testFlatModel(t, hash, ttl, 2)
			})
		}
	}
}

type flatCapture struct {
	version uint64
	view    flatView[int64, int64]
	want    map[int64]int64
	wantTS  map[int64]int64
}

func testFlatModel(t *testing.T, hash func(int64) uint64, ttl bool, seed uint64) {
	b := New(keygroup.Range{Start: 0, End: 1}, codec.Int64())
	if hash != nil {
		b.hash = hash
	}
	tb := &flatTable[int64, int64]{}
	model, modelTS := map[int64]int64{}, map[int64]int64{}
	var caps []flatCapture
	rng := rand.New(rand.NewPCG(seed, 7))
	check := func(step int) {
		t.Helper()
		got, ts := viewContents(tb.capture())
		if !maps.Equal(got, model) || tb.n != len(model) {
			t.Fatalf("step %d: live table holds %v (n=%d), want %v", step, got, tb.n, model)
		}
		if ttl && !maps.Equal(ts, modelTS) {
			t.Fatalf("step %d: live last-access times %v, want %v", step, ts, modelTS)
		}
		for _, c := range caps {
			got, ts := viewContents(c.view)
			if !maps.Equal(got, c.want) || c.view.n != len(c.want) {
				t.Fatalf("step %d: snapshot %d sees %v (n=%d), want %v", step, c.version, got, c.view.n, c.want)
			}
			if ttl && !maps.Equal(ts, c.wantTS) {
				t.Fatalf("step %d: snapshot %d sees last-access times %v, want %v", step, c.version, ts, c.wantTS)
			}
		}
	}
	for step := range 1500 {
		k := int64(rng.IntN(100))
		now := int64(step)
		switch op := rng.IntN(20); {
		case op < 8: // update or insert
			if i := tb.lookup(b.hash, k); i >= 0 {
				writableFlat(tb, b)
				tb.slots[i].val = now
				if ttl {
					tb.ts[i] = now
				}
			} else {
				tb.insert(b, k, now, now, ttl)
			}
			model[k] = now
			if ttl {
				modelTS[k] = now
			}
		case op < 15: // delete
			if i := tb.lookup(b.hash, k); i >= 0 {
				tb.remove(b, i)
			}
			delete(model, k)
			delete(modelTS, k)
		case op < 16 && ttl: // renew
			if i := tb.lookup(b.hash, k); i >= 0 {
				writableFlat(tb, b)
				tb.ts[i] = now
				modelTS[k] = now
			}
		case op < 18 && len(caps) < 4: // snapshot
			b.version++
			caps = append(caps, flatCapture{b.version, tb.capture(), maps.Clone(model), maps.Clone(modelTS)})
			b.live = append(b.live, b.version)
			b.frozenBelow = b.version
		case op < 20 && len(caps) > 0: // release one, any
			j := rng.IntN(len(caps))
			b.release(caps[j].version)
			caps = slices.Delete(caps, j, j+1)
		}
		check(step)
	}
}

// TestFlatTableCopiesOncePerSnapshot checks when a write copies the slots: the
// first write of any kind after a snapshot, not the writes after it, not a
// read, and none with no snapshot outstanding.
func TestFlatTableCopiesOncePerSnapshot(t *testing.T) {
	for _, op := range []string{"update", "insert", "delete"} {
		t.Run(op, func(t *testing.T) {
			// Twelve keys of key group 0, in one table.
			kc := codec.Int64()
			var keys []int64
			for k := int64(0); len(keys) < 12; k++ {
				if groupOf(kc, k) == 0 {
					keys = append(keys, k)
				}
			}
			r := keygroup.Range{Start: 0, End: maxPar}
			b := New(r, kc)
			s := mustValue[int64, int64](t, b, "v")
			want := map[int64]int64{}
			for i, k := range keys[:10] {
				b.SetCurrentKey(k, 0)
				s.Update(int64(i))
				want[k] = int64(i)
			}
			id := func() uintptr { return mapID(s.s.tables[0].flat) }
			before := id()
			b.SetCurrentKey(keys[3], 0)
			s.Update(30)
			want[keys[3]] = 30
			if id() != before {
				t.Fatal("a write copied the slots with no snapshot outstanding")
			}
			snap, err := b.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			s.Value()
			if id() != before {
				t.Fatal("a read copied the slots")
			}
			switch op {
			case "update":
				s.Update(31)
			case "insert":
				b.SetCurrentKey(keys[10], 0)
				s.Update(100)
			case "delete":
				s.Clear()
			}
			after := id()
			if after == before {
				t.Fatalf("the first %s after the snapshot did not copy the slots", op)
			}
			b.SetCurrentKey(keys[11], 0)
			s.Update(50)
			b.SetCurrentKey(keys[5], 0)
			s.Update(50)
			s.Clear()
			if id() != after {
				t.Fatal("a second write after the snapshot copied again")
			}
			f := write(t, snap, "chk-1")
			got, _ := restore(t, r, kc, []file{f})
			equal(t, "snapshot", contents(t, mustValue[int64, int64](t, got, "v")), want)
		})
	}
}

// TestOrderCacheWritesCanonicalBytes takes snapshots of a state whose keys
// stay put while their values change (the order of the first is reused),
// with a TTL some entries of which expired between two snapshots of the
// same layout (the reused order skips them), after inserts only (the new
// keys are merged into the reused order), then after inserts and deletes
// (it is not reused). Every file must be byte for byte what a fresh backend
// holding the same entries writes.
func TestOrderCacheWritesCanonicalBytes(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 16}
	kc := codec.String()
	var keys []string
	for i := 0; len(keys) < 2000; i++ {
		if k := fmt.Sprint("k", i); r.Contains(groupOf(kc, k)) {
			keys = append(keys, k)
		}
	}
	clock := &fakeClock{}
	b := newClocked(r, clock)
	plain := mustValue[string, int](t, b, "plain")
	ttl := must[*ValueState[string, int]](t)(NewValueState(b, "ttl", codec.Int(), ttlOf(100, state.OnCreateAndWrite)))
	live, liveTTL := map[string]int{}, map[string]int{}
	last := map[string]int64{}
	put := func(k string, v int) {
		b.SetCurrentKey(k, groupOf(kc, k))
		plain.Update(v)
		ttl.Update(v)
		live[k], liveTTL[k], last[k] = v, v, clock.ms
	}
	for i, k := range keys[:1000] {
		clock.ms = int64(i % 50)
		put(k, i)
	}
	// reference writes what a backend holding exactly the live entries
	// writes at the clock's time.
	reference := func(id int64) file {
		rb := newClocked(r, clock)
		rp := mustValue[string, int](t, rb, "plain")
		rt := must[*ValueState[string, int]](t)(NewValueState(rb, "ttl", codec.Int(), ttlOf(100, state.OnCreateAndWrite)))
		saved := clock.ms
		for k, v := range live {
			rb.SetCurrentKey(k, groupOf(kc, k))
			rp.Update(v)
		}
		for k, v := range liveTTL {
			clock.ms = last[k]
			rb.SetCurrentKey(k, groupOf(kc, k))
			rt.Update(v)
		}
		clock.ms = saved
		return checkpointTo(t, rb, id)
	}
	cached := func() int {
		n := 0
		for slot := range plain.s.tables {
			if c := plain.s.orders.bySlot[slot]; c.layout != 0 && c.layout == plain.s.tables[slot].flat.layout {
				n++
			}
		}
		return n
	}
	check := func(id int64, what string, wantCached bool) {
		t.Helper()
		if got := cached() == r.Len(); got != wantCached {
			t.Fatalf("%s: orders of every key group cached before the snapshot: %v, want %v", what, got, wantCached)
		}
		if f, ref := checkpointTo(t, b, id), reference(id); !slices.Equal(f.data, ref.data) {
			t.Fatalf("%s: the snapshot's bytes differ from a fresh backend's", what)
		}
		if cached() != r.Len() {
			t.Fatalf("%s: the snapshot left %d of %d key groups' orders cached", what, cached(), r.Len())
		}
	}
	clock.ms = 60
	check(1, "first snapshot", false)
	for i, k := range keys[:1000] {
		b.SetCurrentKey(k, groupOf(kc, k))
		plain.Update(-i)
		live[k] = -i
	}
	check(2, "values changed", true)
	clock.ms = 120 // keys last written at 0..19 expired; the rest live
	for k, at := range last {
		if at+100 <= clock.ms {
			delete(liveTTL, k)
		}
	}
	if len(liveTTL) == 0 || len(liveTTL) == len(live) {
		t.Fatalf("%d of %d entries live: the test expires none or all", len(liveTTL), len(live))
	}
	check(3, "some TTL entries expired", true)
	for _, k := range keys[1000:1160] {
		put(k, 8)
	}
	check(4, "keys added", true)
	for slot := range plain.s.tables {
		if got, want := len(plain.s.orders.bySlot[slot].order), plain.s.tables[slot].flat.n; got != want {
			t.Fatalf("key group %d: the merged order has %d slots, the table %d entries", slot, got, want)
		}
	}
	for _, k := range keys[1160:] {
		put(k, 7)
	}
	for _, k := range keys[:300] {
		b.SetCurrentKey(k, groupOf(kc, k))
		plain.Clear()
		ttl.Clear()
		delete(live, k)
		delete(liveTTL, k)
	}
	check(5, "keys added and removed", false)
}

// TestWrongCachedOrderFailsTheSnapshot corrupts a cached order: the
// snapshot must fail, not write keys out of order.
func TestWrongCachedOrderFailsTheSnapshot(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	kc := codec.Int64()
	b := New(r, kc)
	s := mustValue[int64, int64](t, b, "v")
	var n int64
	for k := int64(0); n < 10; k++ {
		if groupOf(kc, k) == 0 {
			b.SetCurrentKey(k, 0)
			s.Update(k)
			n++
		}
	}
	checkpointTo(t, b, 1)
	c := s.s.orders.bySlot[0]
	if c.layout == 0 || len(c.order) != 10 {
		t.Fatalf("no order cached after the first snapshot: %+v", c)
	}
	swapped := slices.Clone(c.order)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	s.s.orders.bySlot[0].order = swapped
	snap, err := b.Snapshot(2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = snap.WriteState(io.Discard)
	snap.Release()
	if err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("WriteState with a wrong cached order: %v, want an out-of-order error", err)
	}
}
