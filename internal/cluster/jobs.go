package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/storage"
)

// DefaultSlotRequestTimeout is how long a job waits for enough slots
// (Flink's slot.request.timeout).
const DefaultSlotRequestTimeout = 5 * time.Minute

// probeDir holds the objects a JobManager writes to a job's checkpoint
// storage for its TaskManagers to find (storage.Probe lists this prefix).
const probeDir = "weir-probe/"

// jobRun is one job submitted to the JobManager: its JobMaster runs in
// this process, its tasks on the TaskManagers. It implements rest.Job.
type jobRun struct {
	jm        *JobManager
	id, name  string
	args      []string
	metrics   *metrics.Job // empty: the tasks run on the TaskManagers
	job       deploy.Job   // as submitted: reactive mode rescales it
	master    *jobmaster.JobMaster
	gateway   jobmaster.TaskGateway
	reactive  *reactiveRun // nil unless in reactive mode
	mopts     jobmaster.Options
	cancel    context.CancelFunc
	submitted time.Time
	probe     string // the probe object in the job's storage
	done      chan struct{}

	mu         sync.Mutex
	plan       deploy.Plan // the current (or last) attempt's
	state      rest.JobStatus
	attempt    int
	note       string
	standing   string // the note while there is no other (reactive mode's parallelism)
	errText    string
	end        time.Time
	cancelling bool
	exceptions []rest.ExceptionInfo // newest first
	placement  deploy.Placement     // the current attempt's
	deployedAt time.Time            // when the current attempt was deployed
	// tasks are the statuses the current attempt's tasks reported
	// ("<vertex>-<subtask>": RUNNING, FAILED), for the REST subtasks.
	tasks        map[string]rest.TaskStatus
	tasksAttempt int // the attempt of tasks
	loggedWait   string
	// failTask and failAt are the task and TaskManager of the current
	// attempt's first failure, for its ExceptionInfo.
	failTask, failAt string
	// figures are the subtasks' figures of the latest attempt placed, as
	// their TaskManagers report them.
	figures Figures
}

// Submit implements the Submit call: it builds the job with the
// registry and runs its JobMaster here.
func (jm *JobManager) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitReply, error) {
	id, err := jm.SubmitJob(ctx, req.Name, req.Args)
	if err != nil {
		return nil, err
	}
	return &pb.SubmitReply{JobId: id}, nil
}

// SubmitJob builds job name with args and runs it on the cluster; it
// returns the job's id. Its errors are gRPC statuses with the reason.
func (jm *JobManager) SubmitJob(ctx context.Context, name string, args []string) (string, error) {
	return jm.submit(ctx, name, args, nil)
}

// JobHA makes the job service highly available (JobManagerOptions.HA;
// package cli keeps it in etcd with internal/ha): the jobs submitted are
// recorded, their JobMasters keep the checkpoint id counter and the
// completed checkpoints there, and a job is forgotten once it ended for
// good. Called from the job service's goroutines, concurrently.
type JobHA interface {
	// Submitted records an accepted job before it runs (not a recovered
	// one); an error refuses the submission.
	Submitted(ctx context.Context, id, name string, args []string) error
	// Master adjusts a job's JobMaster options before it is created.
	Master(id string, o *jobmaster.Options)
	// Ended forgets a job that ended (finished, cancelled, failed) while
	// this JobManager runs; a job stopped by Close is not ended.
	Ended(id string)
}

// recovered is a job a previous leader ran: its id, and where it resumes.
type recovered struct{ id, restore string }

// RecoverJob runs again, under its id, a job a previous leader recorded
// (high availability): restore is its latest completed checkpoint ("":
// it starts as its flags say). The job's one-time side effects
// (deploy.Preparer) are not run again.
func (jm *JobManager) RecoverJob(ctx context.Context, id, name string, args []string, restore string) error {
	_, err := jm.submit(ctx, name, args, &recovered{id: id, restore: restore})
	return err
}

