package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

var (
	windowRecords = flag.Int64("win.records", 1_000_000, "records per window benchmark run")
	windowKeys    = flag.Int64("win.keys", 100, "keys of the window benchmarks")
	windowCases   = flag.String("win.cases", "", "comma-separated window cases to run (tumbling, sliding-sliced, sliding-per-window, session; empty: all), e.g. to profile one")
)

type winCount struct{}

func (winCount) CreateAccumulator() int64     { return 0 }
func (winCount) Add(_ int64, acc int64) int64 { return acc + 1 }
func (winCount) GetResult(acc int64) int64    { return acc }
func (winCount) Merge(a, b int64) int64       { return a + b }

// runWindowCount counts the records per key in the windows of assigner
// (event time: record i at i ms, so 1M records span 1000 s) and returns
// the sum of all window counts and the wall time.
func runWindowCount(b *testing.B, backend string, n, keys int64, window func(*weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow]) (int64, time.Duration) {
	b.Helper()
	opts := backendOptions(2, backend, b.TempDir())
	env := weir.NewEnvironment(opts)
	sink := &SumSink{}
	strategy := weir.ForMonotonousTimestamps[int64]().WithTimestampAssigner(func(i int64, _ int64) int64 { return i })
	src := env.FromSource("src", datagen.Generator(n, func(i int64) int64 { return i }), strategy).Parallelism(1)
	window(src.KeyBy(func(i int64) int64 { return (i * 7919) % keys })).
		Aggregate("count", state.AggregateFunction[int64, int64, int64](winCount{})).
		SinkTo("sum", sink)
	start := time.Now()
	if err := env.Execute(context.Background(), "windows"); err != nil {
		b.Fatal(err)
	}
	return sink.Sum(), time.Since(start)
}

// BenchmarkWindows reports events/s of a tumbling 10 s count per key, a
// sliding 10 s / 2 s count per key sliced and with one state per window
// (and their ratio, measured in the same run), and a 10 s-gap session
// count, on the heap and on the pebble backend (sub-benchmarks heap and
// pebble: -bench BenchmarkWindows/pebble runs one).
func BenchmarkWindows(b *testing.B) {
	for _, backend := range []string{"heap", "pebble"} {
		b.Run(backend, func(b *testing.B) { benchmarkWindows(b, backend) })
	}
}

func benchmarkWindows(b *testing.B, backend string) {
	n, keys := *windowRecords, *windowKeys
	cases := []struct {
		name   string
		window func(*weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow]
		total  int64 // the sum of all window counts: records × windows per record
	}{
		{"tumbling", func(k *weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow] {
			return k.Window(weir.TumblingEventTimeWindows(10 * time.Second))
		}, n},
		{"sliding-sliced", func(k *weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow] {
			return k.Window(weir.SlidingEventTimeWindows(10*time.Second, 2*time.Second))
		}, 5 * n},
		{"sliding-per-window", func(k *weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow] {
			return k.Window(weir.SlidingEventTimeWindows(10*time.Second, 2*time.Second)).DisableSlicing()
		}, 5 * n},
		{"session", func(k *weir.KeyedStream[int64, int64]) *weir.WindowedStream[int64, int64, weir.TimeWindow] {
			return k.Window(weir.EventTimeSessionWindows(10 * time.Second))
		}, n},
	}
	run := func(name string) bool {
		return *windowCases == "" || slices.Contains(strings.Split(*windowCases, ","), name)
	}
	elapsed := make([]time.Duration, len(cases))
	for range b.N {
		for i, c := range cases {
			if !run(c.name) {
				continue
			}
			got, d := runWindowCount(b, backend, n, keys, c.window)
			// Every record is in 5 sliding windows (windows at the edges
			// hold fewer records, but every record has its 5).
			if got != c.total {
				b.Fatalf("%s: window counts sum to %d, want %d", c.name, got, c.total)
			}
			elapsed[i] += d
		}
	}
	b.ReportMetric(0, "ns/op")
	for i, c := range cases {
		if run(c.name) {
			b.ReportMetric(float64(n)*float64(b.N)/elapsed[i].Seconds(), fmt.Sprint(c.name, "-events/s"))
		}
	}
	if run(cases[1].name) && run(cases[2].name) {
		b.ReportMetric(elapsed[2].Seconds()/elapsed[1].Seconds(), "sliced/per-window")
	}
}
