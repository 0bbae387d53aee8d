package weir_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// ev is a keyed event at event time TS with a value.
type ev struct {
	Key string
	TS  int64
	V   int64
}

func evTS(e ev) int64   { return e.TS }
func evKey(e ev) string { return e.Key }
func sumV(a, b ev) ev   { return ev{Key: a.Key, TS: max(a.TS, b.TS), V: a.V + b.V} }

// countAgg counts records.
type countAgg struct{}

func (countAgg) CreateAccumulator() int64  { return 0 }
func (countAgg) Add(_ ev, acc int64) int64 { return acc + 1 }
func (countAgg) GetResult(acc int64) int64 { return acc }
func (countAgg) Merge(a, b int64) int64    { return a + b }

// describeWindow emits "key [start, end) n=count sum=sum" for each window.
type describeWindow struct{}

func (describeWindow) Process(ctx *weir.WindowContext[string, weir.TimeWindow], elems []ev, out weir.Collector[string]) error {
	var sum int64
	for _, e := range elems {
		sum += e.V
		if e.TS < ctx.Window().Start || e.TS >= ctx.Window().End {
			return fmt.Errorf("record at %d in window %v", e.TS, ctx.Window())
		}
	}
	if ts, _ := ctx.Timestamp(); ts != ctx.Window().MaxTimestamp() {
		return fmt.Errorf("window %v emits at %d", ctx.Window(), ts)
	}
	out.Collect(fmt.Sprintf("%s %v n=%d sum=%d", ctx.CurrentKey(), ctx.Window(), len(elems), sum))
	return nil
}

// runWindows runs events (in this order, one source split) through build
// and returns the sorted output.
func runWindows[OUT any](t *testing.T, events []ev, lag int64, build func(*weir.Stream[ev]) *weir.Stream[OUT], format func(OUT) string) []string {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	sink := collect.New[OUT]()
	build(env.FromSource("events", datagen.FromSlice(events), punctuatedStrategy(lag, evTS)).Parallelism(1)).SinkTo("out", sink)
	run(t, env)
	var got []string
	for _, r := range sink.Results() {
		got = append(got, format(r))
	}
	slices.Sort(got)
	return got
}

func wantSorted(xs ...string) []string { return slices.Sorted(slices.Values(xs)) }

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// outOfOrder is input late by up to 5 ms within its keys.
var outOfOrder = []ev{
	{"a", 3, 1}, {"b", 1, 10}, {"a", 0, 2}, {"a", 9, 4}, {"a", 12, 8}, {"a", 8, 16}, // 8 is 4 late: kept (lag 5)
	{"b", 10, 20}, {"b", 19, 40}, {"a", 25, 32}, {"b", 14, 80}, {"a", 31, 64},
}

func TestTumblingEventTimeWindows(t *testing.T) {
	tumbling := func(s *weir.Stream[ev]) *weir.WindowedStream[string, ev, weir.TimeWindow] {
		return s.KeyBy(evKey).Window(weir.TumblingEventTimeWindows(10 * time.Millisecond))
	}
	want := wantSorted(
		"a [0, 10) n=4 sum=23", "a [10, 20) n=1 sum=8", "a [20, 30) n=1 sum=32", "a [30, 40) n=1 sum=64",
		"b [0, 10) n=1 sum=10", "b [10, 20) n=2 sum=60", // b@14 is late: the watermark is 20
	)
	t.Run("process", func(t *testing.T) {
		got := runWindows(t, outOfOrder, 5, func(s *weir.Stream[ev]) *weir.Stream[string] {
			return tumbling(s).Process("describe", weir.ProcessWindowFunction[string, ev, string, weir.TimeWindow](describeWindow{}))
		}, func(s string) string { return s })
		checkLines(t, got, want)
	})
	t.Run("reduce", func(t *testing.T) {
		got := runWindows(t, outOfOrder, 5, func(s *weir.Stream[ev]) *weir.Stream[ev] {
			return tumbling(s).Reduce("sum", sumV)
		}, func(e ev) string { return fmt.Sprintf("%s sum=%d", e.Key, e.V) })
		checkLines(t, got, wantSorted("a sum=23", "a sum=8", "a sum=32", "a sum=64", "b sum=10", "b sum=60"))
	})
	t.Run("aggregate", func(t *testing.T) {
		got := runWindows(t, outOfOrder, 5, func(s *weir.Stream[ev]) *weir.Stream[int64] {
			return tumbling(s).Aggregate("count", state.AggregateFunction[ev, int64, int64](countAgg{}))
		}, func(n int64) string { return fmt.Sprint(n) })
		checkLines(t, got, wantSorted("4", "1", "1", "1", "1", "2"))
	})
	t.Run("aggregate+process", func(t *testing.T) {
		got := runWindows(t, outOfOrder, 5, func(s *weir.Stream[ev]) *weir.Stream[string] {
			return tumbling(s).AggregateProcess("count", state.AggregateFunction[ev, int64, int64](countAgg{}), weir.ProcessWindowFunction[string, int64, string, weir.TimeWindow](countWindow{}))
		}, func(s string) string { return s })
		checkLines(t, got, wantSorted("a [0, 10) 4", "a [10, 20) 1", "a [20, 30) 1", "a [30, 40) 1", "b [0, 10) 1", "b [10, 20) 2"))
	})
}

