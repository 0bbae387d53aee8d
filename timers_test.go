package weir_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// timerBackends are the state backends timers are tested on.
var timerBackends = []string{"heap", "pebble"}

// punctuated emits a watermark after every record: the largest timestamp
// seen minus lag.
type punctuated struct {
	lag, max int64
}

func (p *punctuated) OnEvent(ts int64) (int64, bool) {
	p.max = max(p.max, ts)
	return p.max - p.lag, true
}
func (p *punctuated) OnPeriodic() (int64, bool) { return 0, false }

func punctuatedStrategy[T any](lag int64, ts func(T) int64) weir.WatermarkStrategy[T] {
	return weir.ForGenerator[T](func() weir.WatermarkGenerator { return &punctuated{lag: lag, max: math.MinInt64 + lag} }).
		WithTimestampAssigner(func(rec T, _ int64) int64 { return ts(rec) })
}

// timerEvent registers (Del false) or deletes (Del true) the event-time
// timer At of Key; it happens at event time TS.
type timerEvent struct {
	Key string
	TS  int64
	At  int64
	Del bool
}

// eventTimers registers and deletes event-time timers as the events say;
// OnTimer emits "key@ts count=n" where n counts the key's records (keyed
// state scoped to the timer's key), and a timer at ts%100 == 50 registers
// one 10 ms in the past, which fires in the same watermark advance.
type eventTimers struct {
	count state.Value[int]
}

func (f *eventTimers) Open(ctx *weir.KeyedContext[string]) (err error) {
	f.count, err = weir.Value[int](ctx, "count")
	return err
}

func (f *eventTimers) ProcessElement(ctx *weir.KeyedContext[string], e timerEvent, _ weir.Collector[string]) error {
	n, _ := f.count.Value()
	f.count.Update(n + 1)
	if e.Del {
		ctx.TimerService().DeleteEventTimeTimer(e.At)
	} else {
		ctx.TimerService().RegisterEventTimeTimer(e.At)
	}
	return nil
}

func (f *eventTimers) OnTimer(ctx *weir.OnTimerContext[string], ts int64, out weir.Collector[string]) error {
	if ctx.TimeDomain() != weir.EventTime {
		return fmt.Errorf("timer at %d: domain %v", ts, ctx.TimeDomain())
	}
	if got, _ := ctx.Timestamp(); got != ts {
		return fmt.Errorf("timer at %d: context timestamp %d", ts, got)
	}
	if wm := ctx.TimerService().CurrentWatermark(); wm < ts {
		return fmt.Errorf("timer at %d fired at watermark %d", ts, wm)
	}
	n, _ := f.count.Value()
	out.Collect(fmt.Sprintf("%s@%d count=%d", ctx.CurrentKey(), ts, n))
	if ts%100 == 50 {
		ctx.TimerService().RegisterEventTimeTimer(ts - 10)
	}
	return nil
}

// lateness tags each record with whether it arrived behind the watermark of
// its (separate) task.
type lateness struct{}

func (lateness) ProcessElement(ctx *weir.Context, s string, out weir.Collector[string]) error {
	ts, _ := ctx.Timestamp()
	if ts <= ctx.CurrentWatermark() {
		s += " late"
	}
	out.Collect(s)
	return nil
}

