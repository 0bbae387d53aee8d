package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/restart"
)

// reactiveRun is a job's reactive mode: its core (guarded by the jobRun's
// mu) and what the job service remembers of its attempts.
type reactiveRun struct {
	core *Reactive
	// ignored is the --parallelism the job was submitted with, "" if none.
	ignored string
	// placing is the parallelism of the attempt being deployed, last that
	// of the attempt deployed before it (0 before the first).
	placing, last int
	// pending: the watcher cancelled the running attempt to rescale, and
	// its end is not consulted yet. rescaled is the reason of the rescale
	// when the last end consulted was one, "" otherwise.
	pending  bool
	reason   string
	rescaled string
	// deployed wakes the watcher when an attempt was deployed.
	deployed chan struct{}
}

// startReactive makes run a job of reactive mode: its attempts are placed
// by the reactive scheduler it returns, and an attempt cancelled to
// rescale restarts at once without counting as a failure of the restart
// strategy (as Flink's adaptive scheduler: a rescale is a restart, counted
// in numRestarts, but not a failure). mopts is the JobMaster's options.
func (r *jobRun) startReactive(mopts *jobmaster.Options, log *slog.Logger) deploy.Scheduler {
	rs := &reactiveRun{core: NewReactive(r.jm.opts.Reactive, r.plan, r.jm.opts.Now()), deployed: make(chan struct{}, 1)}
	r.reactive = rs
	if p, ok := parallelismArg(r.args); ok {
		rs.ignored = p
		log.Info("reactive mode: the job's --parallelism is ignored; it runs at the parallelism of the free slots", "parallelism", p, "max_parallelism", rs.core.Most())
	}
	inner := mopts.Restart
	if inner == nil {
		inner = restart.None{}
	}
	mopts.Restart = reactiveRestart{Strategy: inner, run: r}
	r.standing = r.reactiveNote(0)
	r.note = r.standing
	return &reactiveScheduler{scheduler: scheduler{jm: r.jm, run: r}}
}

// parallelismArg finds a job's --parallelism among its flags.
func parallelismArg(args []string) (string, bool) {
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--parallelism="):
			return strings.TrimPrefix(a, "--parallelism="), true
		case a == "--parallelism" && i+1 < len(args):
			return args[i+1], true
		}
	}
	return "", false
}

// reactiveNote is the job's standing note in reactive mode, running at
// parallelism n (0: not yet placed). r.mu is held, or r is not shared yet.
func (r *jobRun) reactiveNote(n int) string {
	rs := r.reactive
	s := fmt.Sprintf("reactive mode: parallelism %d (at most %d)", n, rs.core.Most())
	if n == 0 {
		s = fmt.Sprintf("reactive mode: at the parallelism of the free slots (at most %d)", rs.core.Most())
	}
	if rs.ignored != "" {
		s += fmt.Sprintf("; --parallelism %s is ignored", rs.ignored)
	}
	return s
}

// reactiveRestart is a job's restart strategy in reactive mode: the end of
// an attempt cancelled to rescale restarts at once; other failures ask the
// job's own strategy.
type reactiveRestart struct {
	restart.Strategy
	run *jobRun
}

// OnFailure implements restart.Strategy.
func (s reactiveRestart) OnFailure(now time.Time) (bool, time.Duration) {
	r := s.run
	r.mu.Lock()
	rs := r.reactive
	rs.rescaled = ""
	if rs.pending {
		rs.pending, rs.rescaled = false, rs.reason
	}
	rescale := rs.rescaled != ""
	r.mu.Unlock()
	if rescale {
		return true, 0
	}
	return s.Strategy.OnFailure(now)
}

// reactiveDeployed records that req's attempt runs (reactive mode) and
// logs a rescale: the old and new parallelism and the checkpoint restored.
func (r *jobRun) reactiveDeployed(req jobmaster.DeployRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.reactive
	if rs == nil {
		return
	}
	rs.core.Deployed(rs.placing)
	rs.pending = false
	r.standing = r.reactiveNote(rs.placing)
	var restored int64
	if req.Restore != nil && req.Restore.Metadata != nil {
		restored = req.Restore.Metadata.ID
	}
	if rs.last != 0 && rs.last != rs.placing {
		r.jm.opts.Logger.Info("rescaled", "job", r.id, "from", rs.last, "to", rs.placing, "checkpoint", restored, "attempt", req.Attempt)
	}
	rs.last = rs.placing
	select {
	case rs.deployed <- struct{}{}:
	default:
	}
}

// reactiveScheduler places the attempts of a job in reactive mode: each
// at the parallelism the free slots allow (the Reactive core decides), the
// job built again at it (deploy.Job.Rescaled).
type reactiveScheduler struct {
	scheduler
}

var _ deploy.PlanningScheduler = (*reactiveScheduler)(nil)

