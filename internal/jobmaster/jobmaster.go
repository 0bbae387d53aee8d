package jobmaster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/jobstate"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/storage"
)

// Options configure a JobMaster.
type Options struct {
	JobID string
	// Checkpoint configures the coordinator (times in milliseconds).
	Checkpoint checkpoint.Options
	// Mode is the barrier alignment mode of the tasks.
	Mode checkpoint.AlignmentMode
	// Storage is the checkpoint storage root; checkpoints go under
	// <root>/<JobID>/chk-<n>.
	Storage storage.Store
	// SavepointDir is the default target of savepoints (a storage URL or a
	// path); empty means savepoints need an explicit directory.
	SavepointDir string
	// RetainOnCancel keeps completed checkpoints when the job is cancelled.
	RetainOnCancel bool
	// Restart decides whether and when a failed job restarts.
	Restart restart.Strategy
	// Restore is where the first attempt starts from: "" (no state),
	// "latest" (the newest complete checkpoint of JobID in Storage) or the
	// path of a checkpoint or savepoint.
	Restore string
	// AllowNonRestoredState lets a restore skip state of operators that no
	// longer exist.
	AllowNonRestoredState bool
	// MaxParallelism is the job's number of key groups, recorded in metadata.
	MaxParallelism int
	Logger         *slog.Logger
	// Clock is the source of every time the JobMaster reads and of every
	// timer it arms (coordinator ticks, restart delays, the stop grace
	// period). Default RealClock.
	Clock Clock
	// StorageTimeout bounds every call the JobMaster makes to checkpoint
	// storage (writing metadata, the id counter and savepoint pointers,
	// deleting files, listing): a call that has not returned by then fails
	// with context.DeadlineExceeded, even when the store ignores its
	// context, so that a hung store cannot hang the job's shutdown. The
	// search of a restore point, which may read every state file, gets ten
	// times as long. Default 2 minutes; it must not be negative.
	StorageTimeout time.Duration
	// OnFailure, when set, is called on Run's goroutine with the error of
	// every failed attempt (not of a cancellation) and whether the job
	// restarts after it. Default: nil.
	OnFailure func(err error, restarting bool)
	// OnRestore, when set, is called on Run's goroutine before each attempt
	// that starts from a checkpoint or savepoint, with it (URL is where it
	// is: the store's URL joined with its directory); and once with nil
	// when Restore is "latest" and the job has no checkpoint to start from.
	// Default: nil.
	OnRestore func(r *Restored, restart bool)
	// IDCounter, when set, records the highest checkpoint id used, in
	// place of the checkpoint-ids object in Storage (Flink's
	// CheckpointIDCounter; with high availability it is in etcd, written
	// by the leader only). Its calls are bounded by StorageTimeout.
	// Default nil: the object in Storage.
	IDCounter CheckpointIDCounter
	// CompletedStore, when set, records every checkpoint and savepoint
	// after its _metadata is durable and before it counts as complete
	// (Flink's CompletedCheckpointStore; with high availability, the
	// pointer in etcd a new leader restores from). When it fails, the
	// checkpoint does not complete: it is aborted (AbortNotRecorded, which
	// does not count toward the tolerable failures), logged and counted
	// (NotRecorded), its tasks are told, and the next checkpoint tries
	// again. Its calls are bounded by StorageTimeout. Default nil: a
	// checkpoint is complete once its _metadata is durable.
	CompletedStore CompletedCheckpointStore
}

// CheckpointIDCounter keeps the highest checkpoint id a job used, so that
// ids never repeat, even across JobManagers (exactly-once sinks name their
// transactions by checkpoint id). Called from Run's goroutine only.
type CheckpointIDCounter interface {
	// Reserved returns the highest id recorded, 0 when none.
	Reserved(ctx context.Context) (int64, error)
	// Reserve records next as the highest id used. It returns nil only
	// once that is durable.
	Reserve(ctx context.Context, next int64) error
}

