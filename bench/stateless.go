package bench

import (
	"context"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/adapt"
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

// Profile-guided optimization: bench/default.pgo is a CPU profile of the
// weir side of BenchmarkStatelessChain only (pprof -focus on the source
// driver, so that the baselines compile the same with or without it). With
// it, the compiler turns the hot calls through function values in the
// batch loops (Scale and NotFifth in the fused map→filter pass,
// mapOp.emitFiltered; the sink's WriteBatch) into guarded direct calls and
// inlines them. go test applies
// -pgo=auto only to main packages, so the profile must be named:
//
//	go test -run '^$' -bench BenchmarkStatelessChain -benchtime 1x -pgo=bench/default.pgo ./bench/
//
// Regenerate it after changing the operators or the workload (the
// benchmark's own flags go after the package: before it, go test takes an
// unknown flag as the end of its own and tests the current directory):
//
//	go test -run '^$' -bench BenchmarkStatelessChain -benchtime 1x -pgo=off -cpuprofile /tmp/stateless.prof ./bench/ -stateless.rounds=15
//	go tool pprof -proto -focus 'sourceDriver' /tmp/stateless.prof > bench/default.pgo

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

// RandomHalf keeps about half the records, as a hash of the record
// decides: answers no branch predictor learns.
func RandomHalf(v int64) bool {
	x := uint64(v) // murmur3's 64-bit finalizer
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x>>63 == 0
}

// RunFilterLoop runs source → filter(keep) → sink over 0..n-1 with
// parallelism 1 and the filter's loop forced to loop
// (adapt.ForceFilterLoop, adaptive again afterwards), and returns the sum
// of what was kept.
func RunFilterLoop(ctx context.Context, n int64, keep func(int64) bool, loop string) (int64, error) {
	if err := adapt.ForceFilterLoop(loop); err != nil {
		return 0, err
	}
	defer adapt.ForceFilterLoop("")
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	sink := new(SumSink)
	env.FromSource("numbers", datagen.Sequence(0, n-1)).Filter("keep", keep).SinkTo("sum", sink)
	if err := env.Execute(ctx, "bench-filter-loop"); err != nil {
		return 0, err
	}
	return sink.Sum(), nil
}
