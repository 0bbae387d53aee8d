package weir_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/adapt"
	"github.com/weirstream/weir/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, env *weir.Environment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx, t.Name()); err != nil {
		t.Fatal(err)
	}
}

func sorted[T any](xs []T, cmp func(a, b T) int) []T {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, cmp)
	return xs
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func TestStatelessChain(t *testing.T) {
	for _, par := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("p", par), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: par, BatchSize: 7})
			sink := collect.New[string]()
			env.FromSource("numbers", datagen.Sequence(0, 9999)).
				Filter("even", func(v int64) bool { return v%2 == 0 }).
				Map("square", func(v int64) int64 { return v * v }).
				FlatMap("twice", func(v int64, out weir.Collector[string]) {
					out.Collect(fmt.Sprint(v, "a"))
					out.Collect(fmt.Sprint(v, "b"))
				}).
				SinkTo("collect", sink)
			run(t, env)
			var want []string
			for v := int64(0); v < 10000; v += 2 {
				want = append(want, fmt.Sprint(v*v, "a"), fmt.Sprint(v*v, "b"))
			}
			if got := sorted(sink.Results(), strings.Compare); !slices.Equal(got, sorted(want, strings.Compare)) {
				t.Fatalf("got %d records, want %d (first %v)", len(got), len(want), got[:min(5, len(got))])
			}
		})
	}
}

type runningCount struct {
	count state.Value[int64]
}

func (c *runningCount) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *runningCount) ProcessElement(ctx *weir.KeyedContext[string], w string, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	if ctx.CurrentKey() != w {
		return fmt.Errorf("current key %q, record %q", ctx.CurrentKey(), w)
	}
	out.Collect(fmt.Sprintf("%s,%d", w, n))
	return nil
}

func TestKeyedRunningCount(t *testing.T) {
	words := []string{"a", "b", "a", "c", "a", "b", "ä", "日本", "a"}
	var input []string
	for range 300 {
		input = append(input, words...)
	}
	for _, par := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("p", par), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: par, BatchSize: 16})
			sink := collect.New[string]()
			env.FromSource("words", datagen.FromSlice(input)).
				KeyBy(func(w string) string { return w }).
				Process("count", &runningCount{}).
				SinkTo("collect", sink)
			run(t, env)
			counts := map[string]int{}
			var want []string
			for _, w := range input {
				counts[w]++
				want = append(want, fmt.Sprintf("%s,%d", w, counts[w]))
			}
			if got := sorted(sink.Results(), strings.Compare); !slices.Equal(got, sorted(want, strings.Compare)) {
				t.Fatalf("running counts differ: got %d records, want %d", len(got), len(want))
			}
		})
	}
}

type reading struct {
	Device string
	Value  float64
}

func TestReduceAndStructKeys(t *testing.T) {
	type key struct {
		Site string
		ID   int32
	}
	var input []reading
	for i := range 1000 {
		input = append(input, reading{Device: fmt.Sprint("d", i%7), Value: float64(i)})
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	sink := collect.New[reading]()
	env.FromSource("readings", datagen.FromSlice(input)).
		KeyBy(func(r reading) key { return key{Site: "x", ID: int32(r.Device[1] - '0')} }).
		Reduce("max", func(acc, in reading) reading {
			if in.Value > acc.Value {
				return in
			}
			return acc
		}).
		SinkTo("collect", sink)
	run(t, env)
	best := map[string]float64{}
	for _, r := range sink.Results() {
		best[r.Device] = max(best[r.Device], r.Value)
	}
	if len(sink.Results()) != 1000 || len(best) != 7 || best["d0"] != 994 {
		t.Fatalf("got %d results, maxima %v", len(sink.Results()), best)
	}
}

func TestUnionRebalanceBroadcast(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	a := env.FromSource("a", datagen.Sequence(0, 99))
	b := env.FromSource("b", datagen.Sequence(100, 199)).Parallelism(1)
	sink := collect.New[int64]()
	a.Union(b).Rebalance().Map("id", func(v int64) int64 { return v }).Parallelism(3).SinkTo("out", sink)
	bsink := collect.New[int64]()
	b.Broadcast().Map("copy", func(v int64) int64 { return v }).Parallelism(3).SinkTo("bout", bsink)
	run(t, env)
	if got := sorted(sink.Results(), cmpInt); !slices.Equal(got, seq(200)) {
		t.Fatalf("union lost or doubled records: %d records", len(got))
	}
	if got := bsink.Results(); len(got) != 300 {
		t.Fatalf("broadcast to 3 subtasks delivered %d records, want 300", len(got))
	}
}

func cmpInt(a, b int64) int { return int(a - b) }

type joiner struct{}

func (joiner) ProcessElement1(_ *weir.Context, v int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprint("n", v))
	return nil
}
func (joiner) ProcessElement2(_ *weir.Context, s string, out weir.Collector[string]) error {
	out.Collect("s" + s)
	return nil
}

