package pebble

// writtenFilter is a growable Bloom filter of the database keys the write
// cache has written back to the database (cache.go). While the database
// holds nothing else of the cached states — the backend was never
// restored — a key the filter has never seen is absent from the database,
// so a cache miss on it (a new key, as most of the distinct bidders and
// auctions of Nexmark q16 and the new (bidder, auction) pairs of q18 are)
// needs no database read: a pebble point read of an absent key still
// seeks the memtable and consults every level's filter and index.
//
// It grows by layers: each holds up to its capacity at about 1% false
// positives (10 bits and 7 probes a key), and the next is four times as
// large. A key may be in any layer; deletions are not removed (a deleted
// key reads as maybe present, and the database answers).
//
// The filter is blocked: a key's 7 bits all lie in one 512-bit block (a
// cache line), so adding or looking up a key costs one cache miss per
// layer instead of up to 7. Past the cache's budget every key it sees is
// usually new, so this filter is consulted on most accesses (6% of q16's
// time with unblocked layers that doubled, BENCHMARKS.md §7d).
//
// It takes the keys' 64-bit hashes (the write cache's, which it computes
// anyway), not the keys.
type writtenFilter struct {
	firstKeys int // capacity of the first layer
	layers    []bloomLayer
}

type bloomLayer struct {
	blocks   [][8]uint64
	mask     uint64 // number of blocks - 1 (a power of two)
	n, limit int
}

const (
	filterFirstKeys = 1 << 14
	filterGrowth    = 4
	filterBitsPer   = 10
	filterProbes    = 7
)

// newWrittenFilter returns an empty filter whose first layer holds
// firstKeys keys (at least filterFirstKeys): the write cache sizes it by
// its budget, since it writes back about as many keys as it holds before
// most lookups miss it, and every layer costs a lookup of an absent key one
// cache miss.
func newWrittenFilter(firstKeys int) *writtenFilter {
	return &writtenFilter{firstKeys: max(firstKeys, filterFirstKeys)}
}

func newBloomLayer(keys int) bloomLayer {
	nblocks := uint64(1)
	for nblocks*512 < uint64(keys*filterBitsPer) {
		nblocks <<= 1
	}
	return bloomLayer{blocks: make([][8]uint64, nblocks), mask: nblocks - 1, limit: keys}
}

// probes returns the block of a key's hash h in l and the bits within the
// block: 7 positions of 9 bits, from a mix of h independent of the bits
// that chose the block.
func (l *bloomLayer) probes(h uint64) (block *[8]uint64, bits uint64) {
	return &l.blocks[h&l.mask], mix64(h)
}

// mix64 is the finalizer of SplitMix64, a bijection that spreads every bit
// of x over the result.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// add records the key of hash h.
func (f *writtenFilter) add(h uint64) {
	if len(f.layers) == 0 || f.layers[len(f.layers)-1].n >= f.layers[len(f.layers)-1].limit {
		keys := f.firstKeys
		if len(f.layers) > 0 {
			keys = filterGrowth * f.layers[len(f.layers)-1].limit
		}
		f.layers = append(f.layers, newBloomLayer(keys))
	}
	l := &f.layers[len(f.layers)-1]
	block, bits := l.probes(h)
	for range filterProbes {
		b := bits & 511
		block[b>>6] |= 1 << (b & 63)
		bits >>= 9
	}
	l.n++
}

// mayContain reports whether the key of hash h may have been added; false
// is certain.
func (f *writtenFilter) mayContain(h uint64) bool {
	for i := len(f.layers) - 1; i >= 0; i-- { // the largest layer holds most keys
		block, bits := f.layers[i].probes(h)
		found := true
		for range filterProbes {
			b := bits & 511
			if block[b>>6]&(1<<(b&63)) == 0 {
				found = false
				break
			}
			bits >>= 9
		}
		if found {
			return true
		}
	}
	return false
}
