//go:build amd64 && !purego

package datagen

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// fillGuard is how many elements around a filled run checkFillAVX2 checks
// are left alone: more than one vector's worth on each side.
const fillGuard = 8

// checkFillAVX2 fills n records with fillSeqAVX2 at element off of a larger
// slice (so at every alignment within a vector for off in 0..7) and compares
// the whole slice with the same slice filled by fillSeqGo: the run must hold
// the same records and the guard elements around it must be untouched.
func checkFillAVX2(t *testing.T, n, off int, v, step int64) {
	t.Helper()
	got := make([]int64, off+n+fillGuard)
	want := make([]int64, len(got))
	for i := range got {
		// Guard values no short run of a small step produces.
		got[i] = math.MinInt64/2 + 0x6b6b*int64(i)
		want[i] = got[i]
	}
	fillSeqGo(want[off:off+n], v, step)
	fillSeqAVX2(unsafe.SliceData(got[off:]), n, v, step)
	for i := range got {
		if got[i] != want[i] {
			where := "in the run"
			if i < off || i >= off+n {
				where = "a guard element, outside the run"
			}
			t.Fatalf("fillSeqAVX2(%d records at offset %d, v=%d, step=%d): element %d (%s) = %d, want %d", n, off, v, step, i, where, got[i], want[i])
		}
	}
}

func skipWithoutAVX2(t *testing.T) {
	if !vectorFill {
		t.Skip("the CPU has no AVX2")
	}
}

// TestFillSeqAVX2 compares fillSeqAVX2 with fillSeqGo for every length up to
// 200 and a few long ones, at every offset within a vector, for steps and
// first values that make the sequence wrap around.
func TestFillSeqAVX2(t *testing.T) {
	skipWithoutAVX2(t)
	lengths := []int{1024, 4099}
	for n := range 201 {
		lengths = append(lengths, n)
	}
	for _, v := range fillStarts {
		for _, step := range fillSteps {
			for _, n := range lengths {
				for off := range 8 {
					checkFillAVX2(t, n, off, v, step)
				}
			}
		}
	}
}

// TestFillSeqAVX2Random is the same comparison for random lengths, offsets,
// first values and steps; values are drawn often from near the ends of the
// int64 range and near zero, where mistakes in wrapping or sign would show.
func TestFillSeqAVX2Random(t *testing.T) {
	skipWithoutAVX2(t)
	r := rand.New(rand.NewPCG(7, 8))
	value := func() int64 {
		switch r.IntN(4) {
		case 0:
			return math.MaxInt64 - r.Int64N(64)
		case 1:
			return math.MinInt64 + r.Int64N(64)
		case 2:
			return r.Int64N(128) - 64
		default:
			return int64(r.Uint64())
		}
	}
	for range 5000 {
		checkFillAVX2(t, r.IntN(300), r.IntN(8), value(), value())
	}
}

// FuzzFillSeqAVX2 is the comparison for inputs the fuzzer picks (go test
// -fuzz FuzzFillSeqAVX2); the seeds run with every go test.
func FuzzFillSeqAVX2(f *testing.F) {
	f.Add(uint16(0), uint8(0), int64(0), int64(1))
	f.Add(uint16(17), uint8(3), int64(math.MaxInt64), int64(1))
	f.Add(uint16(31), uint8(5), int64(math.MinInt64), int64(-1))
	f.Add(uint16(100), uint8(7), int64(-3), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, n uint16, off uint8, v, step int64) {
		skipWithoutAVX2(t)
		checkFillAVX2(t, int(n%5000), int(off%8), v, step)
	})
}
