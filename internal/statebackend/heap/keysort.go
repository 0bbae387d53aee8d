package heap

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// keySorter puts a key group's encoded entries in the canonical order of
// the snapshot format: increasing bytes.Compare order of their keys. It is
// the bulk of a snapshot's cost when done with a comparison sort over byte
// slices, so it sorts 8-byte big-endian chunks of the keys as integers
// instead: a least-significant-digit radix sort over the bytes of the
// chunk, skipping the digits every key shares (the high bytes of small
// integer keys), then the same again, 8 bytes further, for runs of keys
// whose chunks tie (keys longer than 8 bytes with a common prefix).
//
// A chunk is the key's bytes [off, off+8) padded with zero bytes, so
// comparing chunks as integers orders keys as bytes.Compare does, except
// that keys equal up to trailing zero bytes tie at every offset; those are
// left to bytes.Compare once no key of the run has bytes beyond off.
//
// The zero value is ready to use; it keeps its buffers between calls. It is
// not safe for concurrent use.
type keySorter struct {
	items  []sortItem
	tmp    []sortItem
	counts [8][256]uint32
}

// sortItem is one entry being sorted: the chunk of its key at the current
// offset and its index among the spans.
type sortItem struct {
	chunk uint64
	i     int
}

// radixMin is the length of a run below which a comparison sort is
// cheaper than clearing and filling the radix sort's digit counts.
const radixMin = 64

// sort returns the indexes of spans in increasing order of their keys,
// buf[sp.k:sp.v]. The result is valid until the next call.
func (ks *keySorter) sort(buf []byte, spans []span) []sortItem {
	ks.items = slices.Grow(ks.items[:0], len(spans))[:len(spans)]
	for i, sp := range spans {
		ks.items[i] = sortItem{chunk: chunkAt(buf[sp.k:sp.v], 0), i: i}
	}
	ks.tmp = slices.Grow(ks.tmp[:0], len(spans))[:len(spans)]
	ks.sortChunks(buf, spans, ks.items, 0)
	return ks.items
}

// chunkAt returns key[off:off+8] as a big-endian integer, the bytes past the
// key's end taken as zero.
func chunkAt(key []byte, off int) uint64 {
	if len(key) >= off+8 {
		return binary.BigEndian.Uint64(key[off:])
	}
	var b [8]byte
	if off < len(key) {
		copy(b[:], key[off:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// sortChunks sorts items, whose keys share their first off bytes (zero
// padded), by their chunks at off, then breaks ties.
func (ks *keySorter) sortChunks(buf []byte, spans []span, items []sortItem, off int) {
	if len(items) < radixMin {
		slices.SortFunc(items, func(a, b sortItem) int { return cmp.Compare(a.chunk, b.chunk) })
	} else {
		ks.radix(items)
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].chunk == items[i].chunk {
			j++
		}
		if j-i > 1 {
			ks.breakTies(buf, spans, items[i:j], off+8)
		}
		i = j
	}
}

// breakTies sorts run, whose keys share their first off bytes (zero
// padded).
func (ks *keySorter) breakTies(buf []byte, spans []span, run []sortItem, off int) {
	longest := 0
	for _, it := range run {
		longest = max(longest, spans[it.i].v-spans[it.i].k)
	}
	if len(run) < radixMin || longest <= off {
		key := func(it sortItem) []byte { sp := spans[it.i]; return buf[sp.k:sp.v] }
		slices.SortFunc(run, func(a, b sortItem) int { return bytes.Compare(key(a), key(b)) })
		return
	}
	for i := range run {
		sp := spans[run[i].i]
		run[i].chunk = chunkAt(buf[sp.k:sp.v], off)
	}
	ks.sortChunks(buf, spans, run, off)
}

// radix sorts items by chunk, least significant byte first, skipping the
// bytes in which all chunks agree. It uses ks.tmp as the second buffer and
// leaves the result in items.
func (ks *keySorter) radix(items []sortItem) {
	c := &ks.counts
	*c = [8][256]uint32{}
	for _, it := range items {
		x := it.chunk
		c[0][byte(x)]++
		c[1][byte(x>>8)]++
		c[2][byte(x>>16)]++
		c[3][byte(x>>24)]++
		c[4][byte(x>>32)]++
		c[5][byte(x>>40)]++
		c[6][byte(x>>48)]++
		c[7][byte(x>>56)]++
	}
	src, dst := items, ks.tmp[:len(items)]
	first := items[0].chunk
	for d := range 8 {
		shift := uint(8 * d)
		cd := &c[d]
		if cd[byte(first>>shift)] == uint32(len(items)) {
			continue // every chunk has this byte
		}
		var sum uint32
		for b := range cd {
			cd[b], sum = sum, sum+cd[b]
		}
		for _, it := range src {
			b := byte(it.chunk >> shift)
			dst[cd[b]] = it
			cd[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &items[0] {
		copy(items, src)
	}
}