func TestEventTimeTimers(t *testing.T) {
	events := []timerEvent{
		{"a", 0, 30, false},
		{"b", 1, 20, false},
		{"a", 2, 30, false}, // again: still one timer
		{"b", 3, 25, false},
		{"b", 4, 25, true}, // deleted before it fires
		{"c", 5, 150, false},
		{"a", 6, 10, false},
		{"b", 40, 45, false},
		{"a", 200, 1000, false},
		{"d", 300, 300, false}, // at its record's watermark
		{"d", 301, 5, false},   // long past
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	sink := collect.New[string]()
	env.FromSource("events", datagen.FromSlice(events), punctuatedStrategy(0, func(e timerEvent) int64 { return e.TS })).
		KeyBy(func(e timerEvent) string { return e.Key }).
		Process("timers", &eventTimers{}).
		Process("lateness", weir.ProcessFunction[string, string](lateness{})).DisableChaining().
		SinkTo("out", sink)
	run(t, env)
	// Each record's watermark (its timestamp) follows it. Records before
	// a timer's watermark count towards the count it reports.
	want := []string{
		"a@10 count=3", "b@20 count=4", "a@30 count=3", // watermark 40, in timestamp order
		"b@45 count=4",                   // watermark 200
		"c@150 count=1", "c@140 count=1", // same advance: 140 registered by the timer at 150
		"d@300 count=1",    // at the watermark of its own record
		"d@5 count=2 late", // registered behind the watermark: fires with the next one, late downstream
		"a@1000 count=4",   // the maximum watermark at the end of input
	}
	if got := sink.Results(); !slices.Equal(got, want) {
		t.Fatalf("fired\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// feed is a bounded source of what the test sends (one split, read by
// subtask 0); it ends when the test closes it. The reader blocks on a
// doorbell, so a synctest bubble sees it durably blocked.
type feed[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	ready  chan struct{}
}

func newFeed[T any]() *feed[T] { return &feed[T]{ready: make(chan struct{}, 1)} }

func (f *feed[T]) send(vs ...T) {
	f.mu.Lock()
	f.items = append(f.items, vs...)
	f.mu.Unlock()
	f.ring()
}

func (f *feed[T]) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.ring()
}

func (f *feed[T]) ring() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

func (f *feed[T]) Boundedness() connector.Boundedness { return connector.Bounded }
func (f *feed[T]) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "feed"}}, nil
}
func (f *feed[T]) NewReader(connector.ReaderContext) (connector.Reader[T], error) {
	return &feedReader[T]{f: f}, nil
}

type feedReader[T any] struct {
	f   *feed[T]
	has bool
}

func (r *feedReader[T]) AddSplits(sp []connector.SplitState) error { r.has = len(sp) > 0; return nil }
func (r *feedReader[T]) NoMoreSplits()                             {}
func (r *feedReader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	if !r.has {
		return connector.EndOfInput, nil
	}
	r.f.mu.Lock()
	items, closed := r.f.items, r.f.closed
	r.f.items = nil
	r.f.mu.Unlock()
	for _, v := range items {
		out.Emit(v)
	}
	if closed {
		return connector.EndOfInput, nil
	}
	return connector.NothingAvailable, nil
}
func (r *feedReader[T]) Available() <-chan struct{} { return r.f.ready }
func (r *feedReader[T]) Snapshot(int64) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "feed"}}, nil
}
func (r *feedReader[T]) Close() error { return nil }

// procEvent registers (Del false) or deletes the processing-time timer of
// Key After from now.
type procEvent struct {
	Key   string
	After time.Duration
	Del   bool
}

type procTimers struct {
	mu  *sync.Mutex
	log *[]string
	reg map[string]int64
}

func (f *procTimers) ProcessElement(ctx *weir.KeyedContext[string], e procEvent, _ weir.Collector[string]) error {
	ts := ctx.TimerService().CurrentProcessingTime() + e.After.Milliseconds()
	// One function value serves every subtask: reg is shared.
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Del {
		ctx.TimerService().DeleteProcessingTimeTimer(f.reg[e.Key])
		return nil
	}
	f.reg[e.Key] = ts
	ctx.TimerService().RegisterProcessingTimeTimer(ts)
	return nil
}

func (f *procTimers) OnTimer(ctx *weir.OnTimerContext[string], ts int64, out weir.Collector[string]) error {
	now := ctx.TimerService().CurrentProcessingTime()
	if ctx.TimeDomain() != weir.ProcessingTime || now < ts {
		return fmt.Errorf("timer %d fired at %d in %v", ts, now, ctx.TimeDomain())
	}
	f.mu.Lock()
	*f.log = append(*f.log, fmt.Sprintf("%s late=%dms", ctx.CurrentKey(), now-ts))
	f.mu.Unlock()
	out.Collect(ctx.CurrentKey())
	return nil
}