// PlaceAttempt implements deploy.PlanningScheduler.
func (s *reactiveScheduler) PlaceAttempt(ctx context.Context, req jobmaster.DeployRequest) (deploy.Plan, deploy.Placement, []deploy.Worker, error) {
	jm, run := s.jm, s.run
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := jm.opts.Now()
		jm.mu.Lock()
		_, _, free := jm.offersLocked(run)
		changed := jm.changed
		jm.mu.Unlock()
		run.mu.Lock()
		rs := run.reactive
		rs.core.Released(now) // the previous attempt, if any, ended
		rs.core.Slots(free, now)
		d := rs.core.Decide(now)
		run.mu.Unlock()
		var until time.Time
		switch d := d.(type) {
		case Place:
			job, err := run.job.Rescaled(d.Parallelism)
			if err != nil {
				return deploy.Plan{}, deploy.Placement{}, nil, fmt.Errorf("reactive mode: %w", err)
			}
			plan := job.Plan()
			jm.mu.Lock()
			offers, streams, free := jm.offersLocked(run)
			if free < maxParallelism(plan) {
				jm.mu.Unlock()
				continue // a TaskManager left meanwhile: decide again
			}
			p, workers, err := jm.placeLocked(run, plan, offers, streams)
			jm.mu.Unlock()
			if err != nil {
				return deploy.Plan{}, deploy.Placement{}, nil, err
			}
			run.placed(req.Attempt, plan, p)
			run.mu.Lock()
			rs.placing = d.Parallelism
			run.mu.Unlock()
			jm.opts.Logger.Info("placed", "job", run.id, "attempt", req.Attempt, "taskmanagers", len(workers),
				"parallelism", d.Parallelism, "scheduler", SchedulerReactive, "free_slots", free)
			return plan, p, workers, nil
		case Fail:
			return deploy.Plan{}, deploy.Placement{}, nil, fmt.Errorf("job %s: %s", run.name, d.Reason)
		case Wait:
			until = d.Until
			note := "waiting for a free slot (reactive mode)"
			if !until.IsZero() {
				note = fmt.Sprintf("waiting for the slots to settle (reactive mode, %d free, jobmanager.adaptive-scheduler.resource-stabilization-timeout)", free)
				if free == 0 {
					note = fmt.Sprintf("waiting for a free slot (reactive mode, up to %v: jobmanager.adaptive-scheduler.resource-wait-timeout)", jm.opts.Reactive.WaitTimeout)
				}
			}
			run.waitingFor(note, req.Attempt, jm.opts.Reactive.WaitTimeout)
		}
		fire := rearm(&timer, until, jm.opts.Now())
		select {
		case <-changed:
		case <-fire:
		case <-ctx.Done():
			return deploy.Plan{}, deploy.Placement{}, nil, ctx.Err()
		}
	}
}

// rearm stops *timer and, when until is set, starts it again to fire at
// until: the channel to wait on, nil (never) without until.
func rearm(timer **time.Timer, until, now time.Time) <-chan time.Time {
	if until.IsZero() {
		return nil
	}
	if *timer != nil {
		(*timer).Stop()
	}
	*timer = time.NewTimer(max(until.Sub(now), 0))
	return (*timer).C
}

// errRescale is the cause of the cancel of an attempt that rescales.
var errRescale = errors.New("rescaling")

// watchReactive watches the slots while an attempt of run runs, and
// rescales the job (cancels the attempt so that the JobMaster restarts it
// from its latest checkpoint at once, and the scheduler places the next at
// the new parallelism) when the core decides so; until ctx ends.
func (jm *JobManager) watchReactive(ctx context.Context, run *jobRun) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := jm.opts.Now()
		jm.mu.Lock()
		usable := jm.usableLocked(run)
		changed := jm.changed
		jm.mu.Unlock()
		run.mu.Lock()
		rs := run.reactive
		var until time.Time
		var rescale *Rescale
		attempt := run.attempt
		if rs.core.Running() > 0 {
			rs.core.Slots(usable, now)
			switch d := rs.core.Decide(now).(type) {
			case Rescale:
				rescale = &d
				rs.core.Released(now)
				rs.pending = true
				rs.reason = fmt.Sprintf("rescaling from parallelism %d to %d: %d slots free or held", d.From, d.To, usable)
			case Wait:
				until = d.Until
			}
		}
		reason := rs.reason
		run.mu.Unlock()
		if rescale != nil {
			jm.opts.Logger.Info("rescaling: more slots are free", "job", run.id, "attempt", attempt, "from", rescale.From, "to", rescale.To, "slots", usable)
			run.gateway.Cancel(jobmaster.CancelRequest{Attempt: attempt, Reason: reason, Err: fmt.Errorf("%w: %s", errRescale, reason)})
			continue
		}
		fire := rearm(&timer, until, jm.opts.Now())
		select {
		case <-changed:
		case <-run.reactive.deployed:
		case <-fire:
		case <-ctx.Done():
			return
		}
	}
}
