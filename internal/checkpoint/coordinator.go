package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxQueuedRequests bounds the manual and external requests waiting for a
// free slot, as Flink's CheckpointRequestDecider does; beyond it a request
// fails at once with ErrTooManyRequests.
const maxQueuedRequests = 1000

// recentCheckpoints is how many finished (completed or aborted) checkpoints
// the coordinator remembers to tell a late acknowledgement, whose state must
// be discarded, from a duplicate or an unknown one. Flink remembers 16.
const recentCheckpoints = 64

// ErrNotRecorded, wrapped by the error given to MetadataDurable, says that
// the checkpoint's metadata is durable but the completed-checkpoint store
// of high availability did not record it: the checkpoint is aborted
// (AbortNotRecorded) without counting toward Options.TolerableFailures.
var ErrNotRecorded = errors.New("the completed-checkpoint store did not record the checkpoint")

// Coordinator is the checkpoint coordinator's protocol core: it decides when
// checkpoints start, collects acknowledgements, commits, aborts, retains and
// discards. It is a synchronous state machine: every method is an input
// event, carrying the caller's `now` in milliseconds, and queues decisions
// that Decisions drains. It does no I/O, reads no clock and is not safe for
// concurrent use: one goroutine of the shell owns it.
//
// Time advances only through Tick: expiry and the periodic interval are
// evaluated there. The other inputs use `now` to timestamp what they record
// and to check MinPause when a slot frees up.
type Coordinator struct {
	opts Options

	running bool
	// quiesced stops automatic triggers (interval, records, markers) while
	// the job ends; requests still start.
	quiesced bool
	tasks    []TaskID // expected acknowledgers, sorted; never mutated, shared with records

	lastID    int64 // highest checkpoint id handed out or learnt
	lastReqID int64

	pending []*pendingCheckpoint // ascending id
	queue   []queuedRequest      // FIFO of manual and external requests

	retained        []CompletedCheckpoint // checkpoints only, ascending id
	latestSavepoint *CompletedCheckpoint
	recent          []finishedCheckpoint // newest last, at most recentCheckpoints

	hasCompleted   bool
	lastCompletion int64 // for MinPause
	lastSucceeded  int64 // highest completed id: failures below it do not count
	lastNotified   int64 // highest id in a NotifyComplete
	failures       int   // consecutive counted failures
	lastFailure    string

	nextDue     int64 // when the periodic trigger is next due
	intervalDue bool  // the periodic trigger is due and has not started yet
	recordsDue  bool
	markerDue   bool
	records     int64 // source records since the last checkpoint started

	counts Counts
	out    []Decision
}

type pendingCheckpoint struct {
	id          int64
	kind        Kind
	reason      TriggerReason
	requestID   int64
	targetDir   string
	stopAfter   bool
	triggeredAt int64
	tasks       []TaskID // sorted; the coordinator's task set at trigger time
	acks        map[TaskID]TaskAck
	ackedAt     int64
	writingMeta bool
}

type queuedRequest struct {
	id     int64
	reason TriggerReason
	req    Request
}

type finishedCheckpoint struct {
	id        int64
	completed bool
	tasks     []TaskID
	acked     map[TaskID]bool // aborted ones: tasks whose state was already dealt with
}

// NewCoordinator returns a stopped coordinator; Start starts it.
//
// lastID is the highest checkpoint id this job ever used, as recorded by the
// shell's checkpoint id counter (0 for a new job): ids continue above it, so
// they strictly increase across JobManager restarts. recovered lists the
// completed checkpoints found in storage; the coordinator retains them (and
// queues Discard decisions for those beyond Options.Retained). Savepoints in
// recovered only count as the latest savepoint.
//
// opts is copied and completed with EnsureDefaults; an invalid opts or
// recovered list is an error.
func NewCoordinator(opts Options, lastID int64, recovered []CompletedCheckpoint) (*Coordinator, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if lastID < 0 {
		return nil, fmt.Errorf("checkpoint: last checkpoint id is %d, want >= 0", lastID)
	}
	c := &Coordinator{opts: opts, lastID: lastID}
	recs := slices.Clone(recovered)
	slices.SortFunc(recs, func(a, b CompletedCheckpoint) int { return cmp.Compare(a.ID, b.ID) })
	for i, r := range recs {
		if r.ID <= 0 {
			return nil, fmt.Errorf("checkpoint: recovered checkpoint id is %d, want > 0", r.ID)
		}
		if i > 0 && recs[i-1].ID == r.ID {
			return nil, fmt.Errorf("checkpoint: recovered checkpoint %d listed twice", r.ID)
		}
		c.lastID = max(c.lastID, r.ID)
		c.lastSucceeded = max(c.lastSucceeded, r.ID)
		c.lastNotified = max(c.lastNotified, r.ID)
		if r.Kind == KindSavepoint {
			c.latestSavepoint = &recs[i]
			continue
		}
		c.retained = append(c.retained, r)
	}
	c.applyRetention()
	return c, nil
}

