// Package resttest provides an in-memory rest.JobManager for tests of the
// REST API and of its clients.
//
// A Job behaves like a running weir job seen through its handle: it takes
// checkpoints and savepoints on request (recording them in its history with
// per-subtask statistics), stops, and cancels. Tests shape it with the
// setters (status, vertices, exceptions, history) and control operations
// with Hold/Release and FailOperations.
package resttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/rest"
)

// JobManager is an in-memory rest.JobManager. Safe for concurrent use.
type JobManager struct {
	mu   sync.Mutex
	jobs []*Job
	tms  []rest.TaskManagerInfo
}

var _ rest.JobManager = (*JobManager)(nil)

// NewJobManager returns a JobManager with one local TaskManager and no jobs.
func NewJobManager() *JobManager {
	return &JobManager{tms: []rest.TaskManagerInfo{{
		ID: "local", Address: "local", Slots: 4, FreeSlots: 2, CPUCores: 4,
		PhysicalMemory: 8 << 30, FreeMemory: 4 << 30, LastHeartbeat: time.Now(),
	}}}
}

// Add adds jobs and returns the first.
func (m *JobManager) Add(jobs ...*Job) *Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs = append(m.jobs, jobs...)
	if len(jobs) == 0 {
		return nil
	}
	return jobs[0]
}

// SetTaskManagers replaces the TaskManagers.
func (m *JobManager) SetTaskManagers(tms []rest.TaskManagerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tms = slices.Clone(tms)
}

func (m *JobManager) Jobs() []rest.Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]rest.Job, len(m.jobs))
	for i, j := range m.jobs {
		out[i] = j.self()
	}
	return out
}

func (m *JobManager) Job(id string) (rest.Job, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		if j.id == id {
			return j.self(), true
		}
	}
	return nil, false
}

func (m *JobManager) TaskManagers() []rest.TaskManagerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.tms)
}

// Job is an in-memory rest.Job. Safe for concurrent use.
type Job struct {
	id, name string

	mu         sync.Mutex
	now        func() time.Time
	drainable  bool
	status     rest.JobStatus
	start, end time.Time
	vertices   []rest.VertexInfo
	exceptions []rest.ExceptionInfo
	config     rest.CheckpointConfigInfo
	summary    jobmaster.Summary
	history    []jobmaster.CheckpointStats
	nextID     int64
	hold       chan struct{} // operations wait until it is closed
	fail       error         // operations fail with it
	cancels    int
}

var _ rest.Job = (*Job)(nil)

// NewJob returns a RUNNING job that started a minute ago, with two
// vertices of parallelism 2 ("1": source, "2": a keyed count and sink,
// hash-partitioned), exactly-once checkpoints every 10s into
// file:///tmp/ckpt and savepoints into file:///tmp/savepoints.
func NewJob(id, name string) *Job {
	now := time.Now()
	start := now.Add(-time.Minute)
	return &Job{
		id: id, name: name, now: time.Now, status: rest.JobRunning, start: start, nextID: 1,
		vertices: []rest.VertexInfo{
			{ID: "1", Name: "Source: lines -> split", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskRunning,
				StartTime: start, Metrics: rest.IOMetrics{WriteRecords: 1000, WriteBytes: 64000, BusyTime: 30 * time.Second},
				BackPressuredRatio: 0.3},
			{ID: "2", Name: "count -> Sink: out", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskRunning,
				StartTime: start, Metrics: rest.IOMetrics{ReadRecords: 1000, ReadBytes: 64000, IdleTime: 20 * time.Second},
				Inputs: []rest.VertexInput{{Source: "1", ShipStrategy: "HASH"}}},
		},
		config: rest.CheckpointConfigInfo{
			ExactlyOnce: true, Interval: 10 * time.Second, Timeout: 10 * time.Minute, MaxConcurrent: 1,
			Retained: 1, StateBackend: "heap", CheckpointStorage: "file:///tmp/ckpt",
			SavepointDir: "file:///tmp/savepoints",
		},
	}
}

// Drainable makes the job implement rest.Drainer (stop with drain).
func (j *Job) Drainable() *Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.drainable = true
	return j
}

