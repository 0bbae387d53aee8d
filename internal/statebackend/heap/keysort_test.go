package heap

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
)

// checkKeySort sorts keys with a keySorter (twice, to reuse its buffers)
// and fails unless the order is bytes.Compare's.
func checkKeySort(t *testing.T, ks *keySorter, keys [][]byte) {
	t.Helper()
	var buf []byte
	var spans []span
	for i, k := range keys {
		// Values between keys, so that a sort reading past a key's end
		// would see them.
		sp := span{k: len(buf)}
		buf = append(buf, k...)
		sp.v = len(buf)
		buf = fmt.Appendf(buf, "v%d", i)
		sp.end = len(buf)
		spans = append(spans, sp)
	}
	want := slices.Clone(keys)
	slices.SortStableFunc(want, bytes.Compare)
	for pass := range 2 {
		order := ks.sort(buf, spans)
		if len(order) != len(keys) {
			t.Fatalf("pass %d: sorted %d of %d keys", pass, len(order), len(keys))
		}
		seen := make([]bool, len(keys))
		for j, it := range order {
			if seen[it.i] {
				t.Fatalf("pass %d: index %d twice in the order", pass, it.i)
			}
			seen[it.i] = true
			sp := spans[it.i]
			if got := buf[sp.k:sp.v]; !bytes.Equal(got, want[j]) {
				t.Fatalf("pass %d: position %d of %d: key %x, want %x", pass, j, len(keys), got, want[j])
			}
		}
	}
}

func int64Keys(xs ...int64) [][]byte {
	var keys [][]byte
	for _, x := range xs {
		keys = append(keys, codec.Int64().Append(nil, x))
	}
	return keys
}

func TestKeySorter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randInt64s := func(n int, bound int64) [][]byte { // in [-bound, bound); 0: any int64
		var xs []int64
		for range n {
			x := int64(rng.Uint64())
			if bound > 0 {
				x = rng.Int64N(2*bound) - bound
			}
			xs = append(xs, x)
		}
		return int64Keys(xs...)
	}
	strs := func(n int, format string) [][]byte {
		var keys [][]byte
		for i := range n {
			keys = append(keys, codec.String().Append(nil, fmt.Sprintf(format, rng.IntN(n*4), i)))
		}
		return keys
	}
	randBytes := func(n, maxLen int, alphabet string) [][]byte {
		var keys [][]byte
		for range n {
			k := make([]byte, rng.IntN(maxLen+1))
			for j := range k {
				k[j] = alphabet[rng.IntN(len(alphabet))]
			}
			keys = append(keys, k)
		}
		return keys
	}
	// trailingZeros gives keys that differ only in their number of
	// trailing zero bytes, which tie at every chunk.
	trailingZeros := func(n int, stem string) [][]byte {
		var keys [][]byte
		for i := range n {
			keys = append(keys, append([]byte(stem), make([]byte, i)...))
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		return keys
	}
	tests := []struct {
		name string
		keys [][]byte
	}{
		{"empty", nil},
		{"one", int64Keys(7)},
		{"small int64", int64Keys(5, -3, 0, 9, 1<<40, -1<<62)},
		{"int64 below radixMin", randInt64s(radixMin-1, 1<<20)},
		{"int64 at radixMin", randInt64s(radixMin, 1<<20)},
		{"int64 small range", randInt64s(5000, 1000)},
		{"int64 full range", randInt64s(5000, 0)},
		{"int64 consecutive", int64Keys(slices.Collect(func(yield func(int64) bool) {
			for i := range int64(3000) {
				if !yield(3000 - i) {
					return
				}
			}
		})...)},
		{"strings sharing 8-byte prefixes", strs(3000, "key-%07d-%d")},
		{"strings sharing 16-byte prefixes", strs(3000, "a-rather-long-common-prefix-%d/%d")},
		{"short keys and prefixes of each other", randBytes(3000, 5, "ab\x00")},
		{"binary keys of up to 24 bytes", randBytes(3000, 24, "\x00\x01\xfe\xff")},
		{"trailing zeros, small run", trailingZeros(10, "k")},
		{"trailing zeros, long run", trailingZeros(300, "key")},
		{"trailing zeros after 8 bytes", trailingZeros(300, "0123456789")},
		{"empty key among others", append(randBytes(200, 3, "\x00a"), []byte{})},
	}
	var ks keySorter // shared: buffers carry over between cases
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkKeySort(t, &ks, tc.keys) })
	}
}

func FuzzKeySorter(f *testing.F) {
	f.Add([]byte("\x03abc\x00\x01a\x08aaaaaaaab"), uint8(0))
	f.Add([]byte("\x00\x01\x00\x02\x00\x00"), uint8(radixMin))
	f.Fuzz(func(t *testing.T, data []byte, repeat uint8) {
		// data is a sequence of (length, bytes) keys; repeat copies of
		// each, with a distinguishing suffix, make long tie runs.
		var keys [][]byte
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			k := data[1 : 1+n]
			data = data[1+n:]
			keys = append(keys, k)
			for r := range int(repeat) % 100 {
				keys = append(keys, append(slices.Clone(k), byte(r)))
			}
		}
		var ks keySorter
		checkKeySort(t, &ks, keys)
	})
}
