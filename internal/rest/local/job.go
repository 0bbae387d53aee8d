package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/runtime"
)

// MaxExceptions bounds the failures a job remembers (newest kept).
const MaxExceptions = 100

// Job is what the REST API and /metrics read about a job besides its
// checkpoint statistics: identity, graph, status, failures and the
// current attempt's task metrics. Safe for concurrent use.
type Job struct {
	id, name  string
	jg        *graph.JobGraph
	metrics   *metrics.Job
	submitted time.Time

	mu         sync.Mutex
	status     rest.JobStatus
	end        time.Time
	cancelling bool
	exceptions []rest.ExceptionInfo // newest first
	sources    []*runtime.Task      // the current attempt's source tasks
	// stopSavepoint is the savepoint the job was stopped with.
	stopSavepoint string
}

// NewJob returns a CREATED job submitted now.
func NewJob(id, name string, jg *graph.JobGraph) *Job {
	return &Job{id: id, name: name, jg: jg,
		metrics: metrics.NewJob(id, name), submitted: time.Now(), status: rest.JobCreated}
}

// ID returns the job's id.
func (j *Job) ID() string { return j.id }

// Name returns the name the job was executed with.
func (j *Job) Name() string { return j.name }

// Metrics returns the job's task metrics (for /metrics).
func (j *Job) Metrics() *metrics.Job { return j.metrics }

// StartTime is when the job was submitted.
func (j *Job) StartTime() time.Time { return j.submitted }

// StoppedWith records the outcome of a stop with a savepoint.
func (j *Job) StoppedWith(path string, err error) {
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopSavepoint = path
}

// StopSavepoint is the savepoint the job was stopped with ("" if none).
func (j *Job) StopSavepoint() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopSavepoint
}

// Deployed records an attempt's tasks; the job is then RUNNING.
func (j *Job) Deployed(attempt int, tasks []*runtime.Task) {
	ms := make([]*metrics.Task, len(tasks))
	for k, t := range tasks {
		ms[k] = t.Metrics()
	}
	j.metrics.SetTasks(attempt, ms)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sources = j.sources[:0]
	for _, t := range tasks {
		if t.IsSource() {
			j.sources = append(j.sources, t)
		}
	}
	if !j.status.Terminal() {
		j.status = rest.JobRunning
	}
}

// SourceTasks returns the current attempt's source tasks.
func (j *Job) SourceTasks() []*runtime.Task {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.sources)
}

// Failed records the failure of an attempt (jobmaster.Options.OnFailure).
func (j *Job) Failed(err error, restarting bool) {
	e := ExceptionOf(err, time.Now())
	j.mu.Lock()
	defer j.mu.Unlock()
	j.exceptions = append([]rest.ExceptionInfo{e}, j.exceptions...)
	if len(j.exceptions) > MaxExceptions {
		j.exceptions = j.exceptions[:MaxExceptions]
	}
	if restarting {
		j.status = rest.JobRestarting
	} else {
		j.status = rest.JobFailing
	}
}

// Ended records how the job ended: its run returned err.
func (j *Job) Ended(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.end = time.Now()
	switch {
	case err == nil:
		j.status = rest.JobFinished
	case errors.Is(err, context.Canceled):
		j.status = rest.JobCanceled
	default:
		j.status = rest.JobFailed
		if len(j.exceptions) == 0 || j.exceptions[0].Message != err.Error() {
			// A failure outside an attempt (restore, storage): the job's own.
			j.exceptions = append([]rest.ExceptionInfo{ExceptionOf(err, j.end)}, j.exceptions...)
		}
	}
}

// RequestCancel marks a job that has not ended as CANCELLING.
func (j *Job) RequestCancel() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.status.Terminal() {
		j.cancelling = true
	}
}

// Status returns the job's status and, once it ended, its end time.
func (j *Job) Status() (rest.JobStatus, time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancelling && !j.status.Terminal() {
		return rest.JobCancelling, j.end
	}
	return j.status, j.end
}

// Exceptions returns the failures, newest first.
func (j *Job) Exceptions() []rest.ExceptionInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.exceptions)
}