type keyedJoiner struct {
	seen state.Value[string]
}

func (j *keyedJoiner) Open(ctx *weir.KeyedContext[int64]) (err error) {
	j.seen, err = weir.Value[string](ctx, "name")
	return err
}

// Names (input 2) arrive before numbers (input 1) would be racy; so the
// function emits on whichever side completes the pair.
func (j *keyedJoiner) ProcessElement1(ctx *weir.KeyedContext[int64], v int64, out weir.Collector[string]) error {
	if name, ok := j.seen.Value(); ok {
		out.Collect(fmt.Sprint(v, "=", name))
		return nil
	}
	j.seen.Update("#pending")
	return nil
}

func (j *keyedJoiner) ProcessElement2(ctx *weir.KeyedContext[int64], name string, out weir.Collector[string]) error {
	if prev, ok := j.seen.Value(); ok && prev == "#pending" {
		out.Collect(fmt.Sprint(ctx.CurrentKey(), "=", name))
	}
	j.seen.Update(name)
	return nil
}

func TestConnect(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	nums := env.FromSource("nums", datagen.Sequence(0, 49))
	names := env.FromSource("names", datagen.Generator(50, func(i int64) string { return fmt.Sprint(i) }))
	sink := collect.New[string]()
	nums.Connect(names).Process("co", joiner{}).SinkTo("out", sink)

	ksink := collect.New[string]()
	nums.KeyBy(func(v int64) int64 { return v }).
		Connect(names.KeyBy(func(s string) int64 { var v int64; fmt.Sscan(s, &v); return v })).
		Process("join", &keyedJoiner{}).
		SinkTo("kout", ksink)
	run(t, env)
	if got := sink.Results(); len(got) != 100 {
		t.Fatalf("co-process emitted %d records, want 100", len(got))
	}
	var want []string
	for i := range 50 {
		want = append(want, fmt.Sprint(i, "=", i))
	}
	if got := sorted(ksink.Results(), strings.Compare); !slices.Equal(got, sorted(want, strings.Compare)) {
		t.Fatalf("keyed join = %v", got)
	}
}

var lateTag = weir.NewOutputTag[int64]("odd")

type splitter struct {
	odd weir.Collector[int64]
}

func (s *splitter) Open(ctx *weir.Context) (err error) {
	s.odd, err = weir.SideOutput(ctx, lateTag)
	return err
}

func (s *splitter) ProcessElement(_ *weir.Context, v int64, out weir.Collector[int64]) error {
	if v%2 == 1 {
		s.odd.Collect(v)
		return nil
	}
	out.Collect(v)
	return nil
}

func TestSideOutput(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	main := env.FromSource("nums", datagen.Sequence(0, 99)).Process("split", &splitter{})
	evens, odds := collect.New[int64](), collect.New[int64]()
	main.SinkTo("evens", evens)
	main.SideOutput(lateTag).Map("id", func(v int64) int64 { return v }).Parallelism(1).SinkTo("odds", odds)
	run(t, env)
	if len(evens.Results()) != 50 || len(odds.Results()) != 50 {
		t.Fatalf("evens %d odds %d, want 50 and 50", len(evens.Results()), len(odds.Results()))
	}
	for _, v := range odds.Results() {
		if v%2 == 0 {
			t.Fatalf("even %d in the side output", v)
		}
	}
}

