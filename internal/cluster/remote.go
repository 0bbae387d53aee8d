package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
)

// taskStream is the JobManager's end of one instance's task stream: the
// commands waiting to be sent, and the workers of the jobs deployed there.
type taskStream struct {
	resource, instance string

	mu      sync.Mutex
	out     []*pb.JobManagerCommand
	ready   chan struct{}
	lost    chan struct{}
	reason  string
	workers map[string]*remoteWorker // by job id
}

func newTaskStream(resource, instance string) *taskStream {
	return &taskStream{resource: resource, instance: instance, ready: make(chan struct{}, 1),
		lost: make(chan struct{}), workers: map[string]*remoteWorker{}}
}

// send queues c; false when the stream is lost.
func (ts *taskStream) send(c *pb.JobManagerCommand) bool {
	ts.mu.Lock()
	select {
	case <-ts.lost:
		ts.mu.Unlock()
		return false
	default:
	}
	ts.out = append(ts.out, c)
	ts.mu.Unlock()
	select {
	case ts.ready <- struct{}{}:
	default:
	}
	return true
}

func (ts *taskStream) take() []*pb.JobManagerCommand {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := ts.out
	ts.out = nil
	return out
}

// sendLoop sends the queued commands until the stream is lost or send
// fails.
func (ts *taskStream) sendLoop(send func(*pb.JobManagerCommand) error) error {
	for {
		select {
		case <-ts.lost:
			return nil
		case <-ts.ready:
		}
		for _, c := range ts.take() {
			if err := send(c); err != nil {
				return err
			}
		}
	}
}

func (ts *taskStream) isLost() bool {
	select {
	case <-ts.lost:
		return true
	default:
		return false
	}
}

// lose marks the stream lost for reason (once) and fails the attempts of
// every job deployed on it.
func (ts *taskStream) lose(reason string) {
	ts.mu.Lock()
	select {
	case <-ts.lost:
		ts.mu.Unlock()
		return
	default:
	}
	ts.reason = reason
	close(ts.lost)
	workers := make([]*remoteWorker, 0, len(ts.workers))
	for _, w := range ts.workers {
		workers = append(workers, w)
	}
	ts.mu.Unlock()
	for _, w := range workers {
		w.lostTaskManager(reason)
	}
}

func (ts *taskStream) lostReason() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.reason
}

func (ts *taskStream) attach(w *remoteWorker) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.workers[w.run.id] = w
}

func (ts *taskStream) worker(job string) *remoteWorker {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.workers[job]
}

// Tasks implements the task stream of one instance.
func (jm *JobManager) Tasks(stream pb.JobManager_TasksServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	jm.mu.Lock()
	m, ok := jm.instances[first.InstanceId]
	switch {
	case first.Session != jm.session:
		jm.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "registered with JobManager session %s, which ended; this is session %s: register again", first.Session, jm.session)
	case !ok:
		jm.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "instance %s is not registered (it was dropped): register again", first.InstanceId)
	}
	if m.tasks != nil {
		m.tasks.lose("a newer task stream of the instance attached")
	}
	ts := newTaskStream(m.req.ResourceId, m.instance)
	m.tasks = ts
	jm.changedLocked()
	jm.wg.Add(1)
	jm.mu.Unlock()

	broke := make(chan error, 1)
	go func() {
		defer jm.wg.Done()
		for {
			msg, err := stream.Recv()
			if err != nil {
				broke <- err
				return
			}
			jm.onTaskMessage(ts, msg)
		}
	}()
	sent := make(chan error, 1)
	go func() { sent <- ts.sendLoop(stream.Send) }()
	reason, sendEnded := "", false
	select {
	case err := <-broke:
		reason = "task connection broke"
		if s := status.Convert(err); err != nil && s.Code() != codes.Canceled && s.Message() != "EOF" {
			reason += ": " + s.Message()
		}
	case err := <-sent:
		sendEnded = true // received: the wait below must not wait for it again
		reason = "task connection broke"
		if err != nil {
			reason += ": " + describe(err)
		}
	case <-ts.lost:
		reason = ts.lostReason()
	}
	jm.mu.Lock()
	if cur := jm.instances[m.instance]; cur == m && m.tasks == ts {
		if !jm.closed {
			jm.dropLocked(m.instance, reason)
		}
		m.tasks = nil
	}
	jm.mu.Unlock()
	ts.lose(reason)
	if !sendEnded {
		<-sent
	}
	return nil
}

// onTaskMessage takes one message of an instance's task stream: fenced by
// session and attempt, then passed to the job's worker.
func (jm *JobManager) onTaskMessage(ts *taskStream, msg *pb.TaskManagerMessage) {
	w := ts.worker(msg.JobId)
	if w == nil {
		jm.reject(ts, msg, fmt.Errorf("no job %q is deployed on it", msg.JobId))
		return
	}
	if err := w.take(msg); err != nil {
		jm.reject(ts, msg, err)
	}
}