func (jm *JobManager) submit(ctx context.Context, name string, args []string, rec *recovered) (string, error) {
	if jm.opts.Jobs == nil {
		return "", status.Error(codes.FailedPrecondition, "this JobManager has no registry of jobs: it cannot run any")
	}
	job, err := jm.opts.Jobs.Job(name, args)
	if err != nil {
		return "", status.Error(codes.InvalidArgument, err.Error())
	}
	mopts, err := job.Master()
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "job %s: %v", name, err)
	}
	if mopts.Storage == nil {
		return "", status.Errorf(codes.InvalidArgument, "job %s has no checkpoint storage: a cluster needs a shared path or s3:// (--checkpoint-dir)", name)
	}
	url := mopts.Storage.URL()
	if strings.HasPrefix(url, "memory:") {
		return "", status.Errorf(codes.FailedPrecondition, "job %s: checkpoint storage %s lives in the JobManager's memory, which TaskManagers cannot reach: give a path every process shares, or s3:// (--checkpoint-dir)", name, url)
	}
	if rec != nil {
		mopts.JobID = rec.id
		if rec.restore != "" {
			mopts.Restore = rec.restore
		}
	}
	if mopts.JobID == "" {
		mopts.JobID = newID(name + "-")
	}
	run := &jobRun{jm: jm, id: mopts.JobID, name: name, args: slices.Clone(args), plan: job.Plan(), job: job,
		submitted: jm.opts.Now(), done: make(chan struct{}), state: rest.JobCreated,
		metrics: metrics.NewJob(mopts.JobID, name)}
	// The probe: TaskManagers that cannot read it do not share the storage.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := storage.Probe(sctx, mopts.Storage); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "job %s: checkpoint storage: %v", name, err)
	}
	run.probe = probeDir + run.id + "-" + newID("")
	if err := writeProbe(sctx, mopts.Storage, run.probe, run.id); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "job %s: the JobManager cannot write to its checkpoint storage %s: %v", name, url, err)
	}
	log := jm.opts.Logger.With("job", run.id, "name", name)
	mopts.Logger = log
	onFailure := mopts.OnFailure
	mopts.OnFailure = func(err error, restarting bool) {
		if run.failed(err, restarting) && onFailure != nil {
			onFailure(err, restarting)
		}
	}
	if h := jm.opts.HA; h != nil {
		h.Master(mopts.JobID, &mopts)
	}
	var sched deploy.Scheduler = &scheduler{jm: jm, run: run}
	if jm.opts.SchedulerMode == SchedulerReactive {
		sched = run.startReactive(&mopts, log)
	}
	run.mopts = mopts
	gw := &statusGateway{TaskGateway: deploy.NewGateway(run.plan, sched, log), run: run}
	run.gateway = gw
	master, err := jobmaster.New(mopts, gw)
	if err != nil {
		mopts.Storage.Delete(sctx, run.probe)
		return "", status.Errorf(codes.InvalidArgument, "job %s: %v", name, err)
	}
	run.master = master

	jm.mu.Lock()
	if jm.closed {
		jm.mu.Unlock()
		mopts.Storage.Delete(sctx, run.probe)
		return "", status.Error(codes.Unavailable, "the JobManager is shutting down")
	}
	if old, ok := jm.jobs[run.id]; ok && !old.status().Terminal() {
		jm.mu.Unlock()
		mopts.Storage.Delete(sctx, run.probe)
		return "", status.Errorf(codes.AlreadyExists, "job id %s is already running (job %s): cancel it first, or submit it under another job id", run.id, old.name)
	}
	old, known := jm.jobs[run.id]
	if !known {
		jm.jobOrder = append(jm.jobOrder, run.id)
	}
	jm.jobs[run.id] = run
	runCtx, cancelRun := context.WithCancel(jm.jobsCtx)
	run.cancel = cancelRun
	jm.wg.Add(1)
	jm.mu.Unlock()
	undo := func() {
		jm.mu.Lock()
		if known {
			jm.jobs[run.id] = old
		} else {
			delete(jm.jobs, run.id)
			jm.jobOrder = slices.DeleteFunc(jm.jobOrder, func(id string) bool { return id == run.id })
		}
		jm.mu.Unlock()
		jm.wg.Done()
		cancelRun()
		mopts.Storage.Delete(sctx, run.probe)
	}
	if h := jm.opts.HA; h != nil && rec == nil {
		if err := h.Submitted(sctx, run.id, name, args); err != nil {
			undo()
			return "", status.Errorf(codes.Unavailable, "job %s: cannot record the submission for high availability: %v", name, err)
		}
	}
	if p, ok := job.(deploy.Preparer); ok && rec == nil {
		// Accepted (no job of this id runs): the job's one-time side
		// effects, here and never again on a restart.
		if err := p.Prepare(sctx); err != nil {
			undo()
			if h := jm.opts.HA; h != nil {
				h.Ended(run.id)
			}
			return "", status.Errorf(codes.FailedPrecondition, "job %s: %v", name, err)
		}
	}
	if rs := run.reactive; rs != nil {
		log.Info("job submitted", "args", args, "scheduler", SchedulerReactive, "max_parallelism", rs.core.Most(), "storage", url)
	} else {
		log.Info("job submitted", "args", args, "parallelism", maxParallelism(run.plan), "storage", url)
	}
	go func() {
		defer jm.wg.Done()
		defer cancelRun()
		var watcher sync.WaitGroup
		if run.reactive != nil {
			watcher.Go(func() { jm.watchReactive(runCtx, run) })
		}
		err := master.Run(runCtx)
		cancelRun()
		watcher.Wait()
		run.ended(err)
		jm.mu.Lock()
		jm.slots.Release(run.id)
		jm.changedLocked()
		closing := jm.closed
		jm.mu.Unlock()
		if h := jm.opts.HA; h != nil && !closing {
			h.Ended(run.id)
		}
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mopts.Storage.Delete(dctx, run.probe)
		cancel()
		st := run.status()
		log.Info("job ended", "state", st.State, "err", st.Error)
	}()
	return run.id, nil
}

