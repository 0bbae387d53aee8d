package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/storage"
)

// executor is a TaskManager's side of one task stream (one JobManager
// session): it deploys the parts of job attempts the JobManager sends,
// passes the commands of each attempt to its worker, and sends the tasks'
// reports up. When the stream ends (the JobManager was lost) every task
// it runs is cancelled.
type executor struct {
	tm       *TaskManager
	session  string
	instance string
	log      *slog.Logger
	ctx      context.Context // ends with the stream
	cancel   context.CancelFunc

	out outbox
	// metricsMu orders the snapshots of task figures as they enter out,
	// so that the JobManager gets each subtask's figures in order.
	metricsMu sync.Mutex

	mu     sync.Mutex
	jobs   map[string]*tmJob // by job id
	stores map[string]storage.Store
	wg     sync.WaitGroup // deployments in progress
}

// tmJob is one job with tasks on this TaskManager.
type tmJob struct {
	id, name string
	args     []string
	// parallelism is the one the JobManager chose (reactive mode), 0
	// when the job runs at that of its flags.
	parallelism int32
	job         deploy.Job
	worker      deploy.Worker
	attempt     int64 // -1 while none is deployed
	cancel      context.CancelFunc
	running     map[int64]chan struct{} // attempts whose AttemptEnded was not sent yet
	up          *upListener             // the listener of attempt
}

// outbox is the unbounded queue of messages to send up the stream: a
// report never waits for the network.
type outbox struct {
	mu    sync.Mutex
	msgs  []*pb.TaskManagerMessage
	ready chan struct{}
}

func (o *outbox) put(m *pb.TaskManagerMessage) {
	o.mu.Lock()
	o.msgs = append(o.msgs, m)
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *outbox) take() []*pb.TaskManagerMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.msgs
	o.msgs = nil
	return m
}

// runTasks runs the task stream of the registration (session, instance)
// until it breaks or ctx ends; then it cancels every task it deployed and
// waits until they ended.
func (tm *TaskManager) runTasks(ctx context.Context, client pb.JobManagerClient, session, instance string) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Tasks(sctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.TaskManagerMessage{Session: session, InstanceId: instance}); err != nil {
		return err
	}
	ex := &executor{tm: tm, session: session, instance: instance, ctx: sctx, cancel: cancel,
		log:  tm.opts.Logger.With("taskmanager", tm.opts.ResourceID, "session", session),
		jobs: map[string]*tmJob{}, stores: map[string]storage.Store{}}
	ex.out.ready = make(chan struct{}, 1)
	tm.setExecutor(ex)
	defer tm.setExecutor(nil)

	var loops sync.WaitGroup
	sendErr := make(chan error, 1)
	loops.Go(func() {
		for {
			select {
			case <-sctx.Done():
				return
			case <-ex.out.ready:
			}
			for _, m := range ex.out.take() {
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
		}
	})
	loops.Go(func() { ex.metricsLoop(sctx) })
	recvErr := make(chan error, 1)
	loops.Go(func() {
		for {
			c, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			ex.command(c)
		}
	})
	select {
	case err = <-recvErr:
	case err = <-sendErr:
	case <-sctx.Done():
		err = ctx.Err()
	}
	cancel()
	loops.Wait() // the stream's context ended: Recv and Send return
	ex.abandon("the TaskManager lost its JobManager")
	return err
}

// abandon cancels every task of the session and waits until they ended
// (the workers report AttemptEnded once their tasks returned).
func (ex *executor) abandon(reason string) {
	ex.wg.Wait() // deployments in progress end: their context is done
	ex.mu.Lock()
	var waits []chan struct{}
	for _, j := range ex.jobs {
		if j.attempt >= 0 {
			j.worker.Cancel(jobmaster.CancelRequest{Attempt: int(j.attempt), Reason: reason, Err: errors.New(reason)})
		}
		if j.cancel != nil {
			j.cancel()
		}
		for _, ch := range j.running {
			waits = append(waits, ch)
		}
	}
	n := len(ex.jobs)
	ex.mu.Unlock()
	if n > 0 {
		ex.log.Warn("cancelling every task: the JobManager was lost", "jobs", n)
	}
	for _, ch := range waits {
		<-ch
	}
}

