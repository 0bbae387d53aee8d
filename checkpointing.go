package weir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/opstate"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/storage"
)

// restoredState is what one operator instance gets back from a checkpoint.
type restoredState struct {
	keyed        []checkpoint.KeyedStateHandle
	splits       []connector.SplitState
	committables []connector.Committable
	// lists and broadcast are the instance's share of the operator list
	// and broadcast state (opstate.Redistribute).
	lists     []checkpoint.ListState
	broadcast []checkpoint.BroadcastState
	// open reads a keyed-state handle, checking its size and checksum.
	open func(h checkpoint.KeyedStateHandle) ([]byte, error)
	// from is the checkpoint restored: incremental handles' files are
	// read from there (internal/statebackend/incremental).
	from *jobmaster.Restored
}

// restoreFor gathers the state of operator uid for subtask s of par, from
// all subtasks of the checkpoint (the parallelism may have changed).
func (bc *buildCtx) restoreFor(n *nodeBase, s, par int, env *opEnv) *restoredState {
	r := bc.restore
	if r == nil {
		return nil
	}
	var op *checkpoint.OperatorState
	for i := range r.Metadata.Operators {
		if r.Metadata.Operators[i].UID == n.uid {
			op = &r.Metadata.Operators[i]
		}
	}
	if op == nil {
		return nil
	}
	rs := &restoredState{open: func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		if h.Inline != nil {
			return h.Inline, nil
		}
		return storage.CheckpointStorage{Store: r.Store}.ReadStateFile(bc.ctx, r.Dir, h.Path, h.Size, h.CRC)
	}, from: r}
	var splits []checkpoint.SplitState
	var comms []checkpoint.Committable
	for _, st := range op.Subtasks {
		for _, h := range st.Keyed {
			if h.StartGroup < env.keyGroups.End && env.keyGroups.Start < h.EndGroup {
				rs.keyed = append(rs.keyed, h)
			}
		}
		splits = append(splits, st.Splits...)
		comms = append(comms, st.Committables...)
	}
	for i, sp := range splits {
		if i%par == s {
			rs.splits = append(rs.splits, connector.SplitState{ID: sp.ID, Data: sp.Data, Position: sp.Position})
		}
	}
	for i, c := range comms {
		if i%par == s {
			rs.committables = append(rs.committables, connector.Committable{CheckpointID: c.CheckpointID, Subtask: c.Subtask, Data: c.Data})
		}
	}
	rs.lists, rs.broadcast = opstate.Redistribute(op.Subtasks, par, s)
	return rs
}

// restoreHas reports whether the restored checkpoint has state of uid.
func (bc *buildCtx) restoreHas(uid string) bool {
	if bc.restore == nil {
		return false
	}
	for _, op := range bc.restore.Metadata.Operators {
		if op.UID == uid {
			return true
		}
	}
	return false
}

// prepareSink commits the transactions the restored checkpoint holds for a
// two-phase-commit sink and lets the sink remove what a failed attempt left
// behind, before any of its writers exists.
func prepareSink[T any](bc *buildCtx, n *nodeBase, sink connector.Sink[T]) error {
	if bc.restore == nil {
		return nil
	}
	restoredID := bc.restore.Metadata.ID
	if rb, ok := sink.(connector.RollbackCommitter); ok {
		// What checkpoints after the restored one committed is replayed:
		// undo it, so that the output is exactly once again.
		undone, err := rb.RollBackAfter(bc.ctx, restoredID)
		if err != nil {
			return fmt.Errorf("sink %q: roll back the output committed after checkpoint %d: %w", n.name, restoredID, err)
		}
		if undone > 0 {
			bc.logger.Warn("rolled back the output that checkpoints after the restored one committed",
				"sink", n.name, "restored", restoredID, "newer_completed", bc.restore.Newer, "undone", undone)
		}
	} else if _, ok := sink.(connector.Committer); ok && len(bc.restore.Newer) > 0 && !bc.opts.AllowRepeatedOutput {
		return &repeatRefusal{fmt.Errorf("sink %q cannot undo what it committed, and %d checkpoint(s) or savepoint(s) of job %q completed after checkpoint %d, the one restored (ids %v): restoring it would repeat their output; restore the newest one, or set Options.AllowRepeatedOutput (weir run --allow-repeated-output) to accept up to %d checkpoints' output twice",
			n.name, len(bc.restore.Newer), bc.opts.JobID, restoredID, bc.restore.Newer, len(bc.restore.Newer))}
	}
	var all []connector.Committable
	for _, op := range bc.restore.Metadata.Operators {
		if op.UID != n.uid {
			continue
		}
		for _, st := range op.Subtasks {
			for _, c := range st.Committables {
				all = append(all, connector.Committable{CheckpointID: c.CheckpointID, Subtask: c.Subtask, Data: c.Data})
			}
		}
	}
	if len(all) > 0 {
		c, ok := sink.(connector.Committer)
		if !ok {
			return fmt.Errorf("the checkpoint holds %d pre-committed transactions, but the sink cannot commit them", len(all))
		}
		if err := c.Commit(bc.ctx, all); err != nil {
			return fmt.Errorf("re-commit restored transactions: %w", err)
		}
	}
	if cl, ok := sink.(connector.Cleaner); ok {
		if err := cl.Cleanup(bc.ctx, all); err != nil {
			return fmt.Errorf("clean up after the failed attempt: %w", err)
		}
	}
	return nil
}

