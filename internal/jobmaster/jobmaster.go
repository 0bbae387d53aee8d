package jobmaster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/runtime"
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
	// Now is the clock; default time.Now.
	Now func() time.Time
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
}

// Restored describes the checkpoint a deployment starts from.
type Restored struct {
	Metadata *checkpoint.Metadata
	Store    storage.Store
	Dir      string
	// Newer lists the ids of the job's checkpoints and savepoints that
	// completed after this one and are still found in its checkpoint
	// storage (damaged ones Restore "latest" skipped, or newer ones when an
	// older checkpoint is restored by path): what sinks committed on them
	// is visible, and a sink that cannot roll it back would repeat it.
	Newer []int64
}

// URL is where the checkpoint or savepoint is: the store's URL joined with
// its directory, a value Options.Restore accepts.
func (r *Restored) URL() string { return joinURL(r.Store.URL(), r.Dir) }

// Deployment is one attempt's tasks.
type Deployment struct {
	Tasks []*runtime.Task
	// Stop is closed when the attempt stops (runtime.NewJob's stop).
	Stop chan struct{}
}

// DeployFunc builds the tasks of an attempt. resp is the JobMaster, to be
// given to every task's CheckpointConfig.
type DeployFunc func(ctx context.Context, attempt int, restore *Restored, resp runtime.Responder) (*Deployment, error)

// JobMaster runs one job.
type JobMaster struct {
	opts   Options
	deploy DeployFunc
	log    *slog.Logger
	cs     storage.CheckpointStorage
	coord  *checkpoint.Coordinator
	stats  *statsBook

	inbox    inbox
	requests chan request

	// state of the current attempt, touched only by Run's goroutine
	tasks        []*runtime.Task // the attempt's tasks, sorted by id
	sources      []*runtime.Task
	finished     map[string]bool
	finalReq     int64
	finishing    bool
	stopping     bool
	waiting      map[int64]request // by coordinator request id
	targets      map[int64]*runtime.BarrierOptions
	lastRestored *Restored
	everDone     bool // a checkpoint completed in this job at some point
	doneInRun    bool // a checkpoint completed in the current attempt
	metaDone     chan metaResult
	metaWG       sync.WaitGroup
	failure      error                             // FailJob
	reserved     int64                             // highest checkpoint id recorded in storage
	ending       bool                              // afterAttempt is settling the coordinator
	stopReqs     int                               // stop-with-savepoint requests in flight
	attempt      int                               // the attempt running
	ended        map[int64]*runtime.BarrierOptions // targets of recently aborted checkpoints
	cancelRun    context.CancelCauseFunc
	shared       sharedState // shared files of incremental checkpoints (shared.go)
}

