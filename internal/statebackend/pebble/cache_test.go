package pebble

import (
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

var everyGroup = keygroup.Range{Start: 0, End: maxPar}

// inDB reports whether the database itself (not the write cache) holds a
// value for the value state s (id) of key k.
func inDB(t *testing.T, b *Backend[string], id uint64, k string) bool {
	t.Helper()
	return dbHas(t, b, appendEntryKey(nil, groupOf(codec.String(), k), id, codec.String().Append(nil, k)))
}

// dbHas reports whether the database itself holds key.
func dbHas(t *testing.T, b *Backend[string], key []byte) bool {
	t.Helper()
	_, closer, err := b.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	closer.Close()
	return true
}

// TestWriteCacheWritesBack checks that the cache is in effect (a write
// stays in memory) and that snapshots, full and incremental, write it back
// first: without the flush, the restored backends would miss the writes.
func TestWriteCacheWritesBack(t *testing.T) {
	kc := codec.String()
	b := newPebble(t, everyGroup, kc, Options{})
	s, err := NewValueState(b, "v", codec.Int())
	must(t, err)
	for i := range 100 {
		set(b, kc, s, fmt.Sprint("k", i), i)
	}
	if inDB(t, b, s.c.id, "k1") {
		t.Fatal("a write reached the database before any flush: the write cache is not in effect")
	}
	full := checkpointTo(t, b, 1)
	if !inDB(t, b, s.c.id, "k1") {
		t.Fatal("the full snapshot did not write the cache back")
	}
	for i := range 100 { // dirty again, for the incremental snapshot
		set(b, kc, s, fmt.Sprint("k", i), 1000+i)
	}
	dir := filepath.Join(t.TempDir(), "chk-2")
	_, err = b.SnapshotIncremental(2, dir)
	must(t, err)

	c := newPebble(t, everyGroup, kc, Options{})
	_, err = restoreFiles(c, []file{full})
	must(t, err)
	cs, err := NewValueState(c, "v", codec.Int())
	must(t, err)
	d := newPebble(t, everyGroup, kc, Options{})
	_, err = d.RestoreNative([]NativeCheckpoint{{Dir: dir, Groups: everyGroup}})
	must(t, err)
	ds, err := NewValueState(d, "v", codec.Int())
	must(t, err)
	for i := range 100 {
		k := fmt.Sprint("k", i)
		if v, ok := get(c, kc, cs, k); !ok || v != i {
			t.Fatalf("full snapshot: %s = %d %v, want %d", k, v, ok, i)
		}
		if v, ok := get(d, kc, ds, k); !ok || v != 1000+i {
			t.Fatalf("incremental snapshot: %s = %d %v, want %d", k, v, ok, 1000+i)
		}
	}
}

// TestWriteCacheIterationsSeeWrites checks every read that opens an
// iterator over a state's entries after writes that are only in the cache.
func TestWriteCacheIterationsSeeWrites(t *testing.T) {
	kc := codec.String()
	b := newPebble(t, everyGroup, kc, Options{})
	nv, err := NewNamespacedValueState(b, "nv", codec.String(), codec.Int())
	must(t, err)
	m, err := NewMapState(b, "m", codec.String(), codec.Int())
	must(t, err)
	b.SetCurrentKey("a", groupOf(kc, "a"))

	// Namespaces and Entries (timers rebuild their queues from it).
	for _, n := range []string{"w2", "w1"} {
		nv.SetCurrentNamespace(n)
		nv.Update(1)
	}
	if got := slices.Collect(nv.Namespaces()); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Fatalf("Namespaces after cached writes: %v", got)
	}
	nv.SetCurrentNamespace("w1")
	nv.Clear()
	nv.SetCurrentNamespace("w3")
	nv.Update(3)
	var entries []string
	for k, n := range nv.Entries() {
		entries = append(entries, k+"/"+n)
	}
	if !slices.Equal(entries, []string{"a/w2", "a/w3"}) {
		t.Fatalf("Entries after cached writes: %v", entries)
	}
	nv.ClearAllNamespaces()
	nv.SetCurrentNamespace("w3")
	if v, ok := nv.Value(); ok {
		t.Fatalf("value %d after ClearAllNamespaces of cached entries", v)
	}
	nv.Update(4) // after the range deletion, a write again
	if got := slices.Collect(nv.Namespaces()); !slices.Equal(got, []string{"w3"}) {
		t.Fatalf("Namespaces after clear and a write: %v", got)
	}

	// Map iteration, Len, and Remove (which looks for another entry).
	m.Put("x", 1)
	m.Put("y", 2)
	if got := maps.Collect(m.All()); len(got) != 2 || got["x"] != 1 || got["y"] != 2 || m.Len() != 2 {
		t.Fatalf("map after cached puts: %v, Len %d", got, m.Len())
	}
	m.Put("z", 3)
	m.Remove("x")
	m.Remove("y")
	if got := maps.Collect(m.All()); len(got) != 1 || got["z"] != 3 || m.IsEmpty() {
		t.Fatalf("map after removes: %v, empty %v", got, m.IsEmpty())
	}
	m.Remove("z")
	if !m.IsEmpty() || m.Len() != 0 {
		t.Fatal("map not empty after removing every entry")
	}
	m.Put("p", 7)
	m.Clear()
	if _, ok := m.Get("p"); ok || !m.IsEmpty() {
		t.Fatal("a cached entry survived Clear")
	}
	m.Put("q", 8)
	if n := m.Len(); n != 1 {
		t.Fatalf("Len %d after Clear and a put", n)
	}
	m.Put("r", 9)
	if got := maps.Collect(m.All()); len(got) != 2 || got["q"] != 8 || got["r"] != 9 {
		t.Fatalf("map after Clear and a put: %v", got)
	}
}

