package jobstate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// State is where a job is in its lifecycle.
type State int

const (
	// Created: no attempt deployed yet.
	Created State = iota
	// Running: the attempt's tasks run.
	Running
	// Finishing: every source read its bounded input; the final checkpoint
	// is taken, then the sources end.
	Finishing
	// Stopping: a stop-with-savepoint completed; the tasks stop.
	Stopping
	// Restarting: an attempt failed and the restart strategy allows another;
	// the job waits for the restart delay and the restore point.
	Restarting
	// Finished: the job ended without error (bounded input, or stopped with
	// a savepoint). Terminal.
	Finished
	// Cancelled: the job was cancelled. Terminal.
	Cancelled
	// Failed: an attempt failed and no restart is allowed, or none could
	// start. Terminal.
	Failed
)

var stateNames = [...]string{"Created", "Running", "Finishing", "Stopping", "Restarting", "Finished", "Cancelled", "Failed"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// Terminal reports whether no event moves the job out of s.
func (s State) Terminal() bool { return s == Finished || s == Cancelled || s == Failed }

// transitions is every legal change of state; the only place they are
// declared. A state absent from a list cannot be reached from its key.
var transitions = map[State][]State{
	Created:    {Running, Restarting, Cancelled, Failed},
	Running:    {Finishing, Stopping, Restarting, Finished, Cancelled, Failed},
	Finishing:  {Stopping, Restarting, Finished, Cancelled, Failed},
	Stopping:   {Restarting, Finished, Cancelled, Failed},
	Restarting: {Running, Cancelled, Failed},
}

// Legal reports whether the machine may move from one state to another.
func Legal(from, to State) bool { return slices.Contains(transitions[from], to) }

// Options configure a Machine.
type Options struct {
	// RetainOnCancel keeps the completed checkpoints of a cancelled job
	// (no DiscardRetained action). Default false: they are discarded.
	RetainOnCancel bool
}

// Machine is the lifecycle of one job. It is not safe for concurrent use.
type Machine struct {
	opts    Options
	state   State
	attempt int // the attempt deployed or being deployed; -1 before the first

	// of the current attempt
	sources    int             // source tasks
	finished   map[string]bool // sources that read all their input
	finalAsked bool            // the final checkpoint is requested and not done
	released   bool            // the sources were told to end (final checkpoint complete)
	stopReqs   int             // stop-with-savepoint requests in flight
	ending     bool            // the attempt's tasks have all ended
	cancelled  bool            // the job was cancelled
	failure    error           // set by FailJob: the attempt's error
	doneInRun  bool            // a checkpoint completed in this attempt

	everDone   bool  // a checkpoint completed in this job at some point
	runErr     error // the error of the last failed attempt, while restarting
	consulting bool  // ConsultRestart is out, RestartDecided not in
	deploying  bool  // Deploy is out, Deployed or DeployFailed not in
}

// New returns a machine in state Created.
func New(opts Options) *Machine { return &Machine{opts: opts, attempt: -1} }

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Attempt returns the number of the current attempt (0 for the first), -1
// before the first deployment. Messages of tasks that carry another
// attempt's number are stale and must be dropped (fencing).
func (m *Machine) Attempt() int { return m.attempt }

// Accepts reports whether a message of attempt's tasks is current: its
// attempt is the one deployed and still live (not ended, not restarting).
func (m *Machine) Accepts(attempt int) bool {
	return attempt == m.attempt && m.live() && !m.ending
}

func (m *Machine) live() bool {
	return m.state == Running || m.state == Finishing || m.state == Stopping
}

// Event is an input of Step.
type Event interface{ event() }

// Start begins the job (Created only): the first attempt is deployed.
type Start struct{}

// Deployed reports that the current attempt's tasks were deployed; Sources
// is how many of them run a source.
type Deployed struct{ Sources int }

// DeployFailed reports that the current attempt could not be deployed (or
// its coordinator could not start). JobCancelled: the job was cancelled.
type DeployFailed struct {
	Err          error
	JobCancelled bool
}

// SourceFinished reports that a source task read all its input.
type SourceFinished struct{ Task string }

// FinalCheckpointDone reports the end of the final checkpoint's request.
// CoordinatorRunning says whether the coordinator still takes requests
// (a failed final checkpoint is retried only then).
type FinalCheckpointDone struct {
	Err                error
	CoordinatorRunning bool
}

// StopRequested reports a stop-with-savepoint request, before it is given
// to the coordinator.
type StopRequested struct{}

// StopRequestDone reports the end of a stop-with-savepoint request.
type StopRequestDone struct{ Err error }

// CheckpointCompleted reports a completed checkpoint or savepoint.
// StopAfter: it is the savepoint of a stop.
type CheckpointCompleted struct{ Savepoint, StopAfter bool }

// FailJob reports the coordinator's decision to fail the job (tolerable
// checkpoint failures exceeded).
type FailJob struct{ Reason string }

// Cancel reports that the job is cancelled.
type Cancel struct{}

// StopGraceExpired reports that the tasks of a stopped attempt did not end
// within the grace period (ArmStopGrace).
type StopGraceExpired struct{}

// AttemptEnded reports that every task of the current attempt ended, with
// Err the attempt's error (nil: all ended normally). Cancellation: Err is a
// cancellation of the attempt (CancelTasks, or a context cancelled).
// JobCancelled: the job itself was cancelled.
type AttemptEnded struct {
	Err          error
	Cancellation bool
	JobCancelled bool
}

// RestartDecided is the restart strategy's answer to ConsultRestart.
type RestartDecided struct {
	Restart bool
	DelayMs int64
}

// RestartTimerFired reports that the restart delay (ArmRestartTimer) passed.
type RestartTimerFired struct{}

// RestartPointResolved reports the outcome of ResolveRestartPoint: Err
// means no attempt can start.
type RestartPointResolved struct{ Err error }

func (Start) event()                {}
func (Deployed) event()             {}
func (DeployFailed) event()         {}
func (SourceFinished) event()       {}
func (FinalCheckpointDone) event()  {}
func (StopRequested) event()        {}
func (StopRequestDone) event()      {}
func (CheckpointCompleted) event()  {}
func (FailJob) event()              {}
func (Cancel) event()               {}
func (StopGraceExpired) event()     {}
func (AttemptEnded) event()         {}
func (RestartDecided) event()       {}
func (RestartTimerFired) event()    {}
func (RestartPointResolved) event() {}

// Action is an output of Step, for the shell to carry out in order.
type Action interface {
	action()
	String() string
}

// Deploy deploys attempt Attempt; answer with Deployed or DeployFailed.
type Deploy struct{ Attempt int }

// QuiesceCheckpoints stops periodic checkpoints (requests still run).
type QuiesceCheckpoints struct{}

// ResumeCheckpoints resumes periodic checkpoints.
type ResumeCheckpoints struct{}

// TriggerFinalCheckpoint requests the final checkpoint; its end is
// reported with FinalCheckpointDone.
type TriggerFinalCheckpoint struct{}

// StopCheckpoints stops the coordinator (pending checkpoints abort): no
// later checkpoint can complete.
type StopCheckpoints struct{ Reason string }

// FinishSources lets the sources, waiting after their input, end.
type FinishSources struct{}

// StopTasks tells every task to stop (stop-with-savepoint).
type StopTasks struct{}

// ArmStopGrace arms the timer after which a stopped attempt's tasks are
// cancelled; report it with StopGraceExpired.
type ArmStopGrace struct{}

// CancelTasks cancels the attempt's tasks; Cause is why. Stop: it is the
// end of a stop-with-savepoint (the attempt then counts as stopped).
type CancelTasks struct {
	Cause error
	Stop  bool
}

// Settle settles the checkpoints of an ended attempt: stop the coordinator
// (with Err's reason), clean up what aborted checkpoints left, fail the
// requests still waiting.
type Settle struct{ Err error }

// ConsultRestart asks the restart strategy about the failure Err; answer
// with RestartDecided.
type ConsultRestart struct{ Err error }

// ArmRestartTimer arms the restart delay; report it with RestartTimerFired.
type ArmRestartTimer struct{ DelayMs int64 }

// ResolveRestartPoint chooses the checkpoint the next attempt restores;
// answer with RestartPointResolved. Quick: a checkpoint completed in the
// failed attempt (its candidates are checked shallowly). EverCompleted: a
// checkpoint completed in this job at some point (starting without state is
// then refused).
type ResolveRestartPoint struct{ Quick, EverCompleted bool }

// DiscardRetained discards the retained checkpoints (a cancelled job that
// keeps none).
type DiscardRetained struct{}

// End ends the job in State (Finished, Cancelled or Failed) with Err (nil
// when Finished; the failure when Failed; nil when Cancelled: the shell
// returns its context's cause).
type End struct {
	State State
	Err   error
}

func (Deploy) action()                 {}
func (QuiesceCheckpoints) action()     {}
func (ResumeCheckpoints) action()      {}
func (TriggerFinalCheckpoint) action() {}
func (StopCheckpoints) action()        {}
func (FinishSources) action()          {}
func (StopTasks) action()              {}
func (ArmStopGrace) action()           {}
func (CancelTasks) action()            {}
func (Settle) action()                 {}
func (ConsultRestart) action()         {}
func (ArmRestartTimer) action()        {}
func (ResolveRestartPoint) action()    {}
func (DiscardRetained) action()        {}
func (End) action()                    {}

func (a Deploy) String() string               { return fmt.Sprintf("deploy attempt=%d", a.Attempt) }
func (QuiesceCheckpoints) String() string     { return "quiesce-checkpoints" }
func (ResumeCheckpoints) String() string      { return "resume-checkpoints" }
func (TriggerFinalCheckpoint) String() string { return "trigger-final-checkpoint" }
func (a StopCheckpoints) String() string      { return fmt.Sprintf("stop-checkpoints reason=%q", a.Reason) }
func (FinishSources) String() string          { return "finish-sources" }
func (StopTasks) String() string              { return "stop-tasks" }
func (ArmStopGrace) String() string           { return "arm-stop-grace" }
func (a CancelTasks) String() string {
	return fmt.Sprintf("cancel-tasks cause=%q stop=%t", errString(a.Cause), a.Stop)
}
func (a Settle) String() string { return fmt.Sprintf("settle err=%q", errString(a.Err)) }
func (a ConsultRestart) String() string {
	return fmt.Sprintf("consult-restart err=%q", errString(a.Err))
}
func (a ArmRestartTimer) String() string {
	return fmt.Sprintf("arm-restart-timer delay=%dms", a.DelayMs)
}
func (a ResolveRestartPoint) String() string {
	return fmt.Sprintf("resolve-restart-point quick=%t ever-completed=%t", a.Quick, a.EverCompleted)
}
func (DiscardRetained) String() string { return "discard-retained" }
func (a End) String() string           { return fmt.Sprintf("end %s err=%q", a.State, errString(a.Err)) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ErrStopped is the cause of CancelTasks when the tasks of a stopped attempt
// outlived the grace period.
var ErrStopped = errors.New("job stopped with a savepoint")

// Step feeds one event at now (milliseconds; unused today, kept so that
// every input is stamped like the coordinator's) and returns the actions to
// carry out, in order. An event that does not apply in the current state
// (a late report) returns no action.
func (m *Machine) Step(e Event, now int64) []Action {
	_ = now
	if m.state.Terminal() {
		return nil // nothing moves an ended job
	}
	switch e := e.(type) {
	case Start:
		if m.state != Created || m.attempt >= 0 {
			return nil
		}
		return m.deploy(0)
	case Deployed:
		if !m.deploying {
			return nil
		}
		m.deploying = false
		m.sources = e.Sources
		m.moveTo(Running)
		return nil
	case DeployFailed:
		if !m.deploying {
			return nil
		}
		m.deploying = false
		if e.JobCancelled {
			return m.cancelled0()
		}
		return m.consult(e.Err)
	case SourceFinished:
		if !m.live() || m.ending {
			return nil
		}
		m.finished[e.Task] = true
		return m.maybeFinal()
	case FinalCheckpointDone:
		if !m.finalAsked {
			return nil
		}
		m.finalAsked = false
		if e.Err != nil {
			// Retry while the attempt runs; once it ended (or the
			// coordinator stopped) there is nothing to retry.
			if e.CoordinatorRunning && !m.ending && m.live() {
				m.finalAsked = true
				return []Action{TriggerFinalCheckpoint{}}
			}
			return nil
		}
		if m.released || m.ending || !m.live() {
			return nil
		}
		m.released = true
		// Sources now end: no later checkpoint could complete.
		return []Action{FinishSources{}, StopCheckpoints{Reason: "job finishing"}}
	case StopRequested:
		if !m.live() || m.ending {
			return nil
		}
		// As Flink, no periodic checkpoint after the stop's savepoint: the
		// job ends with it (and no final one).
		m.stopReqs++
		return []Action{QuiesceCheckpoints{}}
	case StopRequestDone:
		if m.stopReqs == 0 {
			return nil
		}
		m.stopReqs--
		if e.Err == nil || m.released || m.ending || m.state == Stopping || !m.live() || m.stopReqs > 0 {
			return nil
		}
		// The stop failed: the job goes on as before it.
		if m.allSourcesFinished() || m.finalAsked {
			return m.maybeFinal()
		}
		return []Action{ResumeCheckpoints{}}
	case CheckpointCompleted:
		if !e.Savepoint {
			m.doneInRun, m.everDone = true, true
		}
		if !e.StopAfter || m.state == Stopping || !m.live() || m.ending {
			return nil
		}
		m.moveTo(Stopping)
		// A task blocked sending to a stopped one (backpressure) never
		// reads its Stop mail: after a grace period, in which sinks run
		// their commit of the savepoint, the attempt is cancelled.
		return []Action{ArmStopGrace{}, StopTasks{}, StopCheckpoints{Reason: "job stopped with a savepoint"}}
	case FailJob:
		if !m.live() || m.ending {
			return nil
		}
		m.failure = errors.New(e.Reason)
		return []Action{CancelTasks{Cause: m.failure}}
	case Cancel:
		switch {
		case m.state == Created || m.state == Restarting:
			return m.cancelled0()
		case m.live() && !m.ending && !m.cancelled:
			m.cancelled = true
			return []Action{CancelTasks{Cause: ErrCancelled}}
		}
		return nil
	case StopGraceExpired:
		if m.state != Stopping || m.ending {
			return nil
		}
		return []Action{CancelTasks{Cause: ErrStopped, Stop: true}}
	case AttemptEnded:
		if !m.live() || m.ending {
			return nil
		}
		return m.attemptEnded(e)
	case RestartDecided:
		if !m.consulting {
			return nil
		}
		m.consulting = false
		if !e.Restart {
			return m.fail(m.runErr)
		}
		m.moveTo(Restarting)
		return []Action{ArmRestartTimer{DelayMs: e.DelayMs}}
	case RestartTimerFired:
		if m.state != Restarting {
			return nil
		}
		return []Action{ResolveRestartPoint{Quick: m.doneInRun, EverCompleted: m.everDone}}
	case RestartPointResolved:
		if m.state != Restarting {
			return nil
		}
		if e.Err != nil {
			return m.fail(errors.Join(m.runErr, e.Err))
		}
		return m.deploy(m.attempt + 1)
	}
	panic(fmt.Sprintf("jobstate: unknown event %T", e))
}

// ErrCancelled is the cause of CancelTasks when the job is cancelled.
var ErrCancelled = errors.New("job cancelled")

// deploy starts attempt n with a clean slate.
func (m *Machine) deploy(n int) []Action {
	m.attempt = n
	m.deploying = true
	m.sources = 0
	m.finished = make(map[string]bool)
	m.finalAsked, m.released, m.ending, m.cancelled = false, false, false, false
	m.stopReqs = 0
	m.failure = nil
	m.doneInRun = false
	m.runErr = nil
	return []Action{Deploy{Attempt: n}}
}

func (m *Machine) consult(err error) []Action {
	m.runErr = err
	m.consulting = true
	return []Action{ConsultRestart{Err: err}}
}

func (m *Machine) allSourcesFinished() bool { return m.sources > 0 && len(m.finished) == m.sources }

// maybeFinal requests the final checkpoint once every source finished,
// unless a stop-with-savepoint is in flight (the job then ends with its
// savepoint) or the attempt is stopping or ending. The only place that
// decides it.
func (m *Machine) maybeFinal() []Action {
	if !m.allSourcesFinished() || m.finalAsked || m.released || m.stopReqs > 0 || m.state == Stopping || m.ending {
		return nil
	}
	if m.state == Running {
		m.moveTo(Finishing)
	}
	m.finalAsked = true
	// No more periodic checkpoints: sources have nothing left to read,
	// only the final checkpoint is wanted.
	return []Action{QuiesceCheckpoints{}, TriggerFinalCheckpoint{}}
}

func (m *Machine) attemptEnded(e AttemptEnded) []Action {
	m.ending = true
	m.finalAsked = false
	err := e.Err
	if m.state == Stopping && err != nil && e.Cancellation && !e.JobCancelled {
		err = nil // stopped with a savepoint
	}
	acts := []Action{Settle{Err: err}}
	if err == nil && m.failure != nil {
		err = m.failure
	}
	switch {
	case err == nil:
		// Unlike Flink, a finished job keeps its last checkpoint: a process
		// killed between the end of the job and its exit is then restarted
		// with --restore latest from the final checkpoint, and its sources
		// resume at their end instead of replaying what sinks committed.
		m.moveTo(Finished)
		return append(acts, End{State: Finished})
	case e.JobCancelled:
		return append(acts, m.cancelled0()...)
	}
	return append(acts, m.consult(err)...)
}

func (m *Machine) cancelled0() []Action {
	m.moveTo(Cancelled)
	m.consulting, m.deploying = false, false
	var acts []Action
	if !m.opts.RetainOnCancel {
		acts = append(acts, DiscardRetained{})
	}
	return append(acts, End{State: Cancelled})
}

func (m *Machine) fail(err error) []Action {
	m.moveTo(Failed)
	m.consulting, m.deploying = false, false
	return []Action{End{State: Failed, Err: err}}
}

func (m *Machine) moveTo(s State) {
	if s == m.state {
		return
	}
	if !Legal(m.state, s) {
		panic(fmt.Sprintf("jobstate: illegal transition %s -> %s", m.state, s))
	}
	m.state = s
}

// String describes the machine for scripts and logs.
func (m *Machine) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s attempt=%d", m.state, m.attempt)
	if m.live() {
		fmt.Fprintf(&b, " sources=%d/%d", len(m.finished), m.sources)
		if m.finalAsked {
			b.WriteString(" final-asked")
		}
		if m.released {
			b.WriteString(" released")
		}
		if m.stopReqs > 0 {
			fmt.Fprintf(&b, " stop-requests=%d", m.stopReqs)
		}
		if m.failure != nil {
			fmt.Fprintf(&b, " failure=%q", m.failure)
		}
	}
	return b.String()
}