// self is the job as the server sees it: with rest.Drainer when drainable.
func (j *Job) self() rest.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.drainable {
		return drainableJob{j}
	}
	return j
}

type drainableJob struct{ *Job }

func (d drainableJob) DrainWithSavepoint(ctx context.Context, dir string) (string, error) {
	return d.StopWithSavepoint(ctx, dir)
}

// SetClock replaces the clock (default time.Now).
func (j *Job) SetClock(now func() time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.now = now
}

// SetStart sets the start time of the job and of its vertices.
func (j *Job) SetStart(t time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start = t
	for i := range j.vertices {
		j.vertices[i].StartTime = t
	}
}

// SetStatus sets the status; a terminal one also sets the end time.
func (j *Job) SetStatus(st rest.JobStatus) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.setStatus(st)
}

func (j *Job) setStatus(st rest.JobStatus) {
	j.status = st
	if st.Terminal() && j.end.IsZero() {
		j.end = j.now()
	}
	if st.Terminal() {
		for i := range j.vertices {
			j.vertices[i].Status = terminalTask(st)
			j.vertices[i].EndTime = j.end
		}
	}
}

func terminalTask(st rest.JobStatus) rest.TaskStatus {
	switch st {
	case rest.JobCanceled:
		return rest.TaskCanceled
	case rest.JobFailed:
		return rest.TaskFailed
	default:
		return rest.TaskFinished
	}
}

// SetVertices replaces the vertices.
func (j *Job) SetVertices(vs []rest.VertexInfo) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.vertices = slices.Clone(vs)
}

// AddException records a failure.
func (j *Job) AddException(e rest.ExceptionInfo) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.exceptions = append([]rest.ExceptionInfo{e}, j.exceptions...)
}

// SetCheckpointConfig replaces the checkpoint configuration.
func (j *Job) SetCheckpointConfig(c rest.CheckpointConfigInfo) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.config = c
}

// SetRestore records a restore.
func (j *Job) SetRestore(id int64, path string, at time.Time, restarts int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.summary.Restored, j.summary.RestorePath, j.summary.RestoreTime, j.summary.Restarts = id, path, at, restarts
}

// AddCheckpoint appends c to the history (its ID must be new; IDs of later
// checkpoints continue after it) and counts it.
func (j *Job) AddCheckpoint(c jobmaster.CheckpointStats) {
	j.mu.Lock()
	defer j.mu.Unlock()
	c.Subtasks = slices.Clone(c.Subtasks)
	j.history = append(j.history, c)
	j.nextID = max(j.nextID, c.ID+1)
	switch c.Status {
	case jobmaster.Completed:
		j.summary.Completed++
		if !c.Savepoint {
			j.summary.LatestCompleted = max(j.summary.LatestCompleted, c.ID)
		}
	case jobmaster.Failed:
		j.summary.Failed++
	default:
		j.summary.InProgress++
	}
}

// Hold makes operations (checkpoints, savepoints, stops) wait until
// Release; they stay IN_PROGRESS meanwhile.
func (j *Job) Hold() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.hold == nil {
		j.hold = make(chan struct{})
	}
}

// Release lets held operations complete.
func (j *Job) Release() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.hold != nil {
		close(j.hold)
		j.hold = nil
	}
}

// FailOperations makes the following operations fail with err (nil: they
// succeed again).
func (j *Job) FailOperations(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fail = err
}

// Cancels reports how often Cancel was called.
func (j *Job) Cancels() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cancels
}

func (j *Job) ID() string   { return j.id }
func (j *Job) Name() string { return j.name }

func (j *Job) Status() rest.JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status
}

func (j *Job) StartTime() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.start
}

func (j *Job) EndTime() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end
}

func (j *Job) Vertices() []rest.VertexInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := slices.Clone(j.vertices)
	for i := range out {
		out[i].Inputs = slices.Clone(out[i].Inputs)
	}
	return out
}

func (j *Job) Exceptions() []rest.ExceptionInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.exceptions)
}

func (j *Job) CheckpointConfig() rest.CheckpointConfigInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.config
}

func (j *Job) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := slices.Clone(j.history)
	for i := range out {
		out[i].Subtasks = slices.Clone(out[i].Subtasks)
	}
	return j.summary, out
}

