package pebble

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestListMergerMatchesPebbleDefault checks that listMerger joins random
// sequences of newer and older operands exactly as pebble's default merger
// does (the two share a name, so a database may meet either).
func TestListMergerMatchesPebbleDefault(t *testing.T) {
	if listMerger.Name != pebble.DefaultMerger.Name {
		t.Fatalf("listMerger is named %q, pebble's default %q: existing databases would not open", listMerger.Name, pebble.DefaultMerger.Name)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	operand := func() []byte {
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for trial := range 2000 {
		first := operand()
		ops := make([][]byte, rng.IntN(12))
		newer := make([]bool, len(ops))
		for i := range ops {
			ops[i], newer[i] = operand(), rng.IntN(2) == 0
		}
		got := mergeAll(t, listMerger, first, ops, newer)
		want := mergeAll(t, pebble.DefaultMerger, first, ops, newer)
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d: listMerger gave %x, pebble's default %x (first %x, operands %x, newer %v)", trial, got, want, first, ops, newer)
		}
	}
}

func mergeAll(t *testing.T, m *pebble.Merger, first []byte, ops [][]byte, newer []bool) []byte {
	vm, err := m.Merge(nil, bytes.Clone(first))
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		op = bytes.Clone(op)
		if newer[i] {
			err = vm.MergeNewer(op)
		} else {
			err = vm.MergeOlder(op)
		}
		if err != nil {
			t.Fatal(err)
		}
		clear(op) // the caller keeps ownership: the merger must have copied
	}
	out, closer, err := vm.Finish(true)
	if err != nil || closer != nil {
		t.Fatalf("Finish: %v, closer %v", err, closer)
	}
	return bytes.Clone(out)
}

// BenchmarkListMergerHotList merges the chunks of a list that grew by n
// Adds, newest first, as a read or a compaction does.
func BenchmarkListMergerHotList(b *testing.B) {
	chunk := appendChunk(nil, 1, make([]byte, 40))
	for _, n := range []int{10, 1000} {
		for _, m := range []*pebble.Merger{listMerger, pebble.DefaultMerger} {
			name := "weir"
			if m == pebble.DefaultMerger {
				name = "pebble-default"
			}
			b.Run(fmt.Sprintf("%s/chunks=%d", name, n), func(b *testing.B) {
				for b.Loop() {
					vm, _ := m.Merge(nil, chunk)
					for range n - 1 {
						_ = vm.MergeOlder(chunk)
					}
					_, _, _ = vm.Finish(true)
				}
			})
		}
	}
}