type countWindow struct{}

func (countWindow) Process(ctx *weir.WindowContext[string, weir.TimeWindow], n []int64, out weir.Collector[string]) error {
	if len(n) != 1 {
		return fmt.Errorf("%d pre-aggregated elements", len(n))
	}
	out.Collect(fmt.Sprintf("%s %v %d", ctx.CurrentKey(), ctx.Window(), n[0]))
	return nil
}

// slidingModel computes what sliding windows of size and slide should
// emit: "key [start, end) n=count sum=sum", for windows with records.
func slidingModel(events []ev, size, slide int64) []string {
	type wk struct {
		key        string
		start, end int64
	}
	n, sum := map[wk]int64{}, map[wk]int64{}
	for _, e := range events {
		first := e.TS - ((e.TS%slide)+slide)%slide
		for s := first; s > e.TS-size; s -= slide {
			k := wk{e.Key, s, s + size}
			n[k]++
			sum[k] += e.V
		}
	}
	var out []string
	for k := range n {
		out = append(out, fmt.Sprintf("%s [%d, %d) n=%d sum=%d", k.key, k.start, k.end, n[k], sum[k]))
	}
	slices.Sort(out)
	return out
}

// describeResult formats a window result (Key, TS = record count, V =
// sum) with its window, derived from its timestamp (the window's max
// timestamp).
type describeResult struct{ size int64 }

func (d describeResult) ProcessElement(ctx *weir.Context, e ev, out weir.Collector[string]) error {
	ts, _ := ctx.Timestamp()
	out.Collect(fmt.Sprintf("%s %v n=%d sum=%d", e.Key, weir.TimeWindow{Start: ts + 1 - d.size, End: ts + 1}, e.TS, e.V))
	return nil
}

// sumAcc accumulates the count and the sum of a key's values.
type sumAcc struct {
	Key    string
	N, Sum int64
}

type sumAgg struct{}

func (sumAgg) CreateAccumulator() sumAcc { return sumAcc{} }
func (sumAgg) Add(e ev, a sumAcc) sumAcc { return sumAcc{Key: e.Key, N: a.N + 1, Sum: a.Sum + e.V} }
func (sumAgg) GetResult(a sumAcc) ev     { return ev{Key: a.Key, TS: a.N, V: a.Sum} }
func (sumAgg) Merge(a, b sumAcc) sumAcc {
	return sumAcc{Key: cmp.Or(a.Key, b.Key), N: a.N + b.N, Sum: a.Sum + b.Sum}
}

// ptrSumAgg is sumAgg with a pointer accumulator that Add changes in
// place: the window must never hand it one a snapshot still reads.
type ptrSumAgg struct{}

func (ptrSumAgg) CreateAccumulator() *sumAcc { return &sumAcc{} }
func (ptrSumAgg) Add(e ev, a *sumAcc) *sumAcc {
	a.Key, a.N, a.Sum = e.Key, a.N+1, a.Sum+e.V
	return a
}
func (ptrSumAgg) GetResult(a *sumAcc) ev { return ev{Key: a.Key, TS: a.N, V: a.Sum} }
func (ptrSumAgg) Merge(a, b *sumAcc) *sumAcc {
	a.Key, a.N, a.Sum = cmp.Or(a.Key, b.Key), a.N+b.N, a.Sum+b.Sum
	return a
}

