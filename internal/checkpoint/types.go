package checkpoint

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalidOptions is wrapped by every error Options.Validate returns.
	ErrInvalidOptions = errors.New("checkpoint: invalid options")
	// ErrNotRunning fails a request made, or still queued, while the
	// coordinator is not running (before Start, after TaskFailed or Stop).
	ErrNotRunning = errors.New("checkpoint: coordinator not running")
	// ErrTooManyRequests fails a request when too many are already queued.
	ErrTooManyRequests = errors.New("checkpoint: too many queued checkpoint requests")
	// ErrInvalidRequest fails a malformed request (a checkpoint with a target
	// directory or a stop flag, an unknown kind).
	ErrInvalidRequest = errors.New("checkpoint: invalid request")
)

// AbortError is the error of a RequestDone whose checkpoint was triggered and
// then aborted.
type AbortError struct {
	ID     int64
	Kind   Kind
	Reason AbortReason
	Detail string
}

func (e *AbortError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s %d aborted: %s", e.Kind, e.ID, e.Reason)
	}
	return fmt.Sprintf("%s %d aborted: %s: %s", e.Kind, e.ID, e.Reason, e.Detail)
}

// TaskID names a task that must acknowledge checkpoints. The shell chooses
// the format (e.g. "vertex#subtask"); the core only compares ids.
type TaskID string

// Kind tells checkpoints from savepoints.
type Kind uint8

const (
	// KindCheckpoint is owned by weir: subsumed, retained and discarded by it.
	KindCheckpoint Kind = iota
	// KindSavepoint is owned by the user: never subsumed, never discarded, and
	// (unless it stops the job) never committed to sinks.
	KindSavepoint
)

