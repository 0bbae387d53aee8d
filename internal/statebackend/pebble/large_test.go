package pebble

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// TestLargerThanMemory keeps a state many times larger than the memory the
// backend may use (a 1 MiB block cache and 256 KiB memtables: 1.5 MiB with
// the memtable being flushed) and reads every value back, in random order;
// a full snapshot then streams all of it. The values are random bytes, so
// compression cannot shrink the state.
//
// 60,000 keys × 500 bytes is 30 MB, 20 times that memory. (200,000 keys
// take about a minute where a system call costs 10-20 µs, as in a gVisor
// sandbox: with this little cache nearly every read goes to a file; set
// WEIR_PEBBLE_LARGE_KEYS to try more.)
func TestLargerThanMemory(t *testing.T) {
	keys, size := 60_000, 500
	if testing.Short() || raceEnabled {
		keys = 20_000 // 10 MB: still 6 times
	}
	if n, err := strconv.Atoi(os.Getenv("WEIR_PEBBLE_LARGE_KEYS")); err == nil {
		keys = n
	}
	const cache, memtable, writeCache = 1 << 20, 256 << 10, 64 << 10
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.Int64()
	b := newPebble(t, r, kc, Options{CacheSize: cache, MemTableSize: memtable, WriteCacheSize: writeCache})
	s, err := NewValueState(b, "blob", codec.Bytes())
	must(t, err)

	valueOf := func(dst []byte, k int64) []byte {
		rng := rand.New(rand.NewPCG(uint64(k), 7))
		dst = dst[:0]
		for len(dst) < size {
			dst = binary.LittleEndian.AppendUint64(dst, rng.Uint64())
		}
		return dst[:size]
	}
	start := time.Now()
	var v []byte
	for k := range int64(keys) {
		v = valueOf(v, k)
		set(b, kc, s, k, v)
	}
	wrote := time.Since(start)

	m := b.db.Metrics()
	onDisk := int64(m.DiskSpaceUsage())
	total := int64(keys * size)
	if onDisk < total*8/10 || onDisk < 6*(cache+2*memtable+writeCache) {
		t.Fatalf("%d bytes on disk for %d bytes of values: the state is not on disk", onDisk, total)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if int64(ms.HeapInuse) > total/2 {
		t.Errorf("Go heap in use is %d bytes for a %d-byte state", ms.HeapInuse, total)
	}

	start = time.Now()
	order := rand.New(rand.NewPCG(3, 4)).Perm(keys)
	for _, i := range order {
		k := int64(i)
		got, ok := get(b, kc, s, k)
		if !ok || !bytes.Equal(got, valueOf(v, k)) {
			t.Fatalf("key %d: %d bytes, present %v; want its %d bytes", k, len(got), ok, size)
		}
	}
	read := time.Since(start)

	start = time.Now()
	snap, err := b.Snapshot(1)
	must(t, err)
	h, err := snap.WriteState(io.Discard)
	snap.Release()
	must(t, err)
	if h.Size < total {
		t.Errorf("snapshot of %d bytes for %d bytes of values", h.Size, total)
	}
	t.Logf("%d keys × %d bytes: %d bytes on disk, Go heap %d MiB, cache %d KiB; write %v, random reads %v (%v/read), snapshot %v (%.0f MB/s); cache hits %d, misses %d",
		keys, size, onDisk, ms.HeapInuse>>20, cache>>10, wrote.Round(time.Millisecond), read.Round(time.Millisecond),
		(read / time.Duration(keys)).Round(100*time.Nanosecond), time.Since(start).Round(time.Millisecond),
		float64(h.Size)/time.Since(start).Seconds()/1e6, b.db.Metrics().BlockCache.Hits, b.db.Metrics().BlockCache.Misses)
}