// TestSlidingWindows: sliced and one-state-per-window sliding windows give
// what the model says, on shuffled input with late records within the
// watermark's lag, for slides that divide the size and slides that do not,
// with Reduce and with Aggregate.
func TestSlidingWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var events []ev
	for i := range 400 {
		events = append(events, ev{Key: fmt.Sprint("k", rng.IntN(5)), TS: int64(i) + rng.Int64N(20) - 10, V: rng.Int64N(100)})
	}
	for _, c := range [][2]int64{{100, 20}, {100, 30}, {50, 50}, {70, 1}} {
		size, slide := c[0], c[1]
		want := slidingModel(events, size, slide)
		for _, sliced := range []bool{true, false} {
			t.Run(fmt.Sprintf("size=%d,slide=%d,sliced=%v", size, slide, sliced), func(t *testing.T) {
				window := func(s *weir.Stream[ev]) *weir.WindowedStream[string, ev, weir.TimeWindow] {
					w := s.KeyBy(evKey).Window(weir.SlidingEventTimeWindows(time.Duration(size)*time.Millisecond, time.Duration(slide)*time.Millisecond))
					if !sliced {
						w.DisableSlicing()
					}
					return w
				}
				describe := weir.ProcessFunction[ev, string](describeResult{size: size})
				id := func(s string) string { return s }
				got := runWindows(t, events, 20, func(s *weir.Stream[ev]) *weir.Stream[string] {
					return window(s.Map("one", func(e ev) ev { return ev{Key: e.Key, TS: 1, V: e.V} })).
						Reduce("sum", func(a, b ev) ev { return ev{Key: a.Key, TS: a.TS + b.TS, V: a.V + b.V} }).
						Process("describe", describe)
				}, id)
				checkLines(t, got, want)
				got = runWindows(t, events, 20, func(s *weir.Stream[ev]) *weir.Stream[string] {
					return window(s).Aggregate("sum", state.AggregateFunction[ev, sumAcc, ev](sumAgg{})).Process("describe", describe)
				}, id)
				checkLines(t, got, want)
				got = runWindows(t, events, 20, func(s *weir.Stream[ev]) *weir.Stream[string] {
					return window(s).Aggregate("sum", state.AggregateFunction[ev, *sumAcc, ev](ptrSumAgg{})).Process("describe", describe)
				}, id)
				checkLines(t, got, want)
			})
		}
	}
}

// TestSlicedManyKeys: more keys than the sliced operator keeps a hot pane
// for (1<<16), so that the cache is written to state and started again
// while records come, give what the model says.
func TestSlicedManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("70,000 keys")
	}
	const keys = 70_000 // one subtask
	var events []ev
	for i := range int64(2 * keys) {
		// Each key twice, far apart in the input, in one pane (of 20 ms):
		// the second record of most keys comes after the cache was
		// written to state and started again.
		k := i % keys
		events = append(events, ev{Key: fmt.Sprint("k", k), TS: k%4 + 10*(i/keys), V: i})
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	sink := collect.New[string]()
	src := env.FromSource("events", datagen.FromSlice(events), punctuatedStrategy(1000, evTS))
	src.KeyBy(evKey).Window(weir.SlidingEventTimeWindows(40*time.Millisecond, 20*time.Millisecond)).
		Aggregate("sum", state.AggregateFunction[ev, sumAcc, ev](sumAgg{})).
		Process("describe", weir.ProcessFunction[ev, string](describeResult{size: 40})).
		SinkTo("out", sink)
	run(t, env)
	got := slices.Sorted(slices.Values(sink.Results()))
	checkLines(t, got, slidingModel(events, 40, 20))
}

