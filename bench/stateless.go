package bench

import (
	"context"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
)

// Scale is the map function of the stateless chain.
func Scale(v int64) int64 { return v*3 + 1 }

// NotFifth is the filter function of the stateless chain: it keeps four
// records in five.
func NotFifth(v int64) bool { return v%5 != 0 }

// StatelessBaseline is the hand-written loop that the stateless chain is
// measured against: it generates 0..n-1 as datagen.Sequence does, applies
// Scale and NotFifth and sums what is kept, as SumSink does. The compiler
// inlines both functions, as it would in any hand-written loop.
func StatelessBaseline(n int64) int64 {
	var sum int64
	for i := range n {
		v := Scale(i)
		if NotFifth(v) {
			sum += v
		}
	}
	return sum
}

// StatelessBaselineIndirect is StatelessBaseline calling the functions
// through function values, as an engine must: the difference between the
// two is the price of not inlining user code, which no record-at-a-time
// engine avoids. It is kept from being inlined, which would let the
// compiler see the functions again.
//
//go:noinline
func StatelessBaselineIndirect(n int64, gen func(int64) int64, mapFn func(int64) int64, keep func(int64) bool) int64 {
	var sum int64
	for i := range n {
		v := mapFn(gen(i))
		if keep(v) {
			sum += v
		}
	}
	return sum
}

// RunStateless runs source → map → filter → sink over the numbers 0..n-1
// with parallelism 1 (everything chained into one task) and returns the sum
// of what reached the sink, which equals StatelessBaseline(n).
func RunStateless(ctx context.Context, n int64, opts weir.Options) (int64, error) {
	opts.Parallelism = 1
	env := weir.NewEnvironment(opts)
	sink := new(SumSink)
	env.FromSource("numbers", datagen.Sequence(0, n-1)).
		Map("scale", Scale).
		Filter("not-fifth", NotFifth).
		SinkTo("sum", sink)
	if err := env.Execute(ctx, "bench-stateless"); err != nil {
		return 0, err
	}
	return sink.Sum(), nil
}