// CompletedCheckpointStore is where a checkpoint becomes complete. Never
// called from Run's goroutine; called concurrently when several
// checkpoints write their metadata at once (Checkpoint.MaxConcurrent), so
// an implementation must keep the newest id when calls cross.
type CompletedCheckpointStore interface {
	// AddCompleted records checkpoint (or savepoint) id, whose metadata is
	// at url (a value Options.Restore accepts), as the job's latest
	// completed one. It returns nil only once that is durable; any error
	// means the checkpoint does not count.
	AddCompleted(ctx context.Context, id int64, url string, savepoint bool) error
}

// DefaultStorageTimeout is Options.StorageTimeout's default.
const DefaultStorageTimeout = 2 * time.Minute

// Restored describes the checkpoint a deployment starts from.
type Restored struct {
	Metadata *checkpoint.Metadata
	// StoreURL is Store's URL; across processes the tasks open it.
	StoreURL string
	Store    storage.Store `json:"-"`
	Dir      string
	// Newer lists the ids of the job's checkpoints and savepoints that
	// completed after this one and are still found in its checkpoint
	// storage (damaged ones Restore "latest" skipped, or newer ones when an
	// older checkpoint is restored by path): what sinks committed on them
	// is visible, and a sink that cannot roll it back would repeat it.
	Newer []int64
}

func newRestored(md *checkpoint.Metadata, store storage.Store, dir string) *Restored {
	return &Restored{Metadata: md, StoreURL: store.URL(), Store: store, Dir: dir}
}

// URL is where the checkpoint or savepoint is: the store's URL joined with
// its directory, a value Options.Restore accepts.
func (r *Restored) URL() string { return joinURL(r.Store.URL(), r.Dir) }

// JobMaster runs one job: it drives the job's lifecycle (jobstate) and its
// checkpoint coordinator, and reaches the tasks through a TaskGateway.
type JobMaster struct {
	opts    Options
	gateway TaskGateway
	clock   Clock
	log     *slog.Logger
	cs      storage.CheckpointStorage
	coord   *checkpoint.Coordinator
	machine *jobstate.Machine
	stats   *statsBook

	inbox    inbox
	requests chan request

	// touched only by Run's goroutine
	restore      *Restored  // where the next attempt starts from
	lastRestored *Restored  // where the current attempt started from
	tasks        []TaskInfo // the current attempt's tasks, sorted by id
	running      int        // of them, reported running
	waiting      map[int64]request
	targets      map[int64]*target
	ended        map[int64]*target // targets of recently aborted checkpoints
	reserved     int64             // highest checkpoint id recorded in storage
	metaDone     chan metaResult
	metaWG       sync.WaitGroup
	stopGrace    Timer // armed once a stop-with-savepoint completed
	restartTimer Timer // armed while waiting to restart
	cancelSeen   bool  // the job's context ended and the machine was told
	done         bool  // the machine ended the job
	result       error
	shared       sharedState // shared files of incremental checkpoints (shared.go)
	dropped      int         // reports of other attempts dropped (fencing)
	notRecorded  atomic.Int64
}

// target is where a checkpoint's files go.
type target struct {
	Kind  checkpoint.Kind
	Store storage.Store
	Dir   string
}

type request struct {
	req      checkpoint.Request
	external bool // an external signal rather than a manual request
	final    bool // the final checkpoint of bounded input (no reply)
	reply    chan result
}

type result struct {
	id   int64
	path string
	err  error
}

type metaResult struct {
	id  int64
	err error
}

