//go:build amd64 && !purego

package datagen

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vectorFill reports whether fillSeq uses fillSeqAVX2: decided once, at
// init, because the CPU does not change under a running process.
var vectorFill = cpu.X86.HasAVX2

// minVectorFill is the shortest run fillSeq hands to fillSeqAVX2. Below it
// the vector set-up (building four vectors of four records) costs about what
// it saves, and Sequence's batches are longer than this anyway.
const minVectorFill = 16

// fillSeqAVX2 sets the n int64s at dst to v, v+step, v+2*step, …, wrapping
// around as int64 arithmetic does: fillSeqGo four records to a 256-bit
// store. n must be >= 0 and the CPU must have AVX2.
//
//go:noescape
func fillSeqAVX2(dst *int64, n int, v, step int64)

// fillSeq sets buf[j] = v + j*step for every j, wrapping around as int64
// arithmetic does. The scalar loop is bound by stores (one record each, at
// most two a cycle); AVX2 writes four records a store.
func fillSeq(buf []int64, v, step int64) {
	if vectorFill && len(buf) >= minVectorFill {
		fillSeqAVX2(unsafe.SliceData(buf), len(buf), v, step)
		return
	}
	fillSeqGo(buf, v, step)
}