func writeProbe(ctx context.Context, st storage.Store, name, job string) error {
	w, err := st.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "written by the JobManager of job %s for its TaskManagers to find\n", job); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

func maxParallelism(p deploy.Plan) int {
	n := 0
	for _, v := range p.Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

// JobStatus implements the JobStatus call.
func (jm *JobManager) JobStatus(_ context.Context, req *pb.JobStatusRequest) (*pb.JobInfo, error) {
	jm.mu.Lock()
	run, ok := jm.jobs[req.JobId]
	jm.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no job %q on this JobManager", req.JobId)
	}
	return infoOf(run.status()), nil
}

// ListJobs implements the ListJobs call.
func (jm *JobManager) ListJobs(context.Context, *pb.ListJobsRequest) (*pb.ListJobsReply, error) {
	out := &pb.ListJobsReply{}
	for _, r := range jm.runs() {
		out.Jobs = append(out.Jobs, infoOf(r.status()))
	}
	return out, nil
}

// CancelJob implements the CancelJob call.
func (jm *JobManager) CancelJob(_ context.Context, req *pb.CancelJobRequest) (*pb.CancelJobReply, error) {
	jm.mu.Lock()
	run, ok := jm.jobs[req.JobId]
	jm.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no job %q on this JobManager", req.JobId)
	}
	run.Cancel()
	return &pb.CancelJobReply{}, nil
}

func (jm *JobManager) runs() []*jobRun {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	out := make([]*jobRun, 0, len(jm.jobOrder))
	for _, id := range jm.jobOrder {
		out = append(out, jm.jobs[id])
	}
	return out
}

// Jobs implements rest.JobManager: the jobs submitted, in order.
func (jm *JobManager) Jobs() []rest.Job {
	out := []rest.Job{}
	for _, r := range jm.runs() {
		out = append(out, r)
	}
	return out
}

// Job implements rest.JobManager.
func (jm *JobManager) Job(id string) (rest.Job, bool) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	r, ok := jm.jobs[id]
	if !ok {
		return nil, false
	}
	return r, true
}

// --- the job's status -------------------------------------------------------

func (r *jobRun) status() JobStatus {
	sum := r.master.Summary()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	if r.cancelling && !st.Terminal() {
		st = rest.JobCancelling
	}
	return JobStatus{ID: r.id, Name: r.name, State: string(st), Attempt: r.attempt, Restarts: sum.Restarts,
		LastCheckpoint: sum.LatestCompleted, Error: r.errText, Note: r.note}
}

func (r *jobRun) deployed(attempt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempt, r.deployedAt = attempt, r.jm.opts.Now()
	r.note = r.standing
	if !r.state.Terminal() {
		r.state = rest.JobRunning
	}
}