// TestWriteCacheEvicts runs a budget far below the state: the cache stays
// within it, evicted dirty entries are written back, and every value reads
// back.
func TestWriteCacheEvicts(t *testing.T) {
	kc := codec.String()
	const budget = 8 << 10
	b := newPebble(t, everyGroup, kc, Options{WriteCacheSize: budget})
	s, err := NewValueState(b, "v", codec.String())
	must(t, err)
	for round := range 3 {
		for i := range 2000 {
			set(b, kc, s, fmt.Sprint("k", i), fmt.Sprint(round, strings.Repeat("x", i%50)))
			if b.cache.size > budget {
				t.Fatalf("cache of %d bytes over its budget of %d", b.cache.size, budget)
			}
		}
	}
	if !inDB(t, b, s.c.id, "k0") {
		t.Fatal("an entry evicted long ago is not in the database")
	}
	for i := range 2000 {
		k := fmt.Sprint("k", i)
		if v, ok := get(b, kc, s, k); !ok || v != fmt.Sprint(2, strings.Repeat("x", i%50)) {
			t.Fatalf("%s = %q %v", k, v, ok)
		}
	}
	if b.cache.live() == 0 {
		t.Fatal("no entry left in the cache")
	}
	checkCache(t, b.cache)
}

// checkCache checks the structure of w: every used entry is found through
// the table by its key, the table holds nothing else, the dirty lists hold
// exactly the dirty entries at their recorded positions, the free list
// exactly the free entries, and the size is the sum of the entries' costs.
func checkCache(t *testing.T, w *writeCache) {
	t.Helper()
	used, size := 0, int64(0)
	for i := range w.entries {
		e := &w.entries[i]
		if !e.used {
			if e.dirty {
				t.Fatalf("free entry %d is dirty", i)
			}
			continue
		}
		used++
		size += e.cost()
		if j, _, _ := w.lookup(e.key()); j != i {
			t.Fatalf("entry %d (key %x) found at %d", i, e.key(), j)
		}
		if e.dirty {
			l := w.dirty[e.id]
			if l == nil || int(e.dpos) >= len(l.idx) || l.idx[e.dpos] != uint32(i) {
				t.Fatalf("dirty entry %d of state %d is not at position %d of its list", i, e.id, e.dpos)
			}
		}
	}
	slots := 0
	for _, v := range w.index {
		if v != 0 {
			slots++
			if e := &w.entries[uint32(v)-1]; !e.used || e.hash>>32 != v>>32 {
				t.Fatalf("slot %x names a free entry or the wrong hash", v)
			}
		}
	}
	dirty := 0
	for id, l := range w.dirty {
		for _, i := range l.idx {
			if e := &w.entries[i]; !e.used || !e.dirty || e.id != id {
				t.Fatalf("dirty list of state %d holds entry %d (used %v, dirty %v, state %d)", id, i, e.used, e.dirty, e.id)
			}
		}
		dirty += len(l.idx)
	}
	for i := range w.entries {
		if w.entries[i].dirty {
			dirty--
		}
	}
	switch {
	case used != w.live() || slots != w.live():
		t.Fatalf("%d used entries, %d slots, live %d", used, slots, w.live())
	case used+len(w.free) != len(w.entries):
		t.Fatalf("%d used and %d free of %d entries", used, len(w.free), len(w.entries))
	case dirty != 0:
		t.Fatal("the dirty lists and the dirty entries differ in number")
	case size != w.size:
		t.Fatalf("size %d, the entries cost %d", w.size, size)
	case 2*w.live() > len(w.index):
		t.Fatalf("%d entries in a table of %d slots", w.live(), len(w.index))
	}
}