// reject drops a stale or unknown message (or, for malformed figures of
// subtasks, what was malformed in it: a warning, since only a bug sends
// them).
func (jm *JobManager) reject(ts *taskStream, msg *pb.TaskManagerMessage, why error) {
	jm.rejected.Add(1)
	if errors.Is(why, ErrBadFigures) {
		jm.opts.Logger.Warn("ignoring subtask figures of a TaskManager", "taskmanager", ts.resource, "job", msg.JobId, "attempt", msg.Attempt, "why", why)
		return
	}
	jm.opts.Logger.Debug("dropping a message of a TaskManager", "taskmanager", ts.resource, "job", msg.JobId, "attempt", msg.Attempt, "why", why)
}

// Rejected counts the task stream messages dropped by fencing (another
// session, another attempt, an unknown job).
func (jm *JobManager) Rejected() int64 { return jm.rejected.Load() }

// remoteWorker is one TaskManager as one job's gateway sees it: the
// deploy.Worker that sends the attempt's commands over the task stream and
// passes its reports on.
type remoteWorker struct {
	jm  *JobManager
	run *jobRun
	ts  *taskStream

	mu       sync.Mutex
	attempt  int64 // -1: none deployed
	deployed bool  // the current attempt's deploy succeeded
	ended    bool  // the current attempt reported AttemptEnded
	listener jobmaster.Listener
	request  uint64
	reply    chan *pb.DeployReply
}

var requests atomic.Uint64

var _ deploy.Worker = (*remoteWorker)(nil)

func newRemoteWorker(jm *JobManager, run *jobRun, ts *taskStream) *remoteWorker {
	return &remoteWorker{jm: jm, run: run, ts: ts, attempt: -1}
}

// ID implements deploy.Worker: the TaskManager's resource id.
func (w *remoteWorker) ID() string { return w.ts.resource }

func (w *remoteWorker) command(attempt int) *pb.JobManagerCommand {
	return &pb.JobManagerCommand{Session: w.jm.session, JobId: w.run.id, Attempt: int64(attempt)}
}

// Deploy implements deploy.Worker.
func (w *remoteWorker) Deploy(ctx context.Context, req jobmaster.DeployRequest, plan deploy.Plan, p deploy.Placement, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	pj, err := encodeJSON(p)
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	var rj []byte
	if req.Restore != nil {
		if rj, err = encodeJSON(req.Restore); err != nil {
			return nil, fmt.Errorf("restore point: %w", err)
		}
	}
	reply := make(chan *pb.DeployReply, 1)
	n := requests.Add(1)
	w.mu.Lock()
	w.attempt, w.deployed, w.ended, w.listener, w.request, w.reply = int64(req.Attempt), false, false, l, n, reply
	w.mu.Unlock()
	w.ts.attach(w)
	c := w.command(req.Attempt)
	dt := &pb.DeployTasks{
		Request: n, JobName: w.run.name, Args: w.run.args, Fingerprint: plan.Fingerprint, Worker: w.ID(),
		PlacementJson: pj, RestoreJson: rj, StorageUrl: w.run.mopts.Storage.URL(), ProbeName: w.run.probe,
	}
	if w.run.reactive != nil {
		// The plan is the job rescaled to its highest vertex parallelism
		// (reactive mode): the TaskManager builds the same.
		dt.Parallelism = int32(maxParallelism(plan))
	}
	c.Body = &pb.JobManagerCommand_Deploy{Deploy: dt}
	if !w.ts.send(c) {
		return nil, fmt.Errorf("TaskManager %s was lost: %s", w.ID(), w.ts.lostReason())
	}
	select {
	case r := <-reply:
		if r.Error != "" {
			return nil, errors.New(r.Error)
		}
		tasks := make([]jobmaster.TaskInfo, len(r.Tasks))
		for i, t := range r.Tasks {
			tasks[i] = jobmaster.TaskInfo{ID: t.Id, Source: t.Source}
		}
		w.mu.Lock()
		w.deployed = true
		ended := w.ended
		w.mu.Unlock()
		if !ended && w.ts.isLost() {
			// Lost between the reply and now: lostTaskManager saw the
			// attempt undeployed and reported nothing.
			w.lostTaskManager(w.ts.lostReason())
		}
		return tasks, nil
	case <-w.ts.lost:
		return nil, fmt.Errorf("TaskManager %s was lost while deploying: %s", w.ID(), w.ts.lostReason())
	case <-ctx.Done():
		w.send(req.Attempt, &pb.JobManagerCommand_Cancel{Cancel: &pb.CancelTasks{Reason: "the deployment was abandoned"}})
		return nil, ctx.Err()
	}
}