// command takes one command of the JobManager.
func (ex *executor) command(c *pb.JobManagerCommand) {
	if c.Session != ex.session {
		ex.drop(c, fmt.Errorf("JobManager session %q is not the one registered with (%q)", c.Session, ex.session))
		return
	}
	if d, ok := c.Body.(*pb.JobManagerCommand_Deploy); ok {
		ex.wg.Add(1)
		go func() {
			defer ex.wg.Done()
			ex.deploy(c, d.Deploy)
		}()
		return
	}
	ex.mu.Lock()
	j := ex.jobs[c.JobId]
	current := int64(-1)
	if j != nil {
		current = j.attempt
	}
	ex.mu.Unlock()
	if err := fence(c.Session, ex.session, c.Attempt, current); err != nil {
		ex.drop(c, err)
		return
	}
	attempt := int(c.Attempt)
	switch b := c.Body.(type) {
	case *pb.JobManagerCommand_Trigger:
		t := b.Trigger
		req := jobmaster.TriggerRequest{Attempt: attempt, Checkpoint: t.Checkpoint, Timestamp: t.TimestampMs,
			Kind: checkpointKind(t.Kind), StoreURL: t.StoreUrl, Dir: t.Dir}
		if st, err := ex.store(t.StoreUrl); err == nil {
			req.Store = st
		} else {
			ex.log.Error("cannot open the storage of a checkpoint", "checkpoint", t.Checkpoint, "url", t.StoreUrl, "err", err)
			return
		}
		j.worker.TriggerCheckpoint(req)
	case *pb.JobManagerCommand_NotifyComplete:
		j.worker.NotifyComplete(jobmaster.Notification{Attempt: attempt, Checkpoint: b.NotifyComplete.Checkpoint})
	case *pb.JobManagerCommand_NotifyAborted:
		j.worker.NotifyAborted(jobmaster.Notification{Attempt: attempt, Checkpoint: b.NotifyAborted.Checkpoint})
	case *pb.JobManagerCommand_FinishSources:
		j.worker.FinishSources(attempt)
	case *pb.JobManagerCommand_StopTasks:
		j.worker.StopTasks(attempt)
	case *pb.JobManagerCommand_Cancel:
		reason := b.Cancel.Reason
		j.worker.Cancel(jobmaster.CancelRequest{Attempt: attempt, Reason: reason, Err: errors.New(reason)})
	default:
		ex.drop(c, fmt.Errorf("a command without a body"))
	}
}

func (ex *executor) drop(c *pb.JobManagerCommand, why error) {
	ex.tm.rejected.Add(1)
	ex.log.Debug("dropping a command of the JobManager", "job", c.JobId, "attempt", c.Attempt, "why", why)
}

// store opens a storage URL once per session.
func (ex *executor) store(url string) (storage.Store, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if st, ok := ex.stores[url]; ok {
		return st, nil
	}
	st, err := ex.tm.opts.OpenStorage(url)
	if err != nil {
		return nil, err
	}
	ex.stores[url] = st
	return st, nil
}

// deploy starts the attempt's part on this TaskManager and answers with
// its tasks or the reason it could not.
func (ex *executor) deploy(c *pb.JobManagerCommand, d *pb.DeployTasks) {
	reply := &pb.DeployReply{Request: d.Request}
	tasks, err := ex.start(c, d)
	if err != nil {
		reply.Error = err.Error()
		ex.log.Error("deployment refused", "job", c.JobId, "attempt", c.Attempt, "err", err)
	}
	for _, t := range tasks {
		reply.Tasks = append(reply.Tasks, &pb.TaskInfo{Id: t.ID, Source: t.Source})
	}
	ex.out.put(&pb.TaskManagerMessage{Session: ex.session, JobId: c.JobId, Attempt: c.Attempt,
		Body: &pb.TaskManagerMessage_Deployed{Deployed: reply}})
}

