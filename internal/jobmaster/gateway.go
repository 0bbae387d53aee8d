package jobmaster

import (
	"context"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// TaskGateway is the only way the JobMaster reaches the tasks of its job.
// The local gateway (NewLocalGateway) runs them in this process; a cluster
// gateway sends the same requests to TaskManagers.
//
// Every request names the attempt it is meant for; a gateway ignores
// requests for an attempt other than the one it last deployed (fencing, the
// other way round from the JobMaster's). Deploy is called on the JobMaster's
// goroutine, at most one attempt at a time (the next only after the
// previous one reported AttemptEnded); the other methods must not block for
// long (they are called from the JobMaster's run loop) and report nothing
// back: what the tasks do about them arrives through the Listener.
//
// Messages are plain data (serialisable with encoding/json) except for
// fields tagged `json:"-"`: in process they carry the open store or the
// error value itself, across processes the receiver opens StoreURL and
// reads the error's text.
type TaskGateway interface {
	// Deploy starts attempt req.Attempt's tasks and returns them. ctx bounds
	// the attempt: when it ends the tasks are cancelled. The tasks report
	// to l until the gateway reported AttemptEnded for the attempt.
	Deploy(ctx context.Context, req DeployRequest, l Listener) ([]TaskInfo, error)
	// TriggerCheckpoint starts a checkpoint at the attempt's sources.
	TriggerCheckpoint(req TriggerRequest)
	// NotifyComplete tells every task that a checkpoint completed (sinks
	// commit on it).
	NotifyComplete(n Notification)
	// NotifyAborted tells every task that a checkpoint was aborted.
	NotifyAborted(n Notification)
	// FinishSources lets the sources, which read all their input and wait
	// (SourceFinished), end: the final checkpoint completed.
	FinishSources(attempt int)
	// StopTasks tells every task to stop (a stop-with-savepoint completed).
	StopTasks(attempt int)
	// Cancel cancels every task of the attempt with req's cause.
	Cancel(req CancelRequest)
}

// Listener is the only way the tasks reach the JobMaster: one of the
// Report types below. Report never blocks and may be called from any
// goroutine; reports of an attempt other than the current one are dropped
// by the JobMaster.
type Listener interface {
	Report(r Report)
}

// Report is a message from the tasks: TaskRunning, SourceFinished,
// SourceRecords, CheckpointMarker, Acknowledge, Decline, TaskFailed or
// AttemptEnded.
type Report interface {
	// AttemptNumber is the attempt of the tasks that sent it.
	AttemptNumber() int
}

// DeployRequest asks for an attempt's tasks.
type DeployRequest struct {
	JobID   string
	Attempt int
	// Restore is the checkpoint the attempt starts from (nil: no state).
	// Its Metadata holds every operator's subtask states: the restore
	// handles of each subtask.
	Restore *Restored
}

// TaskInfo describes a deployed task.
type TaskInfo struct {
	ID     string
	Source bool
}

// TriggerRequest starts checkpoint Checkpoint at the sources.
type TriggerRequest struct {
	Attempt    int
	Checkpoint int64
	Timestamp  int64 // ms since the epoch
	Kind       checkpoint.Kind
	// StoreURL and Dir locate the checkpoint's (or savepoint's) directory.
	StoreURL string
	Dir      string
	// Store is the open store of StoreURL, in process.
	Store storage.Store `json:"-"`
}

// Notification names a completed or aborted checkpoint.
type Notification struct {
	Attempt    int
	Checkpoint int64
}

// CancelRequest cancels an attempt. Reason is Err's text.
type CancelRequest struct {
	Attempt int
	Reason  string
	Err     error `json:"-"`
}

// TaskRunning reports that a task was started.
type TaskRunning struct {
	Attempt int
	Task    string
}

// SourceFinished reports that a source task read all its input; it waits
// for FinishSources (sent once the final checkpoint completed).
type SourceFinished struct {
	Attempt int
	Task    string
}

// SourceRecords reports records a source emitted (checkpoints every N
// records).
type SourceRecords struct {
	Attempt int
	Task    string
	N       int64
}

// CheckpointMarker reports a record asking for a checkpoint.
type CheckpointMarker struct {
	Attempt int
	Task    string
}

// Acknowledge reports a task's part of a checkpoint: the state handles of
// each of its operators and the figures of its snapshot.
type Acknowledge struct {
	Attempt    int
	Task       string
	Checkpoint int64
	Operators  []runtime.OperatorStateResult
	Sync       time.Duration
	Async      time.Duration
	Alignment  time.Duration
	StartDelay time.Duration
	// StateSize and CheckpointedSize: see runtime.TaskAck.
	StateSize        int64
	CheckpointedSize int64
}

// Decline reports that a task could not take its part of a checkpoint.
type Decline struct {
	Attempt    int
	Task       string
	Checkpoint int64
	Reason     string
}

// TaskFailed reports the failure that ends an attempt: the task, and the
// operator and subtask that failed when known. AttemptEnded follows once
// every task ended.
type TaskFailed struct {
	Attempt  int
	Task     string
	Operator string
	Subtask  int
	Error    string
	Err      error `json:"-"`
}

// AttemptEnded reports that every task of the attempt ended. Error is empty
// when they all ended normally. Cancellation: the error is a cancellation
// (Cancel, or the attempt's context ended), not a failure of a task.
type AttemptEnded struct {
	Attempt      int
	Error        string
	Err          error `json:"-"`
	Cancellation bool
}

func (r TaskRunning) AttemptNumber() int      { return r.Attempt }
func (r SourceFinished) AttemptNumber() int   { return r.Attempt }
func (r SourceRecords) AttemptNumber() int    { return r.Attempt }
func (r CheckpointMarker) AttemptNumber() int { return r.Attempt }
func (r Acknowledge) AttemptNumber() int      { return r.Attempt }
func (r Decline) AttemptNumber() int          { return r.Attempt }
func (r TaskFailed) AttemptNumber() int       { return r.Attempt }
func (r AttemptEnded) AttemptNumber() int     { return r.Attempt }

// errorOf is the error a report carries: the value in process, its text
// otherwise.
func errorOf(err error, text string) error {
	if err != nil || text == "" {
		return err
	}
	return remoteError(text)
}

type remoteError string

func (e remoteError) Error() string { return string(e) }
