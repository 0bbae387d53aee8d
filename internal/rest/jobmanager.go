package rest

import (
	"context"
	"math"
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
)

// JobManager is what the server reads and drives: the jobs of one
// JobManager and its TaskManagers.
//
// Every method is called concurrently from request goroutines and must be
// safe for that. Methods return snapshots the server may keep and read
// after the call; the server never modifies them.
type JobManager interface {
	// Jobs returns every job the JobManager knows, running or ended, in a
	// stable order (the server lists them in this order).
	Jobs() []Job
	// Job returns the job with the given id, or false.
	Job(id string) (Job, bool)
	// TaskManagers returns the workers offering slots; in local mode the
	// one embedded TaskManager.
	TaskManagers() []TaskManagerInfo
}

// Job is one job as the REST API sees it. The shape follows weir.JobClient
// so that an adapter is thin; see the package documentation for what the
// root package provides.
//
// All methods are safe for concurrent use. The trigger methods block until
// the operation ends or ctx is done; the server calls them on its own
// goroutines and cancels ctx when it shuts down.
type Job interface {
	// ID is the job's id (weir.Options.JobID), unique within the JobManager.
	ID() string
	// Name is the name given to Execute.
	Name() string
	// Status is the job's current status.
	Status() JobStatus
	// StartTime is when the job was submitted.
	StartTime() time.Time
	// EndTime is when the job reached a terminal status; zero before.
	EndTime() time.Time
	// Vertices are the job's vertices (chains of operators) with their
	// current figures, in topological order.
	Vertices() []VertexInfo
	// Exceptions are the failures of the job (restarts included), newest
	// first.
	Exceptions() []ExceptionInfo
	// CheckpointConfig is the job's checkpointing configuration.
	CheckpointConfig() CheckpointConfigInfo

	// Checkpoints returns the checkpoint summary and history, oldest first
	// (as weir.JobClient.Checkpoints).
	Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats)
	// Checkpoint returns the statistics of checkpoint id if it is still in
	// the history (as weir.JobClient.Checkpoint).
	Checkpoint(id int64) (jobmaster.CheckpointStats, bool)

	// TriggerCheckpoint takes a checkpoint, waits for it and returns its id.
	TriggerCheckpoint(ctx context.Context) (int64, error)
	// TriggerSavepoint takes a savepoint into dir (the job's default
	// directory when empty), waits for it and returns its path.
	TriggerSavepoint(ctx context.Context, dir string) (string, error)
	// StopWithSavepoint takes a savepoint, lets sinks commit, stops the job
	// and returns the savepoint's path.
	StopWithSavepoint(ctx context.Context, dir string) (string, error)
	// Cancel asks the job to cancel and returns at once.
	Cancel()
}

// Drainer is implemented by jobs that can stop with a savepoint after
// draining: sources emit the maximum watermark first, so that every
// event-time timer and window fires (POST /jobs/{id}/stop with
// "drain": true). Jobs without it answer such requests with 400.
type Drainer interface {
	DrainWithSavepoint(ctx context.Context, dir string) (string, error)
}

// JobStatus is a job's status, with Flink's names.
type JobStatus string

// Job statuses. A job is created, runs (restarting after failures) and ends
// FINISHED, CANCELED or FAILED.
const (
	JobInitializing JobStatus = "INITIALIZING"
	JobCreated      JobStatus = "CREATED"
	JobRunning      JobStatus = "RUNNING"
	JobFailing      JobStatus = "FAILING"
	JobFailed       JobStatus = "FAILED"
	JobCancelling   JobStatus = "CANCELLING"
	JobCanceled     JobStatus = "CANCELED"
	JobFinished     JobStatus = "FINISHED"
	JobRestarting   JobStatus = "RESTARTING"
	JobSuspended    JobStatus = "SUSPENDED"
)

// Terminal reports whether s is an end state: FINISHED, CANCELED, FAILED.
func (s JobStatus) Terminal() bool {
	return s == JobFinished || s == JobCanceled || s == JobFailed
}

// TaskStatus is the status of a vertex's subtasks (Flink's
// ExecutionState).
type TaskStatus string

// Task statuses.
const (
	TaskCreated      TaskStatus = "CREATED"
	TaskScheduled    TaskStatus = "SCHEDULED"
	TaskDeploying    TaskStatus = "DEPLOYING"
	TaskInitializing TaskStatus = "INITIALIZING"
	TaskRunning      TaskStatus = "RUNNING"
	TaskFinished     TaskStatus = "FINISHED"
	TaskCanceling    TaskStatus = "CANCELING"
	TaskCanceled     TaskStatus = "CANCELED"
	TaskFailed       TaskStatus = "FAILED"
	TaskReconciling  TaskStatus = "RECONCILING"
)

// taskStatuses lists every TaskStatus, in Flink's order.
var taskStatuses = []TaskStatus{TaskCreated, TaskScheduled, TaskDeploying, TaskRunning, TaskFinished,
	TaskCanceling, TaskCanceled, TaskFailed, TaskReconciling, TaskInitializing}

// VertexInfo describes one vertex of a job: a chain of operators run by
// Parallelism subtasks.
type VertexInfo struct {
	// ID identifies the vertex within the job. Checkpoint statistics name
	// tasks "<vertex id>-<subtask>" (runtime.TaskConfig.ID); the server
	// groups subtask statistics by that prefix.
	ID string
	// Name is the chain's name, "a -> b -> c".
	Name           string
	Parallelism    int
	MaxParallelism int
	Status         TaskStatus
	StartTime      time.Time
	EndTime        time.Time // zero while running
	// Metrics are summed over the vertex's subtasks.
	Metrics IOMetrics
	// BackPressuredRatio is the share of recent time (0 to 1) the most
	// backpressured subtask spent waiting to send, as Flink's
	// backPressuredTimeMsPerSecond / 1000.
	BackPressuredRatio float64
	// Inputs are the vertex's inputs, one per edge into it.
	Inputs []VertexInput
	// Operators are the chain's operators, head first, with their record
	// counts summed over the subtasks; nil when the job does not count
	// them.
	Operators []OperatorRecords
	// Subtasks are the vertex's subtasks by index, with where each runs
	// (GET /jobs/{id}/vertices/{vid}); nil when the job does not know them:
	// the server then lists Parallelism subtasks of the vertex's status on
	// no TaskManager.
	Subtasks []SubtaskInfo
}

