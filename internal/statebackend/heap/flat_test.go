package heap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
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