func TestPanicFailsJobNamingOperator(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	env.FromSource("nums", datagen.Sequence(0, 999)).
		Map("boom", func(v int64) int64 {
			if v == 700 {
				panic("bad record")
			}
			return v
		}).
		SinkTo("out", collect.New[int64]())
	err := env.Execute(context.Background(), "panic")
	if err == nil || !strings.Contains(err.Error(), `operator "boom" (subtask `) || !strings.Contains(err.Error(), "panic: bad record") {
		t.Fatalf("Execute = %v, want an error naming operator boom and the panic", err)
	}
}

type failing struct{}

func (failing) ProcessElement(_ *weir.KeyedContext[int64], v int64, _ weir.Collector[int64]) error {
	if v == 42 {
		return errors.New("cannot handle 42")
	}
	return nil
}

func TestErrorFailsJobNamingOperator(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 3})
	env.FromSource("nums", datagen.Sequence(0, 999)).
		KeyBy(func(v int64) int64 { return v }).
		Process("picky", failing{}).
		SinkTo("out", collect.New[int64]())
	err := env.Execute(context.Background(), "error")
	if err == nil || !strings.Contains(err.Error(), `operator "picky" (subtask `) || !strings.Contains(err.Error(), "cannot handle 42") {
		t.Fatalf("Execute = %v", err)
	}
}

func TestCancelUnboundedJob(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	var seen atomic.Int64
	env.FromSource("forever", datagen.Generator(-1, func(i int64) int64 { return i })).
		Map("count", func(v int64) int64 { seen.Add(1); return v }).
		SinkTo("out", collect.New[int64]())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx, "forever") }()
	for seen.Load() < 10_000 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Execute = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("job did not stop after cancel")
	}
}

func TestInvalidGraphs(t *testing.T) {
	tests := []struct {
		name  string
		build func(env *weir.Environment)
		want  string
	}{
		{"duplicate uid", func(env *weir.Environment) {
			s := env.FromSource("a", datagen.Sequence(0, 1)).UID("x")
			s.Map("m", func(v int64) int64 { return v }).UID("x").SinkTo("out", collect.New[int64]())
		}, `uid "x" is already used`},
		{"forward across parallelism", func(env *weir.Environment) {
			env.FromSource("a", datagen.Sequence(0, 1)).Parallelism(1).Forward().
				Map("m", func(v int64) int64 { return v }).Parallelism(2).SinkTo("out", collect.New[int64]())
		}, `forward edge "a" -> "m" joins parallelism 1 to 2`},
		{"dangling operator", func(env *weir.Environment) {
			env.FromSource("a", datagen.Sequence(0, 1)).Map("m", func(v int64) int64 { return v })
		}, `operator "m": its output goes nowhere`},
		{"parallelism of a union", func(env *weir.Environment) {
			a := env.FromSource("a", datagen.Sequence(0, 1))
			a.Union(a).Parallelism(2)
		}, "Parallelism applies to an operator's output"},
		{"unsupported key type", func(env *weir.Environment) {
			env.FromSource("a", datagen.Sequence(0, 1)).
				KeyBy(func(v int64) chan int { return nil }).
				Reduce("r", func(a, b int64) int64 { return a }).SinkTo("out", collect.New[int64]())
		}, "KeyBy"},
		{"bad options", func(env *weir.Environment) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := weir.Options{Parallelism: 2}
			if tt.want == "" {
				opts.BatchSize = -1
				tt.want = "Options.BatchSize"
			}
			env := weir.NewEnvironment(opts)
			tt.build(env)
			err := env.Execute(context.Background(), "bad")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Execute = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Each subtask must get its own copy of a process function.
type perSubtask struct {
	subtask int
	n       int
}

func (p *perSubtask) Open(ctx *weir.Context) error { p.subtask = ctx.Subtask(); return nil }
func (p *perSubtask) ProcessElement(ctx *weir.Context, v int64, out weir.Collector[string]) error {
	p.n++
	if p.subtask != ctx.Subtask() {
		return fmt.Errorf("function of subtask %d runs in subtask %d", p.subtask, ctx.Subtask())
	}
	return nil
}

func TestFunctionsArePerSubtask(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 4})
	env.FromSource("a", datagen.Sequence(0, 9999)).Process("p", &perSubtask{}).SinkTo("out", collect.New[string]())
	run(t, env)
}

// stamped emits each value with timestamp 1000*value.
type stamped struct{ n int }

func (s stamped) Boundedness() connector.Boundedness { return connector.Bounded }
func (s stamped) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "all"}}, nil
}
func (s stamped) NewReader(connector.ReaderContext) (connector.Reader[int64], error) {
	return &stampedReader{n: s.n}, nil
}