// repeatRefusal is prepareSink's refusal to restore a checkpoint that would
// repeat committed output: no restart can cure it.
type repeatRefusal struct{ error }

func (r *repeatRefusal) Unwrap() error { return r.error }

// checkRestoreCoverage fails a restore whose state belongs to operators
// the job no longer has, unless allowed.
func (bc *buildCtx) checkRestoreCoverage(e *Environment) error {
	if bc.restore == nil || bc.opts.AllowNonRestoredState {
		return nil
	}
	uids := map[string]bool{}
	for _, n := range e.nodes {
		uids[n.base().uid] = true
	}
	for _, op := range bc.restore.Metadata.Operators {
		if !uids[op.UID] {
			return fmt.Errorf("checkpoint %s holds state of operator uid %q (%s), which this job does not have: give the operator its old uid, or set Options.AllowNonRestoredState to drop that state",
				bc.restore.Dir, op.UID, op.Name)
		}
	}
	if mp := bc.restore.Metadata.MaxParallelism; mp != 0 && mp != bc.opts.MaxParallelism {
		return fmt.Errorf("checkpoint %s was taken with MaxParallelism %d, but the job has %d: keyed state cannot be redistributed; use %d",
			bc.restore.Dir, mp, bc.opts.MaxParallelism, mp)
	}
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// stateFileName names an operator instance's keyed-state file in a
// checkpoint directory.
func stateFileName(uid string, subtask int) string {
	return fmt.Sprintf("%s-%d.keyed", unsafeName.ReplaceAllString(uid, "_"), subtask)
}

// snapshotKeyed is the snapshot of a keyed operator's backend.
func snapshotKeyed[K comparable](b statebackend.KeyedBackend[K], env *opEnv, id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	snap, err := b.Snapshot(id)
	if err != nil {
		return runtime.OperatorSnapshot{}, err
	}
	name := stateFileName(env.uid, env.subtask)
	return runtime.OperatorSnapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			var h checkpoint.KeyedStateHandle
			size, crc, err := storage.CheckpointStorage{Store: opts.Store}.WriteStateFile(ctx, opts.Dir, name, func(w io.Writer) error {
				var err error
				h, err = snap.WriteState(w)
				return err
			})
			if err != nil {
				return 0, err
			}
			h.Path, h.Size, h.CRC = name, size, crc
			st.Keyed = append(st.Keyed, h)
			return size, nil
		},
		Release: snap.Release,
	}, nil
}

// userHooks calls a user function's optional checkpoint hooks.
type userHooks struct{ fn any }

// CheckpointedFunction is implemented by functions that keep something
// outside weir's state and must put it there before a snapshot.
type CheckpointedFunction interface {
	// SnapshotState runs on the task goroutine at checkpoint id, before the
	// operator's state is snapshotted.
	SnapshotState(id int64) error
}

// CheckpointListener is implemented by functions that act when a checkpoint
// completes or is aborted.
type CheckpointListener interface {
	NotifyCheckpointComplete(id int64) error
	NotifyCheckpointAborted(id int64) error
}

func (u userHooks) snapshot(id int64) error {
	if f, ok := u.fn.(CheckpointedFunction); ok {
		return f.SnapshotState(id)
	}
	return nil
}

func (u userHooks) NotifyCheckpointComplete(id int64) error {
	if f, ok := u.fn.(CheckpointListener); ok {
		return f.NotifyCheckpointComplete(id)
	}
	return nil
}

