package weir_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/state"
)

// countIdx counts records.
type countIdx struct{}

func (countIdx) CreateAccumulator() int64     { return 0 }
func (countIdx) Add(_ int64, acc int64) int64 { return acc + 1 }
func (countIdx) GetResult(acc int64) int64    { return acc }
func (countIdx) Merge(a, b int64) int64       { return a + b }

// windowCount emits "key [start, end) n".
type windowCount struct{}

func (windowCount) Process(ctx *weir.WindowContext[string, weir.TimeWindow], n []int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s %v %d", ctx.CurrentKey(), ctx.Window(), n[0]))
	return nil
}

// windowCounts is the expected output of windowCount: windows(i) are the
// windows of the index i (event time i*10 ms).
func windowCounts(n int64, key func(int64) string, windows func(ts int64) []weir.TimeWindow) func() []string {
	return func() []string {
		type wk struct {
			k string
			w weir.TimeWindow
		}
		counts := map[wk]int64{}
		var order []wk
		for i := range n {
			for _, w := range windows(i * 10) {
				k := wk{key(i), w}
				if counts[k] == 0 {
					order = append(order, k)
				}
				counts[k]++
			}
		}
		var out []string
		for _, k := range order {
			out = append(out, fmt.Sprintf("%s %v %d", k.k, k.w, counts[k]))
		}
		return out
	}
}

// TestWindowsExactlyOnce runs every event-time window kind in the
// exactly-once harness: tasks fail and restart from checkpoints holding
// window contents, timers and session window sets, and the committed
// output must be exactly the expected windows.
func TestWindowsExactlyOnce(t *testing.T) {
	const n = 3000
	count := state.AggregateFunction[int64, int64, int64](countIdx{})
	describe := weir.ProcessWindowFunction[string, int64, string, weir.TimeWindow](windowCount{})
	sessionKey := func(i int64) string { return harnessKey(i / 10) }
	tests := []struct {
		name  string
		build func(in *weir.Stream[int64]) *weir.Stream[string]
		want  func() []string
	}{
		{"tumbling", func(in *weir.Stream[int64]) *weir.Stream[string] {
			return in.KeyBy(harnessKey).Window(weir.TumblingEventTimeWindows(time.Second)).AggregateProcess("w", count, describe)
		}, windowCounts(n, harnessKey, func(ts int64) []weir.TimeWindow {
			return []weir.TimeWindow{{Start: ts / 1000 * 1000, End: ts/1000*1000 + 1000}}
		})},
		{"sliding sliced", func(in *weir.Stream[int64]) *weir.Stream[string] {
			return in.KeyBy(harnessKey).Window(weir.SlidingEventTimeWindows(time.Second, 200*time.Millisecond)).
				Aggregate("w", count).Process("describe", weir.ProcessFunction[int64, string](slidingCount{}))
		}, windowCountsNoKey(n, 1000, 200)},
		{"sliding per window", func(in *weir.Stream[int64]) *weir.Stream[string] {
			return in.KeyBy(harnessKey).Window(weir.SlidingEventTimeWindows(time.Second, 200*time.Millisecond)).DisableSlicing().
				Aggregate("w", count).Process("describe", weir.ProcessFunction[int64, string](slidingCount{}))
		}, windowCountsNoKey(n, 1000, 200)},
		{"session", func(in *weir.Stream[int64]) *weir.Stream[string] {
			return in.KeyBy(sessionKey).Window(weir.EventTimeSessionWindows(50*time.Millisecond)).Process("w", weir.ProcessWindowFunction[string, int64, string, weir.TimeWindow](sessionCount{}))
		}, func() []string {
			// Runs of 10 indexes of one key, 10 ms apart: one session each.
			var out []string
			for r := range int64(n / 10) {
				out = append(out, fmt.Sprintf("%s [%d, %d) 10", sessionKey(r*10), r*100, r*100+140))
			}
			return out
		}},
		{"global count", func(in *weir.Stream[int64]) *weir.Stream[string] {
			return in.KeyBy(harnessKey).Window(weir.GlobalWindows()).Trigger(weir.PurgingTrigger(weir.CountTrigger[int64, weir.GlobalWindow](7))).
				AggregateProcess("w", count, weir.ProcessWindowFunction[string, int64, string, weir.GlobalWindow](globalCount{}))
		}, func() []string {
			counts := map[string]int{}
			for i := range int64(n) {
				counts[harnessKey(i)]++
			}
			var out []string
			for k, c := range counts {
				for range c / 7 {
					out = append(out, k+" 7")
				}
			}
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runTimeHarness(t, timeHarness{records: n, build: tt.build, want: tt.want}, 4)
		})
	}
}

// slidingCount formats a window count with its window, from its timestamp
// (the window's max timestamp; windows of 1 s).
type slidingCount struct{}

func (slidingCount) ProcessElement(ctx *weir.Context, n int64, out weir.Collector[string]) error {
	ts, _ := ctx.Timestamp()
	out.Collect(fmt.Sprintf("%v %d", weir.TimeWindow{Start: ts + 1 - 1000, End: ts + 1}, n))
	return nil
}

// windowCountsNoKey is the expected output of slidingCount: windows of
// size every slide, per key (the keys do not show).
func windowCountsNoKey(n, size, slide int64) func() []string {
	return func() []string {
		type wk struct {
			k string
			w weir.TimeWindow
		}
		counts := map[wk]int64{}
		for i := range n {
			ts := i * 10
			for s := ts - ts%slide; s > ts-size; s -= slide {
				counts[wk{harnessKey(i), weir.TimeWindow{Start: s, End: s + size}}]++
			}
		}
		var out []string
		for k, c := range counts {
			out = append(out, fmt.Sprintf("%v %d", k.w, c))
		}
		return out
	}
}

type sessionCount struct{}

func (sessionCount) Process(ctx *weir.WindowContext[string, weir.TimeWindow], elems []int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s %v %d", ctx.CurrentKey(), ctx.Window(), len(elems)))
	return nil
}

type globalCount struct{}

func (globalCount) Process(ctx *weir.WindowContext[string, weir.GlobalWindow], n []int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s %d", ctx.CurrentKey(), n[0]))
	return nil
}