type stampedReader struct {
	n, next int
	has     bool
}

func (r *stampedReader) AddSplits(s []connector.SplitState) error { r.has = len(s) > 0; return nil }
func (r *stampedReader) NoMoreSplits()                            {}
func (r *stampedReader) Poll(out connector.Emitter[int64]) (connector.Status, error) {
	for ; r.has && r.next < r.n; r.next++ {
		out.EmitAt(int64(r.next), int64(r.next)*1000)
	}
	return connector.EndOfInput, nil
}
func (r *stampedReader) Available() <-chan struct{}                     { return nil }
func (r *stampedReader) Snapshot(int64) ([]connector.SplitState, error) { return nil, nil }
func (r *stampedReader) Close() error                                   { return nil }

type tsCheck struct{}

func (tsCheck) ProcessElement(ctx *weir.KeyedContext[int64], v int64, out weir.Collector[int64]) error {
	ts, ok := ctx.Timestamp()
	if !ok || ts != v*1000 {
		return fmt.Errorf("record %d has timestamp %d (%v), want %d", v, ts, ok, v*1000)
	}
	out.Collect(ts)
	return nil
}

func TestTimestampsFlowThroughChainsAndShuffles(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, BatchSize: 3})
	sink := collect.New[int64]()
	env.FromSource("stamped", connector.Source[int64](stamped{n: 100})).
		Map("id", func(v int64) int64 { return v }).
		KeyBy(func(v int64) int64 { return v % 5 }).
		Process("check", tsCheck{}).
		SinkTo("out", sink)
	run(t, env)
	if len(sink.Results()) != 100 {
		t.Fatalf("got %d results", len(sink.Results()))
	}
}

// TestFilterLoopOption runs a map→filter job (fused into one pass) and a
// lone filter under each loop (adapt.ForceFilterLoop, the test-only
// switch), on answers that follow a pattern and on random ones: the output
// is the same.
func TestFilterLoopOption(t *testing.T) {
	t.Cleanup(func() { adapt.ForceFilterLoop("") })
	const n = 50_000
	random := func(v int64) bool { x := uint64(v) ^ uint64(v)>>33; x *= 0xff51afd7ed558ccd; return (x^x>>33)>>63 == 0 }
	pattern := func(v int64) bool { return v%5 != 0 }
	for _, loop := range []string{"", "adaptive", "branch-free", "branching"} {
		for name, keep := range map[string]func(int64) bool{"random": random, "pattern": pattern} {
			t.Run(fmt.Sprintf("%s/%s", loop, name), func(t *testing.T) {
				var want []int64
				for v := range int64(n) {
					if keep(v) {
						want = append(want, v)
					}
				}
				if err := adapt.ForceFilterLoop(loop); err != nil {
					t.Fatal(err)
				}
				env := weir.NewEnvironment(weir.Options{Parallelism: 1})
				fused, lone := collect.New[int64](), collect.New[int64]()
				src := env.FromSource("numbers", datagen.Sequence(0, n-1))
				src.Map("same", func(v int64) int64 { return v }).Filter("fused", keep).SinkTo("fused-out", fused)
				src.Rebalance().Filter("lone", keep).SinkTo("lone-out", lone)
				if err := env.Execute(context.Background(), "filter-loop"); err != nil {
					t.Fatal(err)
				}
				for what, got := range map[string][]int64{"fused": fused.Results(), "lone": lone.Results()} {
					if !slices.Equal(got, want) {
						t.Errorf("%s filter kept %d records, want %d", what, len(got), len(want))
					}
				}
			})
		}
	}
}