// failed records the failure of an attempt, reported by the JobMaster.
// It returns false when the attempt ended to rescale (reactive mode):
// that is no failure, and leaves no exception (as in Flink).
func (r *jobRun) failed(err error, restarting bool) bool {
	e := rest.ExceptionInfo{Time: r.jm.opts.Now(), Name: fmt.Sprintf("%T", err), Message: err.Error()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs := r.reactive; rs != nil && rs.rescaled != "" {
		r.failTask, r.failAt = "", ""
		r.errText = rs.rescaled
		r.state = rest.JobRestarting
		return false
	}
	e.Task, e.Location = r.failTask, r.failAt
	r.failTask, r.failAt = "", ""
	r.exceptions = append([]rest.ExceptionInfo{e}, r.exceptions...)
	if len(r.exceptions) > 100 {
		r.exceptions = r.exceptions[:100]
	}
	r.errText = err.Error()
	if restarting {
		r.state = rest.JobRestarting
	} else {
		r.state = rest.JobFailing
	}
	return true
}

func (r *jobRun) ended(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end = r.jm.opts.Now()
	r.note, r.standing = "", ""
	switch {
	case err == nil:
		r.state = rest.JobFinished
	case errors.Is(err, context.Canceled):
		r.state = rest.JobCanceled
	default:
		r.state = rest.JobFailed
		r.errText = err.Error()
		if len(r.exceptions) == 0 || r.exceptions[0].Message != err.Error() {
			r.exceptions = append([]rest.ExceptionInfo{{Time: r.end, Name: fmt.Sprintf("%T", err), Message: err.Error()}}, r.exceptions...)
		}
	}
	close(r.done)
}

func (r *jobRun) setNote(note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note = note
}

// Done is closed once the job ended.
func (r *jobRun) Done() <-chan struct{} { return r.done }

// --- rest.Job ---------------------------------------------------------------

var _ rest.Job = (*jobRun)(nil)

// ID implements rest.Job.
func (r *jobRun) ID() string { return r.id }

// Metrics are the job's runtime figures as the JobManager holds them: none
// of its tasks (those are on the TaskManagers' /metrics), so that the
// JobManager's /metrics carries the job's checkpoint figures and
// numRestarts (promexport.Job).
func (r *jobRun) Metrics() *metrics.Job { return r.metrics }

// Name implements rest.Job.
func (r *jobRun) Name() string { return r.name }

// Status implements rest.Job.
func (r *jobRun) Status() rest.JobStatus { return rest.JobStatus(r.status().State) }

// StartTime implements rest.Job.
func (r *jobRun) StartTime() time.Time { return r.submitted }

// EndTime implements rest.Job.
func (r *jobRun) EndTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// Vertices implements rest.Job: the plan's vertices, with the status of the
// job's tasks and the figures their TaskManagers last reported for the
// latest attempt placed (see Figures), each vertex's summed over its
// subtasks.
func (r *jobRun) Vertices() []rest.VertexInfo {
	st := r.Status()
	ts := rest.TaskCreated
	switch st {
	case rest.JobRunning:
		ts = rest.TaskRunning
	case rest.JobFinished:
		ts = rest.TaskFinished
	case rest.JobCanceled, rest.JobCancelling:
		ts = rest.TaskCanceled
	case rest.JobFailed, rest.JobFailing:
		ts = rest.TaskFailed
	case rest.JobRestarting:
		ts = rest.TaskScheduled
	}
	r.mu.Lock()
	plan := r.plan
	p, attempt, deployedAt := r.placement, r.attempt, r.deployedAt
	reported := maps.Clone(r.tasks)
	figures := make([][]SubtaskFigures, len(plan.Vertices))
	for i, v := range plan.Vertices {
		figures[i] = make([]SubtaskFigures, v.Parallelism)
		for s := range v.Parallelism {
			figures[i][s] = r.figures.Subtask(v.ID, s)
		}
	}
	r.mu.Unlock()
	end := r.EndTime()
	out := make([]rest.VertexInfo, len(plan.Vertices))
	for i, v := range plan.Vertices {
		out[i] = rest.VertexInfo{ID: strconv.Itoa(v.ID), Name: v.Name, Parallelism: v.Parallelism,
			MaxParallelism: cmp.Or(v.MaxParallelism, plan.MaxParallelism), Status: ts, StartTime: r.submitted, EndTime: end,
			Subtasks: make([]rest.SubtaskInfo, v.Parallelism)}
		// Where the current (or last) attempt placed each subtask.
		for s := range v.Parallelism {
			w := p.Worker(v.ID, s)
			out[i].Subtasks[s] = rest.SubtaskInfo{Status: subtaskStatus(ts, reported[fmt.Sprintf("%d-%d", v.ID, s)]),
				Attempt: attempt, TaskManager: w, Endpoint: p.Workers[w],
				StartTime: deployedAt, EndTime: end, Metrics: ioMetrics(figures[i][s]),
				Watermarks: true, InputWatermark: figures[i][s].InputWatermark, OutputWatermark: figures[i][s].OutputWatermark}
		}
		out[i].Metrics, out[i].BackPressuredRatio, out[i].Operators = vertexFigures(figures[i])
	}
	return out
}

// ioMetrics are a subtask's figures as REST reports them. Its bytes are
// those of its channels to and from other TaskManagers: complete, since a
// channel within one TaskManager has none to count.
func ioMetrics(f SubtaskFigures) rest.IOMetrics {
	return rest.IOMetrics{ReadRecords: f.RecordsIn, WriteRecords: f.RecordsOut,
		ReadBytes: f.BytesIn, WriteBytes: f.BytesOut,
		BackPressuredTime: f.BackPressured, IdleTime: f.Idle, BusyTime: f.Busy}
}

// vertexFigures sums a vertex's subtask figures: the counters and times,
// each chained operator's records (nil when no subtask reported its
// operators), and the highest backpressured ratio, as local mode does.
func vertexFigures(subtasks []SubtaskFigures) (rest.IOMetrics, float64, []rest.OperatorRecords) {
	var sum rest.IOMetrics
	ratio := 0.0
	var ops []rest.OperatorRecords
	for _, f := range subtasks {
		sum.ReadRecords += f.RecordsIn
		sum.WriteRecords += f.RecordsOut
		sum.ReadBytes += f.BytesIn
		sum.WriteBytes += f.BytesOut
		sum.BackPressuredTime += f.BackPressured
		sum.IdleTime += f.Idle
		sum.BusyTime += f.Busy
		ratio = max(ratio, f.BackPressuredRatio)
		if ops == nil && len(f.Operators) > 0 {
			ops = make([]rest.OperatorRecords, len(f.Operators))
			for k, name := range f.Operators {
				ops[k].Name = name
			}
		}
		if len(f.Operators) != len(ops) {
			continue // a subtask that has not reported (every subtask of a vertex runs the same chain)
		}
		for k := range f.Operators {
			ops[k].ReadRecords += f.OperatorRecordsIn[k]
			ops[k].WriteRecords += f.OperatorRecordsOut[k]
		}
	}
	return sum, ratio, ops
}

// subtaskStatus is a subtask's status from the job's (ts) and what the
// subtask reported in the current attempt: while the job runs, DEPLOYING
// until the subtask reports running; the one that failed FAILED while the
// job fails or restarts.
func subtaskStatus(ts, reported rest.TaskStatus) rest.TaskStatus {
	switch {
	case ts == rest.TaskRunning && reported == "":
		return rest.TaskDeploying
	case ts == rest.TaskRunning:
		return reported
	case reported == rest.TaskFailed && (ts == rest.TaskFailed || ts == rest.TaskScheduled):
		return rest.TaskFailed
	}
	return ts
}

// Placement is where the current (or last) attempt's subtasks run.
func (r *jobRun) Placement() deploy.Placement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.placement
}