func (u userHooks) NotifyCheckpointAborted(id int64) error {
	if f, ok := u.fn.(CheckpointListener); ok {
		return f.NotifyCheckpointAborted(id)
	}
	return nil
}

// --- job handle -------------------------------------------------------------

// JobClient is the handle of a running job.
type JobClient struct {
	jm     *jobmaster.JobMaster
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	info   *jobInfo // status, failures, metrics (rest.go)
}

// ExecuteAsync starts the job and returns its handle at once.
func (e *Environment) ExecuteAsync(ctx context.Context, jobName string) (*JobClient, error) {
	opts, jg, err := e.prepareJob(jobName)
	if err != nil {
		return nil, err
	}
	jmOpts, veto, err := e.masterOptions(opts)
	if err != nil {
		return nil, err
	}
	info := newJobInfo(opts, jobName, jg)
	jmOpts.OnFailure = info.Failed
	if opts.Checkpointing.store == nil {
		// A missing bucket or wrong credentials are reported now, not at the
		// first checkpoint.
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := storage.Probe(pctx, jmOpts.Storage)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("weir: Options.Checkpointing.Storage: %w", err)
		}
	}
	// One live process per job's checkpoint directory: a second one would
	// delete the first one's pending files and checkpoints.
	owner, err := storage.LockJob(jmOpts.Storage, opts.JobID)
	if err != nil {
		return nil, fmt.Errorf("weir: Options.Checkpointing.Storage: %w", err)
	}
	started := false
	defer func() {
		if !started {
			owner.Release()
		}
	}()
	if removed, err := owner.SweepIncomplete(); err != nil {
		opts.Logger.Warn("cannot remove the incomplete checkpoints an earlier run left", "dir", owner.Dir(), "err", err)
	} else if len(removed) > 0 {
		opts.Logger.Info("removed the incomplete checkpoints an earlier run left", "dir", owner.Dir(), "checkpoints", removed)
	}
	var local *localDir
	if opts.StateBackend == "pebble" {
		// A directory of this process's own: another process of the same
		// JobID (other checkpoint and output directories) keeps its own.
		if local, err = newLocalDir(filepath.Join(opts.LocalStateDir, unsafeName.ReplaceAllString(opts.JobID, "_")), opts.Logger); err != nil {
			return nil, err
		}
		opts.localJobDir = local.path
		defer func() {
			if !started {
				local.release(opts.Logger)
			}
		}()
	}
	logger := opts.Logger.With("job", opts.JobID)
	spec := buildSpec{opts: opts, jg: jg, logger: logger, veto: veto}
	deploy := func(ctx context.Context, attempt int, restore *jobmaster.Restored, resp runtime.Responder) (*jobmaster.Deployment, error) {
		tasks, stop, err := e.build(ctx, spec, attempt, restore, resp)
		if err != nil {
			return nil, err
		}
		info.Deployed(attempt, tasks)
		return &jobmaster.Deployment{Tasks: tasks, Stop: stop}, nil
	}
	jm, err := jobmaster.New(jmOpts, jobmaster.NewLocalGateway(deploy, logger))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &JobClient{jm: jm, cancel: cancel, done: make(chan struct{}), info: info}
	started = true
	go func() {
		defer close(c.done)
		defer owner.Release()
		defer local.release(opts.Logger)
		logger.Info("job started", "vertices", len(jg.Vertices))
		c.err = jm.Run(ctx)
		info.Ended(c.err)
		if errors.Is(c.err, context.Canceled) {
			logger.Info("job cancelled", "cause", c.err)
		} else if c.err != nil {
			logger.Error("job ended with an error", "err", c.err)
		} else {
			logger.Info("job finished")
		}
	}()
	return c, nil
}

// committingSinks counts the sinks of the job that commit their output on
// checkpoints (connector.Committer): output that a restore without those
// checkpoints would repeat.
func (e *Environment) committingSinks() int {
	n := 0
	for _, nd := range e.nodes {
		if _, ok := nd.base().sink.(connector.Committer); ok {
			n++
		}
	}
	return n
}

// Wait waits until the job ends and returns its error (nil when it finished
// or was stopped with a savepoint).
func (c *JobClient) Wait() error {
	<-c.done
	return c.err
}

// Done is closed when the job has ended.
func (c *JobClient) Done() <-chan struct{} { return c.done }

// Cancel cancels the job; Wait then returns context.Canceled.
func (c *JobClient) Cancel() { c.cancel() }

