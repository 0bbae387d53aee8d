package datagen

import (
	"math"
	"testing"
)

// fillFuncs are the fill paths: fillSeq (vectorized where the CPU allows)
// and the scalar fillSeqGo.
var fillFuncs = []struct {
	name string
	fill func([]int64, int64, int64)
}{{"vector", fillSeq}, {"scalar", fillSeqGo}}

// fillSteps and fillStarts are the steps and first values the fill tests
// try: the small steps Sequence's splits use, and values at the ends of the
// int64 range, where v + j*step wraps around.
var (
	fillSteps  = []int64{0, 1, -1, 2, 3, -7, 1 << 40, math.MaxInt64, math.MinInt64, math.MaxInt64 / 3}
	fillStarts = []int64{0, 1, -5, math.MaxInt64, math.MaxInt64 - 5, math.MinInt64, math.MinInt64 + 3}
)

// TestFillSeq: both fill paths give v + j*step, wrapped as int64 arithmetic
// does, for every length around the unrolled stride and the vector
// threshold, on every platform.
func TestFillSeq(t *testing.T) {
	for _, v := range fillStarts {
		for _, step := range fillSteps {
			for n := range 70 {
				for _, f := range fillFuncs {
					buf := make([]int64, n)
					f.fill(buf, v, step)
					for j, got := range buf {
						if want := v + int64(j)*step; got != want {
							t.Fatalf("%s fill of %d records, v=%d, step=%d: buf[%d] = %d, want %d", f.name, n, v, step, j, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkSequenceFill fills a batch of the default size with each fill
// path and reports ns/record.
func BenchmarkSequenceFill(b *testing.B) {
	buf := make([]int64, DefaultBatchSize)
	for _, f := range fillFuncs {
		b.Run(f.name, func(b *testing.B) {
			if f.name == "vector" && !vectorFill {
				b.Skip("no vector fill on this CPU or in this build")
			}
			for b.Loop() {
				f.fill(buf, 7, 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/DefaultBatchSize, "ns/record")
		})
	}
}