// Decisions returns the decisions queued since the last call, oldest first,
// and forgets them. The shell calls it after every input.
func (c *Coordinator) Decisions() []Decision {
	out := c.out
	c.out = nil
	return out
}

// Start (re)starts the coordinator for a deployment of the job: tasks are the
// tasks that must acknowledge every checkpoint from now on, restoredFrom the
// checkpoint or savepoint id the tasks restored (0 for none); checkpoint ids
// continue above it. The periodic interval restarts from now.
//
// Start on a running coordinator is a restart: pending checkpoints are
// aborted (AbortStopped), queued requests kept. Checkpoints already writing
// their metadata survive a restart; a shell choosing the checkpoint to
// restore should first wait for their MetadataDurable.
//
// An empty task list, an empty or duplicate task id, or a negative
// restoredFrom is an error and changes nothing.
func (c *Coordinator) Start(now int64, tasks []TaskID, restoredFrom int64) error {
	if len(tasks) == 0 {
		return fmt.Errorf("checkpoint: start: no tasks to acknowledge checkpoints")
	}
	if restoredFrom < 0 {
		return fmt.Errorf("checkpoint: start: restored checkpoint id is %d, want >= 0", restoredFrom)
	}
	sorted := slices.Clone(tasks)
	slices.Sort(sorted)
	for i, t := range sorted {
		if t == "" {
			return fmt.Errorf("checkpoint: start: empty task id")
		}
		if i > 0 && sorted[i-1] == t {
			return fmt.Errorf("checkpoint: start: task %q listed twice", t)
		}
	}
	if c.running {
		c.abortPending(AbortStopped, "job restarted")
	}
	c.running = true
	c.quiesced = false
	c.tasks = sorted
	c.lastID = max(c.lastID, restoredFrom)
	if restoredFrom > 0 {
		c.counts.Restored++
	}
	c.nextDue = now + c.opts.Interval
	c.clearOwed()
	c.maybeTrigger(now)
	return nil
}

// Stop stops the coordinator (job cancelled, finished or failing over):
// pending checkpoints are aborted (AbortStopped, not counted as failures)
// and queued requests fail with ErrNotRunning. Checkpoints writing their
// metadata still complete or fail through MetadataDurable. A stopped
// coordinator ignores Tick and triggers until Start.
func (c *Coordinator) Stop(now int64, reason string) {
	if c.running {
		c.stop(AbortStopped, reason)
	}
}

// TaskFailed reports that task failed: every pending checkpoint is aborted
// (AbortTaskFailed, not counted as a failure), queued requests fail, and the
// coordinator stops until the job is restarted with Start. A task not in the
// current task set gets a Warning; a stopped coordinator ignores it.
func (c *Coordinator) TaskFailed(now int64, task TaskID) {
	if !c.running {
		return
	}
	if !hasTask(c.tasks, task) {
		c.warn(WarnUnknownTask, 0, task)
		return
	}
	c.stop(AbortTaskFailed, fmt.Sprintf("task %s failed", task))
}

// Tick advances time: it expires pending checkpoints older than
// Options.Timeout, makes the periodic checkpoint due when Options.Interval
// has elapsed, and starts whatever may start. The shell calls it on a timer;
// its period bounds the precision of timeouts and intervals.
func (c *Coordinator) Tick(now int64) {
	for _, p := range slices.Clone(c.pending) {
		if !p.writingMeta && now-p.triggeredAt >= c.opts.Timeout {
			c.abort(p, AbortExpired, fmt.Sprintf("not acknowledged within %d ms by %s", c.opts.Timeout, missingTasks(p)))
		}
	}
	if c.running && c.opts.Interval > 0 && now >= c.nextDue {
		c.intervalDue = true
	}
	c.maybeTrigger(now)
}