// TriggerCheckpoint takes a checkpoint now and waits for it; it returns the
// checkpoint's id.
func (c *JobClient) TriggerCheckpoint(ctx context.Context) (int64, error) {
	return c.jm.TriggerCheckpoint(ctx)
}

// SignalCheckpoint reports an external signal asking for a checkpoint (as
// from a hook or a Unix signal) and waits for that checkpoint; it returns
// its id.
func (c *JobClient) SignalCheckpoint(ctx context.Context) (int64, error) {
	return c.jm.Signal(ctx)
}

// TriggerSavepoint takes a savepoint into dir (Checkpointing.SavepointDir
// when empty), waits for it, and returns its path.
func (c *JobClient) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return c.jm.TriggerSavepoint(ctx, dir, false)
}

// StopWithSavepoint takes a savepoint, lets sinks commit, then stops the
// job; it returns the savepoint's path.
func (c *JobClient) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	path, err := c.jm.TriggerSavepoint(ctx, dir, true)
	c.info.StoppedWith(path, err)
	return path, err
}

// StopSavepoint returns the path of the savepoint the job was stopped with
// (StopWithSavepoint, DrainWithSavepoint, or a stop through the REST API),
// once that call returned; "" if it was not stopped with one.
func (c *JobClient) StopSavepoint() string {
	return c.info.StopSavepoint()
}

// DrainWithSavepoint stops the job with a savepoint after draining it
// (Flink's stop --drain): sources stop reading and emit the maximum
// watermark, so that every event-time window and timer fires and its
// results reach the sinks; then the savepoint is taken, sinks commit, and
// the job stops; it returns the savepoint's path. A job restored from it
// starts after the drained input, with no window left to fire. If the
// savepoint fails, the sources read on (the maximum watermark is already
// out: later records are late for event-time operators).
func (c *JobClient) DrainWithSavepoint(ctx context.Context, dir string) (string, error) {
	if dir == "" && c.info.opts.Checkpointing.SavepointDir == "" {
		return "", errors.New("no savepoint directory: pass one or set a default savepoint directory")
	}
	sources := c.info.SourceTasks()
	for _, t := range sources {
		// The savepoint's trigger, mailed to the same tasks later, runs
		// after the drain.
		if err := t.Post(ctx, t.Drain()); err != nil && !errors.Is(err, runtime.ErrTaskEnded) {
			return "", fmt.Errorf("drain %s: %w", t.Name(), err)
		}
	}
	path, err := c.jm.TriggerSavepoint(ctx, dir, true)
	c.info.StoppedWith(path, err)
	if err != nil {
		for _, t := range sources {
			t.Post(context.WithoutCancel(ctx), t.Undrain()) // ErrTaskEnded: nothing to resume
		}
	}
	return path, err
}

func jobMasterOptions(o Options) (jobmaster.Options, error) {
	c := o.Checkpointing
	store := c.store
	if store == nil {
		var err error
		if store, err = storage.Open(c.Storage); err != nil {
			return jobmaster.Options{}, fmt.Errorf("weir: Options.Checkpointing.Storage: %w", err)
		}
	}
	strategy, err := restartStrategy(o.Restart)
	if err != nil {
		return jobmaster.Options{}, fmt.Errorf("weir: Options.Restart: %w", err)
	}
	tolerable := c.TolerableFailures
	if tolerable < 0 {
		tolerable = math.MaxInt32
	}
	mode := checkpoint.ExactlyOnce
	if c.Mode == AtLeastOnce {
		mode = checkpoint.AtLeastOnce
	}
	return jobmaster.Options{
		JobID: o.JobID,
		Checkpoint: checkpoint.Options{
			Interval: c.Interval.Milliseconds(), MinPause: c.MinPause.Milliseconds(),
			MaxConcurrent: c.MaxConcurrent, Timeout: c.Timeout.Milliseconds(),
			TolerableFailures: tolerable, Retained: c.Retained, EveryNRecords: c.EveryNRecords,
		},
		Mode:                  mode,
		Storage:               store,
		SavepointDir:          c.SavepointDir,
		RetainOnCancel:        c.RetainOnCancel,
		Restart:               strategy,
		Restore:               o.Restore,
		AllowNonRestoredState: o.AllowNonRestoredState,
		MaxParallelism:        o.MaxParallelism,
		Logger:                o.Logger,
	}, nil
}

func restartStrategy(spec string) (restart.Strategy, error) {
	o, err := restart.Parse(spec)
	if err != nil {
		return nil, err
	}
	return restart.New(o, nil)
}
