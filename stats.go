package weir

import (
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
)

// CheckpointStatus is where a checkpoint (or savepoint) stands in the
// statistics of JobClient.Checkpoints. The values are Flink's, as the REST
// API reports them.
type CheckpointStatus string

const (
	// CheckpointInProgress: triggered, not every task has acknowledged.
	CheckpointInProgress CheckpointStatus = "IN_PROGRESS"
	// CheckpointCompleted: every task acknowledged and the metadata was
	// written; the checkpoint can be restored.
	CheckpointCompleted CheckpointStatus = "COMPLETED"
	// CheckpointFailed: declined, timed out, or aborted by a failure; see
	// CheckpointStats.FailureReason.
	CheckpointFailed CheckpointStatus = "FAILED"
)

// CheckpointStats describes one checkpoint or savepoint.
type CheckpointStats struct {
	// ID is the checkpoint's id; savepoints take ids from the same
	// sequence.
	ID int64
	// Savepoint tells a savepoint from a checkpoint.
	Savepoint bool
	// Status is where the checkpoint stands.
	Status CheckpointStatus
	// TriggerTime is when the coordinator triggered it.
	TriggerTime time.Time
	// EndTime is when it completed or failed (zero while in progress).
	EndTime time.Time
	// Duration is end to end, from trigger to completion or failure.
	Duration time.Duration
	// StateSize is the full state the checkpoint refers to, shared files
	// uploaded by earlier checkpoints included (Flink's "Full Checkpoint
	// Data Size").
	StateSize int64
	// CheckpointedSize is the bytes this checkpoint uploaded (Flink's
	// "Checkpointed Data Size"): less than StateSize for incremental and
	// changelog checkpoints.
	CheckpointedSize int64
	// Unaligned tells that some task snapshotted unaligned (Flink's
	// is_unaligned); PersistedData is the bytes of channel state (in-flight
	// records) all tasks wrote.
	Unaligned     bool
	PersistedData int64
	// FailureReason says why a failed checkpoint failed.
	FailureReason string
	// Path is the checkpoint's directory (a savepoint's path for
	// savepoints).
	Path string
	// Subtasks are the acknowledgements received, in arrival order.
	Subtasks []SubtaskCheckpointStats
	// NumTasks is the number of tasks that must acknowledge.
	NumTasks int
}

// SubtaskCheckpointStats are one task's figures for a checkpoint.
type SubtaskCheckpointStats struct {
	// Task names the task: its vertex and subtask.
	Task string
	// AckTime is when the task's acknowledgement arrived.
	AckTime time.Time
	// Sync and Async are the durations of the synchronous part of the
	// snapshot (on the task goroutine) and of its asynchronous part (the
	// upload).
	Sync, Async time.Duration
	// Alignment is how long the task waited for the barrier on all its
	// inputs.
	Alignment time.Duration
	// StartDelay is from the trigger to the first barrier at the task.
	StartDelay time.Duration
	// StateSize is the full state the task's snapshot refers to (shared
	// files included); CheckpointedSize what it uploaded for this
	// checkpoint (less than StateSize when incremental).
	StateSize, CheckpointedSize int64
	// Unaligned tells that the barrier overtook in-flight data, which the
	// snapshot holds; PersistedData is the bytes of that channel state.
	Unaligned     bool
	PersistedData int64
}

// CheckpointSummary counts checkpoints and names the last restore.
type CheckpointSummary struct {
	// Completed, Failed and InProgress count the checkpoints and
	// savepoints of the history by status.
	Completed, Failed, InProgress int
	// Restored is the id restored from at the last (re)start, 0 if none.
	Restored int64
	// RestoreTime is when the last restore happened.
	RestoreTime time.Time
	// RestorePath is the checkpoint or savepoint restored from.
	RestorePath string
	// Restarts counts restarts after failures.
	Restarts int
	// LatestCompleted is the id of the latest completed checkpoint (not
	// savepoint), 0 if none.
	LatestCompleted int64
}

// Checkpoint returns the statistics of checkpoint id, if it is still in
// the history.
func (c *JobClient) Checkpoint(id int64) (CheckpointStats, bool) {
	s, ok := c.jm.Checkpoint(id)
	if !ok {
		return CheckpointStats{}, false
	}
	return checkpointStatsOf(s), true
}

// Checkpoints returns the checkpoint summary and history, oldest first.
func (c *JobClient) Checkpoints() (CheckpointSummary, []CheckpointStats) {
	sum, hist := c.jm.Stats()
	out := make([]CheckpointStats, len(hist))
	for i, s := range hist {
		out[i] = checkpointStatsOf(s)
	}
	return checkpointSummaryOf(sum), out
}

// checkpointStatsOf converts the job master's statistics at the API's
// boundary.
func checkpointStatsOf(s jobmaster.CheckpointStats) CheckpointStats {
	out := CheckpointStats{
		ID: s.ID, Savepoint: s.Savepoint, Status: CheckpointStatus(s.Status),
		TriggerTime: s.TriggerTime, EndTime: s.EndTime, Duration: s.Duration,
		StateSize: s.StateSize, CheckpointedSize: s.CheckpointedSize,
		Unaligned: s.Unaligned, PersistedData: s.PersistedData,
		FailureReason: s.FailureReason, Path: s.Path, NumTasks: s.NumTasks,
	}
	if s.Subtasks != nil {
		out.Subtasks = make([]SubtaskCheckpointStats, len(s.Subtasks))
		for i, t := range s.Subtasks {
			out.Subtasks[i] = SubtaskCheckpointStats{
				Task: t.Task, AckTime: t.AckTime, Sync: t.Sync, Async: t.Async,
				Alignment: t.Alignment, StartDelay: t.StartDelay,
				StateSize: t.StateSize, CheckpointedSize: t.CheckpointedSize, Unaligned: t.Unaligned,
				PersistedData: t.PersistedData,
			}
		}
	}
	return out
}

func checkpointSummaryOf(s jobmaster.Summary) CheckpointSummary {
	return CheckpointSummary{
		Completed: s.Completed, Failed: s.Failed, InProgress: s.InProgress,
		Restored: s.Restored, RestoreTime: s.RestoreTime, RestorePath: s.RestorePath,
		Restarts: s.Restarts, LatestCompleted: s.LatestCompleted,
	}
}