// TestWriteCacheStructure runs random operations on a write cache and a
// map that models the database behind it, checking after each that the
// cache reads as the model, that its structure is intact (checkCache), and
// that every batch it writes back is in key order; at the end, after a
// flush, the database holds the model.
func TestWriteCacheStructure(t *testing.T) {
	for _, budget := range []int64{400, 4 << 10, 64 << 10, 32 << 20} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			b := newPebble(t, everyGroup, codec.String(), Options{WriteCacheSize: -1})
			batches, unsorted := 0, 0
			w := newWriteCache(budget, func() *pebble.DB { return b.db }, func(batch *pebble.Batch) error {
				batches++
				var prev []byte
				for r := batch.Reader(); ; {
					_, k, _, ok, err := r.Next()
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					if prev != nil && string(k) <= string(prev) {
						unsorted++
					}
					prev = append(prev[:0], k...)
				}
				return batch.Commit(pebble.NoSync)
			})
			model := map[string]string{}
			r := rand.New(rand.NewPCG(uint64(budget), 1))
			for step := range 20_000 {
				id := uint64(1 + r.IntN(3))
				// Keys of 9 to 30 bytes, many alike in their first 16 (the
				// write-back sort compares those apart).
				key := []byte(fmt.Sprintf("%d/key-%d%s", id, r.IntN(3000), strings.Repeat("-", r.IntN(20))))
				switch op := r.IntN(10); {
				case op < 4:
					v := strings.Repeat("v", r.IntN(40)) + fmt.Sprint(step)
					must(t, w.put(id, key, []byte(v)))
					model[string(key)] = v
				case op < 5:
					must(t, w.del(id, key))
					delete(model, string(key))
				case op < 6:
					must(t, w.flushState(id))
				default:
					v, present, hit, err := w.read(id, key)
					must(t, err)
					if !hit {
						raw, closer, err := b.db.Get(key)
						present = err == nil
						if present {
							v = append([]byte(nil), raw...)
							closer.Close()
						}
						must(t, w.fill(id, key, v, present))
					}
					want, ok := model[string(key)]
					if present != ok || present && string(v) != want {
						t.Fatalf("step %d: %s reads %q %v (hit %v), want %q %v", step, key, v, present, hit, want, ok)
					}
				}
				if w.size > budget {
					t.Fatalf("step %d: %d bytes over the budget of %d", step, w.size, budget)
				}
				if step%97 == 0 {
					checkCache(t, w)
				}
			}
			checkCache(t, w)
			must(t, w.flushAll())
			checkCache(t, w)
			for k, v := range model {
				raw, closer, err := b.db.Get([]byte(k))
				if err != nil || string(raw) != v {
					t.Fatalf("after the flush the database holds %q (%v) at %s, want %q", raw, err, k, v)
				}
				closer.Close()
			}
			if batches == 0 || unsorted > 0 {
				t.Fatalf("%d batches written back, %d keys out of order", batches, unsorted)
			}
			w.reset()
			checkCache(t, w)
		})
	}
}