func (j *Job) Checkpoint(id int64) (jobmaster.CheckpointStats, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range j.history {
		if c.ID == id {
			c.Subtasks = slices.Clone(c.Subtasks)
			return c, true
		}
	}
	return jobmaster.CheckpointStats{}, false
}

// ErrNotRunning is returned by operations on a job that has ended.
var ErrNotRunning = errors.New("the job is not running")

func (j *Job) TriggerCheckpoint(ctx context.Context) (int64, error) {
	c, err := j.snapshot(ctx, false, "")
	return c.ID, err
}

func (j *Job) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	c, err := j.snapshot(ctx, true, dir)
	return c.Path, err
}

func (j *Job) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	c, err := j.snapshot(ctx, true, dir)
	if err != nil {
		return "", err
	}
	j.SetStatus(rest.JobFinished)
	return c.Path, nil
}

func (j *Job) Cancel() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cancels++
	if !j.status.Terminal() {
		j.setStatus(rest.JobCanceled)
	}
}

// snapshot takes a checkpoint or savepoint: IN_PROGRESS in the history
// until held operations are released, then COMPLETED (or FAILED).
func (j *Job) snapshot(ctx context.Context, savepoint bool, dir string) (jobmaster.CheckpointStats, error) {
	j.mu.Lock()
	if j.status.Terminal() {
		j.mu.Unlock()
		return jobmaster.CheckpointStats{}, fmt.Errorf("job %q: %w (%s)", j.id, ErrNotRunning, j.status)
	}
	id := j.nextID
	j.nextID++
	path := fmt.Sprintf("%s/%s/chk-%d", strings.TrimSuffix(j.config.CheckpointStorage, "/"), j.id, id)
	if savepoint {
		if dir == "" {
			dir = j.config.SavepointDir
		}
		if dir == "" {
			j.mu.Unlock()
			return jobmaster.CheckpointStats{}, errors.New("no savepoint directory: pass one, or set Options.Checkpointing.SavepointDir")
		}
		var b [3]byte
		rand.Read(b[:])
		path = fmt.Sprintf("%s/savepoint-%s", strings.TrimSuffix(dir, "/"), hex.EncodeToString(b[:]))
	}
	tasks := 0
	for _, v := range j.vertices {
		tasks += v.Parallelism
	}
	c := jobmaster.CheckpointStats{ID: id, Savepoint: savepoint, Status: jobmaster.InProgress,
		TriggerTime: j.now(), NumTasks: tasks, Path: path}
	j.history = append(j.history, c)
	j.summary.InProgress++
	hold, fail := j.hold, j.fail
	j.mu.Unlock()

	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return j.finish(id, ctx.Err())
		}
	}
	return j.finish(id, fail)
}

func (j *Job) finish(id int64, err error) (jobmaster.CheckpointStats, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	i := slices.IndexFunc(j.history, func(c jobmaster.CheckpointStats) bool { return c.ID == id })
	c := &j.history[i]
	now := j.now()
	c.EndTime, c.Duration = now, now.Sub(c.TriggerTime)
	j.summary.InProgress--
	if err != nil {
		c.Status, c.FailureReason = jobmaster.Failed, err.Error()
		j.summary.Failed++
		return *c, err
	}
	c.Status = jobmaster.Completed
	for _, v := range j.vertices {
		for s := range v.Parallelism {
			// A checkpoint is incremental: a quarter of the state it
			// refers to is new. A savepoint is full.
			size, uploaded := int64(1024*(s+1)), int64(256*(s+1))
			if c.Savepoint {
				uploaded = size
			}
			c.Subtasks = append(c.Subtasks, jobmaster.SubtaskStats{
				Task: fmt.Sprintf("%s-%d", v.ID, s), AckTime: now, Sync: time.Millisecond, Async: 3 * time.Millisecond,
				Alignment: 2 * time.Millisecond, StartDelay: time.Millisecond, StateSize: size, CheckpointedSize: uploaded,
			})
			c.StateSize += size
			c.CheckpointedSize += uploaded
		}
	}
	j.summary.Completed++
	if !c.Savepoint {
		j.summary.LatestCompleted = max(j.summary.LatestCompleted, id)
	}
	return *c, nil
}
