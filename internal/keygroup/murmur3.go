package keygroup

import (
	"encoding/binary"
	"math/bits"
)

// Hash returns the 32-bit MurmurHash3 (x86 variant) of b with seed 0.
//
// The hash is part of the persisted state format: it decides which key group,
// and so which state shard, a key lives in. It must never change.
func Hash(b []byte) uint32 {
	return murmur3(0, b)
}

// murmur3 is MurmurHash3_x86_32 from Austin Appleby's reference
// implementation. The seed is a parameter only so that tests can check the
// published vectors, most of which use a non-zero seed.
func murmur3(seed uint32, b []byte) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	n := len(b)
	for ; len(b) >= 4; b = b[4:] {
		k := binary.LittleEndian.Uint32(b)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}

	var k uint32
	switch len(b) {
	case 3:
		k ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(b[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}

	// The reference mixes in the length as a 32-bit int; longer inputs
	// wrap, as they do there.
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