type request struct {
	req      checkpoint.Request
	external bool // an external signal rather than a manual request
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

// New returns a JobMaster; nothing runs until Run.
func New(opts Options, deploy DeployFunc) (*JobMaster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Restart == nil {
		opts.Restart = restart.None{}
	}
	opts.Checkpoint.EnsureDefaults()
	if err := opts.Checkpoint.Validate(); err != nil {
		return nil, err
	}
	if opts.Storage == nil {
		return nil, errors.New("jobmaster: no checkpoint storage")
	}
	jm := &JobMaster{
		opts:     opts,
		deploy:   deploy,
		log:      opts.Logger.With("job", opts.JobID),
		cs:       storage.CheckpointStorage{Store: opts.Storage, JobID: opts.JobID},
		stats:    newStatsBook(),
		requests: make(chan request),
		metaDone: make(chan metaResult, 16),
	}
	jm.inbox.init()
	return jm, nil
}

func (jm *JobMaster) now() int64 { return jm.opts.Now().UnixMilli() }

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

// Checkpoint returns the statistics of one checkpoint.
func (jm *JobMaster) Checkpoint(id int64) (CheckpointStats, bool) { return jm.stats.get(id) }

// --- Responder, called by tasks ---------------------------------------------

// responder is the job master as the tasks of one attempt see it: every
// event carries the attempt, so that reports of a failed attempt's tasks
// (still arriving while the next attempt runs) are dropped.
type responder struct {
	jm      *JobMaster
	attempt int
}

// Acknowledge implements runtime.Responder.
func (r responder) Acknowledge(ack runtime.TaskAck) {
	r.jm.inbox.put(event{attempt: r.attempt, ack: &ack})
}

// SourceRecords implements runtime.Responder.
func (r responder) SourceRecords(task string, n int64) {
	r.jm.inbox.put(event{attempt: r.attempt, task: task, records: n})
}

// RequestCheckpoint implements runtime.Responder.
func (r responder) RequestCheckpoint(task string) {
	r.jm.inbox.put(event{attempt: r.attempt, task: task, marker: true})
}

// SourceFinished implements runtime.Responder.
func (r responder) SourceFinished(task string) {
	r.jm.inbox.put(event{attempt: r.attempt, task: task, finished: true})
}

type event struct {
	attempt  int
	ack      *runtime.TaskAck
	task     string
	records  int64
	marker   bool
	finished bool
}

// inbox is an unbounded queue: tasks never wait for the job master.
type inbox struct {
	mu     sync.Mutex
	events []event
	ready  chan struct{}
}

func (b *inbox) init() { b.ready = make(chan struct{}, 1) }

func (b *inbox) put(e event) {
	b.mu.Lock()
	b.events = append(b.events, e)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []event {
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
func (jm *JobMaster) Run(ctx context.Context) (err error) {
	defer jm.metaWG.Wait()
	restore, err := jm.initialRestore(ctx)
	if err != nil {
		return err
	}
	lastID, err := jm.cs.MaxCheckpointID(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint storage %s: read checkpoint ids: %w", jm.opts.Storage.URL(), err)
	}
	reserved, err := jm.readReserved(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint storage %s: read checkpoint ids: %w", jm.opts.Storage.URL(), err)
	}
	lastID = max(lastID, reserved)
	jm.reserved = reserved
	if restore != nil {
		lastID = max(lastID, restore.Metadata.ID)
	}
	recovered := jm.recoverCheckpoints(ctx, restore)
	jm.coord, err = checkpoint.NewCoordinator(jm.opts.Checkpoint, lastID, recovered)
	if err != nil {
		return err
	}
	jm.sharedInit(ctx, recovered)
	for attempt := 0; ; attempt++ {
		runErr := jm.runAttempt(ctx, attempt, restore)
		switch {
		case runErr == nil:
			// Unlike Flink, a finished job keeps its last checkpoint: a
			// process killed between the end of the job and its exit is then
			// restarted with --restore latest from the final checkpoint, and
			// its sources resume at their end instead of replaying what sinks
			// committed.
			return nil
		case ctx.Err() != nil:
			jm.onCancelled()
			return context.Cause(ctx)
		}
		ok, delay := jm.opts.Restart.OnFailure(jm.opts.Now())
		if jm.opts.OnFailure != nil {
			jm.opts.OnFailure(runErr, ok)
		}
		if !ok {
			return runErr
		}
		jm.log.Warn("job failed; restarting", "attempt", attempt+1, "delay", delay, "err", runErr)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			jm.onCancelled()
			return context.Cause(ctx)
		}
		restore, err = jm.restartPoint(ctx)
		if err != nil {
			return errors.Join(runErr, err)
		}
	}
}

// recoverCheckpoints hands the coordinator the complete checkpoints an
// earlier process of this job left, when the job resumes from one of them,
// so that retention goes on deleting the old ones; directories a crash cut
// short (no _metadata) are removed. Checkpoints newer than the one restored,
// and those of a job started without restoring, are left alone.
func (jm *JobMaster) recoverCheckpoints(ctx context.Context, restore *Restored) []checkpoint.CompletedCheckpoint {
	if restore == nil || restore.Metadata.Kind != checkpoint.KindCheckpoint || restore.Store != jm.opts.Storage {
		return nil
	}
	ids, err := jm.cs.Checkpoints(ctx)
	if err != nil {
		jm.log.Warn("cannot list earlier checkpoints", "err", err)
		return nil
	}
	var out []checkpoint.CompletedCheckpoint
	for _, id := range ids {
		if id > restore.Metadata.ID {
			break
		}
		dir := jm.cs.CheckpointDir(id)
		md, err := jm.cs.ReadMetadata(ctx, dir)
		switch {
		case err == nil:
			out = append(out, checkpoint.CompletedCheckpoint{ID: id, Kind: md.Kind, TriggeredAt: md.Timestamp})
		case errors.Is(err, storage.ErrNotFound):
			jm.log.Info("removing an incomplete checkpoint left by an earlier run", "checkpoint", id)
			jm.discardDir(jm.opts.Storage, dir)
		default:
			jm.log.Warn("keeping a damaged checkpoint directory", "checkpoint", id, "err", err)
		}
	}
	return out
}

func (jm *JobMaster) initialRestore(ctx context.Context) (*Restored, error) {
	switch jm.opts.Restore {
	case "":
		return nil, nil
	case "latest":
		r, skipped, err := jm.cs.LatestRestorable(ctx)
		for _, s := range skipped {
			jm.log.Warn("skipping broken checkpoint", "err", s)
		}
		if damaged := storage.Damaged(skipped); errors.Is(err, storage.ErrNoCheckpoint) && len(damaged) > 0 {
			// Starting without state would repeat everything the sinks
			// committed on them: the user decides.
			var b strings.Builder
			for _, d := range damaged {
				b.WriteString("; ")
				b.WriteString(d.Error())
			}
			return nil, fmt.Errorf("restore latest: %d checkpoint(s) of job %q in %s completed, but none can be restored%s: %w: repair them, restore an older checkpoint or savepoint by its path, or start without state (Restore \"\"; weir run --restore none) if repeating the output they committed is acceptable",
				len(damaged), jm.opts.JobID, jm.opts.Storage.URL(), b.String(), ErrNoRestorableCheckpoint)
		}
		if errors.Is(err, storage.ErrNoCheckpoint) {
			jm.log.Info("no checkpoint to restore; starting without state")
			if jm.opts.OnRestore != nil {
				jm.opts.OnRestore(nil, false)
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &Restored{Metadata: r.Metadata, Store: r.Store, Dir: r.Dir}, nil
	default:
		store, dir, md, err := storage.ResolveRestore(ctx, jm.opts.Restore)
		if err != nil {
			return nil, err
		}
		return &Restored{Metadata: md, Store: store, Dir: dir}, nil
	}
}

// restartPoint is the newest valid completed checkpoint, or the state the
// job last started from when none completed since.
//
// After an attempt that completed a checkpoint, the candidates are checked
// shallowly (metadata, and the sizes of their state files: the restore reads
// and checks the files anyway); after one that restored and then failed
// before completing any, deeply (every state file read for its checksum), so
// that a checkpoint whose files are damaged is skipped instead of restored
// again and again.
func (jm *JobMaster) restartPoint(ctx context.Context) (*Restored, error) {
	latest := jm.cs.Latest
	if jm.doneInRun {
		latest = jm.cs.LatestQuick
	}
	dir, md, skipped, err := latest(ctx)
	for _, s := range skipped {
		jm.log.Warn("skipping broken checkpoint", "err", s)
	}
	switch {
	case err == nil:
		if jm.lastRestored == nil || md.ID >= jm.lastRestored.Metadata.ID || jm.lastRestored.Metadata.Kind == checkpoint.KindCheckpoint {
			return &Restored{Metadata: md, Store: jm.opts.Storage, Dir: dir}, nil
		}
		return jm.lastRestored, nil
	case errors.Is(err, storage.ErrNoCheckpoint):
		if jm.everDone {
			return nil, errors.New("no valid checkpoint is left to restore from, although one completed: refusing to start over without state (it would repeat committed output)")
		}
		return jm.lastRestored, nil
	default:
		return nil, err
	}
}

func (jm *JobMaster) runAttempt(ctx context.Context, attempt int, restore *Restored) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jm.cancelRun = cancel
	jm.failure = nil
	jm.lastRestored = restore
	jm.doneInRun = false
	var restoredID int64
	if restore != nil {
		restoredID = restore.Metadata.ID
		jm.stats.restored(restoredID, restore.Dir, jm.opts.Now(), attempt > 0)
		restore.Newer = jm.completedAfter(ctx, restoredID)
		jm.log.Info("restoring", "checkpoint", restoredID, "path", restore.URL(), "newer_completed", restore.Newer)
		if jm.opts.OnRestore != nil {
			jm.opts.OnRestore(restore, attempt > 0)
		}
	} else if attempt > 0 {
		jm.stats.restartedWithoutState()
	}
	jm.attempt = attempt
	jm.shared.reg.NewAttempt(restoredID)
	dep, err := jm.deploy(runCtx, attempt, restore, responder{jm: jm, attempt: attempt})
	if err != nil {
		return err
	}
	jm.tasks = slices.SortedFunc(slices.Values(dep.Tasks), func(a, b *runtime.Task) int { return strings.Compare(a.ID(), b.ID()) })
	jm.sources = nil
	jm.finished = make(map[string]bool)
	jm.finalReq, jm.finishing, jm.stopping, jm.stopReqs = 0, false, false, 0
	jm.waiting = make(map[int64]request)
	jm.targets = make(map[int64]*runtime.BarrierOptions)
	var ids []checkpoint.TaskID
	for _, t := range jm.tasks {
		ids = append(ids, checkpoint.TaskID(t.ID()))
		if t.IsSource() {
			jm.sources = append(jm.sources, t)
		}
	}
	if err := jm.coord.Start(jm.now(), ids, restoredID); err != nil {
		return err
	}
	jm.handleDecisions(runCtx)

	done := make(chan error, 1)
	go func() { done <- runtime.NewJob(dep.Tasks, dep.Stop).Run(runCtx) }()

	tick := time.Duration(jm.opts.Checkpoint.Interval) * time.Millisecond / 10
	tick = min(max(tick, time.Millisecond), 100*time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case err := <-done:
			if jm.stopping && err != nil && (errors.Is(err, errJobStopped) || errors.Is(err, context.Canceled)) && ctx.Err() == nil {
				err = nil // stopped with a savepoint
			}
			jm.afterAttempt(err)
			if err == nil && jm.failure != nil {
				err = jm.failure
			}
			return err
		case <-ticker.C:
			jm.coord.Tick(jm.now())
		case <-jm.inbox.ready:
			jm.handleEvents()
		case r := <-jm.requests:
			var id int64
			if r.external {
				id = jm.coord.ExternalSignal(jm.now())
			} else {
				if r.req.StopAfter {
					// As Flink, no periodic checkpoint after the stop's
					// savepoint: the job ends with it (and no final one).
					jm.coord.Quiesce()
					jm.stopReqs++
				}
				id = jm.coord.TriggerManual(jm.now(), r.req)
			}
			jm.waiting[id] = r
		case m := <-jm.metaDone:
			if m.err != nil {
				jm.log.Error("writing checkpoint metadata failed", "checkpoint", m.id, "err", m.err)
			}
			jm.coord.MetadataDurable(jm.now(), m.id, m.err)
		}
		jm.handleDecisions(runCtx)
	}
}

// afterAttempt settles the coordinator once an attempt's tasks have ended.
func (jm *JobMaster) afterAttempt(err error) {
	jm.ending = true
	defer func() { jm.ending = false }()
	jm.metaWG.Wait()
	for {
		select {
		case m := <-jm.metaDone:
			jm.coord.MetadataDurable(jm.now(), m.id, m.err)
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
	jm.handleDecisions(context.Background())
	// Every task of the attempt has ended, so no asynchronous snapshot can
	// still be writing: remove what aborted checkpoints left behind (a
	// write that landed after its checkpoint's directory was discarded).
	for id, opts := range jm.ended {
		jm.discardDir(opts.Store, opts.Dir)
		delete(jm.ended, id)
	}
	jm.sweepShared(context.Background())
	for id, r := range jm.waiting {
		r.reply <- result{err: ErrJobNotRunning}
		delete(jm.waiting, id)
	}
}

func (jm *JobMaster) handleEvents() {
	now := jm.now()
	for _, e := range jm.inbox.take() {
		if e.attempt != jm.attempt {
			continue // from the tasks of an attempt that ended
		}
		switch {
		case e.ack != nil:
			jm.onAck(now, e.ack)
		case e.records > 0:
			jm.coord.SourceRecords(now, e.records)
		case e.marker:
			jm.coord.MarkerRecord(now)
		case e.finished:
			jm.finished[e.task] = true
			if len(jm.finished) == len(jm.sources) && jm.finalReq == 0 && jm.stopReqs == 0 && !jm.stopping {
				// No more periodic checkpoints: sources have nothing left
				// to read, only the final checkpoint is wanted.
				jm.coord.Quiesce()
				jm.requestFinalCheckpoint(now)
			}
		}
	}
}

func (jm *JobMaster) requestFinalCheckpoint(now int64) {
	jm.log.Info("all sources finished; taking the final checkpoint")
	jm.finalReq = jm.coord.TriggerManual(now, checkpoint.Request{Kind: checkpoint.KindCheckpoint})
}

func (jm *JobMaster) onAck(now int64, ack *runtime.TaskAck) {
	task := checkpoint.TaskID(ack.Task)
	if ack.Err != nil {
		jm.coord.Decline(now, ack.ID, task, ack.Err.Error())
		return
	}
	handle, err := json.Marshal(ack.Operators)
	if err != nil {
		jm.coord.Decline(now, ack.ID, task, err.Error())
		return
	}
	jm.sharedAck(ack)
	jm.stats.acked(ack.ID, SubtaskStats{
		Task: ack.Task, AckTime: jm.opts.Now(), Sync: ack.Sync, Async: ack.Async,
		Alignment: ack.Alignment, StartDelay: ack.StartDelay, StateSize: ack.StateSize, CheckpointedSize: ack.CheckpointedSize,
		Unaligned: ack.Unaligned, PersistedData: ack.PersistedData,
	})
	jm.coord.Ack(now, ack.ID, task, checkpoint.TaskSnapshot{
		StateSize: ack.StateSize, CheckpointedSize: ack.CheckpointedSize,
		SyncMs: ack.Sync.Milliseconds(), AsyncMs: ack.Async.Milliseconds(),
		AlignmentMs: ack.Alignment.Milliseconds(), StartDelayMs: ack.StartDelay.Milliseconds(),
		Handle: handle,
	})
}

func (jm *JobMaster) post(ctx context.Context, t *runtime.Task, m runtime.Mail) {
	if err := t.Post(ctx, m); err != nil && !errors.Is(err, runtime.ErrTaskEnded) && ctx.Err() == nil {
		jm.log.Warn("could not post to task", "task", t.ID(), "err", err)
	}
}

func (jm *JobMaster) postAll(ctx context.Context, m func(t *runtime.Task) runtime.Mail) {
	for _, t := range jm.tasks {
		jm.post(ctx, t, m(t))
	}
}

func (jm *JobMaster) handleDecisions(ctx context.Context) {
	for {
		ds := jm.coord.Decisions()
		if len(ds) == 0 {
			return
		}
		finish, stop := false, false
		for _, d := range ds {
			switch d := d.(type) {
			case checkpoint.TriggerCheckpoint:
				jm.trigger(ctx, d)
			case checkpoint.WriteMetadata:
				jm.writeMetadata(d)
			case checkpoint.Completed:
				jm.stats.completed(d.Checkpoint.ID, time.UnixMilli(d.Checkpoint.CompletedAt))
				if d.Checkpoint.Kind == checkpoint.KindCheckpoint {
					jm.everDone, jm.doneInRun = true, true
					jm.shared.reg.Complete(d.Checkpoint.ID, nil)
				}
				jm.log.Info("checkpoint complete", "checkpoint", d.Checkpoint.ID, "kind", d.Checkpoint.Kind,
					"duration_ms", d.Checkpoint.Duration(), "size", d.Checkpoint.StateSize())
				if d.Checkpoint.Kind == checkpoint.KindSavepoint {
					jm.pointToSavepoint(d.Checkpoint.ID)
				}
				if d.Checkpoint.StopAfter {
					stop = true
				}
			case checkpoint.NotifyComplete:
				jm.postAll(ctx, func(t *runtime.Task) runtime.Mail { return t.NotifyComplete(d.ID) })
			case checkpoint.NotifyAborted:
				jm.stats.failed(d.ID, jm.opts.Now(), fmt.Sprintf("%s: %s", d.Reason, d.Detail))
				jm.log.Warn("checkpoint aborted", "checkpoint", d.ID, "reason", d.Reason, "detail", d.Detail)
				jm.postAll(ctx, func(t *runtime.Task) runtime.Mail { return t.NotifyAborted(d.ID) })
				if opts := jm.targets[d.ID]; opts != nil {
					jm.discardDir(opts.Store, opts.Dir)
					jm.rememberEnded(d.ID, opts)
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
				if d.RequestID == jm.finalReq && jm.finalReq != 0 {
					if d.Err != nil {
						// Retry while the attempt runs; once it ended (or the
						// coordinator stopped) there is nothing to retry.
						if jm.coord.Running() && !jm.ending {
							jm.log.Warn("final checkpoint failed; retrying", "err", d.Err)
							jm.requestFinalCheckpoint(jm.now())
						}
					} else {
						finish = true
					}
				}
				if r, ok := jm.waiting[d.RequestID]; ok {
					delete(jm.waiting, d.RequestID)
					if r.req.StopAfter {
						jm.stopReqs--
						if d.Err != nil && !jm.finishing && !jm.ending {
							jm.coord.Resume(jm.now())
							if len(jm.finished) == len(jm.sources) && jm.finalReq == 0 && jm.stopReqs == 0 {
								jm.requestFinalCheckpoint(jm.now())
							}
						}
					}
					res := result{id: d.ID, err: d.Err}
					if opts := jm.targets[d.ID]; opts != nil {
						res.path = opts.Dir
						if u := opts.Store.URL(); u != "" {
							res.path = joinURL(u, opts.Dir)
						}
					}
					r.reply <- res
				}
				delete(jm.targets, d.ID)
			case checkpoint.FailJob:
				jm.log.Error("failing the job", "reason", d.Reason)
				jm.failure = errors.New(d.Reason)
				if jm.cancelRun != nil {
					jm.cancelRun(jm.failure)
				}
			case checkpoint.Warning:
				jm.log.Debug("checkpoint coordinator warning", "warning", d.String())
			}
		}
		if finish && !jm.finishing {
			jm.finishing = true
			for _, t := range jm.sources {
				jm.post(ctx, t, t.Finish())
			}
			// Sources now end: no later checkpoint could complete.
			jm.coord.Stop(jm.now(), "job finishing")
		}
		if stop && !jm.stopping {
			jm.stopping = true
			// A task blocked sending to a stopped one (backpressure) never
			// reads its Stop mail: after a grace period, in which sinks
			// run their commit of the savepoint, the attempt is cancelled.
			if cancel := jm.cancelRun; cancel != nil {
				time.AfterFunc(stopGrace, func() { cancel(errJobStopped) })
			}
			jm.postAll(ctx, func(t *runtime.Task) runtime.Mail { return t.Stop() })
			jm.coord.Stop(jm.now(), "job stopped with a savepoint")
		}
	}
}

// completedAfter returns the ids above id of the job's checkpoints that
// have a _metadata (complete, damaged or not) and of its savepoint
// pointers, ascending. Errors of the store are logged: the list is then
// what could be read.
func (jm *JobMaster) completedAfter(ctx context.Context, id int64) []int64 {
	var out []int64
	ids, err := jm.cs.Checkpoints(ctx)
	if err != nil {
		jm.log.Warn("cannot list the checkpoints newer than the one restored", "err", err)
	}
	for _, c := range ids {
		if c <= id {
			continue
		}
		if _, err := jm.opts.Storage.Stat(ctx, path.Join(jm.cs.CheckpointDir(c), storage.MetadataName)); err == nil {
			out = append(out, c)
		}
	}
	ptrs, err := jm.cs.SavepointPointers(ctx)
	if err != nil {
		jm.log.Warn("cannot list the savepoints newer than the one restored", "err", err)
	}
	for _, p := range ptrs {
		if p > id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pointToSavepoint leaves a pointer to savepoint id in the job's
// checkpoint directory, so that Restore "latest" finds it when it is newer
// than every checkpoint (a stop with a savepoint takes no checkpoint
// after it, and its sinks commit on it).
func (jm *JobMaster) pointToSavepoint(id int64) {
	opts := jm.targets[id]
	if opts == nil {
		return
	}
	url := joinURL(opts.Store.URL(), opts.Dir)
	if err := jm.cs.WriteSavepointPointer(context.Background(), id, url); err != nil {
		jm.log.Error("cannot record the savepoint in the checkpoint directory: a restore from \"latest\" will not find it; restore it by its path", "savepoint", id, "path", url, "err", err)
	}
}

func joinURL(base, p string) string {
	if base == "" {
		return p
	}
	if len(base) > 0 && base[len(base)-1] == '/' {
		return base + p
	}
	return base + "/" + p
}

// declineTriggered fails checkpoint id before any barrier left (storage
// refused its id or its target). The coordinator takes declines from
// expected tasks only, so the job master declines in the name of one.
func (jm *JobMaster) declineTriggered(id int64, reason string) {
	if len(jm.tasks) == 0 {
		return
	}
	jm.coord.Decline(jm.now(), id, checkpoint.TaskID(jm.tasks[0].ID()), reason)
}

func (jm *JobMaster) trigger(ctx context.Context, d checkpoint.TriggerCheckpoint) {
	opts := &runtime.BarrierOptions{Kind: d.Kind, Store: jm.opts.Storage, Dir: jm.cs.CheckpointDir(d.ID)}
	if d.Kind == checkpoint.KindSavepoint {
		store, err := storage.Open(d.TargetDir)
		dir := storage.SavepointDir("", d.ID)
		if err != nil {
			jm.declineTriggered(d.ID, fmt.Sprintf("savepoint directory: %v", err))
			return
		}
		opts.Store, opts.Dir = store, dir
	}
	if err := jm.reserveID(d.ID); err != nil {
		jm.declineTriggered(d.ID, fmt.Sprintf("record checkpoint id: %v", err))
		return
	}
	jm.targets[d.ID] = opts
	statsPath := opts.Dir
	if d.Kind == checkpoint.KindSavepoint {
		// A savepoint's path is where it can be restored from, as
		// TriggerSavepoint returns it (its directory alone names nothing).
		if u := opts.Store.URL(); u != "" {
			statsPath = joinURL(u, opts.Dir)
		}
	}
	jm.stats.triggered(d.ID, d.Kind == checkpoint.KindSavepoint, time.UnixMilli(d.Timestamp), len(jm.tasks), statsPath)
	for _, t := range jm.sources {
		jm.post(ctx, t, t.TriggerCheckpoint(d.ID, d.Timestamp, opts))
	}
}

// errJobStopped cancels the tasks of a job stopped with a savepoint that did
// not end within stopGrace.
var errJobStopped = errors.New("job stopped with a savepoint")

const stopGrace = time.Second

// idBlock is how many checkpoint ids one write of the id counter reserves.
const idBlock = 100

// counterName is the object holding the highest reserved checkpoint id.
func (jm *JobMaster) counterName() string { return path.Join(jm.cs.JobDir(), "checkpoint-ids") }

// reserveID makes id durable as used before any barrier of it leaves
// (ids must never repeat, even after a crash: exactly-once sinks name
// their transactions by checkpoint id). It reserves ids in blocks, so
// storage is written once every idBlock checkpoints.
func (jm *JobMaster) reserveID(id int64) error {
	if id <= jm.reserved {
		return nil
	}
	w, err := jm.opts.Storage.Create(context.Background(), jm.counterName())
	if err != nil {
		return err
	}
	next := id + idBlock - 1
	if _, err := fmt.Fprintf(w, "%d\n", next); err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	jm.reserved = next
	return nil
}

// readReserved returns the highest reserved id, 0 when none was recorded.
func (jm *JobMaster) readReserved(ctx context.Context) (int64, error) {
	r, err := jm.opts.Storage.Open(ctx, jm.counterName())
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	if _, err := fmt.Fscan(r, &n); err != nil {
		return 0, fmt.Errorf("%s: %w", jm.counterName(), err)
	}
	return n, nil
}

func (jm *JobMaster) writeMetadata(d checkpoint.WriteMetadata) {
	opts := jm.targets[d.ID]
	if opts == nil {
		jm.metaDone <- metaResult{id: d.ID, err: fmt.Errorf("checkpoint %d has no target", d.ID)}
		return
	}
	md := &checkpoint.Metadata{
		Version: checkpoint.MetadataVersion, JobID: jm.opts.JobID, ID: d.ID, Kind: d.Kind, Timestamp: d.TriggeredAt,
	}
	byUID := map[string]*checkpoint.OperatorState{}
	var order []string
	for _, a := range d.Acks {
		var ops []runtime.OperatorStateResult
		if err := json.Unmarshal(a.Snapshot.Handle, &ops); err != nil {
			jm.metaDone <- metaResult{id: d.ID, err: fmt.Errorf("task %s's acknowledgement: %w", a.Task, err)}
			return
		}
		for _, o := range ops {
			os := byUID[o.UID]
			if os == nil {
				os = &checkpoint.OperatorState{UID: o.UID, Name: o.Name, Parallelism: o.Parallelism,
					Subtasks: make([]checkpoint.SubtaskState, o.Parallelism)}
				byUID[o.UID] = os
				order = append(order, o.UID)
			}
			st := o.State
			st.Subtask = o.Subtask
			if o.Subtask < len(os.Subtasks) {
				os.Subtasks[o.Subtask] = st
			}
		}
	}
	sort.Strings(order)
	for _, uid := range order {
		md.Operators = append(md.Operators, *byUID[uid])
	}
	md.MaxParallelism = jm.opts.MaxParallelism
	jm.metaWG.Go(func() {
		err := storage.CheckpointStorage{Store: opts.Store}.WriteMetadata(context.Background(), opts.Dir, md)
		jm.metaDone <- metaResult{id: d.ID, err: err}
	})
}

func (jm *JobMaster) discardDir(store storage.Store, dir string) {
	if err := store.DeletePrefix(context.Background(), dir+"/"); err != nil {
		jm.log.Warn("could not discard checkpoint files", "dir", dir, "err", err)
	}
}

// rememberEnded keeps the target of an aborted checkpoint or savepoint for
// a while, so that state a late acknowledgement wrote there is found.
func (jm *JobMaster) rememberEnded(id int64, opts *runtime.BarrierOptions) {
	if jm.ended == nil {
		jm.ended = make(map[int64]*runtime.BarrierOptions)
	}
	jm.ended[id] = opts
	for len(jm.ended) > 128 {
		oldest := id
		for k := range jm.ended {
			oldest = min(oldest, k)
		}
		delete(jm.ended, oldest)
	}
}

func (jm *JobMaster) discardTaskState(d checkpoint.DiscardTaskState) {
	var ops []runtime.OperatorStateResult
	if json.Unmarshal(d.Handle, &ops) != nil {
		return
	}
	store, dir := jm.opts.Storage, jm.cs.CheckpointDir(d.ID)
	if opts := jm.targets[d.ID]; opts != nil {
		store, dir = opts.Store, opts.Dir
	} else if opts := jm.ended[d.ID]; opts != nil {
		store, dir = opts.Store, opts.Dir
	}
	for _, o := range ops {
		paths := []string{}
		for _, h := range o.State.Keyed {
			paths = append(paths, h.Path)
		}
		if c := o.State.Channels; c != nil {
			paths = append(paths, c.Path)
		}
		for _, p := range paths {
			if p != "" {
				if err := store.Delete(context.Background(), path.Join(dir, p)); err != nil {
					jm.log.Warn("could not discard task state", "checkpoint", d.ID, "task", d.Task, "err", err)
				}
			}
		}
	}
}

func (jm *JobMaster) onCancelled() {
	if !jm.opts.RetainOnCancel {
		jm.discardAll()
	}
}

func (jm *JobMaster) discardAll() {
	for _, c := range jm.coord.Retained() {
		if c.Kind == checkpoint.KindCheckpoint {
			jm.discardDir(jm.opts.Storage, jm.cs.CheckpointDir(c.ID))
			jm.shared.reg.Discard(c.ID)
		}
	}
	jm.sweepShared(context.Background())
}
