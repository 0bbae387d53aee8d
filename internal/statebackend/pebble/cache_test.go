package pebble

import (
	"errors"
	"fmt"
	"maps"
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
	key := appendEntryKey(nil, groupOf(codec.String(), k), id, codec.String().Append(nil, k))
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
	if n := len(b.cache.entries); n == 0 || n != len(b.cache.ring) {
		t.Fatalf("%d entries, %d in the CLOCK ring", n, len(b.cache.ring))
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
	f := newWrittenFilter()
	const n = 200_000 // several layers
	for i := range n {
		f.add(fmt.Appendf(nil, "key-%d", i))
	}
	if len(f.layers) < 3 {
		t.Fatalf("%d layers for %d keys", len(f.layers), n)
	}
	for i := range n {
		if !f.mayContain(fmt.Appendf(nil, "key-%d", i)) {
			t.Fatalf("key-%d added and not found", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayContain(fmt.Appendf(nil, "other-%d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.05 {
		t.Fatalf("false positive rate %.3f", rate)
	}
}
