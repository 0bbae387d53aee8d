package cluster

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/deploy"
)

// Scheduler modes (Flink's scheduler-mode).
const (
	// SchedulerDefault runs every attempt of a job at the parallelism its
	// flags give it, waiting for as many slots.
	SchedulerDefault = "default"
	// SchedulerReactive runs every attempt at the parallelism the slots
	// allow and rescales the job when TaskManagers join or leave.
	SchedulerReactive = "reactive"
)

// ReactiveOptions configure reactive mode, under the keys of Flink's
// adaptive scheduler (jobmanager.adaptive-scheduler.*), with the defaults
// Flink gives them in reactive mode.
type ReactiveOptions struct {
	// MinParallelismIncrease is how much the job's cumulative parallelism
	// (the sum of its vertices' parallelism, as Flink counts it) must grow
	// before a running job scales up (min-parallelism-increase). Default
	// 1; at least 1.
	MinParallelismIncrease int
	// StabilizationTimeout is how long the slots must stay unchanged
	// before the job is placed on fewer slots than it could use at most,
	// or scales up (resource-stabilization-timeout). Default 0, Flink's in
	// reactive mode: at once. Not negative.
	StabilizationTimeout time.Duration
	// WaitTimeout is how long an attempt waits for a first slot before the
	// job fails (resource-wait-timeout). Default 0: for ever (Flink's -1,
	// its default in reactive mode). Not negative.
	WaitTimeout time.Duration
}

// EnsureDefaults fills every zero field with its default.
func (o *ReactiveOptions) EnsureDefaults() {
	if o.MinParallelismIncrease == 0 {
		o.MinParallelismIncrease = 1
	}
}

// Validate reports the first invalid field.
func (o *ReactiveOptions) Validate() error {
	switch {
	case o.MinParallelismIncrease < 1:
		return fmt.Errorf("reactive mode: min parallelism increase %d: use 1 or more (jobmanager.adaptive-scheduler.min-parallelism-increase)", o.MinParallelismIncrease)
	case o.StabilizationTimeout < 0:
		return fmt.Errorf("reactive mode: resource stabilization timeout %v: use 0 or a positive duration (jobmanager.adaptive-scheduler.resource-stabilization-timeout)", o.StabilizationTimeout)
	case o.WaitTimeout < 0:
		return fmt.Errorf("reactive mode: resource wait timeout %v: use 0 (wait for ever) or a positive duration (jobmanager.adaptive-scheduler.resource-wait-timeout)", o.WaitTimeout)
	}
	return nil
}

// Reactive is the pure core of reactive mode for one job: from the slots
// the job may use and what its attempts do, it decides when to place an
// attempt and at what parallelism, and when a running attempt rescales.
// It reads no clock and starts nothing; the job service drives it (the
// scheduler when an attempt asks for slots, a watcher while one runs) and
// carries out its decisions.
//
// The job's parallelism n is the most subtasks of a vertex: vertex v runs
// min(n, v's MaxParallelism), and n itself is at most the largest
// MaxParallelism and at most the slots (slot sharing: one subtask of each
// vertex per slot). A TaskManager lost takes the running attempt down (it
// fails over); the next placement takes what the remaining slots allow,
// never waiting for the lost slots to come back.
type Reactive struct {
	opts ReactiveOptions
	caps []int // each vertex's MaxParallelism
	most int   // the largest useful parallelism: the largest cap

	slots   int       // slots the job may use: the free ones and its own
	changed time.Time // when slots last changed
	running int       // the running attempt's parallelism; 0 while none runs
	waiting time.Time // since when the next placement waits (running == 0)
}

// NewReactive returns the core of a job of plan, waiting since now for its
// first placement, with no slot yet. opts must be valid (defaults filled).
func NewReactive(opts ReactiveOptions, plan deploy.Plan, now time.Time) *Reactive {
	r := &Reactive{opts: opts, changed: now, waiting: now}
	for _, v := range plan.Vertices {
		c := v.MaxParallelism
		if c <= 0 {
			c = plan.MaxParallelism
		}
		r.caps = append(r.caps, c)
		r.most = max(r.most, c)
	}
	return r
}

// Most is the largest parallelism the job can use.
func (r *Reactive) Most() int { return r.most }

// Running is the running attempt's parallelism, 0 while none runs.
func (r *Reactive) Running() int { return r.running }

// Slots sets the number of slots the job may use at now: the free slots of
// the TaskManagers that can take tasks, and those its attempt holds.
func (r *Reactive) Slots(n int, now time.Time) {
	if n != r.slots {
		r.slots, r.changed = n, now
	}
}

// Deployed records that an attempt runs at parallelism n.
func (r *Reactive) Deployed(n int) { r.running = n }

// Released records that the running attempt ended, or is being cancelled
// to rescale: the next placement waits from now. Nothing changes while no
// attempt runs.
func (r *Reactive) Released(now time.Time) {
	if r.running > 0 {
		r.running, r.waiting = 0, now
	}
}

// Target is the parallelism the slots allow now.
func (r *Reactive) Target() int { return min(r.slots, r.most) }

// Cumulative is the sum of the vertices' parallelism at parallelism n.
func (r *Reactive) Cumulative(n int) int {
	sum := 0
	for _, c := range r.caps {
		sum += min(n, c)
	}
	return sum
}

// Decision is what the core decides: Place, Rescale, Wait or Fail.
type Decision interface{ decision() }

// Place: place the waiting attempt at Parallelism.
type Place struct{ Parallelism int }

// Rescale: cancel the running attempt (at From) so that the next one runs
// at To, from the latest completed checkpoint.
type Rescale struct{ From, To int }

// Wait: nothing to do before Until, or before the slots change when Until
// is zero.
type Wait struct{ Until time.Time }

// Fail: the waiting attempt fails (no slot came within the wait timeout).
type Fail struct{ Reason string }

func (Place) decision()   {}
func (Rescale) decision() {}
func (Wait) decision()    {}
func (Fail) decision()    {}

func (d Place) String() string   { return fmt.Sprintf("place parallelism=%d", d.Parallelism) }
func (d Rescale) String() string { return fmt.Sprintf("rescale %d->%d", d.From, d.To) }
func (d Fail) String() string    { return "fail: " + d.Reason }

// Decide returns what to do at now. While an attempt runs, the answer is
// Rescale or Wait; while one waits to be placed, Place, Wait or Fail.
func (r *Reactive) Decide(now time.Time) Decision {
	target := r.Target()
	settled := r.changed.Add(r.opts.StabilizationTimeout)
	if r.running > 0 {
		if target <= r.running || r.Cumulative(target)-r.Cumulative(r.running) < r.opts.MinParallelismIncrease {
			return Wait{}
		}
		if now.Before(settled) {
			return Wait{Until: settled}
		}
		return Rescale{From: r.running, To: target}
	}
	if target < 1 {
		if r.opts.WaitTimeout <= 0 {
			return Wait{}
		}
		deadline := r.waiting.Add(r.opts.WaitTimeout)
		if !now.Before(deadline) {
			return Fail{Reason: fmt.Sprintf("no free slot came within %v (jobmanager.adaptive-scheduler.resource-wait-timeout)", r.opts.WaitTimeout)}
		}
		return Wait{Until: deadline}
	}
	if target < r.most && now.Before(settled) {
		return Wait{Until: settled}
	}
	return Place{Parallelism: target}
}