// TriggerManual requests a checkpoint or savepoint (REST, CLI) and returns
// the request id that its RequestDone will carry. The request starts at once
// if a slot is free (MinPause does not apply), otherwise it waits in a FIFO
// queue ahead of automatic triggers.
func (c *Coordinator) TriggerManual(now int64, req Request) int64 {
	return c.request(now, ReasonManual, req)
}

// ExternalSignal requests a checkpoint on behalf of an external hook. It is
// TriggerManual for a checkpoint with ReasonExternal.
func (c *Coordinator) ExternalSignal(now int64) int64 {
	return c.request(now, ReasonExternal, Request{Kind: KindCheckpoint})
}

// SourceRecords counts n records read by the sources. Once
// Options.EveryNRecords have been read since the last checkpoint started, a
// checkpoint is due (ReasonRecords) and starts as soon as it may.
func (c *Coordinator) SourceRecords(now int64, n int64) {
	if !c.running || c.opts.EveryNRecords == 0 || n <= 0 {
		return
	}
	c.records += n
	if c.records >= c.opts.EveryNRecords {
		c.recordsDue = true
	}
	c.maybeTrigger(now)
}

// MarkerRecord reports that a source read a record asking for a checkpoint.
// One is due (ReasonMarker) and starts as soon as it may; markers arriving
// before it starts are served by the same checkpoint.
func (c *Coordinator) MarkerRecord(now int64) {
	if !c.running {
		return
	}
	c.markerDue = true
	c.maybeTrigger(now)
}

// Ack records task's acknowledgement of checkpoint id. When the last expected
// task acknowledges, WriteMetadata is emitted.
//
// Acknowledgements that cannot count are ignored with a Warning: duplicates,
// unknown ids, tasks outside the checkpoint's task set. One for a checkpoint
// already aborted (WarnLateAck) is also followed by DiscardTaskState, since
// nothing will ever reference that state.
func (c *Coordinator) Ack(now int64, id int64, task TaskID, snap TaskSnapshot) {
	p := c.findPending(id)
	if p == nil {
		c.strayAck(id, task, snap.Handle)
		return
	}
	if !hasTask(p.tasks, task) {
		c.warn(WarnUnknownTask, id, task)
		return
	}
	if _, dup := p.acks[task]; dup {
		c.warn(WarnDuplicateAck, id, task)
		return
	}
	p.acks[task] = TaskAck{Task: task, At: now, Snapshot: snap}
	if len(p.acks) < len(p.tasks) {
		return
	}
	p.writingMeta = true
	p.ackedAt = now
	c.emit(WriteMetadata{ID: p.id, Kind: p.kind, TargetDir: p.targetDir, TriggeredAt: p.triggeredAt, Acks: sortedAcks(p.acks)})
}

// Decline reports that task could not take its part of checkpoint id; the
// checkpoint is aborted (AbortDeclined). A decline for a checkpoint no longer
// pending or already writing its metadata is ignored with a Warning.
func (c *Coordinator) Decline(now int64, id int64, task TaskID, reason string) {
	p := c.findPending(id)
	switch {
	case p == nil && (c.findRecent(id) != nil || c.findCompleted(id) != nil):
		c.warn(WarnLateDecline, id, task)
	case p == nil:
		c.warn(WarnUnknownCheckpoint, id, task)
	case !hasTask(p.tasks, task):
		c.warn(WarnUnknownTask, id, task)
	case p.writingMeta:
		c.warn(WarnLateDecline, id, task)
	default:
		c.abort(p, AbortDeclined, fmt.Sprintf("task %s: %s", task, reason))
		c.maybeTrigger(now)
	}
}

// MetadataDurable reports the outcome of a WriteMetadata: err == nil means
// chk-id/_metadata is durable and id is complete, the commit point. Then, in
// order: Completed, NotifyComplete (see its contract), the request's
// RequestDone, aborts of the pending checkpoints it subsumes, Discard of
// checkpoints beyond Options.Retained, and triggers that may now start.
// A non-nil err aborts id (AbortMetadataFailed), or, when it wraps
// ErrNotRecorded, AbortNotRecorded (not counted as a failure).
func (c *Coordinator) MetadataDurable(now int64, id int64, err error) {
	p := c.findPending(id)
	if p == nil || !p.writingMeta {
		c.warn(WarnUnexpectedMetadata, id, "")
		return
	}
	switch {
	case errors.Is(err, ErrNotRecorded):
		c.abort(p, AbortNotRecorded, err.Error())
	case err != nil:
		c.abort(p, AbortMetadataFailed, err.Error())
	default:
		c.complete(now, p)
	}
	c.maybeTrigger(now)
}

