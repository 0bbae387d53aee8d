package pebble

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/state"
)

// benchBackend returns a backend of kind over [0, 128) with one int state
// holding keys keys, and the keys with their key groups. Pebble runs with
// its default options.
func benchBackend(b *testing.B, kind string, keys int) (statebackend.KeyedBackend[string], state.Value[int], []string, []int) {
	kc := codec.String()
	r := keygroup.Range{Start: 0, End: maxPar}
	var be statebackend.KeyedBackend[string]
	if kind == "pebble" {
		be = newPebble(b, r, kc, Options{CacheSize: DefaultCacheSize, MemTableSize: DefaultMemTableSize})
	} else {
		be = newBackend(b, kind, r, kc)
	}
	s := mustValue[string, int](b, be, "count")
	names, groups := make([]string, keys), make([]int, keys)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
		groups[i] = groupOf(kc, names[i])
		be.SetCurrentKey(names[i], groups[i])
		s.Update(i)
	}
	return be, s, names, groups
}

// BenchmarkValue reads keys of a state of 100,000 keys, in a scrambled
// order (the cache holds all of pebble's state).
func BenchmarkValue(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			be, s, names, groups := benchBackend(b, kind, 100_000)
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				if _, ok := s.Value(); !ok {
					b.Fatal("missing")
				}
				i++
			}
		})
	}
}

// BenchmarkUpdate overwrites keys of a state of 100,000 keys.
func BenchmarkUpdate(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			be, s, names, groups := benchBackend(b, kind, 100_000)
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				s.Update(i)
				i++
			}
		})
	}
}

// BenchmarkReadModifyWrite is a keyed counter: Value then Update.
func BenchmarkReadModifyWrite(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			be, s, names, groups := benchBackend(b, kind, 100_000)
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				v, _ := s.Value()
				s.Update(v + 1)
				i++
			}
		})
	}
}

// BenchmarkSnapshotSync measures the synchronous part of a checkpoint: it
// must not grow with the number of keys.
func BenchmarkSnapshotSync(b *testing.B) {
	for _, kind := range kinds {
		for _, keys := range []int{1_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", kind, keys), func(b *testing.B) {
				be, _, _, _ := benchBackend(b, kind, keys)
				var id int64
				for b.Loop() {
					id++
					snap, err := be.Snapshot(id)
					if err != nil {
						b.Fatal(err)
					}
					snap.Release()
				}
			})
		}
	}
}

// BenchmarkWriteState measures the asynchronous part: 1M entries to the
// canonical format.
func BenchmarkWriteState(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			be, _, _, _ := benchBackend(b, kind, 1_000_000)
			var size int64
			for b.Loop() {
				snap, _ := be.Snapshot(1)
				h, err := snap.WriteState(io.Discard)
				snap.Release()
				if err != nil {
					b.Fatal(err)
				}
				size = h.Size
			}
			b.SetBytes(size)
		})
	}
}

// BenchmarkSnapshotIncremental measures the synchronous part of an
// incremental checkpoint after 1,000 updates to a state of 1M keys: a flush
// of the memtable and hard links.
func BenchmarkSnapshotIncremental(b *testing.B) {
	be, s, names, groups := benchBackend(b, "pebble", 1_000_000)
	pb := be.(*Backend[string])
	dir := b.TempDir()
	var id int64
	for b.Loop() {
		b.StopTimer()
		for i := range 1000 {
			j := (int(id)*1000 + i*7919) % len(names)
			be.SetCurrentKey(names[j], groups[j])
			s.Update(i)
		}
		id++
		b.StartTimer()
		if _, err := pb.SnapshotIncremental(id, fmt.Sprintf("%s/chk-%d", dir, id)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchKeys returns keys keys and their key groups.
func benchKeys(keys int) ([]string, []int) {
	names, groups := make([]string, keys), make([]int, keys)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
		groups[i] = groupOf(codec.String(), names[i])
	}
	return names, groups
}

// benchEmpty returns an empty backend of kind over [0, 128), pebble with
// its default options.
func benchEmpty(b *testing.B, kind string) statebackend.KeyedBackend[string] {
	r := keygroup.Range{Start: 0, End: maxPar}
	if kind == "pebble" {
		return newPebble(b, r, codec.String(), Options{CacheSize: DefaultCacheSize, MemTableSize: DefaultMemTableSize})
	}
	return newBackend(b, kind, r, codec.String())
}

// BenchmarkListAdd appends to the lists of 10,000 keys (on pebble a merge
// operand, without reading the list).
func BenchmarkListAdd(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			be := benchEmpty(b, kind)
			var l state.List[int]
			var err error
			switch be := be.(type) {
			case *heap.Backend[string]:
				l, err = heap.NewListState(be, "list", codec.Int())
			case *Backend[string]:
				l, err = NewListState(be, "list", codec.Int())
			}
			if err != nil {
				b.Fatal(err)
			}
			names, groups := benchKeys(10_000)
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				l.Add(i)
				i++
			}
		})
	}
}

// BenchmarkMapPut puts 100 user keys into the maps of 10,000 keys (on
// pebble one database entry per user key).
func BenchmarkMapPut(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			m := benchMap(b, kind)
			be, names, groups := m.be, m.names, m.groups
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				m.s.Put(i%100, i)
				i++
			}
		})
	}
}

