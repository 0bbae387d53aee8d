package jobmaster

import (
	"slices"
	"sync"
	"time"
)

// Status of a checkpoint in the statistics.
type Status string

const (
	InProgress Status = "IN_PROGRESS"
	Completed  Status = "COMPLETED"
	Failed     Status = "FAILED"
)

// SubtaskStats are one task's figures for a checkpoint.
type SubtaskStats struct {
	Task       string
	AckTime    time.Time
	Sync       time.Duration
	Async      time.Duration
	Alignment  time.Duration
	StartDelay time.Duration
	// StateSize is the full state the task's snapshot refers to (shared
	// files included); CheckpointedSize what it uploaded for this
	// checkpoint (less than StateSize when incremental).
	StateSize        int64
	CheckpointedSize int64
	// Unaligned: the task snapshotted unaligned; PersistedData is the
	// bytes of channel state (in-flight records) it wrote.
	Unaligned     bool
	PersistedData int64
}

// CheckpointStats describes one checkpoint or savepoint.
type CheckpointStats struct {
	ID          int64
	Savepoint   bool
	Status      Status
	TriggerTime time.Time
	// EndTime is when it completed or failed.
	EndTime time.Time
	// Duration is end to end, from trigger to completion.
	Duration time.Duration
	// StateSize is the full state the checkpoint refers to, shared files
	// uploaded by earlier checkpoints included (Flink's "Full Checkpoint
	// Data Size"); CheckpointedSize the bytes this checkpoint uploaded
	// (Flink's "Checkpointed Data Size"). They differ for incremental and
	// changelog checkpoints.
	StateSize        int64
	CheckpointedSize int64
	// Unaligned: some task snapshotted unaligned (Flink's is_unaligned);
	// PersistedData is the channel state all tasks wrote.
	Unaligned     bool
	PersistedData int64
	FailureReason string
	// Path is the checkpoint's directory (a savepoint's path for savepoints).
	Path     string
	Subtasks []SubtaskStats
	// NumTasks is the number of tasks that must acknowledge.
	NumTasks int
}

// Summary counts checkpoints.
type Summary struct {
	Completed  int
	Failed     int
	InProgress int
	Restored   int64 // id restored from at the last (re)start, 0 if none
	// RestoreTime is when the last restore happened.
	RestoreTime time.Time
	// RestorePath is the checkpoint or savepoint restored from.
	RestorePath string
	// Restarts counts restarts after failures.
	Restarts int
	// LatestCompleted is the id of the latest completed checkpoint.
	LatestCompleted int64
}

// statsBook keeps the history; read by other goroutines through Snapshot.
type statsBook struct {
	mu      sync.Mutex
	history []*CheckpointStats // by trigger order
	byID    map[int64]*CheckpointStats
	summary Summary
	limit   int
}

func newStatsBook() *statsBook {
	return &statsBook{byID: make(map[int64]*CheckpointStats), limit: 1000}
}

func (b *statsBook) triggered(id int64, savepoint bool, at time.Time, tasks int, path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &CheckpointStats{ID: id, Savepoint: savepoint, Status: InProgress, TriggerTime: at, NumTasks: tasks, Path: path}
	b.history = append(b.history, s)
	b.byID[id] = s
	b.summary.InProgress++
	if len(b.history) > b.limit {
		old := b.history[0]
		delete(b.byID, old.ID)
		b.history = b.history[1:]
	}
}

func (b *statsBook) acked(id int64, sub SubtaskStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.byID[id]; s != nil && s.Status == InProgress {
		s.Subtasks = append(s.Subtasks, sub)
		s.StateSize += sub.StateSize
		s.CheckpointedSize += sub.CheckpointedSize
		s.Unaligned = s.Unaligned || sub.Unaligned
		s.PersistedData += sub.PersistedData
	}
}

func (b *statsBook) completed(id int64, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.byID[id]
	if s == nil || s.Status != InProgress {
		return
	}
	s.Status, s.EndTime, s.Duration = Completed, at, at.Sub(s.TriggerTime)
	b.summary.InProgress--
	b.summary.Completed++
	if !s.Savepoint && id > b.summary.LatestCompleted {
		b.summary.LatestCompleted = id
	}
}

func (b *statsBook) failed(id int64, at time.Time, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.byID[id]
	if s == nil || s.Status != InProgress {
		return
	}
	s.Status, s.EndTime, s.Duration, s.FailureReason = Failed, at, at.Sub(s.TriggerTime), reason
	b.summary.InProgress--
	b.summary.Failed++
}

func (b *statsBook) restored(id int64, path string, at time.Time, restart bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.summary.Restored, b.summary.RestorePath, b.summary.RestoreTime = id, path, at
	if restart {
		b.summary.Restarts++
	}
}

func (b *statsBook) restartedWithoutState() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.summary.Restarts++
}

// snapshot returns deep copies, oldest first.
func (b *statsBook) snapshot() (Summary, []CheckpointStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]CheckpointStats, len(b.history))
	for i, s := range b.history {
		out[i] = *s
		out[i].Subtasks = slices.Clone(s.Subtasks)
	}
	return b.summary, out
}

func (b *statsBook) currentSummary() Summary {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.summary
}

func (b *statsBook) get(id int64) (CheckpointStats, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.byID[id]
	if !ok {
		return CheckpointStats{}, false
	}
	c := *s
	c.Subtasks = slices.Clone(s.Subtasks)
	return c, true
}
