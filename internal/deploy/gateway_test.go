package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeWorker records what the gateway asks of it and reports what a test
// tells it to.
type fakeWorker struct {
	id        string
	deployErr error
	// endOnCancel: a Cancel makes the worker report a TaskFailed and an
	// AttemptEnded (a cancellation), as a LocalGateway does.
	endOnCancel bool

	mu       sync.Mutex
	l        jobmaster.Listener
	attempt  int
	calls    []string
	cancels  []jobmaster.CancelRequest
	deployed int
	plans    []string // the fingerprint of each deploy's plan
}

func (w *fakeWorker) ID() string { return w.id }

func (w *fakeWorker) Deploy(ctx context.Context, req jobmaster.DeployRequest, plan Plan, p Placement, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, fmt.Sprintf("deploy %d", req.Attempt))
	w.plans = append(w.plans, plan.Fingerprint)
	if w.deployErr != nil {
		return nil, w.deployErr
	}
	w.l, w.attempt = l, req.Attempt
	w.deployed++
	var infos []jobmaster.TaskInfo
	for v, row := range p.Subtasks {
		for s, id := range row {
			if id == w.id {
				infos = append(infos, jobmaster.TaskInfo{ID: fmt.Sprintf("%d-%d", v, s), Source: plan.Vertices[v].Source})
			}
		}
	}
	return infos, nil
}

func (w *fakeWorker) call(s string) {
	w.mu.Lock()
	w.calls = append(w.calls, s)
	w.mu.Unlock()
}

func (w *fakeWorker) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	w.call(fmt.Sprintf("trigger %d/%d", req.Attempt, req.Checkpoint))
}
func (w *fakeWorker) NotifyComplete(n jobmaster.Notification) {
	w.call(fmt.Sprintf("complete %d/%d", n.Attempt, n.Checkpoint))
}
func (w *fakeWorker) NotifyAborted(n jobmaster.Notification) {
	w.call(fmt.Sprintf("aborted %d/%d", n.Attempt, n.Checkpoint))
}
func (w *fakeWorker) FinishSources(attempt int) { w.call(fmt.Sprintf("finish %d", attempt)) }
func (w *fakeWorker) StopTasks(attempt int)     { w.call(fmt.Sprintf("stop %d", attempt)) }
func (w *fakeWorker) Cancel(req jobmaster.CancelRequest) {
	w.mu.Lock()
	w.calls = append(w.calls, fmt.Sprintf("cancel %d", req.Attempt))
	w.cancels = append(w.cancels, req)
	l, attempt, end := w.l, w.attempt, w.endOnCancel && req.Attempt == w.attempt
	w.mu.Unlock()
	if end && l != nil {
		err := req.Err
		if err == nil {
			err = errors.New(req.Reason)
		}
		l.Report(jobmaster.TaskFailed{Attempt: attempt, Task: "x", Error: err.Error(), Err: err, Subtask: -1})
		l.Report(jobmaster.AttemptEnded{Attempt: attempt, Error: err.Error(), Err: err, Cancellation: errors.Is(err, context.Canceled)})
	}
}

func (w *fakeWorker) report(r jobmaster.Report) {
	w.mu.Lock()
	l := w.l
	w.mu.Unlock()
	l.Report(r)
}

func (w *fakeWorker) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// staticScheduler places every attempt the same way.
type staticScheduler struct {
	p       Placement
	workers []Worker
	err     error
}

func (s staticScheduler) Place(ctx context.Context, plan Plan, attempt int) (Placement, []Worker, error) {
	return s.p, s.workers, s.err
}

// jm is the JobMaster as a Listener: it keeps the reports.
type jm struct {
	mu      sync.Mutex
	reports []jobmaster.Report
}

func (j *jm) Report(r jobmaster.Report) {
	j.mu.Lock()
	j.reports = append(j.reports, r)
	j.mu.Unlock()
}

func (j *jm) got() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, r := range j.reports {
		switch r := r.(type) {
		case jobmaster.TaskRunning:
			out = append(out, fmt.Sprintf("running %d %s", r.Attempt, r.Task))
		case jobmaster.TaskFailed:
			out = append(out, fmt.Sprintf("failed %d %s: %s", r.Attempt, r.Task, r.Error))
		case jobmaster.AttemptEnded:
			out = append(out, fmt.Sprintf("ended %d err=%q cancellation=%v", r.Attempt, r.Error, r.Cancellation))
		case jobmaster.Acknowledge:
			out = append(out, fmt.Sprintf("ack %d %s %d", r.Attempt, r.Task, r.Checkpoint))
		default:
			out = append(out, fmt.Sprintf("%T %d", r, r.AttemptNumber()))
		}
	}
	return out
}