// BenchmarkMapGet reads user keys of maps of 100 entries of 10,000 keys
// (a point read on pebble).
func BenchmarkMapGet(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			m := benchMap(b, kind)
			be, names, groups := m.be, m.names, m.groups
			for j := range names {
				be.SetCurrentKey(names[j], groups[j])
				for u := range 100 {
					m.s.Put(u, u)
				}
			}
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(names)
				be.SetCurrentKey(names[j], groups[j])
				if _, ok := m.s.Get(i % 100); !ok {
					b.Fatal("missing")
				}
				i++
			}
		})
	}
}

type benchMapState struct {
	be     statebackend.KeyedBackend[string]
	s      state.Map[int, int]
	names  []string
	groups []int
}

func benchMap(b *testing.B, kind string) benchMapState {
	be := benchEmpty(b, kind)
	var s state.Map[int, int]
	var err error
	switch be := be.(type) {
	case *heap.Backend[string]:
		s, err = heap.NewMapState(be, "map", codec.Int(), codec.Int())
	case *Backend[string]:
		s, err = NewMapState(be, "map", codec.Int(), codec.Int())
	}
	if err != nil {
		b.Fatal(err)
	}
	names, groups := benchKeys(10_000)
	return benchMapState{be, s, names, groups}
}

// BenchmarkIncrementalChurn measures what incremental checkpoints upload
// in a steady state: 1M keys of 100 random bytes, then 30 rounds of 1% of
// the keys updated at random and an incremental snapshot. A round uploads
// the data files its snapshot holds and the one before did not (a flush,
// and every file a compaction wrote since). It reports the mean and the
// worst round as a percentage of the full state (the canonical snapshot's
// bytes), as incremental_size_test.go's proof does for 5 rounds. One
// iteration takes about 20 s: run it with -benchtime 1x.
func BenchmarkIncrementalChurn(b *testing.B) {
	const keys, rounds = 1_000_000, 30
	for b.Loop() {
		mean, worst := incrementalChurn(b, keys, rounds)
		b.ReportMetric(mean, "mean-%")
		b.ReportMetric(worst, "worst-%")
	}
}

func incrementalChurn(b *testing.B, keys, rounds int) (mean, worst float64) {
	dir := b.TempDir()
	be := newPebble(b, keygroup.Range{Start: 0, End: maxPar}, codec.String(), Options{Dir: dir + "/db", CacheSize: DefaultCacheSize, MemTableSize: DefaultMemTableSize})
	v, err := NewValueState(be, "v", codec.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	names, groups := benchKeys(keys)
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 100)
	put := func(i int) {
		be.SetCurrentKey(names[i], groups[i])
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		v.Update(val)
	}
	for i := range keys {
		put(i)
	}
	var prev map[string]bool
	var total int64
	var most int64
	for round := 0; round <= rounds; round++ {
		if round > 0 {
			for range keys / 100 {
				put(rng.IntN(keys))
			}
		}
		chk := fmt.Sprintf("%s/chk-%d", dir, round)
		files, err := be.SnapshotIncremental(int64(round+1), chk)
		if err != nil {
			b.Fatal(err)
		}
		cur := make(map[string]bool, len(files))
		var up int64
		for _, f := range files {
			cur[f] = true
			if prev[f] {
				continue
			}
			fi, err := os.Stat(filepath.Join(chk, f))
			if err != nil {
				b.Fatal(err)
			}
			up += fi.Size()
		}
		if round > 0 {
			total += up
			most = max(most, up)
			if err := os.RemoveAll(fmt.Sprintf("%s/chk-%d", dir, round-1)); err != nil {
				b.Fatal(err)
			}
		}
		prev = cur
	}
	full, err := be.Snapshot(int64(rounds + 2))
	if err != nil {
		b.Fatal(err)
	}
	defer full.Release()
	var cw countWriter
	if _, err := full.WriteState(&cw); err != nil {
		b.Fatal(err)
	}
	return 100 * float64(total) / float64(rounds) / float64(cw), 100 * float64(most) / float64(cw)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// BenchmarkWriteBackSort sorts the write-backs of a flush of a full write
// cache: 250k map entries keyed as Nexmark q16's (key group, state id, a
// channel and a day, the user key), in the order of a cache's dirty list.
func BenchmarkWriteBackSort(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 250_000
	var ws writeBackSort
	es := make([]cacheEntry, n)
	for i := range es {
		key := binary.BigEndian.AppendUint16(nil, uint16(r.IntN(64)))
		key = append(key, 3)
		key = codec.String().Append(key, fmt.Sprint("channel-", r.IntN(10_000)))
		key = codec.String().Append(key, "2015-07-15")
		key = append(key, 1)
		key = binary.BigEndian.AppendUint64(key, uint64(r.IntN(200_000)))
		es[i] = cacheEntry{kv: append(key, 7), klen: uint32(len(key)), present: true}
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range es {
			ws.add(&es[i])
		}
		ws.sort()
		ws.buf, ws.recs = ws.buf[:0], ws.recs[:0]
	}
}
