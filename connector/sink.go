package connector

import (
	"context"
	"log/slog"
)

// Sink writes the records of a stream to an external system. A Sink value is a
// description shared by all subtasks; each subtask gets its own Writer.
type Sink[T any] interface {
	// NewWriter creates the writer of one subtask. It must not start
	// goroutines.
	NewWriter(ctx WriterContext) (Writer[T], error)
}

// WriterContext tells a writer where it runs.
type WriterContext struct {
	// JobID identifies the job; stable across restarts of the same job.
	JobID string
	// Subtask is the index of the writer's subtask, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of subtasks of the sink.
	Parallelism int
	// Attempt counts the restarts of the job, from 0; a writer can use it to
	// pick names that do not collide with those of a failed attempt.
	Attempt int
	// Logger is the subtask's logger; never nil.
	Logger *slog.Logger
}

// Writer writes records. All methods are called from the task's goroutine.
type Writer[T any] interface {
	// Write writes one record. An error fails the job.
	Write(rec T) error
	// Flush is called before each checkpoint's pre-commit and once at the end
	// of input (endOfInput true): buffered records must then be handed to the
	// external system.
	Flush(endOfInput bool) error
	// Close releases the writer's resources. It is called once, also after an
	// error; it must not make uncommitted data visible.
	Close() error
}

// BatchWriter is implemented by a Writer that can take a run of records in
// one call. The runtime calls WriteBatch instead of Write when a chain hands
// the sink a batch; WriteBatch(recs) must have the effect of Write(recs[i])
// for each i in order, stopping at the first error. The writer neither keeps
// nor modifies recs (copy what must outlive the call). Like Write, it is
// called from the task's goroutine only.
type BatchWriter[T any] interface {
	WriteBatch(recs []T) error
}

// PreCommitter is implemented by a Writer that takes part in two-phase commit.
// During the synchronous part of checkpoint n (after Flush) PreCommit closes
// the transaction that holds the records written since the previous
// checkpoint and returns a committable describing it. The committable is
// stored in the checkpoint; it is committed by the Sink's Committer once the
// checkpoint is complete, and again after a restore from that checkpoint.
type PreCommitter interface {
	PreCommit(checkpointID int64) (committable []byte, err error)
}

// Committable is a pre-committed transaction of one subtask.
type Committable struct {
	CheckpointID int64
	Subtask      int
	Data         []byte
}

// Committer is implemented by a Sink whose writers are PreCommitters. Commit
// makes the committables' records visible. It must be idempotent: after a
// failure it may be called again with committables that were already
// committed.
type Committer interface {
	Commit(ctx context.Context, committables []Committable) error
}

// Cleaner is implemented by a two-phase-commit Sink that leaves files or
// transactions behind when a job fails (pre-committed transactions of
// checkpoints that never completed, data of writers that never
// pre-committed). When a job restores, the runtime commits the restored
// checkpoint's committables and then calls Cleanup once, with those same
// committables, before any writer of the sink is created: everything the
// sink owns that keep does not name may be removed.
type Cleaner interface {
	Cleanup(ctx context.Context, keep []Committable) error
}

// RollbackCommitter is implemented by a Committer that can undo what it
// committed, because its output is its own: files it names, rows it keys by
// checkpoint id. When a job restores checkpoint or savepoint n (a fallback
// past a damaged newer checkpoint, an older checkpoint or savepoint given by
// path, a restart), the runtime calls RollBackAfter(ctx, n) once, before it
// re-commits n's committables and calls Cleanup, and before any writer of
// the sink is created: everything that checkpoints with ids above n
// committed must then be gone (or moved where readers do not look), since
// the restored job replays those records. Checkpoint ids only grow over a
// job's life, restores included, so "above n" is "after n". It returns how
// many transactions (files, batches) it undid, for the log.
//
// A Committer that cannot undo its commits (a Kafka or NATS sink: what
// consumers read is read) does not implement it. The runtime then refuses
// to restore a checkpoint when checkpoints or savepoints of the job that
// completed after it are found in its checkpoint storage — their output
// would repeat — unless the job allows it (weir.Options.AllowRepeatedOutput,
// weir run --allow-repeated-output); the error says how many checkpoints'
// output may repeat.
type RollbackCommitter interface {
	RollBackAfter(ctx context.Context, checkpointID int64) (undone int, err error)
}