func TestSessionWindows(t *testing.T) {
	// With a lag of 100 ms, every record but the last is on time.
	events := []ev{
		{"a", 0, 1}, {"a", 5, 2}, // [0, 15)
		{"b", 3, 100},
		{"a", 30, 4}, {"a", 50, 8}, // separate sessions [30, 40) and [50, 60)...
		{"a", 40, 16},   // ... that [40, 50) bridges (touching merges): [30, 60)
		{"b", 13, 200},  // touching [3, 13): merges into [3, 23)
		{"a", 100, 32},  // alone
		{"a", 12, 64},   // extends [0, 15) to [0, 22)
		{"c", 200, 128}, // watermark 100: fires [0, 22), [30, 60), [3, 23)
		{"a", 205, 256},
		{"a", 20, 512}, // late: its session [20, 30) is behind the watermark
	}
	got := runWindows(t, events, 100, func(s *weir.Stream[ev]) *weir.Stream[string] {
		return s.KeyBy(evKey).Window(weir.EventTimeSessionWindows(10*time.Millisecond)).
			Process("sessions", weir.ProcessWindowFunction[string, ev, string, weir.TimeWindow](describeWindow{}))
	}, func(s string) string { return s })
	checkLines(t, got, wantSorted(
		"a [0, 22) n=3 sum=67", "a [30, 60) n=3 sum=28", "a [100, 110) n=1 sum=32", "a [205, 215) n=1 sum=256",
		"b [3, 23) n=2 sum=300", "c [200, 210) n=1 sum=128",
	))
	// With an aggregate: the accumulators merge (MergeNamespaces).
	got = runWindows(t, events, 100, func(s *weir.Stream[ev]) *weir.Stream[string] {
		return s.KeyBy(evKey).Window(weir.EventTimeSessionWindows(10*time.Millisecond)).
			Aggregate("sessions", state.AggregateFunction[ev, sumAcc, ev](sumAgg{})).
			Map("fmt", func(e ev) string { return fmt.Sprintf("%s n=%d sum=%d", e.Key, e.TS, e.V) })
	}, func(s string) string { return s })
	checkLines(t, got, wantSorted("a n=3 sum=67", "a n=3 sum=28", "a n=1 sum=32", "a n=1 sum=256", "b n=2 sum=300", "c n=1 sum=128"))
	// A count trigger on sessions: counts merge with the windows.
	got = runWindows(t, events, 100, func(s *weir.Stream[ev]) *weir.Stream[string] {
		return s.KeyBy(evKey).Window(weir.EventTimeSessionWindows(10*time.Millisecond)).
			Trigger(weir.CountTrigger[ev, weir.TimeWindow](3)).
			Process("sessions", weir.ProcessWindowFunction[string, ev, string, weir.TimeWindow](describeWindow{}))
	}, func(s string) string { return s })
	checkLines(t, got, wantSorted("a [0, 22) n=3 sum=67", "a [30, 60) n=3 sum=28"))
}

// TestLateData: records behind the watermark are added while their window
// is within the allowed lateness (the window fires again), and later ones
// are dropped or go to the side output.
func TestLateData(t *testing.T) {
	events := []ev{
		{"a", 1, 1}, {"a", 12, 2}, // watermark 12: [0, 10) fires with 1
		{"a", 5, 4},   // late, within lateness 5 (cleanup at 9+5=14): fires again with 1+4
		{"a", 16, 8},  // watermark 16: [0, 10) state is gone
		{"a", 7, 16},  // too late
		{"a", 14, 32}, // in [10, 20), on time
		{"a", 30, 64},
	}
	lateTag := weir.NewOutputTag[ev]("late")
	for _, c := range []struct {
		name     string
		lateness time.Duration
		side     bool
		want     []string
		wantLate []string
	}{
		{"dropped", 0, false, wantSorted("a [0, 10) n=1 sum=1", "a [10, 20) n=3 sum=42", "a [30, 40) n=1 sum=64"), nil},
		{"side output", 0, true, wantSorted("a [0, 10) n=1 sum=1", "a [10, 20) n=3 sum=42", "a [30, 40) n=1 sum=64"), []string{"a@5", "a@7"}},
		{"allowed lateness", 5 * time.Millisecond, true, wantSorted("a [0, 10) n=1 sum=1", "a [0, 10) n=2 sum=5", "a [10, 20) n=3 sum=42", "a [30, 40) n=1 sum=64"), []string{"a@7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 1})
			sink, late := collect.New[string](), collect.New[ev]()
			w := env.FromSource("events", datagen.FromSlice(events), punctuatedStrategy(0, evTS)).
				KeyBy(evKey).Window(weir.TumblingEventTimeWindows(10 * time.Millisecond)).AllowedLateness(c.lateness)
			if c.side {
				w.SideOutputLateData(lateTag)
			}
			out := w.Process("windows", weir.ProcessWindowFunction[string, ev, string, weir.TimeWindow](describeWindow{}))
			out.SinkTo("out", sink)
			out.SideOutput(lateTag).SinkTo("late", late)
			run(t, env)
			got := sink.Results()
			slices.Sort(got)
			checkLines(t, got, c.want)
			var gotLate []string
			for _, e := range late.Results() {
				gotLate = append(gotLate, fmt.Sprintf("%s@%d", e.Key, e.TS))
			}
			if !slices.Equal(gotLate, c.wantLate) {
				t.Fatalf("late records %v, want %v", gotLate, c.wantLate)
			}
		})
	}
}

