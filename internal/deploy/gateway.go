package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/jobmaster"
)

// NewGateway returns the TaskGateway of a job whose tasks run on workers:
// each Deploy asks s for a placement and the workers of the attempt (and,
// when s is a PlanningScheduler, for the attempt's plan, which then
// replaces plan for that attempt), checks the placement against the plan, runs plan.Prepare (in this process,
// before any task of the attempt exists) and deploys each worker's part in
// the order of their ids. If a worker's deploy fails, the workers already
// deployed are cancelled (and waited for, bounded by ctx) and the error is
// returned. The requests of the current attempt go to every worker of it;
// the workers' reports pass through to the JobMaster, except that:
//   - the first TaskFailed of an attempt cancels the other workers at once,
//     and later ones (their consequence) are not passed on;
//   - one AttemptEnded is sent, once every worker of the attempt ended,
//     with the first failure's error (or, when all were cancelled, the
//     first cancellation's);
//   - reports of another attempt than the one deployed last are dropped.
//
// logger may be nil.
func NewGateway(plan Plan, s Scheduler, logger *slog.Logger) jobmaster.TaskGateway {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &gateway{plan: plan, sched: s, log: logger}
}

type gateway struct {
	plan  Plan
	sched Scheduler
	log   *slog.Logger

	mu  sync.Mutex
	cur *attempt // the attempt deployed last; nil before the first
}

// attempt is one deployed attempt: its workers and the merge of their
// reports.
type attempt struct {
	n       int
	workers []Worker
	l       jobmaster.Listener
	log     *slog.Logger

	mu        sync.Mutex
	deployed  map[string]bool // the workers whose Deploy returned
	ended     map[string]jobmaster.AttemptEnded
	failure   *jobmaster.TaskFailed // the first TaskFailed
	dead      bool                  // the deploy failed: nothing more is passed on
	cancelled bool                  // the JobMaster cancelled the attempt
	stale     bool                  // a later attempt was deployed
	// failedFirst: the first TaskFailed came before the JobMaster's
	// Cancel (else it is the cancel's consequence).
	failedFirst bool
	done        chan struct{} // closed once every deployed worker ended after dead
	sentEnd     bool
}

var _ jobmaster.TaskGateway = (*gateway)(nil)

// Deploy implements jobmaster.TaskGateway.
func (g *gateway) Deploy(ctx context.Context, req jobmaster.DeployRequest, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	plan := g.plan
	var p Placement
	var workers []Worker
	var err error
	if ps, ok := g.sched.(PlanningScheduler); ok {
		plan, p, workers, err = ps.PlaceAttempt(ctx, req)
	} else {
		p, workers, err = g.sched.Place(ctx, plan, req.Attempt)
	}
	if err != nil {
		return nil, fmt.Errorf("deploy: place attempt %d of job %q: %w", req.Attempt, g.plan.Job, err)
	}
	if err := p.Check(plan); err != nil {
		return nil, err
	}
	byID := map[string]Worker{}
	for _, w := range workers {
		byID[w.ID()] = w
	}
	var ids []string
	for id := range p.Workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	a := &attempt{n: req.Attempt, l: l, log: g.log.With("attempt", req.Attempt),
		deployed: map[string]bool{}, ended: map[string]jobmaster.AttemptEnded{}, done: make(chan struct{})}
	for _, id := range ids {
		w, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("deploy: the scheduler placed subtasks of job %q on worker %q but gave no such worker (it gave %s)", plan.Job, id, workerIDs(workers))
		}
		a.workers = append(a.workers, w)
	}
	if plan.Prepare != nil {
		if err := plan.Prepare(ctx, req.Restore); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	prev := g.cur
	g.cur = a
	g.mu.Unlock()
	if prev != nil {
		prev.mu.Lock()
		prev.stale = true // what it still reports is dropped
		prev.mu.Unlock()
	}
	var infos []jobmaster.TaskInfo
	for _, w := range a.workers {
		ti, err := w.Deploy(ctx, req, plan, p, workerListener{a: a, worker: w.ID()})
		if err != nil {
			err = fmt.Errorf("deploy: worker %s: %w", w.ID(), err)
			a.abandon(ctx, err)
			return nil, err
		}
		a.mu.Lock()
		a.deployed[w.ID()] = true
		a.mu.Unlock()
		infos = append(infos, ti...)
	}
	return infos, nil
}