// Exceptions implements rest.Job.
func (r *jobRun) Exceptions() []rest.ExceptionInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.exceptions)
}

// CheckpointConfig implements rest.Job.
func (r *jobRun) CheckpointConfig() rest.CheckpointConfigInfo {
	c := r.mopts.Checkpoint
	return rest.CheckpointConfigInfo{
		ExactlyOnce: true,
		Interval:    time.Duration(c.Interval) * time.Millisecond, Timeout: time.Duration(c.Timeout) * time.Millisecond,
		MinPause: time.Duration(c.MinPause) * time.Millisecond, MaxConcurrent: c.MaxConcurrent,
		TolerableFailures: c.TolerableFailures, Retained: c.Retained, RetainOnCancel: r.mopts.RetainOnCancel,
		CheckpointStorage: r.mopts.Storage.URL(), SavepointDir: r.mopts.SavepointDir, EveryNRecords: c.EveryNRecords,
	}
}

// Checkpoints implements rest.Job.
func (r *jobRun) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	return r.master.Stats()
}

// Checkpoint implements rest.Job.
func (r *jobRun) Checkpoint(id int64) (jobmaster.CheckpointStats, bool) {
	return r.master.Checkpoint(id)
}

// TriggerCheckpoint implements rest.Job.
func (r *jobRun) TriggerCheckpoint(ctx context.Context) (int64, error) {
	return r.master.TriggerCheckpoint(ctx)
}

