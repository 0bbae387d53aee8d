package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/jobstate"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// --- a clock moved by hand --------------------------------------------------

type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       chan time.Time
	at      time.Time
	period  time.Duration // 0: one-shot
	stopped bool
	clock   *fakeClock
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d, period time.Duration) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: make(chan time.Time, 1), at: c.now.Add(d), period: period, clock: c}
	if d <= 0 && period == 0 {
		t.c <- c.now
		t.stopped = true
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) NewTimer(d time.Duration) Timer   { return c.add(d, 0) }
func (c *fakeClock) NewTicker(d time.Duration) Ticker { return fakeTicker{c.add(d, d)} }

type fakeTicker struct{ t *fakeTimer }

func (t fakeTicker) C() <-chan time.Time { return t.t.c }
func (t fakeTicker) Stop()               { t.t.Stop() }

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// oneShots counts the armed one-shot timers (restart delay, stop grace).
func (c *fakeClock) oneShots() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && t.period == 0 {
			n++
		}
	}
	return n
}

// Advance moves the clock and fires what fell due (a ticker once).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.stopped || t.at.After(c.now) {
			continue
		}
		select {
		case t.c <- c.now:
		default:
		}
		if t.period == 0 {
			t.stopped = true
			continue
		}
		for !t.at.After(c.now) {
			t.at = t.at.Add(t.period)
		}
	}
}

// --- a gateway whose tasks the test plays -----------------------------------

type completeCall struct{ Notification }
type abortCall struct{ Notification }
type finishCall struct{ attempt int }
type stopCall struct{ attempt int }

// fakeGateway records every request in calls and lets the test report what
// its tasks "a" (a source) and "b" do.
type fakeGateway struct {
	calls chan any
	mu    sync.Mutex
	l     Listener
}

func newFakeGateway() *fakeGateway { return &fakeGateway{calls: make(chan any, 1024)} }

func (g *fakeGateway) Deploy(ctx context.Context, req DeployRequest, l Listener) ([]TaskInfo, error) {
	g.mu.Lock()
	g.l = l
	g.mu.Unlock()
	g.calls <- req
	for _, id := range []string{"a", "b"} {
		l.Report(TaskRunning{Attempt: req.Attempt, Task: id})
	}
	return []TaskInfo{{ID: "b"}, {ID: "a", Source: true}}, nil
}

func (g *fakeGateway) TriggerCheckpoint(req TriggerRequest) { g.calls <- req }
func (g *fakeGateway) NotifyComplete(n Notification)        { g.calls <- completeCall{n} }
func (g *fakeGateway) NotifyAborted(n Notification)         { g.calls <- abortCall{n} }
func (g *fakeGateway) FinishSources(attempt int)            { g.calls <- finishCall{attempt} }
func (g *fakeGateway) StopTasks(attempt int)                { g.calls <- stopCall{attempt} }

// Cancel ends the attempt as the runtime does: every task returns the cause.
func (g *fakeGateway) Cancel(req CancelRequest) {
	g.calls <- req
	g.report(AttemptEnded{Attempt: req.Attempt, Err: req.Err, Error: req.Reason, Cancellation: true})
}

func (g *fakeGateway) report(r Report) {
	g.mu.Lock()
	l := g.l
	g.mu.Unlock()
	l.Report(r)
}

func (g *fakeGateway) ack(attempt int, task string, id int64) {
	g.report(Acknowledge{Attempt: attempt, Task: task, Checkpoint: id, StateSize: 10, CheckpointedSize: 10, Sync: time.Millisecond})
}

func (g *fakeGateway) fail(attempt int, task, operator string, subtask int) {
	err := fmt.Errorf("operator %q (subtask %d): boom", operator, subtask)
	g.report(TaskFailed{Attempt: attempt, Task: task, Operator: operator, Subtask: subtask, Error: err.Error(), Err: err})
	g.report(AttemptEnded{Attempt: attempt, Error: err.Error(), Err: err})
}

// next returns the next request of type T, skipping others.
func next[T any](t *testing.T, g *fakeGateway) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c := <-g.calls:
			if v, ok := c.(T); ok {
				return v
			}
			t.Logf("skipping %T %+v", c, c)
		case <-deadline:
			var zero T
			t.Fatalf("no %T request within 10s", zero)
			return zero
		}
	}
}

