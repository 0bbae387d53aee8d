package pebble

import "hash/maphash"

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
// positives (10 bits and 7 probes a key), and the next is twice as large.
// A key may be in any layer; deletions are not removed (a deleted key
// reads as maybe present, and the database answers).
type writtenFilter struct {
	seed   maphash.Seed
	layers []bloomLayer
}

type bloomLayer struct {
	bits     []uint64
	mask     uint64 // number of bits - 1 (a power of two)
	n, limit int
}

const (
	filterFirstKeys = 1 << 14
	filterBitsPer   = 10
	filterProbes    = 7
)

func newWrittenFilter() *writtenFilter { return &writtenFilter{seed: maphash.MakeSeed()} }

func newBloomLayer(keys int) bloomLayer {
	nbits := uint64(64)
	for nbits < uint64(keys*filterBitsPer) {
		nbits <<= 1
	}
	return bloomLayer{bits: make([]uint64, nbits/64), mask: nbits - 1, limit: keys}
}

// add records key.
func (f *writtenFilter) add(key []byte) {
	if len(f.layers) == 0 || f.layers[len(f.layers)-1].n >= f.layers[len(f.layers)-1].limit {
		keys := filterFirstKeys
		if len(f.layers) > 0 {
			keys = 2 * f.layers[len(f.layers)-1].limit
		}
		f.layers = append(f.layers, newBloomLayer(keys))
	}
	l := &f.layers[len(f.layers)-1]
	h := maphash.Bytes(f.seed, key)
	h1, h2 := h, h>>32|1
	for range filterProbes {
		b := h1 & l.mask
		l.bits[b>>6] |= 1 << (b & 63)
		h1 += h2
	}
	l.n++
}

// mayContain reports whether key may have been added; false is certain.
func (f *writtenFilter) mayContain(key []byte) bool {
	h := maphash.Bytes(f.seed, key)
	for i := range f.layers {
		l := &f.layers[i]
		h1, h2 := h, h>>32|1
		found := true
		for range filterProbes {
			b := h1 & l.mask
			if l.bits[b>>6]&(1<<(b&63)) == 0 {
				found = false
				break
			}
			h1 += h2
		}
		if found {
			return true
		}
	}
	return false
}
