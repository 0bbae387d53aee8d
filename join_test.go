package weir_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// joinEvent is a record of either side of the join tests.
type joinEvent struct {
	Key int
	ID  int64
	TS  int64
}

const joinKeys = 3

// joinSide generates n events of one side: ids 0..n-1, keys id%3, and
// timestamps that advance 10 ms per event with up to 29 ms of disorder
// (offset shifts the side).
func joinSide(id int64, offset int64) joinEvent {
	jitter := (id*7919 + offset*31) % 30
	return joinEvent{Key: int(id % joinKeys), ID: id, TS: 1_000_000 + 10*id + jitter + offset}
}

func joinStrategy() weir.WatermarkStrategy[joinEvent] {
	return weir.ForBoundedOutOfOrderness[joinEvent](40 * time.Millisecond).
		WithTimestampAssigner(func(e joinEvent, _ int64) int64 { return e.TS })
}

// joinReference is the interval join by nested loops.
func joinReference(n int64, lower, upper int64) []string {
	var out []string
	for i := range n {
		l := joinSide(i, 0)
		for j := range n {
			r := joinSide(j, 5)
			if l.Key == r.Key && r.TS >= l.TS+lower && r.TS <= l.TS+upper {
				out = append(out, fmt.Sprintf("%d:%d:%d@%d", l.Key, l.ID, r.ID, max(l.TS, r.TS)))
			}
		}
	}
	return out
}

// joinPair formats a joined pair and checks the context's timestamps.
type joinPair struct{}

func (joinPair) ProcessElement(ctx *weir.JoinContext, l, r joinEvent, out weir.Collector[string]) error {
	ts, ok := ctx.Timestamp()
	if !ok || ts != max(l.TS, r.TS) || ctx.LeftTimestamp() != l.TS || ctx.RightTimestamp() != r.TS {
		return fmt.Errorf("pair %v %v: context timestamps %d (%v) left %d right %d", l, r, ts, ok, ctx.LeftTimestamp(), ctx.RightTimestamp())
	}
	out.Collect(fmt.Sprintf("%d:%d:%d@%d", l.Key, l.ID, r.ID, ts))
	return nil
}

func TestIntervalJoinMatchesReference(t *testing.T) {
	const n = 600
	for _, backend := range timerBackends {
		for _, par := range []int{1, 2} {
			for _, b := range []struct{ lower, upper int64 }{{-20, 30}, {-8, 8}, {5, 45}, {-50, -10}} {
				t.Run(fmt.Sprintf("%s/p%d/[%d,%d]", backend, par, b.lower, b.upper), func(t *testing.T) {
					env := weir.NewEnvironment(weir.Options{Parallelism: par, StateBackend: backend, LocalStateDir: t.TempDir()})
					left := env.FromSource("left", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 0) }), joinStrategy())
					right := env.FromSource("right", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 5) }), joinStrategy())
					key := func(e joinEvent) int { return e.Key }
					sink := collect.New[string]()
					left.KeyBy(key).IntervalJoin(right.KeyBy(key)).
						Between(time.Duration(b.lower)*time.Millisecond, time.Duration(b.upper)*time.Millisecond).
						Process("join", weir.ProcessJoinFunction[joinEvent, joinEvent, string](joinPair{})).
						SinkTo("out", sink)
					if err := env.Execute(context.Background(), "interval-join"); err != nil {
						t.Fatal(err)
					}
					want := joinReference(n, b.lower, b.upper)
					if lost, dup := multiset.Diff(want, sink.Results()); len(lost)+len(dup) > 0 {
						t.Fatalf("%d pairs expected, %d got: %d missing (e.g. %v), %d extra (e.g. %v)",
							len(want), len(sink.Results()), len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))])
					}
					if len(want) == 0 {
						t.Fatal("the reference joins nothing: the test proves nothing")
					}
				})
			}
		}
	}
}

func TestIntervalJoinExclusiveBounds(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	ev := func(id, ts int64) joinEvent { return joinEvent{Key: 0, ID: id, TS: ts} }
	strategy := weir.ForMonotonousTimestamps[joinEvent]().WithTimestampAssigner(func(e joinEvent, _ int64) int64 { return e.TS })
	left := env.FromSource("left", datagen.FromSlice([]joinEvent{ev(1, 100)}), strategy)
	right := env.FromSource("right", datagen.FromSlice([]joinEvent{ev(10, 90), ev(11, 91), ev(12, 109), ev(13, 110)}), strategy)
	key := func(e joinEvent) int { return e.Key }
	sink := collect.New[string]()
	left.KeyBy(key).IntervalJoin(right.KeyBy(key)).Between(-10*time.Millisecond, 10*time.Millisecond).
		LowerBoundExclusive().UpperBoundExclusive().
		Process("join", weir.JoinFunc(func(l, r joinEvent) string { return fmt.Sprint(l.ID, "-", r.ID) })).
		SinkTo("out", sink)
	if err := env.Execute(context.Background(), "exclusive"); err != nil {
		t.Fatal(err)
	}
	got := sink.Results()
	slices.Sort(got)
	if want := []string{"1-11", "1-12"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (bounds (-10, 10) exclusive)", got, want)
	}
}

