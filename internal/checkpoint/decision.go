package checkpoint

import (
	"fmt"
	"strings"
)

// Decision is something the coordinator asks its shell to do. It is a closed
// sum: the shell switches on the concrete type. Decisions must be carried out
// in the order Decisions returns them.
type Decision interface {
	fmt.Stringer
	decision()
}

// TriggerCheckpoint starts checkpoint ID: the shell tells the source tasks to
// snapshot and emit barrier ID. Before any barrier leaves, the shell must make
// ID durable as the highest id used (the checkpoint id counter), so that a new
// coordinator never hands it out again.
type TriggerCheckpoint struct {
	ID        int64
	Kind      Kind
	Reason    TriggerReason
	Timestamp int64 // the `now` of the trigger; travels with the barrier
	RequestID int64 // the manual or external request served, 0 for none
	TargetDir string
	StopAfter bool
}

// WriteMetadata says every task acknowledged ID: the shell writes
// chk-ID/_metadata (atomically) and reports the outcome with
// MetadataDurable. ID is not complete before that report.
type WriteMetadata struct {
	ID          int64
	Kind        Kind
	TargetDir   string
	TriggeredAt int64
	Acks        []TaskAck // every task's acknowledgement, sorted by task
}

// Completed says ID is complete: its metadata is durable. It carries the
// record for statistics and the REST API.
type Completed struct {
	Checkpoint CompletedCheckpoint
}

// NotifyComplete is sent to every task: checkpoint ID and all before it are
// complete, so exactly-once sinks commit. Notifications are monotonic: the
// coordinator never emits NotifyComplete for an id below one it already
// notified. Savepoints that do not stop the job are not notified (as in
// Flink): a job that later fails over restores from a checkpoint, and side
// effects committed for a newer savepoint would be repeated.
type NotifyComplete struct {
	ID int64
}

// NotifyAborted is sent to every task: ID was aborted, drop what was written
// for it. The shell may also remove ID's exclusive directory in storage; the
// state of tasks that had already acknowledged is released through the
// DiscardTaskState decisions that follow.
type NotifyAborted struct {
	ID     int64
	Kind   Kind
	Reason AbortReason
	Detail string
}

// Discard removes completed checkpoint ID from storage (its metadata, its
// exclusive files, and its references to shared files): it fell out of
// Options.Retained. Never emitted for savepoints. Acks are the checkpoint's
// acknowledgements with their handles (as given to NewCoordinator for
// recovered checkpoints, possibly without).
type Discard struct {
	ID   int64
	Acks []TaskAck
}

// DiscardTaskState releases the state Task wrote for ID, which no completed
// checkpoint will ever reference: ID was aborted after Task acknowledged, or
// Task's acknowledgement arrived after the abort. Handle is the one Task
// acknowledged with.
type DiscardTaskState struct {
	ID     int64
	Task   TaskID
	Handle []byte
}

// RequestDone answers a manual or external request. ID is the checkpoint that
// served it, 0 if none was triggered. Err is nil on success, wraps
// ErrNotRunning, ErrTooManyRequests or ErrInvalidRequest if the request was
// refused, and is an *AbortError if its checkpoint was aborted.
type RequestDone struct {
	RequestID int64
	ID        int64
	Err       error
}

// FailJob says the job must fail: more consecutive checkpoint failures than
// Options.TolerableFailures. The coordinator keeps running; the shell fails
// the job over and calls Stop or TaskFailed, then Start.
type FailJob struct {
	Reason string
}

// Warning reports an input the coordinator ignored. Nothing needs doing; the
// shell logs it and may count it in a metric.
type Warning struct {
	Code WarningCode
	ID   int64
	Task TaskID
}

func (TriggerCheckpoint) decision() {}
func (WriteMetadata) decision()     {}
func (Completed) decision()         {}
func (NotifyComplete) decision()    {}
func (NotifyAborted) decision()     {}
func (Discard) decision()           {}
func (DiscardTaskState) decision()  {}
func (RequestDone) decision()       {}
func (FailJob) decision()           {}
func (Warning) decision()           {}

func (d TriggerCheckpoint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trigger id=%d kind=%s reason=%s ts=%d", d.ID, d.Kind, d.Reason, d.Timestamp)
	if d.RequestID != 0 {
		fmt.Fprintf(&b, " request=%d", d.RequestID)
	}
	if d.TargetDir != "" {
		fmt.Fprintf(&b, " dir=%s", d.TargetDir)
	}
	if d.StopAfter {
		b.WriteString(" stop-after")
	}
	return b.String()
}

func (d WriteMetadata) String() string {
	tasks := make([]string, len(d.Acks))
	for i, a := range d.Acks {
		tasks[i] = string(a.Task)
	}
	return fmt.Sprintf("write-metadata id=%d kind=%s acks=%s", d.ID, d.Kind, strings.Join(tasks, ","))
}

func (d Completed) String() string {
	c := &d.Checkpoint
	return fmt.Sprintf("completed id=%d kind=%s duration=%d size=%d checkpointed=%d",
		c.ID, c.Kind, c.Duration(), c.StateSize(), c.CheckpointedSize())
}

func (d NotifyComplete) String() string { return fmt.Sprintf("notify-complete id=%d", d.ID) }

func (d NotifyAborted) String() string {
	s := fmt.Sprintf("notify-aborted id=%d kind=%s reason=%s", d.ID, d.Kind, d.Reason)
	if d.Detail != "" {
		s += fmt.Sprintf(" detail=%q", d.Detail)
	}
	return s
}

func (d Discard) String() string { return fmt.Sprintf("discard id=%d", d.ID) }

func (d DiscardTaskState) String() string {
	return fmt.Sprintf("discard-task-state id=%d task=%s", d.ID, d.Task)
}

func (d RequestDone) String() string {
	if d.Err != nil {
		return fmt.Sprintf("request-done request=%d id=%d err=%q", d.RequestID, d.ID, d.Err.Error())
	}
	return fmt.Sprintf("request-done request=%d id=%d ok", d.RequestID, d.ID)
}

func (d FailJob) String() string { return fmt.Sprintf("fail-job reason=%q", d.Reason) }

func (d Warning) String() string {
	s := fmt.Sprintf("warning %s id=%d", d.Code, d.ID)
	if d.Task != "" {
		s += " task=" + string(d.Task)
	}
	return s
}