// New returns a JobMaster whose tasks run behind gateway; nothing runs
// until Run.
func New(opts Options, gateway TaskGateway) (*JobMaster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Restart == nil {
		opts.Restart = restart.None{}
	}
	switch {
	case opts.StorageTimeout == 0:
		opts.StorageTimeout = DefaultStorageTimeout
	case opts.StorageTimeout < 0:
		return nil, fmt.Errorf("jobmaster: Options.StorageTimeout is %v: want a positive duration, or 0 for the default %v", opts.StorageTimeout, DefaultStorageTimeout)
	}
	opts.Checkpoint.EnsureDefaults()
	if err := opts.Checkpoint.Validate(); err != nil {
		return nil, err
	}
	if opts.Storage == nil {
		return nil, errors.New("jobmaster: no checkpoint storage")
	}
	if gateway == nil {
		return nil, errors.New("jobmaster: no task gateway")
	}
	jm := &JobMaster{
		opts:     opts,
		gateway:  gateway,
		clock:    opts.Clock,
		log:      opts.Logger.With("job", opts.JobID),
		cs:       storage.CheckpointStorage{Store: opts.Storage, JobID: opts.JobID},
		machine:  jobstate.New(jobstate.Options{RetainOnCancel: opts.RetainOnCancel}),
		stats:    newStatsBook(),
		requests: make(chan request),
		metaDone: make(chan metaResult, 16),
	}
	jm.inbox.init()
	return jm, nil
}

func (jm *JobMaster) now() int64 { return jm.clock.Now().UnixMilli() }

// --- handle, safe for any goroutine -----------------------------------------

// ErrNoRestorableCheckpoint is wrapped by Run's error when Restore is
// "latest" and the job has completed checkpoints, none of which can be
// restored (all damaged).
var ErrNoRestorableCheckpoint = errors.New("no restorable checkpoint")

// ErrJobNotRunning is returned by requests made when the job is not running.
var ErrJobNotRunning = errors.New("job is not running")

func (jm *JobMaster) ask(ctx context.Context, req checkpoint.Request) (result, error) {
	return jm.send(ctx, request{req: req, reply: make(chan result, 1)})
}

// Signal reports an external signal asking for a checkpoint (a hook, a
// Unix signal) and waits until that checkpoint completed or failed.
func (jm *JobMaster) Signal(ctx context.Context) (int64, error) {
	res, err := jm.send(ctx, request{external: true, reply: make(chan result, 1)})
	return res.id, err
}