func twoWorkerSetup(workers ...*fakeWorker) (Plan, staticScheduler) {
	plan := Plan{Job: "j", Vertices: []Vertex{{ID: 0, Name: "src", Parallelism: 2, Source: true}, {ID: 1, Name: "sink", Parallelism: 2}}, Fingerprint: "f"}
	p := Placement{Workers: map[string]string{}, Subtasks: [][]string{{}, {}}}
	var ws []Worker
	for i, w := range workers {
		p.Workers[w.id] = fmt.Sprintf("127.0.0.1:%d", i+1)
		ws = append(ws, w)
	}
	for s := range 2 {
		for v := range 2 {
			p.Subtasks[v] = append(p.Subtasks[v], workers[s%len(workers)].id)
		}
	}
	return plan, staticScheduler{p: p, workers: ws}
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestGatewayFansOutAndMerges: a deploy returns the union of the workers'
// tasks; requests of the current attempt reach every worker, those of
// another attempt none; reports pass through; one AttemptEnded once every
// worker ended.
func TestGatewayFansOutAndMerges(t *testing.T) {
	a, b := &fakeWorker{id: "a"}, &fakeWorker{id: "b"}
	plan, sched := twoWorkerSetup(b, a) // any order: deployed in id order
	var prepared []string
	plan.Prepare = func(ctx context.Context, r *jobmaster.Restored) error {
		prepared = append(prepared, fmt.Sprint(len(a.log()), len(b.log())))
		return nil
	}
	g := NewGateway(plan, sched, nil)
	l := &jm{}
	infos, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 1}, l)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ti := range infos {
		ids = append(ids, fmt.Sprintf("%s %v", ti.ID, ti.Source))
	}
	slices.Sort(ids)
	want(t, "tasks", ids, []string{"0-0 true", "0-1 true", "1-0 false", "1-1 false"})
	want(t, "prepared before any worker deployed", prepared, []string{"0 0"})
	g.TriggerCheckpoint(jobmaster.TriggerRequest{Attempt: 1, Checkpoint: 7})
	g.TriggerCheckpoint(jobmaster.TriggerRequest{Attempt: 0, Checkpoint: 8})
	g.NotifyComplete(jobmaster.Notification{Attempt: 1, Checkpoint: 7})
	g.NotifyAborted(jobmaster.Notification{Attempt: 2, Checkpoint: 7})
	g.FinishSources(1)
	g.StopTasks(1)
	for _, w := range []*fakeWorker{a, b} {
		want(t, "worker "+w.id, w.log(), []string{"deploy 1", "trigger 1/7", "complete 1/7", "finish 1", "stop 1"})
	}
	a.report(jobmaster.TaskRunning{Attempt: 1, Task: "0-0"})
	b.report(jobmaster.Acknowledge{Attempt: 1, Task: "0-1", Checkpoint: 7})
	a.report(jobmaster.AttemptEnded{Attempt: 1})
	want(t, "reports before b ended", l.got(), []string{"running 1 0-0", "ack 1 0-1 7"})
	b.report(jobmaster.AttemptEnded{Attempt: 1})
	b.report(jobmaster.AttemptEnded{Attempt: 1}) // a repeat changes nothing
	want(t, "reports", l.got(), []string{"running 1 0-0", "ack 1 0-1 7", `ended 1 err="" cancellation=false`})
}

// TestGatewayFailureCancelsTheOthers: one worker's TaskFailed cancels the
// other at once (which never ends until cancelled), with the failure as
// the cause; the JobMaster sees one TaskFailed and one AttemptEnded with
// the failure's error, not a cancellation.
func TestGatewayFailureCancelsTheOthers(t *testing.T) {
	a, b := &fakeWorker{id: "a"}, &fakeWorker{id: "b", endOnCancel: true}
	plan, sched := twoWorkerSetup(a, b)
	g := NewGateway(plan, sched, nil)
	l := &jm{}
	if _, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 3}, l); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	a.report(jobmaster.TaskFailed{Attempt: 3, Task: "1-0", Error: boom.Error(), Err: boom})
	want(t, "b", b.log(), []string{"deploy 3", "cancel 3"})
	if len(b.cancels) != 1 || !errors.Is(b.cancels[0].Err, boom) {
		t.Fatalf("b was cancelled with %+v, want the failure as its cause", b.cancels)
	}
	want(t, "a", a.log(), []string{"deploy 3"})
	a.report(jobmaster.AttemptEnded{Attempt: 3, Error: boom.Error(), Err: boom})
	want(t, "reports", l.got(), []string{"failed 3 1-0: boom", `ended 3 err="boom" cancellation=false`})
}