// TriggerSavepoint implements rest.Job.
func (r *jobRun) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return r.master.TriggerSavepoint(ctx, dir, false)
}

// StopWithSavepoint implements rest.Job.
func (r *jobRun) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	return r.master.TriggerSavepoint(ctx, dir, true)
}

// Cancel implements rest.Job: it cancels the job and returns at once.
func (r *jobRun) Cancel() {
	r.mu.Lock()
	if !r.state.Terminal() {
		r.cancelling = true
	}
	r.mu.Unlock()
	r.cancel()
}

// statusGateway is the job's gateway with the job's status kept: RUNNING
// once an attempt was deployed.
type statusGateway struct {
	jobmaster.TaskGateway
	run *jobRun
}

func (g *statusGateway) Deploy(ctx context.Context, req jobmaster.DeployRequest, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	g.run.mu.Lock()
	g.run.failTask, g.run.failAt = "", ""
	g.run.tasks, g.run.tasksAttempt = map[string]rest.TaskStatus{}, req.Attempt
	g.run.mu.Unlock()
	tasks, err := g.TaskGateway.Deploy(ctx, req, failureListener{Listener: l, run: g.run, attempt: req.Attempt})
	if err == nil {
		g.run.reactiveDeployed(req)
		g.run.deployed(req.Attempt)
	}
	return tasks, err
}

// failureListener notes where the attempt's first failure happened: the
// task that failed and the TaskManager that ran it (from the placement;
// a lost TaskManager's failure names no task).
type failureListener struct {
	jobmaster.Listener
	run     *jobRun
	attempt int
}

func (l failureListener) Report(r jobmaster.Report) {
	if t, ok := r.(jobmaster.TaskRunning); ok {
		l.run.mu.Lock()
		if l.attempt == l.run.tasksAttempt && l.run.tasks[t.Task] == "" {
			l.run.tasks[t.Task] = rest.TaskRunning
		}
		l.run.mu.Unlock()
	}
	if f, ok := r.(jobmaster.TaskFailed); ok {
		l.run.mu.Lock()
		if f.Task != "" && l.attempt == l.run.tasksAttempt {
			l.run.tasks[f.Task] = rest.TaskFailed
		}
		if l.run.failTask == "" && l.run.failAt == "" {
			l.run.failTask = f.Task
			if f.Operator != "" {
				l.run.failTask = fmt.Sprintf("%s (%d)", f.Operator, f.Subtask+1)
			}
			l.run.failAt = workerOfTask(l.run.placement, f.Task)
		}
		l.run.mu.Unlock()
	}
	l.Listener.Report(r)
}

// workerOfTask is the worker that runs task "<vertex>-<subtask>" in p, ""
// when unknown.
func workerOfTask(p deploy.Placement, task string) string {
	var v, s int
	if _, err := fmt.Sscanf(task, "%d-%d", &v, &s); err != nil {
		return ""
	}
	return p.Worker(v, s)
}

// --- the scheduler ----------------------------------------------------------

// scheduler places the attempts of one job on the registered
// TaskManagers whose task stream is attached: deploy.Spread over their
// free slots, waiting for enough slots up to the slot request timeout.
type scheduler struct {
	jm  *JobManager
	run *jobRun
}

// Place implements deploy.Scheduler.
func (s *scheduler) Place(ctx context.Context, plan deploy.Plan, attempt int) (deploy.Placement, []deploy.Worker, error) {
	jm, run := s.jm, s.run
	timeout := jm.opts.SlotRequestTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	need := maxParallelism(plan)
	for {
		jm.mu.Lock()
		offers, streams, free := jm.offersLocked(run)
		changed := jm.changed
		if free >= need {
			p, workers, err := jm.placeLocked(run, plan, offers, streams)
			jm.mu.Unlock()
			if err != nil {
				return deploy.Placement{}, nil, err
			}
			run.placed(attempt, plan, p)
			jm.opts.Logger.Info("placed", "job", run.id, "attempt", attempt, "taskmanagers", len(workers), "slots", need)
			return p, workers, nil
		}
		jm.mu.Unlock()
		note := fmt.Sprintf("waiting for %d slots, %d registered", need, free)
		run.waitingFor(note, attempt, timeout)
		select {
		case <-changed:
		case <-timer.C:
			return deploy.Placement{}, nil, fmt.Errorf("job %s: %s: not enough slots came within %v (slot.request.timeout, --slot-request-timeout)", plan.Job, note, timeout)
		case <-ctx.Done():
			return deploy.Placement{}, nil, ctx.Err()
		}
	}
}