func workerIDs(ws []Worker) string {
	var ids []string
	for _, w := range ws {
		ids = append(ids, fmt.Sprintf("%q", w.ID()))
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// abandon cancels the workers deployed so far after a failed deploy, and
// waits until they ended (or ctx ended).
func (a *attempt) abandon(ctx context.Context, err error) {
	a.mu.Lock()
	a.dead = true
	var deployed []Worker
	for _, w := range a.workers {
		if a.deployed[w.ID()] {
			deployed = append(deployed, w)
		}
	}
	waiting := !a.deployedEnded()
	if !waiting {
		close(a.done)
	}
	a.mu.Unlock()
	for _, w := range deployed {
		w.Cancel(jobmaster.CancelRequest{Attempt: a.n, Reason: err.Error(), Err: err})
	}
	if waiting {
		select {
		case <-a.done:
		case <-ctx.Done():
		}
	}
}

// deployedEnded reports whether every worker whose Deploy returned has
// ended. a.mu is held.
func (a *attempt) deployedEnded() bool {
	for id := range a.deployed {
		if _, ok := a.ended[id]; !ok {
			return false
		}
	}
	return true
}

// current returns the workers of attempt n, nil if n is not the current.
func (g *gateway) current(n int) []Worker {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil || g.cur.n != n {
		return nil
	}
	g.cur.mu.Lock()
	defer g.cur.mu.Unlock()
	if g.cur.dead {
		return nil
	}
	return g.cur.workers
}

// TriggerCheckpoint implements jobmaster.TaskGateway.
func (g *gateway) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	for _, w := range g.current(req.Attempt) {
		w.TriggerCheckpoint(req)
	}
}

// NotifyComplete implements jobmaster.TaskGateway.
func (g *gateway) NotifyComplete(n jobmaster.Notification) {
	for _, w := range g.current(n.Attempt) {
		w.NotifyComplete(n)
	}
}

// NotifyAborted implements jobmaster.TaskGateway.
func (g *gateway) NotifyAborted(n jobmaster.Notification) {
	for _, w := range g.current(n.Attempt) {
		w.NotifyAborted(n)
	}
}

// FinishSources implements jobmaster.TaskGateway.
func (g *gateway) FinishSources(attempt int) {
	for _, w := range g.current(attempt) {
		w.FinishSources(attempt)
	}
}

// StopTasks implements jobmaster.TaskGateway.
func (g *gateway) StopTasks(attempt int) {
	for _, w := range g.current(attempt) {
		w.StopTasks(attempt)
	}
}

// Cancel implements jobmaster.TaskGateway.
func (g *gateway) Cancel(req jobmaster.CancelRequest) {
	g.mu.Lock()
	if a := g.cur; a != nil && a.n == req.Attempt {
		a.mu.Lock()
		a.cancelled = true
		a.mu.Unlock()
	}
	g.mu.Unlock()
	for _, w := range g.current(req.Attempt) {
		w.Cancel(req)
	}
}

// workerListener is the Listener one worker of an attempt reports to.
type workerListener struct {
	a      *attempt
	worker string
}

// Report implements jobmaster.Listener.
func (wl workerListener) Report(r jobmaster.Report) {
	a := wl.a
	if r.AttemptNumber() != a.n {
		a.log.Debug("dropped a report of another attempt", "worker", wl.worker, "report_attempt", r.AttemptNumber())
		return
	}
	switch r := r.(type) {
	case jobmaster.TaskFailed:
		a.mu.Lock()
		first := a.failure == nil
		if first {
			a.failure = &r
			a.failedFirst = !a.cancelled
		}
		passing, cancelled := a.passingLocked(), a.cancelled || a.dead
		a.mu.Unlock()
		if !first {
			return
		}
		if passing {
			a.l.Report(r)
		}
		if cancelled {
			return // the JobMaster (or a failed deploy) cancels every worker itself
		}
		// The same error as the cause: a cancellation stays one.
		err := errorOf(r.Err, r.Error)
		a.log.Info("a worker failed: cancelling the others", "worker", wl.worker, "err", err)
		for _, w := range a.workers {
			if w.ID() != wl.worker {
				w.Cancel(jobmaster.CancelRequest{Attempt: a.n, Reason: err.Error(), Err: err})
			}
		}
	case jobmaster.AttemptEnded:
		a.mu.Lock()
		if _, ok := a.ended[wl.worker]; ok {
			a.mu.Unlock()
			return
		}
		a.ended[wl.worker] = r
		if a.dead {
			if a.deployedEnded() {
				select {
				case <-a.done:
				default:
					close(a.done)
				}
			}
			a.mu.Unlock()
			return
		}
		if len(a.ended) < len(a.workers) || a.sentEnd || a.stale {
			a.mu.Unlock()
			return
		}
		a.sentEnd = true
		end := a.merged()
		a.mu.Unlock()
		a.l.Report(end)
	default:
		a.mu.Lock()
		passing := a.passingLocked()
		a.mu.Unlock()
		if passing {
			a.l.Report(r)
		}
	}
}

// passingLocked reports whether the attempt's reports still go to the
// JobMaster: its deploy did not fail and no later attempt was deployed.
func (a *attempt) passingLocked() bool { return !a.dead && !a.stale }

// merged is the attempt's one AttemptEnded. A worker that ended without
// an error adds nothing. When the JobMaster cancelled the attempt before
// any task failed, it was cancelled. When every worker that ended with an error was
// cancelled, the attempt was cancelled (with the first cancellation's
// error); otherwise it failed, with the first TaskFailed's error or else
// the first error that is no cancellation. a.mu is held.
func (a *attempt) merged() jobmaster.AttemptEnded {
	end := jobmaster.AttemptEnded{Attempt: a.n}
	var cancelled, failed *jobmaster.AttemptEnded
	for _, w := range a.workers {
		e := a.ended[w.ID()]
		switch {
		case e.Err == nil && e.Error == "":
		case e.Cancellation:
			if cancelled == nil {
				cancelled = &e
			}
		default:
			if failed == nil {
				failed = &e
			}
		}
	}
	if a.cancelled && !a.failedFirst && (failed != nil || cancelled != nil) {
		// The JobMaster cancelled the attempt and nothing failed before:
		// a cancellation, also when the workers' errors came from another
		// process as text (no longer context.Canceled).
		e := cancelled
		if e == nil {
			e = failed
		}
		end.Err, end.Error, end.Cancellation = e.Err, e.Error, true
		return end
	}
	switch {
	case failed != nil:
		end.Err, end.Error = failed.Err, failed.Error
		if a.failure != nil {
			end.Err, end.Error = a.failure.Err, a.failure.Error
		}
		if end.Error == "" && end.Err != nil {
			end.Error = end.Err.Error()
		}
	case cancelled != nil:
		end.Err, end.Error, end.Cancellation = cancelled.Err, cancelled.Error, true
	}
	return end
}

// errorOf is the error a report carries: the value in process, its text
// otherwise.
func errorOf(err error, text string) error {
	if err != nil || text == "" {
		return err
	}
	return errors.New(text)
}