// TestGatewayCancelIsACancellation: the JobMaster's cancel reaches every
// worker; their TaskFailed (of the cancel) do not cancel the others again,
// and the attempt ends as a cancellation. A report of an older attempt,
// from its workers' listeners, is dropped.
func TestGatewayCancelIsACancellation(t *testing.T) {
	a, b := &fakeWorker{id: "a", endOnCancel: true}, &fakeWorker{id: "b", endOnCancel: true}
	plan, sched := twoWorkerSetup(a, b)
	g := NewGateway(plan, sched, nil)
	old := &jm{}
	if _, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 1}, old); err != nil {
		t.Fatal(err)
	}
	oldListener := a.l
	a.report(jobmaster.AttemptEnded{Attempt: 1, Error: "x"})
	b.report(jobmaster.AttemptEnded{Attempt: 1, Error: "x"})
	l := &jm{}
	if _, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 2}, l); err != nil {
		t.Fatal(err)
	}
	oldListener.Report(jobmaster.TaskRunning{Attempt: 1, Task: "0-0"})
	a.report(jobmaster.TaskRunning{Attempt: 1, Task: "0-0"}) // a stale report on the new listener
	g.Cancel(jobmaster.CancelRequest{Attempt: 1, Reason: "stale"})
	g.Cancel(jobmaster.CancelRequest{Attempt: 2, Reason: context.Canceled.Error(), Err: context.Canceled})
	want(t, "a", a.log(), []string{"deploy 1", "deploy 2", "cancel 2"})
	want(t, "b", b.log(), []string{"deploy 1", "deploy 2", "cancel 2"})
	want(t, "reports", l.got(), []string{"failed 2 x: context canceled", `ended 2 err="context canceled" cancellation=true`})
	want(t, "old reports", old.got()[1:], nil)
}

// TestGatewayDeployErrorMidway: a worker's deploy fails: the workers
// already deployed are cancelled and waited for, the later ones are not
// deployed, and the error names the worker; nothing of the attempt reaches
// the JobMaster after it.
func TestGatewayDeployErrorMidway(t *testing.T) {
	a := &fakeWorker{id: "a"}
	b := &fakeWorker{id: "b", deployErr: errors.New("no room")}
	c := &fakeWorker{id: "c"}
	plan, sched := twoWorkerSetup(a, b)
	sched.p.Workers["c"] = "127.0.0.1:3"
	sched.p.Subtasks[1][1] = "c"
	sched.workers = append(sched.workers, c)
	g := NewGateway(plan, sched, nil)
	l := &jm{}
	done := make(chan error, 1)
	go func() {
		_, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 5}, l)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(a.log(), "cancel 5") {
		if time.Now().After(deadline) {
			t.Fatal("a was not cancelled")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Deploy returned (%v) before a ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	a.report(jobmaster.TaskFailed{Attempt: 5, Error: "cancelled"})
	a.report(jobmaster.AttemptEnded{Attempt: 5, Error: "cancelled", Cancellation: true})
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "worker b: no room") {
		t.Fatalf("Deploy = %v, want the error of worker b", err)
	}
	want(t, "c", c.log(), nil)
	want(t, "reports", l.got(), nil)
	// The attempt is not current: its requests go nowhere.
	g.TriggerCheckpoint(jobmaster.TriggerRequest{Attempt: 5, Checkpoint: 1})
	want(t, "a", a.log(), []string{"deploy 5", "cancel 5"})
}

// TestGatewayRefusals: a scheduler's error, a placement that does not
// fit the plan, a placement naming a worker the scheduler did not give,
// and a failing Prepare are each the error of Deploy, and nothing is
// deployed.
func TestGatewayRefusals(t *testing.T) {
	a, b := &fakeWorker{id: "a"}, &fakeWorker{id: "b"}
	plan, sched := twoWorkerSetup(a, b)
	for _, tc := range []struct {
		name  string
		edit  func(p *Plan, s *staticScheduler)
		error string
	}{
		{"scheduler", func(p *Plan, s *staticScheduler) { s.err = errors.New("waiting for 2 slots, 1 registered") },
			`deploy: place attempt 1 of job "j": waiting for 2 slots, 1 registered`},
		{"placement", func(p *Plan, s *staticScheduler) { s.p.Subtasks = s.p.Subtasks[:1] }, "the placement has 1 vertices"},
		{"worker", func(p *Plan, s *staticScheduler) { s.workers = s.workers[:1] }, `on worker "b" but gave no such worker (it gave "a")`},
		{"prepare", func(p *Plan, s *staticScheduler) {
			p.Prepare = func(context.Context, *jobmaster.Restored) error { return errors.New("cannot commit") }
		}, "cannot commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := plan, sched
			s.p.Subtasks = slices.Clone(s.p.Subtasks)
			tc.edit(&p, &s)
			_, err := NewGateway(p, s, nil).Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 1}, &jm{})
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("Deploy = %v, want an error containing %q", err, tc.error)
			}
			want(t, "a", a.log(), nil)
		})
	}
}