func (jm *JobMaster) send(ctx context.Context, r request) (result, error) {
	select {
	case jm.requests <- r:
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	select {
	case res := <-r.reply:
		return res, res.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
}

// TriggerCheckpoint asks for a checkpoint and waits until it completed or
// failed; it returns the checkpoint's id.
func (jm *JobMaster) TriggerCheckpoint(ctx context.Context) (int64, error) {
	res, err := jm.ask(ctx, checkpoint.Request{Kind: checkpoint.KindCheckpoint})
	return res.id, err
}

// TriggerSavepoint takes a savepoint into dir (the default savepoint
// directory when empty) and returns its path. With stop, the job stops once
// the savepoint completed.
func (jm *JobMaster) TriggerSavepoint(ctx context.Context, dir string, stop bool) (string, error) {
	if dir == "" {
		dir = jm.opts.SavepointDir
	}
	if dir == "" {
		return "", errors.New("no savepoint directory: pass one or set a default savepoint directory")
	}
	res, err := jm.ask(ctx, checkpoint.Request{Kind: checkpoint.KindSavepoint, TargetDir: dir, StopAfter: stop})
	return res.path, err
}

// Stats returns the checkpoint summary and history, oldest first.
func (jm *JobMaster) Stats() (Summary, []CheckpointStats) { return jm.stats.snapshot() }

// Summary returns the job's checkpoint counts and restarts without
// copying the history, as a status read needs.
func (jm *JobMaster) Summary() Summary { return jm.stats.currentSummary() }

// Checkpoint returns the statistics of one checkpoint.
func (jm *JobMaster) Checkpoint(id int64) (CheckpointStats, bool) { return jm.stats.get(id) }

// Report implements Listener: the tasks' reports queue in an unbounded
// inbox (tasks never wait for the job master).
func (jm *JobMaster) Report(r Report) { jm.inbox.put(r) }

// inbox is an unbounded queue.
type inbox struct {
	mu     sync.Mutex
	events []Report
	ready  chan struct{}
}

func (b *inbox) init() { b.ready = make(chan struct{}, 1) }

func (b *inbox) put(e Report) {
	b.mu.Lock()
	b.events = append(b.events, e)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.events
	b.events = nil
	return e
}

// --- the run loop -----------------------------------------------------------

// Run runs the job, restarting it after failures as the restart strategy
// allows, until it finishes, is stopped with a savepoint, is cancelled
// through ctx, or fails for good.
func (jm *JobMaster) Run(ctx context.Context) error {
	defer jm.metaWG.Wait() // returns within Options.StorageTimeout: every write is bounded
	if err := jm.prepare(ctx); err != nil {
		return err
	}
	tick := time.Duration(jm.opts.Checkpoint.Interval) * time.Millisecond / 10
	tick = min(max(tick, time.Millisecond), 100*time.Millisecond)
	ticker := jm.clock.NewTicker(tick)
	defer ticker.Stop()
	defer func() {
		stopTimer(jm.stopGrace)
		stopTimer(jm.restartTimer)
	}()
	jm.step(ctx, jobstate.Start{})
	for !jm.done {
		live := jm.machine.Accepts(jm.machine.Attempt())
		var requests chan request
		if live {
			requests = jm.requests // requests wait while no attempt runs
		}
		var ctxDone <-chan struct{}
		if !jm.cancelSeen {
			ctxDone = ctx.Done()
		}
		select {
		case <-ctxDone:
			jm.cancelSeen = true
			jm.step(ctx, jobstate.Cancel{})
		case <-ticker.C():
			if live {
				jm.coord.Tick(jm.now())
			}
		case <-timerC(jm.stopGrace):
			jm.stopGrace = nil
			jm.step(ctx, jobstate.StopGraceExpired{})
		case <-timerC(jm.restartTimer):
			jm.restartTimer = nil
			jm.step(ctx, jobstate.RestartTimerFired{})
		case <-jm.inbox.ready:
			jm.handleReports(ctx)
		case r := <-requests:
			jm.onRequest(ctx, r)
		case m := <-jm.metaDone:
			jm.metadataDone(m)
		}
		jm.handleDecisions(ctx)
	}
	return jm.result
}

// metadataDone hands the outcome of a metadata write (and of the
// completed-checkpoint store) to the coordinator.
func (jm *JobMaster) metadataDone(m metaResult) {
	switch {
	case errors.Is(m.err, checkpoint.ErrNotRecorded):
		n := jm.notRecorded.Add(1)
		jm.log.Error("the completed-checkpoint store did not record the checkpoint: it does not complete, and the next one tries again",
			"checkpoint", m.id, "not_recorded_total", n, "err", m.err)
	case m.err != nil:
		jm.log.Error("writing checkpoint metadata failed", "checkpoint", m.id, "err", m.err)
	}
	jm.coord.MetadataDurable(jm.now(), m.id, m.err)
}

// NotRecorded counts the checkpoints whose metadata was durable but that
// Options.CompletedStore did not record (so they did not complete).
func (jm *JobMaster) NotRecorded() int64 { return jm.notRecorded.Load() }

func timerC(t Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// prepare reads what the job starts from: the restore point, the highest
// checkpoint id used, the checkpoints to retain, the shared files.
func (jm *JobMaster) prepare(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 10*jm.opts.StorageTimeout)
	defer cancel()
	restore, err := jm.initialRestore(sctx)
	if err != nil {
		return err
	}
	lastID, err := jm.cs.MaxCheckpointID(sctx)
	if err != nil {
		return fmt.Errorf("checkpoint storage %s: read checkpoint ids: %w", jm.opts.Storage.URL(), err)
	}
	reserved, err := jm.readReserved(sctx)
	if err != nil {
		return fmt.Errorf("checkpoint storage %s: read checkpoint ids: %w", jm.opts.Storage.URL(), err)
	}
	lastID = max(lastID, reserved)
	jm.reserved = reserved
	if restore != nil {
		lastID = max(lastID, restore.Metadata.ID)
	}
	recovered := jm.recoverCheckpoints(sctx, restore)
	jm.coord, err = checkpoint.NewCoordinator(jm.opts.Checkpoint, lastID, recovered)
	if err != nil {
		return err
	}
	jm.sharedInit(sctx, recovered)
	jm.restore = restore
	return nil
}

// step feeds the lifecycle machine and carries out its actions.
func (jm *JobMaster) step(ctx context.Context, e jobstate.Event) {
	jm.exec(ctx, jm.machine.Step(e, jm.now()))
}

func (jm *JobMaster) exec(ctx context.Context, acts []jobstate.Action) {
	for _, a := range acts {
		attempt := jm.machine.Attempt()
		switch a := a.(type) {
		case jobstate.Deploy:
			jm.deployAttempt(ctx, a.Attempt)
		case jobstate.QuiesceCheckpoints:
			jm.coord.Quiesce()
		case jobstate.ResumeCheckpoints:
			jm.coord.Resume(jm.now())
		case jobstate.TriggerFinalCheckpoint:
			jm.log.Info("all sources finished; taking the final checkpoint")
			id := jm.coord.TriggerManual(jm.now(), checkpoint.Request{Kind: checkpoint.KindCheckpoint})
			jm.waiting[id] = request{final: true}
		case jobstate.StopCheckpoints:
			jm.coord.Stop(jm.now(), a.Reason)
		case jobstate.FinishSources:
			jm.gateway.FinishSources(attempt)
		case jobstate.StopTasks:
			jm.gateway.StopTasks(attempt)
		case jobstate.ArmStopGrace:
			stopTimer(jm.stopGrace)
			jm.stopGrace = jm.clock.NewTimer(stopGrace)
		case jobstate.CancelTasks:
			if !a.Stop && !errors.Is(a.Cause, jobstate.ErrCancelled) {
				jm.log.Error("failing the job", "reason", a.Cause)
			}
			jm.gateway.Cancel(CancelRequest{Attempt: attempt, Reason: a.Cause.Error(), Err: a.Cause})
		case jobstate.Settle:
			jm.settle(ctx, a.Err)
		case jobstate.ConsultRestart:
			ok, delay := jm.opts.Restart.OnFailure(jm.clock.Now())
			if jm.opts.OnFailure != nil {
				jm.opts.OnFailure(a.Err, ok)
			}
			if ok {
				jm.log.Warn("job failed; restarting", "attempt", attempt+1, "delay", delay, "err", a.Err)
			}
			jm.step(ctx, jobstate.RestartDecided{Restart: ok, DelayMs: delay.Milliseconds()})
		case jobstate.ArmRestartTimer:
			stopTimer(jm.restartTimer)
			jm.restartTimer = jm.clock.NewTimer(time.Duration(a.DelayMs) * time.Millisecond)
		case jobstate.ResolveRestartPoint:
			restore, err := jm.restartPoint(ctx, a.Quick, a.EverCompleted)
			if err == nil {
				jm.restore = restore
			}
			jm.step(ctx, jobstate.RestartPointResolved{Err: err})
		case jobstate.DiscardRetained:
			jm.discardAll()
		case jobstate.End:
			jm.done = true
			switch a.State {
			case jobstate.Cancelled:
				jm.result = context.Cause(ctx)
				if jm.result == nil {
					jm.result = context.Canceled
				}
			default:
				jm.result = a.Err
			}
		default:
			panic(fmt.Sprintf("jobmaster: unknown lifecycle action %T", a))
		}
	}
}

// deployAttempt deploys attempt from jm.restore.
func (jm *JobMaster) deployAttempt(ctx context.Context, attempt int) {
	restore := jm.restore
	jm.lastRestored = restore
	var restoredID int64
	if restore != nil {
		restoredID = restore.Metadata.ID
		jm.stats.restored(restoredID, restore.Dir, jm.clock.Now(), attempt > 0)
		restore.Newer = jm.completedAfter(restoredID)
		jm.log.Info("restoring", "checkpoint", restoredID, "path", restore.URL(), "newer_completed", restore.Newer)
		if jm.opts.OnRestore != nil {
			jm.opts.OnRestore(restore, attempt > 0)
		}
	} else if attempt > 0 {
		jm.stats.restartedWithoutState()
	}
	jm.shared.reg.NewAttempt(restoredID)
	jm.waiting = make(map[int64]request)
	jm.targets = make(map[int64]*target)
	jm.tasks, jm.running = nil, 0
	tasks, err := jm.gateway.Deploy(ctx, DeployRequest{JobID: jm.opts.JobID, Attempt: attempt, Restore: restore}, jm)
	if err != nil {
		jm.step(ctx, jobstate.DeployFailed{Err: err, JobCancelled: ctx.Err() != nil})
		return
	}
	jm.tasks = slices.SortedFunc(slices.Values(tasks), func(a, b TaskInfo) int { return strings.Compare(a.ID, b.ID) })
	var ids []checkpoint.TaskID
	sources := 0
	for _, t := range jm.tasks {
		ids = append(ids, checkpoint.TaskID(t.ID))
		if t.Source {
			sources++
		}
	}
	jm.step(ctx, jobstate.Deployed{Sources: sources})
	if err := jm.coord.Start(jm.now(), ids, restoredID); err != nil {
		// The tasks run already: cancel them, the attempt fails with err.
		jm.step(ctx, jobstate.FailJob{Reason: err.Error()})
	}
}

func (jm *JobMaster) onRequest(ctx context.Context, r request) {
	var id int64
	if r.external {
		id = jm.coord.ExternalSignal(jm.now())
	} else {
		if r.req.StopAfter {
			jm.step(ctx, jobstate.StopRequested{})
		}
		id = jm.coord.TriggerManual(jm.now(), r.req)
	}
	jm.waiting[id] = r
}

// handleReports takes the tasks' reports; those of another attempt than
// the current one (a failed attempt's tasks still reporting while the next
// runs, or a late ack) are dropped.
func (jm *JobMaster) handleReports(ctx context.Context) {
	for _, r := range jm.inbox.take() {
		now := jm.now()
		if !jm.machine.Accepts(r.AttemptNumber()) {
			jm.dropped++
			jm.log.Debug("dropping a report of another attempt", "report", fmt.Sprintf("%T", r), "attempt", r.AttemptNumber(), "current", jm.machine.Attempt())
			continue
		}
		switch r := r.(type) {
		case TaskRunning:
			if jm.running++; jm.running == len(jm.tasks) {
				jm.log.Debug("every task of the attempt runs", "attempt", r.Attempt, "tasks", jm.running)
			}
		case Acknowledge:
			jm.onAck(now, r)
		case Decline:
			jm.coord.Decline(now, r.Checkpoint, checkpoint.TaskID(r.Task), r.Reason)
		case SourceRecords:
			if r.N > 0 {
				jm.coord.SourceRecords(now, r.N)
			}
		case CheckpointMarker:
			jm.coord.MarkerRecord(now)
		case SourceFinished:
			jm.step(ctx, jobstate.SourceFinished{Task: r.Task})
		case TaskFailed:
			jm.log.Info("task failed", "attempt", r.Attempt, "task", r.Task, "operator", r.Operator, "subtask", r.Subtask, "err", errorOf(r.Err, r.Error))
		case AttemptEnded:
			jm.step(ctx, jobstate.AttemptEnded{Err: errorOf(r.Err, r.Error), Cancellation: r.Cancellation, JobCancelled: ctx.Err() != nil})
		}
		jm.handleDecisions(ctx)
	}
}

// settle settles the coordinator once an attempt's tasks have ended.
func (jm *JobMaster) settle(ctx context.Context, err error) {
	stopTimer(jm.stopGrace)
	jm.stopGrace = nil
	jm.metaWG.Wait()
	for {
		select {
		case m := <-jm.metaDone:
			jm.metadataDone(m)
			continue
		default:
		}
		break
	}
	// Every task has ended: pending checkpoints can never complete. (Stop,
	// not TaskFailed: the failed task is not known by id here, and as in
	// Flink these aborts do not count as checkpoint failures.)
	if err != nil {
		jm.coord.Stop(jm.now(), fmt.Sprintf("job failed: %v", err))
	} else {
		jm.coord.Stop(jm.now(), "job finished")
	}
	jm.handleDecisions(ctx)
	// Every task of the attempt has ended, so no asynchronous snapshot can
	// still be writing: remove what aborted checkpoints left behind (a
	// write that landed after its checkpoint's directory was discarded).
	for id, t := range jm.ended {
		jm.discardDir(t.Store, t.Dir)
		delete(jm.ended, id)
	}
	jm.sweepShared()
	for id, r := range jm.waiting {
		if r.reply != nil {
			r.reply <- result{err: ErrJobNotRunning}
		}
		delete(jm.waiting, id)
	}
}

func (jm *JobMaster) onAck(now int64, a Acknowledge) {
	task := checkpoint.TaskID(a.Task)
	handle, err := json.Marshal(a.Operators)
	if err != nil {
		jm.coord.Decline(now, a.Checkpoint, task, err.Error())
		return
	}
	if err := jm.sharedAck(a); err != nil {
		jm.coord.Decline(now, a.Checkpoint, task, err.Error())
		return
	}
	jm.stats.acked(a.Checkpoint, SubtaskStats{
		Task: a.Task, AckTime: jm.clock.Now(), Sync: a.Sync, Async: a.Async,
		Alignment: a.Alignment, StartDelay: a.StartDelay, StateSize: a.StateSize, CheckpointedSize: a.CheckpointedSize,
		Unaligned: a.Unaligned, PersistedData: a.PersistedData,
	})
	jm.coord.Ack(now, a.Checkpoint, task, checkpoint.TaskSnapshot{
		StateSize: a.StateSize, CheckpointedSize: a.CheckpointedSize,
		SyncMs: a.Sync.Milliseconds(), AsyncMs: a.Async.Milliseconds(),
		AlignmentMs: a.Alignment.Milliseconds(), StartDelayMs: a.StartDelay.Milliseconds(),
		Handle: handle,
	})
}

// handleDecisions carries out the coordinator's decisions. Those that
// matter to the lifecycle are fed to the machine, whose actions run after
// the whole batch (tasks are told a savepoint completed before they are
// told to stop).
func (jm *JobMaster) handleDecisions(ctx context.Context) {
	for {
		ds := jm.coord.Decisions()
		if len(ds) == 0 {
			return
		}
		var later []jobstate.Action
		lifecycle := func(e jobstate.Event) { later = append(later, jm.machine.Step(e, jm.now())...) }
		attempt := jm.machine.Attempt()
		for _, d := range ds {
			switch d := d.(type) {
			case checkpoint.TriggerCheckpoint:
				jm.trigger(d)
			case checkpoint.WriteMetadata:
				jm.writeMetadata(d)
			case checkpoint.Completed:
				jm.stats.completed(d.Checkpoint.ID, time.UnixMilli(d.Checkpoint.CompletedAt))
				if d.Checkpoint.Kind == checkpoint.KindCheckpoint {
					jm.shared.reg.Complete(d.Checkpoint.ID, nil)
				}
				jm.log.Info("checkpoint complete", "checkpoint", d.Checkpoint.ID, "kind", d.Checkpoint.Kind,
					"duration_ms", d.Checkpoint.Duration(), "size", d.Checkpoint.StateSize())
				if d.Checkpoint.Kind == checkpoint.KindSavepoint {
					jm.pointToSavepoint(d.Checkpoint.ID)
				}
				lifecycle(jobstate.CheckpointCompleted{Savepoint: d.Checkpoint.Kind == checkpoint.KindSavepoint, StopAfter: d.Checkpoint.StopAfter})
			case checkpoint.NotifyComplete:
				jm.gateway.NotifyComplete(Notification{Attempt: attempt, Checkpoint: d.ID})
			case checkpoint.NotifyAborted:
				jm.stats.failed(d.ID, jm.clock.Now(), fmt.Sprintf("%s: %s", d.Reason, d.Detail))
				jm.log.Warn("checkpoint aborted", "checkpoint", d.ID, "reason", d.Reason, "detail", d.Detail)
				jm.gateway.NotifyAborted(Notification{Attempt: attempt, Checkpoint: d.ID})
				if t := jm.targets[d.ID]; t != nil {
					jm.discardDir(t.Store, t.Dir)
					jm.rememberEnded(d.ID, t)
				}
				delete(jm.targets, d.ID)
				jm.deleteShared(jm.shared.reg.Abort(d.ID))
			case checkpoint.Discard:
				jm.discardDir(jm.opts.Storage, jm.cs.CheckpointDir(d.ID))
				jm.shared.reg.Discard(d.ID)
				jm.deleteShared(jm.shared.reg.Collect())
			case checkpoint.DiscardTaskState:
				jm.discardTaskState(d)
				jm.deleteShared(jm.shared.reg.Abort(d.ID))
			case checkpoint.RequestDone:
				r, ok := jm.waiting[d.RequestID]
				if ok {
					delete(jm.waiting, d.RequestID)
				}
				switch {
				case !ok:
				case r.final:
					if d.Err != nil && jm.coord.Running() && jm.machine.Accepts(attempt) {
						jm.log.Warn("final checkpoint failed; retrying", "err", d.Err)
					}
					lifecycle(jobstate.FinalCheckpointDone{Err: d.Err, CoordinatorRunning: jm.coord.Running()})
				case r.req.StopAfter:
					lifecycle(jobstate.StopRequestDone{Err: d.Err})
				}
				if ok && r.reply != nil {
					res := result{id: d.ID, err: d.Err}
					if t := jm.targets[d.ID]; t != nil {
						res.path = t.Dir
						if u := t.Store.URL(); u != "" {
							res.path = joinURL(u, t.Dir)
						}
					}
					r.reply <- res
				}
				delete(jm.targets, d.ID)
			case checkpoint.FailJob:
				lifecycle(jobstate.FailJob{Reason: d.Reason})
			case checkpoint.Warning:
				jm.log.Debug("checkpoint coordinator warning", "warning", d.String())
			}
		}
		jm.exec(ctx, later)
	}
}

// declineTriggered fails checkpoint id before any barrier left (storage
// refused its id or its target). The coordinator takes declines from
// expected tasks only, so the job master declines in the name of one.
func (jm *JobMaster) declineTriggered(id int64, reason string) {
	if len(jm.tasks) == 0 {
		return
	}
	jm.coord.Decline(jm.now(), id, checkpoint.TaskID(jm.tasks[0].ID), reason)
}

func (jm *JobMaster) trigger(d checkpoint.TriggerCheckpoint) {
	t := &target{Kind: d.Kind, Store: jm.opts.Storage, Dir: jm.cs.CheckpointDir(d.ID)}
	if d.Kind == checkpoint.KindSavepoint {
		store, err := storage.Open(d.TargetDir)
		dir := storage.SavepointDir("", d.ID)
		if err != nil {
			jm.declineTriggered(d.ID, fmt.Sprintf("savepoint directory: %v", err))
			return
		}
		t.Store, t.Dir = store, dir
	}
	if err := jm.reserveID(d.ID); err != nil {
		jm.declineTriggered(d.ID, fmt.Sprintf("record checkpoint id: %v", err))
		return
	}
	jm.targets[d.ID] = t
	statsPath := t.Dir
	if d.Kind == checkpoint.KindSavepoint {
		// A savepoint's path is where it can be restored from, as
		// TriggerSavepoint returns it (its directory alone names nothing).
		if u := t.Store.URL(); u != "" {
			statsPath = joinURL(u, t.Dir)
		}
	}
	jm.stats.triggered(d.ID, d.Kind == checkpoint.KindSavepoint, time.UnixMilli(d.Timestamp), len(jm.tasks), statsPath)
	jm.gateway.TriggerCheckpoint(TriggerRequest{Attempt: jm.machine.Attempt(), Checkpoint: d.ID, Timestamp: d.Timestamp,
		Kind: d.Kind, StoreURL: t.Store.URL(), Dir: t.Dir, Store: t.Store})
}

// stopGrace is how long the tasks of a job stopped with a savepoint may
// take to end before they are cancelled.
const stopGrace = time.Second

func (jm *JobMaster) onCancelled() {
	if !jm.opts.RetainOnCancel {
		jm.discardAll()
	}
}