func (k Kind) String() string {
	switch k {
	case KindCheckpoint:
		return "checkpoint"
	case KindSavepoint:
		return "savepoint"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// TriggerReason says why a checkpoint was started.
type TriggerReason uint8

const (
	ReasonInterval TriggerReason = iota + 1 // Options.Interval elapsed
	ReasonManual                            // TriggerManual (REST, CLI)
	ReasonExternal                          // ExternalSignal (a hook)
	ReasonRecords                           // Options.EveryNRecords reached
	ReasonMarker                            // a source read a marker record
)

func (r TriggerReason) String() string {
	switch r {
	case ReasonInterval:
		return "interval"
	case ReasonManual:
		return "manual"
	case ReasonExternal:
		return "external"
	case ReasonRecords:
		return "records"
	case ReasonMarker:
		return "marker"
	case 0:
		return "unknown" // e.g. a recovered checkpoint whose metadata does not say
	}
	return fmt.Sprintf("TriggerReason(%d)", uint8(r))
}

// AbortReason says why a pending checkpoint was aborted.
type AbortReason uint8

const (
	AbortDeclined       AbortReason = iota + 1 // a task declined it
	AbortExpired                               // not acknowledged within Options.Timeout
	AbortSubsumed                              // a newer checkpoint completed first
	AbortTaskFailed                            // a task failed (TaskFailed)
	AbortMetadataFailed                        // the shell could not write its metadata
	AbortStopped                               // the coordinator was stopped or restarted
	// AbortNotRecorded: the metadata is durable but the completed-checkpoint
	// store (high availability) did not record the checkpoint. As the store
	// is expected back (etcd restarting), it does not count as a failure.
	AbortNotRecorded
)

func (r AbortReason) String() string {
	switch r {
	case AbortDeclined:
		return "declined"
	case AbortExpired:
		return "expired"
	case AbortSubsumed:
		return "subsumed"
	case AbortTaskFailed:
		return "task-failed"
	case AbortMetadataFailed:
		return "metadata-failed"
	case AbortStopped:
		return "stopped"
	case AbortNotRecorded:
		return "not-recorded"
	}
	return fmt.Sprintf("AbortReason(%d)", uint8(r))
}

// countsAsFailure reports whether an abort for this reason counts toward
// Options.TolerableFailures. As in Flink's CheckpointFailureManager, aborts
// that a failover would cause anyway (task failure, stop) or that are a
// success in disguise (subsumed) do not.
func (r AbortReason) countsAsFailure() bool {
	return r == AbortDeclined || r == AbortExpired || r == AbortMetadataFailed
}

// WarningCode classifies a Warning.
type WarningCode uint8

const (
	WarnDuplicateAck       WarningCode = iota + 1 // a task acknowledged the same checkpoint twice
	WarnLateAck                                   // acknowledgement for a checkpoint already aborted
	WarnUnknownCheckpoint                         // id the coordinator does not know (or no longer remembers)
	WarnUnknownTask                               // task not among those expected to acknowledge
	WarnLateDecline                               // decline for a checkpoint no longer abortable
	WarnUnexpectedMetadata                        // MetadataDurable for a checkpoint not awaiting it
)

func (w WarningCode) String() string {
	switch w {
	case WarnDuplicateAck:
		return "duplicate-ack"
	case WarnLateAck:
		return "late-ack"
	case WarnUnknownCheckpoint:
		return "unknown-checkpoint"
	case WarnUnknownTask:
		return "unknown-task"
	case WarnLateDecline:
		return "late-decline"
	case WarnUnexpectedMetadata:
		return "unexpected-metadata"
	}
	return fmt.Sprintf("WarningCode(%d)", uint8(w))
}

// Request is a manual checkpoint or savepoint request.
type Request struct {
	Kind Kind
	// TargetDir is where a savepoint goes; empty means the shell's default.
	// Must be empty for checkpoints. Opaque to the core.
	TargetDir string
	// StopAfter asks the shell to stop the job once the savepoint completed
	// (stop-with-savepoint). Savepoints only. As in Flink, such a savepoint
	// subsumes older pending checkpoints and is notified to the tasks, so
	// that sinks commit before the job ends.
	StopAfter bool
}

// TaskSnapshot is what a task reports when it acknowledges a checkpoint.
type TaskSnapshot struct {
	StateSize        int64 // bytes of state the checkpoint references for this task
	CheckpointedSize int64 // bytes this task uploaded for this checkpoint (less when incremental)
	SyncMs           int64 // synchronous part of the snapshot
	AsyncMs          int64 // asynchronous part (upload)
	AlignmentMs      int64 // barrier alignment, from the aligner's Snapshot action
	StartDelayMs     int64 // from trigger to the first barrier at this task
	// Handle locates the task's state in checkpoint storage. Opaque to the
	// core, which keeps it without copying: the caller must not modify it
	// after passing it to Ack.
	Handle []byte
}

// TaskAck is one task's acknowledgement of a checkpoint.
type TaskAck struct {
	Task     TaskID
	At       int64 // the `now` of the Ack call
	Snapshot TaskSnapshot
}

// CompletedCheckpoint is a checkpoint or savepoint whose metadata is durable.
// The shell reads these from storage to build a new coordinator after a
// JobManager restart, and the REST API shows them.
type CompletedCheckpoint struct {
	ID          int64
	Kind        Kind
	Reason      TriggerReason
	TargetDir   string
	StopAfter   bool
	TriggeredAt int64
	AckedAt     int64     // when the last task acknowledged
	CompletedAt int64     // when MetadataDurable reported success
	Acks        []TaskAck // sorted by task
}

// Duration is the end-to-end duration: trigger to durable metadata.
func (c *CompletedCheckpoint) Duration() int64 { return c.CompletedAt - c.TriggeredAt }

// StateSize is the sum of the tasks' StateSize.
func (c *CompletedCheckpoint) StateSize() int64 {
	var n int64
	for _, a := range c.Acks {
		n += a.Snapshot.StateSize
	}
	return n
}

// CheckpointedSize is the sum of the tasks' CheckpointedSize.
func (c *CompletedCheckpoint) CheckpointedSize() int64 {
	var n int64
	for _, a := range c.Acks {
		n += a.Snapshot.CheckpointedSize
	}
	return n
}

// PendingCheckpoint describes a checkpoint in progress, for statistics.
type PendingCheckpoint struct {
	ID          int64
	Kind        Kind
	Reason      TriggerReason
	RequestID   int64
	TriggeredAt int64
	NumTasks    int       // tasks expected to acknowledge
	Acks        []TaskAck // received so far, sorted by task
	// WritingMetadata is set once every task acknowledged: the checkpoint
	// then waits for MetadataDurable and can no longer be aborted by expiry,
	// declines, subsumption or task failures.
	WritingMetadata bool
}

// Counts are running totals for the REST API's /checkpoints "counts".
type Counts struct {
	Triggered  int64
	InProgress int64
	Completed  int64
	Failed     int64 // every abort, whatever the reason
	Restored   int64 // Start calls with a restored checkpoint id
}