// Quiesce stops automatic triggers — interval ticks, record counts and
// marker records — until the next Start, for a job whose sources have read
// all their input: only the final checkpoint (a request) is still wanted.
// Pending checkpoints and queued requests are unaffected.
func (c *Coordinator) Quiesce() { c.quiesced = true }

// Resume undoes Quiesce (a stop-with-savepoint that failed: the job goes
// on, and so do its periodic checkpoints).
func (c *Coordinator) Resume(now int64) {
	c.quiesced = false
	c.maybeTrigger(now)
}

// Running reports whether the coordinator was started and not stopped since.
func (c *Coordinator) Running() bool { return c.running }

// LastID returns the highest checkpoint id used so far.
func (c *Coordinator) LastID() int64 { return c.lastID }

// Options returns the options in effect, defaults filled in.
func (c *Coordinator) Options() Options { return c.opts }

// Counts returns running totals.
func (c *Coordinator) Counts() Counts {
	n := c.counts
	n.InProgress = int64(len(c.pending))
	return n
}

// Pending describes the checkpoints in progress, ascending by id.
func (c *Coordinator) Pending() []PendingCheckpoint {
	out := make([]PendingCheckpoint, len(c.pending))
	for i, p := range c.pending {
		out[i] = PendingCheckpoint{
			ID: p.id, Kind: p.kind, Reason: p.reason, RequestID: p.requestID,
			TriggeredAt: p.triggeredAt, NumTasks: len(p.tasks), Acks: sortedAcks(p.acks),
			WritingMetadata: p.writingMeta,
		}
	}
	return out
}

// Retained returns the retained completed checkpoints, ascending by id; the
// last one is what a failover restores. The Acks slices are shared: do not
// modify them.
func (c *Coordinator) Retained() []CompletedCheckpoint { return slices.Clone(c.retained) }

// LatestSavepoint returns the savepoint with the highest id completed by (or
// recovered into) this coordinator.
func (c *Coordinator) LatestSavepoint() (CompletedCheckpoint, bool) {
	if c.latestSavepoint == nil {
		return CompletedCheckpoint{}, false
	}
	return *c.latestSavepoint, true
}

func (c *Coordinator) request(now int64, reason TriggerReason, req Request) int64 {
	c.lastReqID++
	id := c.lastReqID
	switch {
	case req.Kind != KindCheckpoint && req.Kind != KindSavepoint:
		c.emit(RequestDone{RequestID: id, Err: fmt.Errorf("%w: unknown kind %s", ErrInvalidRequest, req.Kind)})
	case req.Kind == KindCheckpoint && (req.TargetDir != "" || req.StopAfter):
		c.emit(RequestDone{RequestID: id, Err: fmt.Errorf("%w: a target directory or stop flag needs a savepoint", ErrInvalidRequest)})
	case !c.running:
		c.emit(RequestDone{RequestID: id, Err: ErrNotRunning})
	case len(c.queue) >= maxQueuedRequests:
		c.emit(RequestDone{RequestID: id, Err: ErrTooManyRequests})
	default:
		c.queue = append(c.queue, queuedRequest{id: id, reason: reason, req: req})
		c.maybeTrigger(now)
	}
	return id
}

// maybeTrigger starts what may start: queued requests first, in order, then
// one automatic checkpoint if one is due and MinPause is over.
func (c *Coordinator) maybeTrigger(now int64) {
	if !c.running {
		return
	}
	for len(c.pending) < c.opts.MaxConcurrent {
		if len(c.queue) > 0 {
			r := c.queue[0]
			c.queue = c.queue[1:]
			c.trigger(now, r.reason, r.id, r.req)
			continue
		}
		reason, due := c.owed()
		if !due || c.quiesced || (c.hasCompleted && now < c.lastCompletion+c.opts.MinPause) {
			return
		}
		c.trigger(now, reason, 0, Request{Kind: KindCheckpoint})
	}
}

// owed returns the automatic trigger that is due, the most specific reason
// first: one checkpoint serves all of them.
func (c *Coordinator) owed() (TriggerReason, bool) {
	switch {
	case c.markerDue:
		return ReasonMarker, true
	case c.recordsDue:
		return ReasonRecords, true
	case c.intervalDue:
		return ReasonInterval, true
	}
	return 0, false
}