// SubtaskInfo is one subtask of a vertex: its attempt and the TaskManager
// that runs it.
type SubtaskInfo struct {
	Status TaskStatus
	// Attempt is the number of the job's attempt the subtask belongs to
	// (0 for the first, one more after each restart).
	Attempt int
	// TaskManager is the id of the TaskManager the subtask runs on (that
	// of /taskmanagers; "local" for the embedded one); "" while it is not
	// placed.
	TaskManager string
	// Endpoint is that TaskManager's address, host:port (on a cluster its
	// data plane's), or a host name alone.
	Endpoint           string
	StartTime, EndTime time.Time // zero before, and while running
	// Metrics are the subtask's own figures; BytesUnknown as for a vertex.
	Metrics IOMetrics
	// Watermarks says the job reports the subtask's watermarks:
	// InputWatermark, the watermark of its inputs (for a source, the one
	// its reader generated), and OutputWatermark, the last one it sent
	// downstream, in epoch milliseconds (Flink's currentInputWatermark and
	// currentOutputWatermark), each NoWatermark before the first. Without
	// it GET .../watermarks leaves the subtask out, as Flink leaves out a
	// subtask whose metrics it has not fetched.
	Watermarks                      bool
	InputWatermark, OutputWatermark int64
}

// NoWatermark is a subtask's watermark before the first one: the smallest
// int64, Flink's Long.MIN_VALUE, which its dashboard shows as "No
// Watermark".
const NoWatermark = math.MinInt64

// OperatorRecords are one chained operator's records in and out (Flink's
// operator-scope numRecordsIn and numRecordsOut).
type OperatorRecords struct {
	Name                      string
	ReadRecords, WriteRecords int64
}

// IOMetrics are a vertex's record and byte counters and its accumulated
// busy, idle and backpressured time, summed over its subtasks.
type IOMetrics struct {
	ReadBytes, WriteBytes     int64
	ReadRecords, WriteRecords int64
	BackPressuredTime         time.Duration
	IdleTime                  time.Duration
	BusyTime                  time.Duration
	// BytesUnknown says ReadBytes and WriteBytes are not counted: they
	// count only the bytes of serialized exchanges between tasks (Flink's
	// numBytesIn/numBytesOut of network channels), and the local runtime
	// has none (its channels carry Go values), so they are 0; the API then
	// reports read-bytes-complete and write-bytes-complete false. A
	// cluster counts them: the payload bytes of the subtasks' channels to
	// and from other TaskManagers (those between subtasks on one
	// TaskManager carry Go values and count none, where Flink serializes
	// its local channels too).
	BytesUnknown bool
}

// VertexInput is an edge into a vertex.
type VertexInput struct {
	// Source is the producing vertex's ID.
	Source string
	// ShipStrategy is the partitioner: "FORWARD", "REBALANCE", "HASH",
	// "BROADCAST".
	ShipStrategy string
}

// ExceptionInfo is one failure of a job.
type ExceptionInfo struct {
	Time time.Time
	// Name is the kind of failure (for Go errors, the error's type).
	Name string
	// Message is the error's text; a stack trace when a panic caused it.
	Message string
	// Task names the task that failed, e.g. `parse (2/4)`; empty for
	// failures of the job as a whole.
	Task string
	// Location is the TaskManager the task ran on; empty in local mode.
	Location string
}

// CheckpointConfigInfo is a job's checkpointing configuration.
type CheckpointConfigInfo struct {
	// ExactlyOnce selects "exactly_once" (true) or "at_least_once".
	ExactlyOnce bool
	// Interval between periodic checkpoints; 0 when there are none.
	Interval time.Duration
	Timeout  time.Duration
	MinPause time.Duration
	// MaxConcurrent is the number of checkpoints in progress at once.
	MaxConcurrent int
	// TolerableFailures is the number of consecutive failed checkpoints
	// tolerated; -1 for unlimited.
	TolerableFailures int
	// Retained is the number of completed checkpoints kept.
	Retained int
	// RetainOnCancel keeps completed checkpoints when the job is
	// cancelled (Flink's externalization.delete_on_cancellation, negated).
	RetainOnCancel bool
	// StateBackend is "heap" or "pebble".
	StateBackend string
	// CheckpointStorage is the storage URL, e.g. "file:///ckpt".
	CheckpointStorage string
	// SavepointDir is the default savepoint directory; empty for none.
	SavepointDir string
	// Unaligned reports unaligned checkpoints; with it, AlignedTimeout
	// starts them aligned and switches after that long (0: always
	// unaligned).
	Unaligned      bool
	AlignedTimeout time.Duration
	// EveryNRecords triggers a checkpoint every that many source records
	// (0: off).
	EveryNRecords int64
}

// TaskManagerInfo describes one TaskManager.
type TaskManagerInfo struct {
	ID string
	// Address is where the TaskManager is reached ("host:port"), or
	// "local" for the embedded one.
	Address        string
	DataPort       int
	LastHeartbeat  time.Time
	Slots          int
	FreeSlots      int
	CPUCores       int
	PhysicalMemory int64
	FreeMemory     int64
}