// TestProcessingTimeTimers runs a job in a synctest bubble: fake time
// advances only when every goroutine is blocked, so timers fire exactly on
// time and the test reads the log after each step.
func TestProcessingTimeTimers(t *testing.T) {
	skipInBubbleOverTCP(t, "TestProcessingTimeTimersTCP")
	synctest.Test(t, func(t *testing.T) {
		src := newFeed[procEvent]()
		var mu sync.Mutex
		var log []string
		env := weir.NewEnvironment(weir.Options{Parallelism: 1})
		sink := collect.New[string]()
		env.FromSource("events", connector.Source[procEvent](src)).
			KeyBy(func(e procEvent) string { return e.Key }).
			Process("timers", &procTimers{mu: &mu, log: &log, reg: map[string]int64{}}).
			SinkTo("out", sink)
		job, err := env.ExecuteAsync(t.Context(), "proc")
		if err != nil {
			t.Fatal(err)
		}
		step := func(d time.Duration, want ...string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			mu.Lock()
			got := slices.Clone(log)
			log = log[:0]
			mu.Unlock()
			if !slices.Equal(got, want) {
				t.Fatalf("after %v: fired %v, want %v", d, got, want)
			}
		}
		src.send(
			procEvent{Key: "a", After: time.Second},
			procEvent{Key: "b", After: 3 * time.Second},
			procEvent{Key: "c", After: 2 * time.Second},
			procEvent{Key: "c", Del: true},
			procEvent{Key: "a", After: time.Second}, // same time again: one timer
		)
		step(999 * time.Millisecond /* nothing due yet */)
		step(time.Millisecond, "a late=0ms")
		step(time.Second /* c was deleted */)
		step(time.Second, "b late=0ms")
		src.send(procEvent{Key: "d", After: 500 * time.Millisecond}, procEvent{Key: "e", After: 100 * time.Millisecond})
		step(time.Second, "e late=0ms", "d late=0ms")
		src.close()
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		if got := sink.Results(); !slices.Equal(got, []string{"a", "b", "e", "d"}) {
			t.Fatalf("collected %v", got)
		}
	})
}

// TestTimerErrors: OnTimer's error fails the job, naming the timer.
type failingTimer struct{}

func (failingTimer) ProcessElement(ctx *weir.KeyedContext[string], e timerEvent, _ weir.Collector[string]) error {
	ctx.TimerService().RegisterEventTimeTimer(e.At)
	return nil
}
func (failingTimer) OnTimer(_ *weir.OnTimerContext[string], ts int64, _ weir.Collector[string]) error {
	return errors.New("boom")
}

func TestTimerErrorFailsJob(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	env.FromSource("events", datagen.FromSlice([]timerEvent{{"a", 1, 7, false}}), punctuatedStrategy(0, func(e timerEvent) int64 { return e.TS })).
		KeyBy(func(e timerEvent) string { return e.Key }).
		Process("timers", weir.KeyedProcessFunction[string, timerEvent, string](failingTimer{})).
		SinkTo("out", collect.New[string]())
	err := env.Execute(t.Context(), "fail")
	if err == nil || !strings.Contains(err.Error(), "event time timer at 7: boom") || !strings.Contains(err.Error(), `"timers"`) {
		t.Fatalf("Execute = %v, want the timer's error naming the operator", err)
	}
}

// timerPerRecord registers an event-time timer 1 s after each record;
// every timer reports its key and time once.
type timerPerRecord struct{}

func (timerPerRecord) ProcessElement(ctx *weir.KeyedContext[string], i int64, _ weir.Collector[string]) error {
	ts, _ := ctx.Timestamp()
	ctx.TimerService().RegisterEventTimeTimer(ts + 1000)
	return nil
}

func (timerPerRecord) OnTimer(ctx *weir.OnTimerContext[string], ts int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s@%d", ctx.CurrentKey(), ts))
	return nil
}

func harnessKey(i int64) string { return fmt.Sprint("k", (i*7919)%61) }

// TestTimersExactlyOnce: timers are checkpointed with keyed state and come
// back after failures: every timer fires exactly once in the committed
// output, although tasks fail and restart from checkpoints in which many
// timers are pending.
func TestTimersExactlyOnce(t *testing.T) {
	for _, backend := range timerBackends {
		t.Run(backend, func(t *testing.T) {
			const n = 3000
			runTimeHarness(t, timeHarness{records: n, backend: backend,
				build: func(in *weir.Stream[int64]) *weir.Stream[string] {
					return in.KeyBy(harnessKey).Process("timers", weir.KeyedProcessFunction[string, int64, string](timerPerRecord{}))
				},
				want: func() []string {
					var want []string
					for i := range int64(n) {
						want = append(want, fmt.Sprintf("%s@%d", harnessKey(i), i*10+1000))
					}
					return want
				}}, 8)
		})
	}
}

// farTimers registers a timer far in event time for each record, which
// only the maximum watermark at the end of the input fires.
type farTimers struct{}