func (c *Coordinator) clearOwed() {
	c.intervalDue, c.recordsDue, c.markerDue = false, false, false
	c.records = 0
}

func (c *Coordinator) trigger(now int64, reason TriggerReason, requestID int64, req Request) {
	c.lastID++
	p := &pendingCheckpoint{
		id: c.lastID, kind: req.Kind, reason: reason, requestID: requestID,
		targetDir: req.TargetDir, stopAfter: req.StopAfter, triggeredAt: now,
		tasks: c.tasks, acks: make(map[TaskID]TaskAck, len(c.tasks)),
	}
	c.pending = append(c.pending, p)
	c.counts.Triggered++
	if req.Kind == KindCheckpoint {
		// Any checkpoint serves the automatic triggers that were due.
		if c.intervalDue {
			c.nextDue = now + c.opts.Interval
		}
		c.clearOwed()
	}
	c.emit(TriggerCheckpoint{
		ID: p.id, Kind: p.kind, Reason: reason, Timestamp: now, RequestID: requestID,
		TargetDir: p.targetDir, StopAfter: p.stopAfter,
	})
}

func (c *Coordinator) complete(now int64, p *pendingCheckpoint) {
	c.removePending(p.id)
	rec := CompletedCheckpoint{
		ID: p.id, Kind: p.kind, Reason: p.reason, TargetDir: p.targetDir, StopAfter: p.stopAfter,
		TriggeredAt: p.triggeredAt, AckedAt: p.ackedAt, CompletedAt: now, Acks: sortedAcks(p.acks),
	}
	c.counts.Completed++
	c.hasCompleted = true
	c.lastCompletion = now
	if p.id > c.lastSucceeded {
		c.lastSucceeded = p.id
		c.failures = 0
	}
	c.remember(finishedCheckpoint{id: p.id, completed: true, tasks: p.tasks})
	c.emit(Completed{Checkpoint: rec})

	commits := p.kind == KindCheckpoint || p.stopAfter
	if commits && p.id > c.lastNotified {
		c.lastNotified = p.id
		c.emit(NotifyComplete{ID: p.id})
	}
	if p.requestID != 0 {
		c.emit(RequestDone{RequestID: p.requestID, ID: p.id})
	}
	if commits {
		for _, q := range slices.Clone(c.pending) {
			if q.id < p.id && q.kind == KindCheckpoint && !q.writingMeta {
				c.abort(q, AbortSubsumed, fmt.Sprintf("%s %d completed", p.kind, p.id))
			}
		}
	}
	if p.kind == KindSavepoint {
		if c.latestSavepoint == nil || p.id > c.latestSavepoint.ID {
			c.latestSavepoint = &rec
		}
		return
	}
	i, _ := slices.BinarySearchFunc(c.retained, p.id, func(r CompletedCheckpoint, id int64) int { return cmp.Compare(r.ID, id) })
	c.retained = slices.Insert(c.retained, i, rec)
	c.applyRetention()
}

// applyRetention discards the oldest completed checkpoints beyond Retained.
// A checkpoint completing out of order (older than one already retained) may
// thus be discarded right after its Completed.
func (c *Coordinator) applyRetention() {
	for len(c.retained) > c.opts.Retained {
		c.emit(Discard{ID: c.retained[0].ID, Acks: c.retained[0].Acks})
		c.retained = slices.Delete(c.retained, 0, 1)
	}
}

func (c *Coordinator) abort(p *pendingCheckpoint, reason AbortReason, detail string) {
	c.removePending(p.id)
	c.counts.Failed++
	c.emit(NotifyAborted{ID: p.id, Kind: p.kind, Reason: reason, Detail: detail})
	acked := make(map[TaskID]bool, len(p.acks))
	for _, a := range sortedAcks(p.acks) {
		acked[a.Task] = true
		c.emit(DiscardTaskState{ID: p.id, Task: a.Task, Handle: a.Snapshot.Handle})
	}
	if p.requestID != 0 {
		c.emit(RequestDone{RequestID: p.requestID, ID: p.id, Err: &AbortError{ID: p.id, Kind: p.kind, Reason: reason, Detail: detail}})
	}
	c.remember(finishedCheckpoint{id: p.id, tasks: p.tasks, acked: acked})

	// Savepoints are the user's business: a failed one fails the request, not
	// the job. Failures of checkpoints older than the last success are moot.
	if p.kind != KindCheckpoint || !reason.countsAsFailure() || p.id <= c.lastSucceeded {
		return
	}
	c.failures++
	c.lastFailure = fmt.Sprintf("checkpoint %d %s", p.id, reason)
	if detail != "" {
		c.lastFailure += ": " + detail
	}
	if c.failures > c.opts.TolerableFailures {
		c.emit(FailJob{Reason: fmt.Sprintf("exceeded checkpoint tolerable failure threshold (%d): %d consecutive failures, last: %s",
			c.opts.TolerableFailures, c.failures, c.lastFailure)})
		c.failures = 0
	}
}