// take passes a message of the task stream on, unless it is stale.
func (w *remoteWorker) take(msg *pb.TaskManagerMessage) error {
	w.mu.Lock()
	current := w.attempt
	if w.ended {
		current = -1
	}
	if err := fence(msg.Session, w.jm.session, msg.Attempt, current); err != nil {
		w.mu.Unlock()
		return err
	}
	switch b := msg.Body.(type) {
	case *pb.TaskManagerMessage_Deployed:
		if b.Deployed.Request != w.request || w.reply == nil {
			w.mu.Unlock()
			return fmt.Errorf("a reply to deployment %d, which is not the one pending", b.Deployed.Request)
		}
		w.reply <- b.Deployed
		w.reply = nil
		w.mu.Unlock()
		return nil
	case *pb.TaskManagerMessage_Report:
		r, err := reportFromWire(int(msg.Attempt), b.Report)
		if err != nil {
			w.mu.Unlock()
			return err
		}
		if _, ok := r.(jobmaster.AttemptEnded); ok {
			w.ended = true
		}
		l := w.listener
		w.mu.Unlock()
		l.Report(r)
		return nil
	case *pb.TaskManagerMessage_Metrics:
		w.mu.Unlock()
		return w.run.reportFigures(int(msg.Attempt), b.Metrics)
	}
	w.mu.Unlock()
	return fmt.Errorf("a message without a body")
}

// lostTaskManager reports the current attempt's tasks on the TaskManager
// as failed and ended: it was lost.
func (w *remoteWorker) lostTaskManager(reason string) {
	w.mu.Lock()
	if w.attempt < 0 || !w.deployed || w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	attempt, l := int(w.attempt), w.listener
	w.mu.Unlock()
	w.run.mu.Lock()
	if w.run.failTask == "" && w.run.failAt == "" {
		w.run.failAt = w.ts.resource
	}
	w.run.mu.Unlock()
	err := fmt.Errorf("TaskManager %s (instance %s) was lost: %s", w.ts.resource, w.ts.instance, reason)
	w.jm.opts.Logger.Warn("failing the job's tasks on a lost TaskManager", "job", w.run.id, "attempt", attempt, "taskmanager", w.ts.resource, "reason", reason)
	l.Report(jobmaster.TaskFailed{Attempt: attempt, Subtask: -1, Error: err.Error(), Err: err})
	l.Report(jobmaster.AttemptEnded{Attempt: attempt, Error: err.Error(), Err: err})
}

// send sends a command of attempt, when it is the current one.
func (w *remoteWorker) send(attempt int, body any) {
	w.mu.Lock()
	cur := w.attempt
	w.mu.Unlock()
	if int64(attempt) != cur {
		return
	}
	c := w.command(attempt)
	switch b := body.(type) {
	case *pb.JobManagerCommand_Trigger:
		c.Body = b
	case *pb.JobManagerCommand_NotifyComplete:
		c.Body = b
	case *pb.JobManagerCommand_NotifyAborted:
		c.Body = b
	case *pb.JobManagerCommand_FinishSources:
		c.Body = b
	case *pb.JobManagerCommand_StopTasks:
		c.Body = b
	case *pb.JobManagerCommand_Cancel:
		c.Body = b
	default:
		panic(fmt.Sprintf("cluster: no command body %T", body))
	}
	w.ts.send(c)
}

// TriggerCheckpoint implements deploy.Worker.
func (w *remoteWorker) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	w.send(req.Attempt, &pb.JobManagerCommand_Trigger{Trigger: &pb.TriggerCheckpoint{
		Checkpoint: req.Checkpoint, TimestampMs: req.Timestamp, Kind: int32(req.Kind), StoreUrl: req.StoreURL, Dir: req.Dir}})
}

// NotifyComplete implements deploy.Worker.
func (w *remoteWorker) NotifyComplete(n jobmaster.Notification) {
	w.send(n.Attempt, &pb.JobManagerCommand_NotifyComplete{NotifyComplete: &pb.CheckpointNotice{Checkpoint: n.Checkpoint}})
}

// NotifyAborted implements deploy.Worker.
func (w *remoteWorker) NotifyAborted(n jobmaster.Notification) {
	w.send(n.Attempt, &pb.JobManagerCommand_NotifyAborted{NotifyAborted: &pb.CheckpointNotice{Checkpoint: n.Checkpoint}})
}

// FinishSources implements deploy.Worker.
func (w *remoteWorker) FinishSources(attempt int) {
	w.send(attempt, &pb.JobManagerCommand_FinishSources{FinishSources: &pb.Empty{}})
}

// StopTasks implements deploy.Worker.
func (w *remoteWorker) StopTasks(attempt int) {
	w.send(attempt, &pb.JobManagerCommand_StopTasks{StopTasks: &pb.Empty{}})
}

// Cancel implements deploy.Worker.
func (w *remoteWorker) Cancel(req jobmaster.CancelRequest) {
	reason := req.Reason
	if reason == "" && req.Err != nil {
		reason = req.Err.Error()
	}
	w.send(req.Attempt, &pb.JobManagerCommand_Cancel{Cancel: &pb.CancelTasks{Reason: reason}})
}
