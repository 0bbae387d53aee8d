package pebble

import (
	"fmt"
	"io"
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