// TestGlobalWindowsCountTrigger: a global window fires every n records of
// a key, with all records so far, or only the new ones with a purging
// trigger; it never fires without a trigger.
func TestGlobalWindowsCountTrigger(t *testing.T) {
	var events []ev
	for i := range 10 {
		events = append(events, ev{Key: fmt.Sprint("k", i%2), TS: int64(i), V: int64(i)})
	}
	sum := func(trigger weir.Trigger[ev, weir.GlobalWindow]) []string {
		return runWindows(t, events, 0, func(s *weir.Stream[ev]) *weir.Stream[string] {
			w := s.KeyBy(evKey).Window(weir.GlobalWindows())
			if trigger != nil {
				w.Trigger(trigger)
			}
			return w.Reduce("sum", sumV).Map("fmt", func(e ev) string { return fmt.Sprintf("%s %d", e.Key, e.V) })
		}, func(s string) string { return s })
	}
	// k0: 0 2 4 6 8; k1: 1 3 5 7 9.
	checkLines(t, sum(weir.CountTrigger[ev, weir.GlobalWindow](2)), wantSorted("k0 2", "k0 12", "k1 4", "k1 16"))
	checkLines(t, sum(weir.PurgingTrigger(weir.CountTrigger[ev, weir.GlobalWindow](2))), wantSorted("k0 2", "k0 10", "k1 4", "k1 12"))
	checkLines(t, sum(nil), nil)
}

// TestWindowAll runs non-keyed windows in one subtask.
func TestWindowAll(t *testing.T) {
	// Three subtasks feed the window: with a lag of 100 ms no record is late
	// whatever the interleaving.
	got := runWindows(t, outOfOrder, 100, func(s *weir.Stream[ev]) *weir.Stream[string] {
		return s.Rebalance().Map("spread", func(e ev) ev { return e }).Parallelism(3).
			WindowAll(weir.TumblingEventTimeWindows(20*time.Millisecond)).
			Process("all", weir.ProcessAllWindowFunction[ev, string, weir.TimeWindow](allWindows{}))
	}, func(s string) string { return s })
	checkLines(t, got, wantSorted("[0, 20) n=9 sum=181 subtask 0/1", "[20, 40) n=2 sum=96 subtask 0/1"))
}

type allWindows struct{}

func (allWindows) Process(ctx *weir.AllWindowContext[weir.TimeWindow], elems []ev, out weir.Collector[string]) error {
	var sum int64
	for _, e := range elems {
		sum += e.V
	}
	out.Collect(fmt.Sprintf("%v n=%d sum=%d subtask %d/%d", ctx.Window(), len(elems), sum, ctx.Subtask(), ctx.Parallelism()))
	return nil
}