func TestIntervalJoinBadInput(t *testing.T) {
	key := func(e joinEvent) int { return e.Key }
	t.Run("lower above upper", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Options{Parallelism: 1})
		l := env.FromSource("l", datagen.FromSlice([]joinEvent{{}}), joinStrategy())
		r := env.FromSource("r", datagen.FromSlice([]joinEvent{{}}), joinStrategy())
		l.KeyBy(key).IntervalJoin(r.KeyBy(key)).Between(10*time.Millisecond, 5*time.Millisecond).
			Process("bad-join", weir.JoinFunc(func(a, b joinEvent) int { return 0 })).SinkTo("out", collect.New[int]())
		err := env.Execute(context.Background(), "bad")
		if err == nil || !strings.Contains(err.Error(), `"bad-join"`) || !strings.Contains(err.Error(), "lower bound") {
			t.Fatalf("Execute = %v, want an error naming the operator and the bounds", err)
		}
	})
	t.Run("no timestamps", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Options{Parallelism: 1})
		l := env.FromSource("l", datagen.FromSlice([]joinEvent{{}}))
		r := env.FromSource("r", datagen.FromSlice([]joinEvent{{}}))
		l.KeyBy(key).IntervalJoin(r.KeyBy(key)).Between(0, time.Millisecond).
			Process("ts-join", weir.JoinFunc(func(a, b joinEvent) int { return 0 })).SinkTo("out", collect.New[int]())
		err := env.Execute(context.Background(), "bad")
		if err == nil || !strings.Contains(err.Error(), `"ts-join"`) || !strings.Contains(err.Error(), "no timestamp") {
			t.Fatalf("Execute = %v, want an error naming the operator and the missing timestamps", err)
		}
	})
}

// TestIntervalJoinExactlyOnce runs the interval join under injected
// failures (operator panic, source errors, storage commit errors, sink
// commit errors, failures during alignment and the asynchronous phase) with
// checkpoints every few milliseconds: the committed pairs must be exactly
// the reference's.
func TestIntervalJoinExactlyOnce(t *testing.T) {
	const n = 1500
	seeds := 8
	if testing.Short() {
		seeds = 2
	}
	want := joinReference(n, -20, 30)
	for _, backend := range timerBackends {
		for seed := range seeds {
			t.Run(fmt.Sprint(backend, "/seed", seed), func(t *testing.T) {
				runJoinHarness(t, backend, fmt.Sprint("join-", seed), seed, newFaultPlan(uint64(seed)), want,
					func(left, right *weir.Stream[joinEvent], key func(joinEvent) int) *weir.Stream[string] {
						return left.KeyBy(key).IntervalJoin(right.KeyBy(key)).Between(-20*time.Millisecond, 30*time.Millisecond).
							Process("join", weir.ProcessJoinFunction[joinEvent, joinEvent, string](joinPair{}))
					})
			})
		}
	}
}

// runJoinHarness runs a job that joins two generated sides (the left one
// with failing reads and an operator that panics now and then) with join,
// under the faults of plan and exactly-once checkpoints every few
// milliseconds, and checks that the committed rows are exactly want.
func runJoinHarness(t *testing.T, backend, jobID string, seed int, plan *faultPlan, want []string,
	join func(left, right *weir.Stream[joinEvent], key func(joinEvent) int) *weir.Stream[string]) {
	t.Helper()
	const n = 1500
	opts := weir.Options{Parallelism: 2, JobID: jobID, Restart: "fixed-delay:attempts=100,delay=0",
		StateBackend: backend, LocalStateDir: t.TempDir()}
	opts.Checkpointing.Interval = time.Duration(3+seed%5) * time.Millisecond
	opts.Checkpointing.TolerableFailures = -1
	injectFaults(t, &opts, uint64(seed), plan, storage.NewMemoryStore())
	env := weir.NewEnvironment(opts)
	rate := datagen.Options{RecordsPerSecond: 30_000, BatchSize: 32}
	ls := datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 0) }).WithOptions(rate)
	rs := datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 5) }).WithOptions(rate)
	left := env.FromSource("left", connector.Source[joinEvent](flakySource[joinEvent]{ls, plan}), joinStrategy()).
		Map("maybe-panic", func(e joinEvent) joinEvent {
			if plan.maybe("operator-panic", 0.002) {
				panic("injected operator panic")
			}
			return e
		})
	right := env.FromSource("right", rs, joinStrategy())
	sink := flakySink[string]{collect.Transactional[string](), plan}
	join(left, right, func(e joinEvent) int { return e.Key }).SinkTo("out", connector.Sink[string](sink))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := env.ExecuteAsync(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v (faults fired %v)", err, plan.fired)
	}
	if lost, dup := multiset.Diff(want, sink.Results()); len(lost)+len(dup) > 0 {
		t.Fatalf("exactly-once violated: %d lost (e.g. %v), %d duplicated (e.g. %v); faults fired %v",
			len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))], plan.fired)
	}
	sum, _ := job.Checkpoints()
	t.Logf("faults fired %v, restarts %d, checkpoints %d", plan.fired, sum.Restarts, sum.Completed)
}