func (ex *executor) start(c *pb.JobManagerCommand, d *pb.DeployTasks) ([]jobmaster.TaskInfo, error) {
	tm := ex.tm
	me := tm.opts.ResourceID
	if tm.opts.Jobs == nil {
		return nil, fmt.Errorf("TaskManager %s has no registry of jobs: it cannot run job %s", me, d.JobName)
	}
	if tm.opts.Node == nil {
		return nil, fmt.Errorf("TaskManager %s has no data plane: it cannot run tasks", me)
	}
	if d.Worker != me {
		return nil, fmt.Errorf("TaskManager %s was sent the part of worker %q", me, d.Worker)
	}
	ex.mu.Lock()
	old := ex.jobs[c.JobId]
	ex.mu.Unlock()
	j := old
	if j == nil || j.name != d.JobName || !slices.Equal(j.args, d.Args) || j.parallelism != d.Parallelism {
		job, err := tm.opts.Jobs.Job(d.JobName, d.Args)
		if err != nil {
			return nil, fmt.Errorf("TaskManager %s cannot build job %s: %w", me, d.JobName, err)
		}
		if d.Parallelism > 0 {
			// Reactive mode: the parallelism the JobManager chose.
			if job, err = job.Rescaled(int(d.Parallelism)); err != nil {
				return nil, fmt.Errorf("TaskManager %s cannot build job %s at parallelism %d: %w", me, d.JobName, d.Parallelism, err)
			}
		}
		j = &tmJob{id: c.JobId, name: d.JobName, args: d.Args, parallelism: d.Parallelism, job: job, attempt: -1,
			worker: deploy.NewLocalWorker(me, job, tm.opts.Node, ex.log), running: map[int64]chan struct{}{}}
	}
	plan := j.job.Plan()
	if plan.Fingerprint != d.Fingerprint {
		return nil, fmt.Errorf("TaskManager %s refuses job %s: its build of the job has graph fingerprint %s, the JobManager's %s (operator uids, types, parallelism or codecs differ): run the same binary with the same job flags in every process", me, d.JobName, plan.Fingerprint, d.Fingerprint)
	}
	if err := ex.checkStorage(d); err != nil {
		return nil, err
	}
	var p deploy.Placement
	if err := decodeJSON(d.PlacementJson, &p, "the placement"); err != nil {
		return nil, fmt.Errorf("TaskManager %s: %w", me, err)
	}
	var restore *jobmaster.Restored
	if len(d.RestoreJson) > 0 {
		restore = &jobmaster.Restored{}
		if err := decodeJSON(d.RestoreJson, restore, "the restore point"); err != nil {
			return nil, fmt.Errorf("TaskManager %s: %w", me, err)
		}
		st, err := ex.store(restore.StoreURL)
		if err != nil {
			return nil, fmt.Errorf("TaskManager %s cannot open the storage %s of the checkpoint it restores: %w", me, restore.StoreURL, err)
		}
		restore.Store = st
	}
	// The previous attempt's tasks here end before the next starts (also
	// those of the job's previous build, at another parallelism).
	ex.mu.Lock()
	var prev []chan struct{}
	builds := []*tmJob{j}
	if old != nil && old != j {
		builds = append(builds, old)
	}
	for _, b := range builds {
		for _, ch := range b.running {
			prev = append(prev, ch)
		}
		if b.cancel != nil {
			b.cancel()
		}
	}
	ex.mu.Unlock()
	for _, ch := range prev {
		select {
		case <-ch:
		case <-ex.ctx.Done():
			return nil, errors.New("the JobManager was lost")
		}
	}
	actx, cancel := context.WithCancel(ex.ctx)
	ended := make(chan struct{})
	ex.mu.Lock()
	if ex.ctx.Err() != nil {
		ex.mu.Unlock()
		cancel()
		return nil, errors.New("the JobManager was lost")
	}
	j.attempt, j.cancel = c.Attempt, cancel
	j.running[c.Attempt] = ended
	ex.jobs[c.JobId] = j
	ex.mu.Unlock()
	l := &upListener{ex: ex, job: c.JobId, attempt: c.Attempt, ended: ended, j: j}
	ex.mu.Lock()
	j.up = l
	ex.mu.Unlock()
	tasks, err := j.worker.Deploy(actx, jobmaster.DeployRequest{JobID: c.JobId, Attempt: int(c.Attempt), Restore: restore}, plan, p, l)
	if err != nil {
		cancel()
		l.end()
		ex.mu.Lock()
		if j.attempt == c.Attempt {
			j.attempt = -1
		}
		ex.mu.Unlock()
		return nil, fmt.Errorf("TaskManager %s: %w", me, err)
	}
	ex.log.Info("deployed", "job", c.JobId, "attempt", c.Attempt, "tasks", len(tasks))
	return tasks, nil
}