func (farTimers) ProcessElement(ctx *weir.KeyedContext[string], i int64, _ weir.Collector[string]) error {
	ctx.TimerService().RegisterEventTimeTimer(1e12 + i)
	return nil
}

func (farTimers) OnTimer(ctx *weir.OnTimerContext[string], ts int64, out weir.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s@%d", ctx.CurrentKey(), ts))
	return nil
}

// TestTimersRescale stops a job with pending timers with a savepoint at
// parallelism 4 and resumes it at parallelism 2: the timers move with their
// key groups and all fire exactly once at the end of the input.
func TestTimersRescale(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 6000
	src := spIndexes(n, 12000)
	sink := collect.Transactional[string]()
	build := func(par int, restore string) (*weir.JobClient, *atomic.Int64) {
		var tap atomic.Int64
		env := weir.NewEnvironment(weir.Options{Parallelism: par, JobID: "timers-rescale", Restore: restore})
		env.FromSource("src", src).UID("src").
			Map("tap", func(i int64) int64 { tap.Add(1); return i }).UID("tap").
			KeyBy(spKey).
			Process("timers", weir.KeyedProcessFunction[string, int64, string](farTimers{})).UID("timers").
			SinkTo("out", sink).UID("out")
		c, err := env.ExecuteAsync(ctx, "timers-rescale")
		if err != nil {
			t.Fatal(err)
		}
		return c, &tap
	}
	c, tap := build(4, "")
	spWait(t, "2000 records", 10*time.Second, func() bool { return tap.Load() >= 2000 })
	sp, err := c.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := sink.Len(); got != 0 {
		t.Fatalf("%d timers fired before the stop: the test needs them pending", got)
	}
	c, _ = build(2, sp)
	if err := spWaitJob(t, c, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range int64(n) {
		want = append(want, fmt.Sprintf("%s@%d", spKey(i), int64(1e12)+i))
	}
	spSameMultiset(t, "timers rescaled 4 -> 2", sink.Results(), want)
}

// TestProcessingTimersRestored: processing-time timers pending in a
// checkpoint are restored and re-armed after a failure, and fire at their
// time (in a synctest bubble: fake time, no sleeps for synchronization).
func TestProcessingTimersRestored(t *testing.T) {
	skipInBubbleOverTCP(t, "TestProcessingTimersRestoredTCP")
	synctest.Test(t, func(t *testing.T) {
		src := newFeed[procEvent]()
		var mu sync.Mutex
		var log []string
		var failed atomic.Bool
		opts := weir.Options{Parallelism: 1, Restart: "fixed-delay:attempts=3,delay=0"}
		opts.Checkpointing.Interval = 100 * time.Millisecond
		env := weir.NewEnvironment(opts)
		sink := collect.Transactional[string]()
		env.FromSource("events", connector.Source[procEvent](src)).
			Map("poison", func(e procEvent) procEvent {
				if e.Key == "poison" && !failed.Swap(true) {
					panic("injected failure")
				}
				return e
			}).
			KeyBy(func(e procEvent) string { return e.Key }).
			Process("timers", &procTimers{mu: &mu, log: &log, reg: map[string]int64{}}).
			SinkTo("out", sink)
		job, err := env.ExecuteAsync(t.Context(), "proc-restore")
		if err != nil {
			t.Fatal(err)
		}
		src.send(procEvent{Key: "a", After: 10 * time.Second}, procEvent{Key: "b", After: 20 * time.Second})
		time.Sleep(time.Second)
		synctest.Wait()
		if sum, _ := job.Checkpoints(); sum.Completed == 0 {
			t.Fatalf("no checkpoint completed after 1 s: %+v", sum)
		}
		src.send(procEvent{Key: "poison"})
		time.Sleep(time.Second)
		synctest.Wait()
		if sum, _ := job.Checkpoints(); sum.Restarts != 1 {
			t.Fatalf("restarts = %d, want 1", sum.Restarts)
		}
		step := func(d time.Duration, want ...string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			mu.Lock()
			got := slices.Clone(log)
			log = log[:0]
			mu.Unlock()
			if !slices.Equal(got, want) {
				t.Fatalf("after %v more: fired %v, want %v", d, got, want)
			}
		}
		step(8*time.Second - time.Millisecond)
		step(time.Millisecond, "a late=0ms")
		step(10*time.Second, "b late=0ms")
		src.close()
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		if got := sink.Results(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("committed %v, want [a b]", got)
		}
	})
}