// abortPending aborts every pending checkpoint that is not writing its
// metadata: once all tasks acknowledged, only MetadataDurable may decide,
// because the metadata may already be durable.
func (c *Coordinator) abortPending(reason AbortReason, detail string) {
	for _, p := range slices.Clone(c.pending) {
		if !p.writingMeta {
			c.abort(p, reason, detail)
		}
	}
}

func (c *Coordinator) stop(reason AbortReason, detail string) {
	c.running = false
	c.abortPending(reason, detail)
	for _, r := range c.queue {
		c.emit(RequestDone{RequestID: r.id, Err: fmt.Errorf("%w: %s", ErrNotRunning, detail)})
	}
	c.queue = nil
	c.clearOwed()
}

// strayAck handles an acknowledgement for a checkpoint that is not pending.
func (c *Coordinator) strayAck(id int64, task TaskID, handle []byte) {
	if f := c.findRecent(id); f != nil {
		switch {
		case !hasTask(f.tasks, task):
			c.warn(WarnUnknownTask, id, task)
		case f.completed || f.acked[task]:
			c.warn(WarnDuplicateAck, id, task)
		default:
			f.acked[task] = true
			c.warn(WarnLateAck, id, task)
			c.emit(DiscardTaskState{ID: id, Task: task, Handle: handle})
		}
		return
	}
	if r := c.findCompleted(id); r != nil {
		if slices.ContainsFunc(r.Acks, func(a TaskAck) bool { return a.Task == task }) {
			c.warn(WarnDuplicateAck, id, task)
		} else {
			c.warn(WarnUnknownTask, id, task)
		}
		return
	}
	// Unknown, or aborted too long ago to remember whether task's state was
	// already released: leaking it is safer than deleting referenced state.
	c.warn(WarnUnknownCheckpoint, id, task)
}

func (c *Coordinator) findPending(id int64) *pendingCheckpoint {
	for _, p := range c.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (c *Coordinator) removePending(id int64) {
	c.pending = slices.DeleteFunc(c.pending, func(p *pendingCheckpoint) bool { return p.id == id })
}

func (c *Coordinator) findRecent(id int64) *finishedCheckpoint {
	for i := range c.recent {
		if c.recent[i].id == id {
			return &c.recent[i]
		}
	}
	return nil
}

func (c *Coordinator) findCompleted(id int64) *CompletedCheckpoint {
	for i := range c.retained {
		if c.retained[i].ID == id {
			return &c.retained[i]
		}
	}
	if c.latestSavepoint != nil && c.latestSavepoint.ID == id {
		return c.latestSavepoint
	}
	return nil
}

func (c *Coordinator) remember(f finishedCheckpoint) {
	if len(c.recent) == recentCheckpoints {
		c.recent = slices.Delete(c.recent, 0, 1)
	}
	c.recent = append(c.recent, f)
}

func (c *Coordinator) emit(d Decision) { c.out = append(c.out, d) }

func (c *Coordinator) warn(code WarningCode, id int64, task TaskID) {
	c.emit(Warning{Code: code, ID: id, Task: task})
}

func hasTask(sorted []TaskID, t TaskID) bool {
	_, ok := slices.BinarySearch(sorted, t)
	return ok
}

func sortedAcks(m map[TaskID]TaskAck) []TaskAck {
	out := make([]TaskAck, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b TaskAck) int { return cmp.Compare(a.Task, b.Task) })
	return out
}

// missingTasks names the tasks that have not acknowledged p, a few at most.
func missingTasks(p *pendingCheckpoint) string {
	const show = 5
	var names []string
	missing := 0
	for _, t := range p.tasks {
		if _, ok := p.acks[t]; ok {
			continue
		}
		missing++
		if len(names) < show {
			names = append(names, string(t))
		}
	}
	s := strings.Join(names, ",")
	if missing > show {
		s += fmt.Sprintf(" and %d more", missing-show)
	}
	return s
}