type harness struct {
	t     *testing.T
	jm    *JobMaster
	gw    *fakeGateway
	clock *fakeClock
	stop  context.CancelFunc
	done  chan error
}

func start(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, gw: newFakeGateway(), clock: newFakeClock(), done: make(chan error, 1)}
	opts.JobID = "job"
	opts.Clock = h.clock
	if opts.Storage == nil {
		opts.Storage = storage.NewMemoryStore()
	}
	jm, err := New(opts, h.gw)
	if err != nil {
		t.Fatal(err)
	}
	h.jm = jm
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- jm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of the cancel")
		}
	})
	return h
}

// waitTimer waits until the JobMaster armed a one-shot timer.
func (h *harness) waitTimer() {
	h.t.Helper()
	for i := 0; h.clock.oneShots() == 0; i++ {
		if i > 1000 {
			h.t.Fatal("no timer armed within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitAcked waits until checkpoint id's statistics count n acks.
func (h *harness) waitAcked(id int64, n int) {
	h.t.Helper()
	for i := 0; ; i++ {
		if st, ok := h.jm.Checkpoint(id); ok && len(st.Subtasks) >= n {
			return
		}
		if i > 1000 {
			h.t.Fatalf("checkpoint %d: %d acks not seen within 10s", id, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// end cancels the job and returns Run's error.
func (h *harness) end() error {
	h.t.Helper()
	h.stop()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return within 10s of the cancel")
		return nil
	}
}

func async[T any](f func() (T, error)) chan struct {
	v   T
	err error
} {
	ch := make(chan struct {
		v   T
		err error
	}, 1)
	go func() {
		v, err := f()
		ch <- struct {
			v   T
			err error
		}{v, err}
	}()
	return ch
}

func wait[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		var zero T
		return zero
	}
}

// TestLateAck: one task acknowledges at once, the other 5s later on the
// injected clock (before the 10s timeout): the checkpoint completes, the
// tasks of the attempt are told, and the statistics show the late ack 5s
// after the trigger.
func TestLateAck(t *testing.T) {
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 10_000}})
	dep := next[DeployRequest](t, h.gw)
	if dep.Attempt != 0 || dep.Restore != nil {
		t.Fatalf("deploy = %+v, want attempt 0 without state", dep)
	}
	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr := next[TriggerRequest](t, h.gw)
	if tr.Attempt != 0 || tr.Kind != checkpoint.KindCheckpoint || tr.Dir != "job/chk-1" {
		t.Fatalf("trigger = %+v", tr)
	}
	h.gw.ack(0, "a", tr.Checkpoint)
	h.waitAcked(tr.Checkpoint, 1)
	h.clock.Advance(5 * time.Second)
	h.gw.ack(0, "b", tr.Checkpoint)
	r := wait(t, res)
	if r.err != nil || r.v != tr.Checkpoint {
		t.Fatalf("TriggerCheckpoint = %d, %v; want %d", r.v, r.err, tr.Checkpoint)
	}
	if n := next[completeCall](t, h.gw); n.Checkpoint != tr.Checkpoint || n.Attempt != 0 {
		t.Fatalf("notify complete = %+v", n)
	}
	st, ok := h.jm.Checkpoint(tr.Checkpoint)
	if !ok || st.Status != Completed || len(st.Subtasks) != 2 {
		t.Fatalf("stats = %+v", st)
	}
	late := st.Subtasks[0].AckTime.Sub(st.Subtasks[1].AckTime)
	if late < 0 {
		late = -late
	}
	if late != 5*time.Second {
		t.Fatalf("acks %v apart on the injected clock, want 5s", late)
	}
	if err := h.end(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// TestAckForOldAttempt proves the fencing: after attempt 0 failed and
// attempt 1 runs, acknowledgements and a source's end reported by attempt
// 0's tasks are dropped — the checkpoint of attempt 1 they name times out,
// and no final checkpoint starts — while attempt 1's own acks complete the
// next one.
func TestAckForOldAttempt(t *testing.T) {
	strategy, err := restart.New(restart.Options{Kind: restart.KindFixedDelay,
		FixedDelay: restart.FixedDelayOptions{Attempts: 1, Delay: time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var failures []string
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 2_000, TolerableFailures: 5}, Restart: strategy,
		OnFailure: func(err error, restarting bool) { failures = append(failures, fmt.Sprint(err, restarting)) }})
	next[DeployRequest](t, h.gw)
	h.gw.fail(0, "b", "map", 1)
	h.waitTimer() // the restart delay
	h.clock.Advance(time.Second)
	if dep := next[DeployRequest](t, h.gw); dep.Attempt != 1 {
		t.Fatalf("second deploy is attempt %d, want 1", dep.Attempt)
	}
	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr := next[TriggerRequest](t, h.gw)
	if tr.Attempt != 1 {
		t.Fatalf("trigger for attempt %d, want 1", tr.Attempt)
	}
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	h.gw.report(SourceFinished{Attempt: 0, Task: "a"})
	h.gw.report(AttemptEnded{Attempt: 0, Error: "stale end"})
	h.gw.ack(1, "a", tr.Checkpoint) // only one of attempt 1's tasks
	h.waitAcked(tr.Checkpoint, 1)
	h.clock.Advance(3 * time.Second) // past the timeout
	if r := wait(t, res); r.err == nil {
		t.Fatalf("checkpoint %d completed with acks of an old attempt", r.v)
	}
	if n := next[abortCall](t, h.gw); n.Attempt != 1 || n.Checkpoint != tr.Checkpoint {
		t.Fatalf("abort notification = %+v", n)
	}
	res = async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr2 := next[TriggerRequest](t, h.gw)
	h.gw.ack(1, "a", tr2.Checkpoint)
	h.gw.ack(1, "b", tr2.Checkpoint)
	if r := wait(t, res); r.err != nil {
		t.Fatalf("checkpoint of attempt 1: %v", r.err)
	}
	if err := h.end(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled (the stale AttemptEnded must not end the job)", err)
	}
	if len(failures) != 1 || !strings.Contains(failures[0], `operator "map" (subtask 1)`) {
		t.Fatalf("failures = %q, want the one of attempt 0", failures)
	}
}

// TestNeverAck: tasks that never acknowledge make every checkpoint expire;
// with no tolerable failure the coordinator fails the job, the JobMaster
// cancels the attempt through the gateway, and Run returns that failure.
func TestNeverAck(t *testing.T) {
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 1_000, TolerableFailures: 0}})
	next[DeployRequest](t, h.gw)
	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr := next[TriggerRequest](t, h.gw)
	h.clock.Advance(2 * time.Second)
	if r := wait(t, res); r.err == nil {
		t.Fatalf("checkpoint %d completed without acks", tr.Checkpoint)
	}
	cancel := next[CancelRequest](t, h.gw)
	if cancel.Attempt != 0 || cancel.Reason == "" {
		t.Fatalf("cancel = %+v", cancel)
	}
	var err error
	select {
	case err = <-h.done:
		h.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not fail")
	}
	if err == nil || errors.Is(err, context.Canceled) || err.Error() != cancel.Reason {
		t.Fatalf("Run = %v, want the coordinator's reason %q", err, cancel.Reason)
	}
}

// TestFailWhileSavepointPending: a task fails while a stop-with-savepoint
// waits for acknowledgements: the savepoint fails, nothing of it is left,
// the job does not stop but restarts, and checkpoints go on in attempt 1.
func TestFailWhileSavepointPending(t *testing.T) {
	strategy, err := restart.New(restart.Options{Kind: restart.KindFixedDelay,
		FixedDelay: restart.FixedDelayOptions{Attempts: 1, Delay: restart.NoDelay}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 60_000}, Restart: strategy})
	next[DeployRequest](t, h.gw)
	dir := t.TempDir()
	sp := async(func() (string, error) { return h.jm.TriggerSavepoint(context.Background(), dir, true) })
	tr := next[TriggerRequest](t, h.gw)
	if tr.Kind != checkpoint.KindSavepoint {
		t.Fatalf("trigger = %+v, want a savepoint", tr)
	}
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.fail(0, "b", "sink", 0)
	if r := wait(t, sp); r.err == nil {
		t.Fatalf("savepoint %s completed although a task failed", r.v)
	}
	if dep := next[DeployRequest](t, h.gw); dep.Attempt != 1 {
		t.Fatalf("deploy attempt %d, want 1", dep.Attempt)
	}
	store, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Stat(context.Background(), path.Join(tr.Dir, storage.MetadataName)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("savepoint metadata: %v, want not found", err)
	}
	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr2 := next[TriggerRequest](t, h.gw)
	h.gw.ack(1, "a", tr2.Checkpoint)
	h.gw.ack(1, "b", tr2.Checkpoint)
	if r := wait(t, res); r.err != nil {
		t.Fatalf("checkpoint after the restart: %v", r.err)
	}
	if err := h.end(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// TestShutdownWhenStorageHangs: the metadata write of a checkpoint never
// returns (the fault store holds it for ever, ignoring its context); a
// cancel still ends Run within the storage timeout, not never.
func TestShutdownWhenStorageHangs(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	faults := storage.NewFaults(1)
	held := make(chan struct{}, 1)
	if err := faults.Add(storage.Rule{Ops: storage.OpCreate, Path: "job/chk-*/" + storage.MetadataName,
		Delay: func(storage.Op, string) {
			held <- struct{}{}
			<-release
		}}); err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 600_000}, StorageTimeout: timeout,
		Storage: storage.WithFaults(storage.NewMemoryStore(), faults)})
	next[DeployRequest](t, h.gw)
	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr := next[TriggerRequest](t, h.gw)
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	<-held // the metadata write hangs
	began := time.Now()
	err := h.end()
	if took := time.Since(began); took > timeout+2*time.Second {
		t.Fatalf("Run took %v to return after the cancel, want about %v", took, timeout)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if r := wait(t, res); r.err == nil {
		t.Fatal("the checkpoint whose metadata never landed completed")
	}
}

// TestOptions: a negative storage timeout is refused, naming the field.
func TestOptions(t *testing.T) {
	_, err := New(Options{Storage: storage.NewMemoryStore(), StorageTimeout: -time.Second}, newFakeGateway())
	if err == nil || !strings.Contains(err.Error(), "Options.StorageTimeout") {
		t.Fatalf("New = %v, want an error naming Options.StorageTimeout", err)
	}
	if _, err := New(Options{Storage: storage.NewMemoryStore()}, nil); err == nil {
		t.Fatal("New accepted no gateway")
	}
}

// TestBoundedEnd: the source reads all its input; the final checkpoint is
// taken, then (only then) the sources are let go, and the job finishes.
func TestBoundedEnd(t *testing.T) {
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 60_000}})
	next[DeployRequest](t, h.gw)
	h.gw.report(SourceFinished{Attempt: 0, Task: "a"})
	tr := next[TriggerRequest](t, h.gw)
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	if n := next[completeCall](t, h.gw); n.Checkpoint != tr.Checkpoint {
		t.Fatalf("notify complete = %+v", n)
	}
	if f := next[finishCall](t, h.gw); f.attempt != 0 {
		t.Fatalf("finish for attempt %d", f.attempt)
	}
	h.gw.report(AttemptEnded{Attempt: 0})
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not finish")
	}
}

// TestStopWithSavepointGrace: the savepoint of a stop completes, the tasks
// are told to stop and do not end; after the grace period on the injected
// clock they are cancelled, and the job counts as stopped (Run nil).
func TestStopWithSavepointGrace(t *testing.T) {
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 60_000}})
	next[DeployRequest](t, h.gw)
	dir := t.TempDir()
	sp := async(func() (string, error) { return h.jm.TriggerSavepoint(context.Background(), dir, true) })
	tr := next[TriggerRequest](t, h.gw)
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	if r := wait(t, sp); r.err != nil || !strings.HasSuffix(r.v, tr.Dir) {
		t.Fatalf("savepoint = %q, %v; want one ending in %s", r.v, r.err, tr.Dir)
	}
	next[stopCall](t, h.gw)
	h.waitTimer()
	h.clock.Advance(stopGrace)
	if c := next[CancelRequest](t, h.gw); !errors.Is(c.Err, jobstate.ErrStopped) {
		t.Fatalf("cancel = %+v, want the stop's", c)
	}
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not stop")
	}
}
