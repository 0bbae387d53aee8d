package heap

import (
	"fmt"
	"io"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// benchBackend returns a backend over [0, 128) with one int state holding
// keys keys.
func benchBackend(b *testing.B, keys int) (*Backend[string], *ValueState[string, int], []string) {
	kc := codec.String()
	be := New(keygroup.Range{Start: 0, End: maxPar}, kc)
	s, err := NewValueState(be, "count", codec.Int())
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
		be.SetCurrentKey(names[i], groupOf(kc, names[i]))
		s.Update(i)
	}
	return be, s, names
}

// BenchmarkSnapshotSync measures the synchronous part of a checkpoint: it
// must not grow with the number of keys.
func BenchmarkSnapshotSync(b *testing.B) {
	for _, keys := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			be, _, _ := benchBackend(b, keys)
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

// BenchmarkWriteAfterSnapshot measures the first write to a key group after
// a snapshot, which clones that key group's map of the state (1M keys over
// 128 key groups: ~7,800 entries), against a write with no snapshot in
// flight.
func BenchmarkWriteAfterSnapshot(b *testing.B) {
	const keys = 1_000_000
	be, s, names := benchBackend(b, keys)
	kc := codec.String()
	// One key per key group, to write each group in turn.
	perGroup := make([]string, maxPar)
	for _, k := range names {
		perGroup[groupOf(kc, k)] = k
	}
	b.Run("first-write-after-snapshot", func(b *testing.B) {
		snap, _ := be.Snapshot(1)
		g := 0
		for b.Loop() {
			if g == maxPar { // every group cloned: freeze them all again
				b.StopTimer()
				snap.Release()
				snap, _ = be.Snapshot(1)
				g = 0
				b.StartTimer()
			}
			be.SetCurrentKey(perGroup[g], g)
			s.Update(g)
			g++
		}
		snap.Release()
		b.ReportMetric(float64(keys)/maxPar, "entries/clone")
	})
	b.Run("write-no-snapshot", func(b *testing.B) {
		g := 0
		for b.Loop() {
			be.SetCurrentKey(perGroup[g%maxPar], g%maxPar)
			s.Update(g)
			g++
		}
	})
}

// BenchmarkWriteState measures the asynchronous part: encoding, sorting and
// writing 1M entries, with string keys and with the int64 keys of the
// checkpoint overhead benchmark (bench/checkpoint_test.go).
func BenchmarkWriteState(b *testing.B) {
	b.Run("keys=string", func(b *testing.B) {
		be, _, _ := benchBackend(b, 1_000_000)
		benchWriteState(b, be)
	})
	b.Run("keys=int64", func(b *testing.B) {
		kc := codec.Int64()
		be := New(keygroup.Range{Start: 0, End: maxPar}, kc)
		s, err := NewValueState(be, "count", codec.Int64())
		if err != nil {
			b.Fatal(err)
		}
		for k := range int64(1_000_000) {
			be.SetCurrentKey(k, groupOf(kc, k))
			s.Update(k)
		}
		benchWriteState(b, be)
	})
}

func benchWriteState[K comparable](b *testing.B, be *Backend[K]) {
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
}

// BenchmarkValueAccess measures a read and a write of the current key's
// value with no snapshot in flight: the record path.
func BenchmarkValueAccess(b *testing.B) {
	be, s, names := benchBackend(b, 4096)
	kc := codec.String()
	groups := make([]int, len(names))
	for i, k := range names {
		groups[i] = groupOf(kc, k)
	}
	i := 0
	for b.Loop() {
		j := i % len(names)
		be.SetCurrentKey(names[j], groups[j])
		v, _ := s.Value()
		s.Update(v + 1)
		i++
	}
}

// BenchmarkListAdd measures Add to lists of 64 elements, with no snapshot
// in flight: amortized constant, no allocation per Add.
func BenchmarkListAdd(b *testing.B) {
	kc := codec.String()
	be := New(keygroup.Range{Start: 0, End: maxPar}, kc)
	s, err := NewListState(be, "l", codec.Int())
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 1024)
	groups := make([]int, len(names))
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
		groups[i] = groupOf(kc, names[i])
	}
	i := 0
	for b.Loop() {
		j := i % len(names)
		be.SetCurrentKey(names[j], groups[j])
		if i%(64*len(names)) < len(names) {
			s.Clear()
		}
		s.Add(i)
		i++
	}
}

// int64Backend returns a backend over [0, 128) with one int64 state holding
// the keys 0..keys-1, as in the checkpoint overhead benchmark
// (bench/checkpoint_test.go), and each key's key group.
func int64Backend(b *testing.B, keys int) (*Backend[int64], *ValueState[int64, int64], []int) {
	kc := codec.Int64()
	be := New(keygroup.Range{Start: 0, End: maxPar}, kc)
	s, err := NewValueState(be, "count", codec.Int64())
	if err != nil {
		b.Fatal(err)
	}
	groups := make([]int, keys)
	for k := range int64(keys) {
		groups[k] = groupOf(kc, k)
		be.SetCurrentKey(k, groups[k])
		s.Update(k)
	}
	return be, s, groups
}

// BenchmarkValueAccessLarge is BenchmarkValueAccess over 1M int64 keys in a
// random order: the record path of the keyed running count, whose table
// does not fit in the caches, so that every access misses them.
func BenchmarkValueAccessLarge(b *testing.B) {
	const keys = 1 << 20
	be, s, groups := int64Backend(b, keys)
	var x uint64 = 1
	for b.Loop() {
		x ^= x << 13 // xorshift: a random key without a table of them
		x ^= x >> 7
		x ^= x << 17
		k := int64(x % keys)
		be.SetCurrentKey(k, groups[k])
		v, _ := s.Value()
		s.Update(v + 1)
	}
}

// BenchmarkCopyOnWriteAll measures what copy-on-write costs one checkpoint
// of the keyed running count: after a snapshot of 1M int64 keys, one write
// to every key group (each copies its table).
func BenchmarkCopyOnWriteAll(b *testing.B) {
	const keys = 1_000_000
	be, s, groups := int64Backend(b, keys)
	perGroup := make([]int64, maxPar)
	for k, g := range groups {
		perGroup[g] = int64(k)
	}
	var id int64
	for b.Loop() {
		b.StopTimer()
		id++
		snap, _ := be.Snapshot(id)
		b.StartTimer()
		for g, k := range perGroup {
			be.SetCurrentKey(k, g)
			s.Update(id)
		}
		b.StopTimer()
		snap.Release()
		b.StartTimer()
	}
}