// checkStorage makes sure this TaskManager reaches the job's checkpoint
// storage: it opens it, probes it, and finds the object the JobManager
// wrote there.
func (ex *executor) checkStorage(d *pb.DeployTasks) error {
	me := ex.tm.opts.ResourceID
	if strings.HasPrefix(d.StorageUrl, "memory:") {
		return fmt.Errorf("TaskManager %s cannot reach checkpoint storage %s: it lives in the JobManager's memory; give a path every process shares, or s3://", me, d.StorageUrl)
	}
	st, err := ex.store(d.StorageUrl)
	if err != nil {
		return fmt.Errorf("TaskManager %s cannot open checkpoint storage %s: %w", me, d.StorageUrl, err)
	}
	ctx, cancel := context.WithTimeout(ex.ctx, time.Minute)
	defer cancel()
	if err := storage.Probe(ctx, st); err != nil {
		return fmt.Errorf("TaskManager %s cannot reach checkpoint storage: %w", me, err)
	}
	if d.ProbeName == "" {
		return nil
	}
	if _, err := st.Stat(ctx, d.ProbeName); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("TaskManager %s does not share the checkpoint storage %s with the JobManager: it cannot see the object %s the JobManager wrote there (is the path on a file system every process mounts?); give a shared path or s3://", me, d.StorageUrl, d.ProbeName)
		}
		return fmt.Errorf("TaskManager %s cannot read checkpoint storage %s: %w", me, d.StorageUrl, err)
	}
	return nil
}

// checkpointKind is the wire's kind as a checkpoint.Kind.
func checkpointKind(k int32) checkpoint.Kind {
	if k == int32(checkpoint.KindSavepoint) {
		return checkpoint.KindSavepoint
	}
	return checkpoint.KindCheckpoint
}

// upListener sends one attempt's reports up the task stream.
type upListener struct {
	ex      *executor
	job     string
	attempt int64
	ended   chan struct{}
	j       *tmJob
	once    sync.Once
	// finalSent: the final figures were sent (guarded by ex.metricsMu).
	finalSent bool
}

// Report implements jobmaster.Listener.
func (l *upListener) Report(r jobmaster.Report) {
	w, err := reportToWire(r)
	if err != nil {
		l.ex.log.Error("a report cannot be sent", "job", l.job, "err", err)
		return
	}
	if _, ok := r.(jobmaster.AttemptEnded); ok && int64(r.AttemptNumber()) == l.attempt {
		// The tasks' final figures go just before the end: the JobManager
		// drops what comes for an attempt after its end.
		l.sendMetrics(true)
	}
	l.ex.out.put(&pb.TaskManagerMessage{Session: l.ex.session, JobId: l.job, Attempt: int64(r.AttemptNumber()),
		Body: &pb.TaskManagerMessage_Report{Report: w}})
	if _, ok := r.(jobmaster.AttemptEnded); ok && int64(r.AttemptNumber()) == l.attempt {
		l.end()
	}
}

// end marks the attempt's tasks here as ended.
func (l *upListener) end() {
	l.once.Do(func() {
		l.ex.mu.Lock()
		delete(l.j.running, l.attempt)
		l.ex.mu.Unlock()
		close(l.ended)
	})
}

// metricsLoop sends the figures of every running attempt's tasks here
// each MetricsInterval, until ctx ends.
func (ex *executor) metricsLoop(ctx context.Context) {
	tick := time.NewTicker(ex.tm.opts.MetricsInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ex.mu.Lock()
		var ups []*upListener
		for _, j := range ex.jobs {
			if _, running := j.running[j.attempt]; running && j.up != nil && j.up.attempt == j.attempt {
				ups = append(ups, j.up)
			}
		}
		ex.mu.Unlock()
		for _, l := range ups {
			l.sendMetrics(false)
		}
	}
}

// sendMetrics puts the figures of the attempt's tasks here into the
// outbox; final marks the last, once the tasks all ended, after which
// none is sent.
func (l *upListener) sendMetrics(final bool) {
	mw, ok := l.j.worker.(deploy.MetricsWorker)
	if !ok {
		return
	}
	ex := l.ex
	ex.metricsMu.Lock()
	defer ex.metricsMu.Unlock()
	if l.finalSent {
		return
	}
	l.finalSent = final
	tasks := mw.TaskMetrics(int(l.attempt))
	if len(tasks) == 0 {
		return
	}
	m := &pb.TaskMetrics{Final: final, Subtasks: make([]*pb.SubtaskMetrics, len(tasks))}
	now := ex.tm.opts.Now()
	for i, t := range tasks {
		m.Subtasks[i] = subtaskMetricsToWire(t.ID, t.Operators, t.Snapshot(now))
	}
	ex.out.put(&pb.TaskManagerMessage{Session: ex.session, JobId: l.job, Attempt: l.attempt,
		Body: &pb.TaskManagerMessage_Metrics{Metrics: m}})
}