// TestGatewayCancelAcrossProcesses: workers whose cancellation errors
// arrive as text (not context.Canceled, as from another process) still
// end the attempt as a cancellation when the JobMaster cancelled it; a
// failure before the cancel stays a failure.
func TestGatewayCancelAcrossProcesses(t *testing.T) {
	for _, failFirst := range []bool{false, true} {
		a, b := &fakeWorker{id: "a"}, &fakeWorker{id: "b"}
		plan, sched := twoWorkerSetup(a, b)
		g := NewGateway(plan, sched, nil)
		l := &jm{}
		if _, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 1}, l); err != nil {
			t.Fatal(err)
		}
		if failFirst {
			a.report(jobmaster.TaskFailed{Attempt: 1, Error: "boom"})
		}
		g.Cancel(jobmaster.CancelRequest{Attempt: 1, Reason: "context canceled"})
		if !failFirst {
			a.report(jobmaster.TaskFailed{Attempt: 1, Error: "context canceled"})
		}
		a.report(jobmaster.AttemptEnded{Attempt: 1, Error: "context canceled"})
		b.report(jobmaster.AttemptEnded{Attempt: 1, Error: "context canceled"})
		got := l.got()
		wantEnd := `ended 1 err="context canceled" cancellation=true`
		if failFirst {
			wantEnd = `ended 1 err="boom" cancellation=false`
		}
		if got[len(got)-1] != wantEnd {
			t.Errorf("failure first %v: reports %q, want the last %q", failFirst, got, wantEnd)
		}
	}
}

// planningScheduler gives each attempt the job rescaled to the
// parallelism of its attempt number, all on one worker.
type planningScheduler struct {
	staticScheduler
	job Job
	w   Worker
}

func (s planningScheduler) PlaceAttempt(ctx context.Context, req jobmaster.DeployRequest) (Plan, Placement, []Worker, error) {
	j, err := s.job.Rescaled(req.Attempt)
	if err != nil {
		return Plan{}, Placement{}, nil, err
	}
	plan := j.Plan()
	p := Placement{Workers: map[string]string{s.w.ID(): "127.0.0.1:1"}}
	for _, v := range plan.Vertices {
		p.Subtasks = append(p.Subtasks, slices.Repeat([]string{s.w.ID()}, v.Parallelism))
	}
	return plan, p, []Worker{s.w}, nil
}

// TestGatewayPlanningScheduler: with a PlanningScheduler each attempt is
// deployed with the plan the scheduler chose (the job at another
// parallelism), its placement checked against that plan; the plan given to
// NewGateway is not used.
func TestGatewayPlanningScheduler(t *testing.T) {
	a := &fakeWorker{id: "a", endOnCancel: true}
	job := idleJob{plan: Plan{Job: "idle", MaxParallelism: 8, Fingerprint: "idle",
		Vertices: []Vertex{{ID: 0, Name: "src", Parallelism: 2, Source: true}, {ID: 1, Name: "one", Parallelism: 1, MaxParallelism: 1}}}}
	g := NewGateway(job.Plan(), planningScheduler{job: job, w: a}, nil)
	for attempt, tasks := range map[int]int{3: 4, 1: 2} {
		infos, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: attempt}, &jm{})
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != tasks {
			t.Errorf("attempt %d at parallelism %d: %d tasks, want %d (the capped vertex at 1)", attempt, attempt, len(infos), tasks)
		}
		if got := a.plans[len(a.plans)-1]; got != fmt.Sprintf("idle@%d", attempt) {
			t.Errorf("attempt %d deployed plan %s, want the rescaled one", attempt, got)
		}
		g.Cancel(jobmaster.CancelRequest{Attempt: attempt, Err: context.Canceled})
	}
	_, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 0}, &jm{})
	if err == nil || !strings.Contains(err.Error(), "parallelism 0") {
		t.Fatalf("attempt 0 (parallelism 0) = %v, want the Rescaled error", err)
	}
}