// TestWriteCacheTTL checks that an entry that expires while cached reads
// as absent, is deleted from the database, and is left out of snapshots.
func TestWriteCacheTTL(t *testing.T) {
	kc := codec.String()
	now := int64(1_000_000)
	b := newPebble(t, everyGroup, kc, Options{Clock: func() int64 { return now }})
	s, err := NewValueState(b, "v", codec.Int(), WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	set(b, kc, s, "a", 1)
	set(b, kc, s, "b", 2)
	checkpointTo(t, b, 1) // both in the database now, and cached clean
	if !inDB(t, b, s.c.id, "a") {
		t.Fatal("not written back")
	}
	now += 5
	set(b, kc, s, "b", 3) // renewed, in the cache only
	now += 6              // a expired, b not
	if v, ok := get(b, kc, s, "a"); ok {
		t.Fatalf("expired cached entry read as %d", v)
	}
	f := checkpointTo(t, b, 2)
	if inDB(t, b, s.c.id, "a") {
		t.Fatal("the expired entry's deletion was not written back")
	}
	c := newPebble(t, everyGroup, kc, Options{Clock: func() int64 { return now }})
	_, err = restoreFiles(c, []file{f})
	must(t, err)
	cs, err := NewValueState(c, "v", codec.Int(), WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	must(t, err)
	if v, ok := get(c, kc, cs, "b"); !ok || v != 3 {
		t.Fatalf("renewed entry restored as %d %v", v, ok)
	}
	if _, ok := get(c, kc, cs, "a"); ok {
		t.Fatal("expired entry restored")
	}
}

// TestWriteCacheOptions checks the option's default and that a negative
// budget disables the cache.
func TestWriteCacheOptions(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if o.WriteCacheSize != DefaultWriteCacheSize {
		t.Fatalf("default WriteCacheSize %d", o.WriteCacheSize)
	}
	kc := codec.String()
	b := newPebble(t, everyGroup, kc, Options{WriteCacheSize: -1})
	s, err := NewValueState(b, "v", codec.Int())
	must(t, err)
	set(b, kc, s, "a", 1)
	if b.cache != nil || !inDB(t, b, s.c.id, "a") {
		t.Fatal("with WriteCacheSize -1 a write did not go to the database")
	}
}

// TestWrittenFilter checks the filter of keys written back: no false
// negatives across its growth, and about 1% false positives.
func TestWrittenFilter(t *testing.T) {
	f, seed := newWrittenFilter(0), maphash.MakeSeed()
	const n = 200_000 // several layers
	for i := range n {
		f.add(maphash.Bytes(seed, fmt.Appendf(nil, "key-%d", i)))
	}
	if len(f.layers) < 3 {
		t.Fatalf("%d layers for %d keys", len(f.layers), n)
	}
	for i := range n {
		if !f.mayContain(maphash.Bytes(seed, fmt.Appendf(nil, "key-%d", i))) {
			t.Fatalf("key-%d added and not found", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayContain(maphash.Bytes(seed, fmt.Appendf(nil, "other-%d", i))) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.05 {
		t.Fatalf("false positive rate %.3f", rate)
	}
}

// TestWriteCacheSkipsRewrites checks that a write of what a cached entry
// holds already is not written back again, and that a deletion of a key
// the cache does not know is (the database may hold it).
func TestWriteCacheSkipsRewrites(t *testing.T) {
	b := newPebble(t, everyGroup, codec.String(), Options{WriteCacheSize: -1})
	w := newWriteCache(1<<20, func() *pebble.DB { return b.db }, func(batch *pebble.Batch) error { return batch.Commit(pebble.NoSync) })
	dirty := func() int {
		n := 0
		for _, l := range w.dirty {
			n += len(l.idx)
		}
		return n
	}
	must(t, b.db.Set([]byte("old"), []byte("v"), pebble.NoSync))
	must(t, w.del(1, []byte("old")))
	must(t, w.put(1, []byte("a"), []byte("x")))
	if n := dirty(); n != 2 {
		t.Fatalf("%d dirty entries after a deletion and a put, want 2", n)
	}
	must(t, w.flushAll())
	if _, closer, err := b.db.Get([]byte("old")); err == nil {
		closer.Close()
		t.Fatal("the deletion of a key the cache did not know was not written back")
	}
	must(t, w.put(1, []byte("a"), []byte("x")))
	must(t, w.del(1, []byte("old")))
	if _, _, hit, err := w.read(1, []byte("new")); err != nil || !hit {
		t.Fatalf("a never-written key missed the filter (%v)", err)
	}
	must(t, w.del(1, []byte("new")))
	if n := dirty(); n != 0 {
		t.Fatalf("%d dirty entries after writes of what the cache held", n)
	}
	must(t, w.put(1, []byte("a"), []byte("y")))
	if n := dirty(); n != 1 {
		t.Fatalf("%d dirty entries after a new value, want 1", n)
	}
	checkCache(t, w)
}

// listInDB reports whether the database itself (not the write cache)
// holds the list of key k of the list state id (its one sub-entry).
func listInDB(t *testing.T, b *Backend[string], id uint64, k string) bool {
	t.Helper()
	return dbHas(t, b, append(appendEntryKey(nil, groupOf(codec.String(), k), id, codec.String().Append(nil, k)), subMark))
}

// TestWriteCacheLists: a list's appends stay in the cache (a new list,
// and a cached one, which grows in place) and reach the database with
// the snapshot; after a restore, an append to a list the cache does not
// know goes to the database as a merge operand without a read, and one to
// a list read since extends the cached copy. Every Get sees every Add.
func TestWriteCacheLists(t *testing.T) {
	kc := codec.String()
	b := newPebble(t, everyGroup, kc, Options{})
	l, err := NewListState(b, "l", codec.Int())
	must(t, err)
	add := func(b *Backend[string], l *ListState[string, int], k string, vs ...int) {
		b.SetCurrentKey(k, groupOf(kc, k))
		for _, v := range vs {
			l.Add(v)
		}
	}
	check := func(b *Backend[string], l *ListState[string, int], k string, want ...int) {
		t.Helper()
		b.SetCurrentKey(k, groupOf(kc, k))
		if got := l.Get(); !slices.Equal(got, want) {
			t.Fatalf("%s: Get = %v, want %v", k, got, want)
		}
	}
	for i := range 100 {
		add(b, l, fmt.Sprint("k", i), i, i+1)
	}
	add(b, l, "k1", 7)
	if listInDB(t, b, l.c.id, "k1") {
		t.Fatal("a list's Add reached the database before any flush: lists bypass the write cache")
	}
	check(b, l, "k1", 1, 2, 7)
	before := b.cache.size
	add(b, l, "k1", 8)
	if grew := b.cache.size - before; grew > 64 {
		t.Errorf("one Add to a cached list grew the cache by %d bytes: the list was copied, not extended", grew)
	}
	check(b, l, "k1", 1, 2, 7, 8)
	full := checkpointTo(t, b, 1)
	if !listInDB(t, b, l.c.id, "k1") {
		t.Fatal("the snapshot did not write the cached lists back")
	}

	c := newPebble(t, everyGroup, kc, Options{})
	_, err = restoreFiles(c, []file{full})
	must(t, err)
	cl, err := NewListState(c, "l", codec.Int())
	must(t, err)
	add(c, cl, "k1", 9) // unknown to the cache: a merge operand
	sub := append(appendEntryKey(nil, groupOf(kc, "k1"), cl.c.id, kc.Append(nil, "k1")), subMark)
	if i, _, _ := c.cache.lookup(sub); i >= 0 {
		t.Fatal("an Add to a list the cache did not know read the list into the cache")
	}
	check(c, cl, "k1", 1, 2, 7, 8, 9)
	add(c, cl, "k1", 10) // read since: extends the cached copy
	check(c, cl, "k1", 1, 2, 7, 8, 9, 10)
	add(c, cl, "new", 1) // a key the restored database may hold: a merge
	check(c, cl, "new", 1)
	for i := 2; i < 100; i++ {
		check(c, cl, fmt.Sprint("k", i), i, i+1)
	}
	c.SetCurrentKey("k1", groupOf(kc, "k1"))
	cl.Update([]int{3})
	check(c, cl, "k1", 3)
	cl.Clear()
	check(c, cl, "k1")
	add(c, cl, "k1", 4)
	check(c, cl, "k1", 4)
	second := checkpointTo(t, c, 2)
	d := newPebble(t, everyGroup, kc, Options{})
	_, err = restoreFiles(d, []file{second})
	must(t, err)
	dl, err := NewListState(d, "l", codec.Int())
	must(t, err)
	check(d, dl, "k1", 4)
	check(d, dl, "k2", 2, 3)
	check(d, dl, "new", 1)
}