// offersLocked releases run's slots (the tasks of its previous attempt
// ended before the JobMaster deploys the next) and returns the free slots
// of the TaskManagers whose task stream is attached, their streams, and
// how many slots are free. jm.mu is held.
func (jm *JobManager) offersLocked(run *jobRun) ([]deploy.Slots, map[string]*taskStream, int) {
	jm.slots.Release(run.id)
	var offers []deploy.Slots
	streams := map[string]*taskStream{}
	free := 0
	for _, m := range jm.instances {
		if m.tasks == nil || m.tasks.isLost() {
			continue
		}
		_, f, _ := jm.slots.Slots(m.instance)
		offers = append(offers, deploy.Slots{Worker: m.req.ResourceId, DataAddress: m.req.DataAddress, Free: f})
		streams[m.req.ResourceId] = m.tasks
		free += f
	}
	return offers, streams, free
}

// usableLocked is the number of slots run may use: the free ones and
// those it holds, of the TaskManagers whose task stream is attached.
// jm.mu is held.
func (jm *JobManager) usableLocked(run *jobRun) int {
	n := 0
	for _, m := range jm.instances {
		if m.tasks == nil || m.tasks.isLost() {
			continue
		}
		_, f, _ := jm.slots.Slots(m.instance)
		n += f + jm.slots.Held(m.instance, run.id)
	}
	return n
}

// placeLocked spreads plan over offers and allocates its slots to run; it
// returns the placement and its workers, sorted by id. jm.mu is held.
func (jm *JobManager) placeLocked(run *jobRun, plan deploy.Plan, offers []deploy.Slots, streams map[string]*taskStream) (deploy.Placement, []deploy.Worker, error) {
	p, err := deploy.Spread(plan, offers)
	if err != nil {
		return deploy.Placement{}, nil, err
	}
	p.Run = strconv.FormatInt(run.submitted.UnixNano(), 36)
	var workers []deploy.Worker
	for id := range p.Workers {
		ts := streams[id]
		if _, err := jm.slots.AllocateOn(run.id, ts.instance, slotsUsed(p, id)); err != nil {
			jm.slots.Release(run.id)
			return deploy.Placement{}, nil, err
		}
		workers = append(workers, newRemoteWorker(jm, run, ts))
	}
	slices.SortFunc(workers, func(a, b deploy.Worker) int { return strings.Compare(a.ID(), b.ID()) })
	return p, workers, nil
}

// placed records the plan and placement of the attempt being deployed;
// its subtasks' figures start at 0.
func (r *jobRun) placed(attempt int, plan deploy.Plan, p deploy.Placement) {
	parallelism := make(map[int]int, len(plan.Vertices))
	for _, v := range plan.Vertices {
		parallelism[v.ID] = v.Parallelism
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plan, r.placement, r.note = plan, p, ""
	r.figures.Placed(attempt, parallelism)
}

// reportFigures takes a TaskManager's figures of the subtasks of attempt
// it runs. The subtasks it refuses (stale or malformed) are named in the
// error; the others are taken.
func (r *jobRun) reportFigures(attempt int, m *pb.TaskMetrics) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, s := range m.Subtasks {
		if err := r.figures.Report(attempt, s.Task, subtaskFiguresFromWire(s)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitingFor notes (and logs, once per change) what an attempt waits for.
func (r *jobRun) waitingFor(note string, attempt int, timeout time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note = note
	if r.loggedWait != note {
		r.loggedWait = note
		r.jm.opts.Logger.Info(note, "job", r.id, "attempt", attempt, "timeout", timeout)
	}
}

// slotsUsed is the number of slots worker takes in p: slot sharing puts
// one subtask of each vertex in a slot.
func slotsUsed(p deploy.Placement, worker string) int {
	n := 0
	for _, subs := range p.Subtasks {
		c := 0
		for _, w := range subs {
			if w == worker {
				c++
			}
		}
		n = max(n, c)
	}
	return n
}

// changedLocked wakes the schedulers waiting for slots. jm.mu is held.
func (jm *JobManager) changedLocked() {
	close(jm.changed)
	jm.changed = make(chan struct{})
}
