package keygroup

import (
	"strings"
	"testing"
)

// The expected values were computed with MurmurHash3_x86_32 from
// aappleby/smhasher (compiled from src/MurmurHash3.cpp); the seeded ones are
// also the vectors commonly published for the algorithm.
func TestMurmur3Vectors(t *testing.T) {
	tests := []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0x00000000},
		{"", 1, 0x514e28b7},
		{"", 0xffffffff, 0x81f16f39},
		{"\x00\x00\x00\x00", 0, 0x2362f9de},
		{"\xff\xff\xff\xff", 0, 0x76293b50},
		{"\x21\x43\x65\x87", 0, 0xf55b516b},
		{"a", 0, 0x3c2569b2},
		{"aa", 0, 0x371091a9},
		{"aaa", 0, 0xb4d05fb7},
		{"aaaa", 0, 0x7eeed987},
		{"abc", 0, 0xb3dd93fa},
		{"abcd", 0, 0x43ed676a},
		{"abcde", 0, 0xe89b9af6},
		{"hello", 0, 0x248bfa47},
		{"0123456789", 0, 0x70b9a121},
		{"Hello, world!", 0, 0xc0363e43},
		{"Hello, world!", 1234, 0xfaf6cdb3},
		{"The quick brown fox jumps over the lazy dog", 0, 0x2e4ff723},
		{"The quick brown fox jumps over the lazy dog", 0x9747b28c, 0x2fa826cd},
	}
	for _, tc := range tests {
		if got := murmur3(tc.seed, []byte(tc.in)); got != tc.want {
			t.Errorf("murmur3(%#x, %q) = %#08x, want %#08x", tc.seed, tc.in, got, tc.want)
		}
	}
}

func TestHashIsSeedZero(t *testing.T) {
	tests := []string{"", "a", "abcd", "abcde", strings.Repeat("x", 1000)}
	for _, in := range tests {
		if got, want := Hash([]byte(in)), murmur3(0, []byte(in)); got != want {
			t.Errorf("Hash(%q) = %#08x, want murmur3(0, ...) = %#08x", in, got, want)
		}
	}
}