// TestWindowBadInput: bad window parameters and event-time windows without
// timestamps are rejected when the job is built, naming the operator.
func TestWindowBadInput(t *testing.T) {
	events := datagen.FromSlice([]ev{{"a", 1, 1}})
	withTS := func(env *weir.Environment) *weir.Stream[ev] {
		return env.FromSource("events", events, punctuatedStrategy(0, evTS))
	}
	count := state.AggregateFunction[ev, int64, int64](countAgg{})
	tests := []struct {
		name  string
		build func(env *weir.Environment)
		want  string
	}{
		{"zero size", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.TumblingEventTimeWindows(0)).Aggregate("w", count)
		}, `operator "w": tumbling event-time windows: size 0 ms, want > 0`},
		{"negative slide", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.SlidingProcessingTimeWindows(time.Second, -time.Second)).Aggregate("w", count)
		}, `operator "w": sliding processing-time windows: slide -1000 ms, want > 0`},
		{"slide larger than size", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.SlidingEventTimeWindows(time.Second, 2*time.Second)).Reduce("w", sumV)
		}, `operator "w": sliding event-time windows: slide 2000 ms is larger than the size 1000 ms`},
		{"zero gap", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.EventTimeSessionWindows(0)).Reduce("w", sumV)
		}, `operator "w": session event-time windows: gap 0 ms, want > 0`},
		{"no timestamps", func(env *weir.Environment) {
			env.FromSource("events", events).KeyBy(evKey).Window(weir.TumblingEventTimeWindows(time.Second)).Reduce("w", sumV)
		}, `operator "w": event-time windows need timestamps and watermarks`},
		{"one input without timestamps", func(env *weir.Environment) {
			withTS(env).Union(env.FromSource("more", events)).KeyBy(evKey).Window(weir.TumblingEventTimeWindows(time.Second)).Reduce("w", sumV)
		}, `operator "w": event-time windows need timestamps`},
		{"count trigger of 0", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.GlobalWindows()).Trigger(weir.CountTrigger[ev, weir.GlobalWindow](0)).Reduce("w", sumV)
		}, `operator "w": count trigger of 0 records, want >= 1`},
		{"negative lateness", func(env *weir.Environment) {
			withTS(env).KeyBy(evKey).Window(weir.TumblingEventTimeWindows(time.Second)).AllowedLateness(-time.Second).Reduce("w", sumV)
		}, `operator "w": allowed lateness -1s, want >= 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{})
			tt.build(env)
			err := env.Execute(t.Context(), "bad")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Execute = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Timestamps assigned mid-stream are timestamps.
	env := weir.NewEnvironment(weir.Options{})
	sink := collect.New[int64]()
	env.FromSource("events", events).AssignTimestampsAndWatermarks("ts", punctuatedStrategy(0, evTS)).
		KeyBy(evKey).Window(weir.TumblingEventTimeWindows(time.Second)).Aggregate("w", count).SinkTo("out", sink)
	run(t, env)
	if got := sink.Results(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("windows after AssignTimestampsAndWatermarks: %v", got)
	}
}

// TestProcessingTimeWindows runs processing-time windows in a synctest
// bubble: records arrive at chosen fake times, and windows fire when the
// fake clock passes their end.
func TestProcessingTimeWindows(t *testing.T) {
	skipInBubbleOverTCP(t, "TestProcessingTimeWindowsTCP")
	type step struct {
		at   time.Duration // since the start, rounded to whole seconds by the bubble's epoch
		keys string        // one record per letter
	}
	tests := []struct {
		name     string
		assigner func(*weir.KeyedStream[string, string]) *weir.Stream[string]
		steps    []step
		want     []string
	}{
		{"tumbling", func(k *weir.KeyedStream[string, string]) *weir.Stream[string] {
			return k.Window(weir.TumblingProcessingTimeWindows(time.Second)).Process("w", weir.ProcessWindowFunction[string, string, string, weir.TimeWindow](countKeys{}))
		}, []step{{0, "aab"}, {500 * time.Millisecond, "a"}, {1500 * time.Millisecond, "b"}, {2100 * time.Millisecond, "bb"}},
			[]string{"a 0s-1s 3", "b 0s-1s 1", "b 1s-2s 1", "b 2s-3s 2"}},
		{"sliding", func(k *weir.KeyedStream[string, string]) *weir.Stream[string] {
			return k.Window(weir.SlidingProcessingTimeWindows(2*time.Second, time.Second)).Reduce("w", func(a, b string) string { return a + b })
		}, []step{{0, "a"}, {1200 * time.Millisecond, "a"}, {2500 * time.Millisecond, "a"}},
			[]string{"a", "aa", "aa", "a"}},
		{"session", func(k *weir.KeyedStream[string, string]) *weir.Stream[string] {
			return k.Window(weir.ProcessingTimeSessionWindows(time.Second)).Process("w", weir.ProcessWindowFunction[string, string, string, weir.TimeWindow](countKeys{}))
		}, []step{{0, "a"}, {800 * time.Millisecond, "ab"}, {1700 * time.Millisecond, "a"}, {5 * time.Second, "a"}},
			[]string{"b 800ms-1.8s 1", "a 0s-2.7s 3", "a 5s-6s 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				src := newFeed[string]()
				env := weir.NewEnvironment(weir.Options{Parallelism: 1})
				var mu sync.Mutex
				var got []string
				tt.assigner(env.FromSource("keys", connector.Source[string](src)).KeyBy(func(s string) string { return s[:1] })).
					Map("relative", func(s string) string {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, relativeTimes(s, start))
						return s
					}).SinkTo("out", collect.New[string]())
				job, err := env.ExecuteAsync(t.Context(), "proc-windows")
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range tt.steps {
					time.Sleep(time.Until(start.Add(s.at)))
					for _, k := range s.keys {
						src.send(string(k))
					}
				}
				time.Sleep(time.Until(start.Add(10 * time.Second)))
				synctest.Wait()
				src.close()
				if err := job.Wait(); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(got, tt.want) {
					t.Fatalf("fired %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// countKeys emits "key start-end n" with times relative to the bubble's
// start (see relativeTimes).
type countKeys struct{}

func (countKeys) Process(ctx *weir.WindowContext[string, weir.TimeWindow], elems []string, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s @%d-@%d %d", ctx.CurrentKey(), ctx.Window().Start, ctx.Window().End, len(elems)))
	return nil
}

// relativeTimes rewrites "@ms" epoch times as durations since start.
func relativeTimes(s string, start time.Time) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		var parts []string
		for _, p := range strings.Split(f, "-") {
			var ms int64
			if _, err := fmt.Sscanf(p, "@%d", &ms); err == nil {
				p = time.UnixMilli(ms).Sub(start).String()
			}
			parts = append(parts, p)
		}
		fields[i] = strings.Join(parts, "-")
	}
	return strings.Join(fields, " ")
}

// TestWindowsWithIdleInput: an input that sends nothing does not hold the
// windows back once it is idle (WithIdleness); before that, it does.
func TestWindowsWithIdleInput(t *testing.T) {
	skipInBubbleOverTCP(t, "TestWindowsWithIdleInputTCP")
	synctest.Test(t, func(t *testing.T) {
		busy, quiet := newFeed[ev](), newFeed[ev]()
		strategy := punctuatedStrategy(0, evTS).WithIdleness(time.Second)
		env := weir.NewEnvironment(weir.Options{Parallelism: 1})
		var mu sync.Mutex
		var got []string
		env.FromSource("busy", connector.Source[ev](busy), strategy).
			Union(env.FromSource("quiet", connector.Source[ev](quiet), strategy)).
			KeyBy(evKey).Window(weir.TumblingEventTimeWindows(10*time.Millisecond)).
			Process("w", weir.ProcessWindowFunction[string, ev, string, weir.TimeWindow](describeWindow{})).
			Map("log", func(s string) string {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, s)
				return s
			}).SinkTo("out", collect.New[string]())
		job, err := env.ExecuteAsync(t.Context(), "idle")
		if err != nil {
			t.Fatal(err)
		}
		fired := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
		busy.send(ev{"a", 1, 1}, ev{"a", 15, 2})
		time.Sleep(100 * time.Millisecond)
		if f := fired(); len(f) != 0 {
			t.Fatalf("fired %v while the quiet input holds the watermark back", f)
		}
		time.Sleep(2 * time.Second)
		busy.send(ev{"a", 25, 4}) // the quiet input is idle by now
		time.Sleep(500 * time.Millisecond)
		if f := fired(); !slices.Equal(f, []string{"a [0, 10) n=1 sum=1", "a [10, 20) n=1 sum=2"}) {
			t.Fatalf("fired %v once the quiet input is idle", f)
		}
		busy.close()
		quiet.close()
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		// The maximum watermark at the end of the input fires the rest.
		if f := fired(); len(f) != 3 || f[2] != "a [20, 30) n=1 sum=4" {
			t.Fatalf("after the end of input: %v", f)
		}
	})
}