// ExceptionOf describes a failure: the task that failed, the error's type
// (the innermost cause's) and its text, with the stack for a panic.
func ExceptionOf(err error, at time.Time) rest.ExceptionInfo {
	e := rest.ExceptionInfo{Time: at, Message: err.Error()}
	var oe *runtime.OperatorError
	if errors.As(err, &oe) {
		e.Task = fmt.Sprintf("%s (%d/%d)", oe.Operator, oe.Subtask+1, oe.Parallelism)
	}
	var pe *runtime.PanicError
	if errors.As(err, &pe) {
		e.Name = "panic"
		e.Message += "\n\n" + pe.Stack
		return e
	}
	inner := err
	for {
		var next error
		switch u := inner.(type) {
		case *runtime.OperatorError:
			next = u.Err
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		}
		if next == nil {
			break
		}
		inner = next
	}
	e.Name = fmt.Sprintf("%T", inner)
	return e
}

// Vertices are the job graph's vertices with the current attempt's figures
// summed over their subtasks; maxParallelism is the job's.
func (j *Job) Vertices(maxParallelism int) []rest.VertexInfo {
	st, end := j.Status()
	figures := map[string]metrics.Vertex{}
	for _, v := range j.metrics.Vertices(time.Now()) {
		figures[v.ID] = v
	}
	attempt, _ := j.metrics.Tasks()
	out := make([]rest.VertexInfo, 0, len(j.jg.Vertices))
	for _, v := range j.jg.Vertices {
		id := strconv.Itoa(int(v.ID))
		vi := rest.VertexInfo{ID: id, Name: v.Name, Parallelism: v.Parallelism,
			MaxParallelism: maxParallelism, Status: rest.TaskCreated}
		if m, ok := figures[id]; ok {
			// Every subtask runs on the one embedded TaskManager.
			for _, t := range m.Subtasks {
				vi.Subtasks = append(vi.Subtasks, rest.SubtaskInfo{
					Status: taskStatus(t.Status), Attempt: attempt, TaskManager: TaskManagerID, Endpoint: Host,
					StartTime: t.Start, EndTime: t.End,
					Metrics: rest.IOMetrics{ReadRecords: t.RecordsIn, WriteRecords: t.RecordsOut,
						BackPressuredTime: t.BackPressured, IdleTime: t.Idle, BusyTime: t.Busy, BytesUnknown: true},
					Watermarks: true, InputWatermark: t.InputWatermark, OutputWatermark: t.OutputWatermark,
				})
			}
			vi.Status = taskStatus(m.Status)
			vi.StartTime, vi.EndTime = m.Start, m.End
			vi.Metrics = rest.IOMetrics{
				ReadRecords: m.RecordsIn, WriteRecords: m.RecordsOut,
				BackPressuredTime: m.BackPressured, IdleTime: m.Idle, BusyTime: m.Busy,
				BytesUnknown: true,
			}
			vi.BackPressuredRatio = m.MaxBackPressuredRatio
			for k, name := range m.Operators {
				vi.Operators = append(vi.Operators, rest.OperatorRecords{Name: name,
					ReadRecords: m.OperatorRecordsIn[k], WriteRecords: m.OperatorRecordsOut[k]})
			}
		} else if st.Terminal() {
			vi.Status, vi.EndTime = terminalTaskStatus(st), end
		}
		for _, e := range v.Inputs {
			vi.Inputs = append(vi.Inputs, rest.VertexInput{
				Source:       strconv.Itoa(int(j.jg.VertexOf[e.From])),
				ShipStrategy: e.Partitioner.String(),
			})
		}
		out = append(out, vi)
	}
	return out
}

// slots is what the job needs of the TaskManager: its largest vertex
// parallelism, as with Flink's slot sharing.
func (j *Job) slots() int {
	need := 0
	for _, v := range j.jg.Vertices {
		need = max(need, v.Parallelism)
	}
	return need
}

func taskStatus(s metrics.Status) rest.TaskStatus {
	switch s {
	case metrics.Initializing:
		return rest.TaskInitializing
	case metrics.Running:
		return rest.TaskRunning
	case metrics.Finished:
		return rest.TaskFinished
	case metrics.Canceled:
		return rest.TaskCanceled
	case metrics.Failed:
		return rest.TaskFailed
	default:
		return rest.TaskCreated
	}
}

func terminalTaskStatus(st rest.JobStatus) rest.TaskStatus {
	switch st {
	case rest.JobFailed:
		return rest.TaskFailed
	case rest.JobCanceled:
		return rest.TaskCanceled
	default:
		return rest.TaskFinished
	}
}
