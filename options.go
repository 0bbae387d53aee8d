package weir

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	iruntime "github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend/incremental"
	"github.com/weirstream/weir/internal/storage"
)

// Options configure an Environment. The zero value is valid: every field has
// a default, filled by EnsureDefaults.
type Options struct {
	// Parallelism is the default number of subtasks of every operator.
	// Default: GOMAXPROCS.
	Parallelism int
	// MaxParallelism is the number of key groups of keyed operators, and so
	// the largest parallelism a keyed operator can ever be rescaled to.
	// Changing it makes existing keyed state unreadable. Default: 128; range
	// [1, 32768].
	MaxParallelism int
	// BatchSize is the number of records sent between tasks in one batch.
	// Larger batches raise throughput and latency. Default: 1024; range
	// [1, 1<<20].
	BatchSize int
	// BufferTimeout bounds how long a record waits in a partly filled
	// batch while its task is busy (Flink's
	// execution.buffer-timeout.interval): this often, a task's writers
	// send what they hold. A task also sends its partial batches whenever
	// it runs out of work and before every barrier and watermark, so the
	// timeout matters only for a task that is never idle: a source that
	// always has more, or an operator slower than its input. Default 0:
	// 100 ms, as in Flink; NoBufferTimeout (any negative value) turns it
	// off (Flink's execution.buffer-timeout.enabled: false); otherwise at
	// least 1 ms. For Flink's interval 0 (a flush after every record), set
	// BatchSize to 1.
	BufferTimeout time.Duration
	// QueueSize is the number of batches a channel between two subtasks holds
	// before its sender blocks (backpressure). Default: 4; range [1, 1024].
	QueueSize int
	// StateBackend is where keyed state lives while the job runs: "heap"
	// (Go maps in memory, copy-on-write snapshots) or "pebble" (an LSM tree
	// on local disk: state larger than memory). Default: "heap".
	StateBackend string
	// LocalStateDir is where the pebble backend keeps its working files,
	// under <LocalStateDir>/<JobID>/proc-<pid>-<random>/: a directory of
	// each process's own, removed when its job ends (and by a later
	// process if it died). Default: <os.TempDir()>/weir-state.
	LocalStateDir string
	// localJobDir is this process's directory under LocalStateDir (set
	// by ExecuteAsync).
	localJobDir string
	// capParallelism caps the parallelism an operator sets itself at
	// Parallelism (set by a Deployable's Rescaled: reactive mode).
	capParallelism bool
	// JobID identifies the job in logs and to connectors. Default: the job
	// name given to Execute.
	JobID string
	// Logger receives the runtime's structured logs. Default: a logger that
	// discards everything.
	Logger *slog.Logger
	// Checkpointing configures checkpoints. Checkpoints can always be
	// triggered by hand (JobClient.TriggerCheckpoint); periodic ones need
	// Checkpointing.Interval.
	Checkpointing CheckpointOptions
	// Restart is the restart strategy after a failure: "none",
	// "fixed-delay[:attempts=N,delay=D]", "exponential-delay[:...]",
	// "failure-rate[:max=N,interval=D,delay=D]". Default: as in Flink,
	// "exponential-delay" when periodic checkpointing is on, else "none".
	Restart string
	// Restore starts the job from saved state: "latest" (the newest complete
	// checkpoint of this JobID in Checkpointing.Storage; none: start empty),
	// or the path or URL of a checkpoint or savepoint. Default: "" (no
	// state).
	Restore string
	// AllowNonRestoredState lets Restore skip the state of operators (by
	// uid) that the job no longer has. Default: false — such state fails
	// the start, so that state is never dropped silently.
	AllowNonRestoredState bool
	// Exchange is how records cross between tasks: "local" (in-process
	// channels of batches) or "tcp" (every non-chained edge whose record
	// type codec.Of supports goes through the network data plane,
	// internal/network, on 127.0.0.1: serialized, credit-based flow
	// control; for tests and benchmarks of the network path). Default:
	// the environment variable WEIR_EXCHANGE if set, else "local".
	Exchange string
	// AllowRepeatedOutput lets Restore start from a checkpoint older than
	// others of the job that completed since, although a sink of the job
	// commits on checkpoints and cannot undo those commits (it is not a
	// connector.RollbackCommitter): their output is then written again.
	// Default: false — such a restore fails, saying how many checkpoints'
	// output would repeat. Sinks that can undo (the exactly-once file sink)
	// roll that output back instead and need no permission.
	AllowRepeatedOutput bool
	// OnRestore, when set, is called each time the job starts from a
	// checkpoint or savepoint (at its start and at every restart), and once
	// with a zero RestoreInfo when Restore is "latest" and the job has no
	// checkpoint to start from. It runs on the job's control goroutine:
	// it must return quickly. Default: nil.
	OnRestore func(RestoreInfo)
}

// NoBufferTimeout, as Options.BufferTimeout, turns the buffer timeout off:
// a partly filled batch then waits until it fills, its task is idle, or an
// event follows it.
const NoBufferTimeout time.Duration = -1

// DefaultBufferTimeout is the buffer timeout of Options whose BufferTimeout
// is 0, as in Flink.
const DefaultBufferTimeout = iruntime.DefaultBufferTimeout

// RestoreInfo says which checkpoint or savepoint a job started from.
type RestoreInfo struct {
	// ID is the checkpoint's id; 0 when there was nothing to restore.
	ID int64
	// Savepoint is set when it was a savepoint.
	Savepoint bool
	// URL is where it is: a value Options.Restore accepts ("file:///…",
	// "s3://…", "memory://…").
	URL string
	// Restart is set for a restart after a failure.
	Restart bool
}

// CheckpointMode selects the checkpointing guarantee.
type CheckpointMode int

const (
	// ExactlyOnce aligns barriers: state reflects every record exactly once.
	ExactlyOnce CheckpointMode = iota
	// AtLeastOnce does not align: faster under skew, but after a restore
	// some records may be reflected twice.
	AtLeastOnce
)

// CheckpointOptions configure checkpoints (DESIGN.md §5). The zero value
// means: no periodic checkpoints, exactly-once, in-memory storage.
type CheckpointOptions struct {
	// Interval between periodic checkpoints. Default: 0 (none; checkpoints
	// only by hand, every N records, or at the end of bounded input).
	// Range: 0 or >= 1ms.
	Interval time.Duration
	// Mode: ExactlyOnce (default) or AtLeastOnce.
	Mode CheckpointMode
	// MinPause is the least time between the end of one checkpoint and the
	// start of the next. Default: 0. Range: >= 0.
	MinPause time.Duration
	// Timeout aborts a checkpoint that has not completed in time. Default:
	// 10 minutes. Range: >= 1ms.
	Timeout time.Duration
	// MaxConcurrent is the number of checkpoints in progress at once.
	// Default: 1. Range: >= 1.
	MaxConcurrent int
	// TolerableFailures is the number of consecutive failed checkpoints
	// the job tolerates; one more fails the job. Default: 0 (as Flink).
	// Use -1 for unlimited.
	TolerableFailures int
	// Retained is the number of completed checkpoints kept. Default: 1.
	// Range: >= 1.
	Retained int
	// EveryNRecords triggers a checkpoint each time the sources emitted
	// this many records. Default: 0 (off). Range: >= 0.
	EveryNRecords int64
	// Storage is where checkpoints go: "memory://NAME" (in this process),
	// "file:///path" or a path. Default: "memory://" (private to the job).
	Storage string
	// SavepointDir is the default directory of savepoints. Default: none.
	SavepointDir string
	// RetainOnCancel keeps the retained checkpoints when the job is
	// cancelled. Default: false: deleted, as in Flink — except when a sink
	// of the job commits its output on checkpoints (a connector.Committer,
	// such as the exactly-once file sink): that output is visible, and a
	// next run needs the checkpoints to go on after it instead of
	// repeating it, so they are kept unless DiscardOnCancel is set.
	RetainOnCancel bool
	// DiscardOnCancel deletes the retained checkpoints when the job is
	// cancelled even though a sink of the job committed output on them:
	// a next run with Restore "latest" then starts from nothing and
	// repeats that output. Default: false. Not with RetainOnCancel.
	DiscardOnCancel bool
	// Incremental makes checkpoints of the pebble backend incremental: each
	// uploads only the database files that no earlier checkpoint uploaded,
	// under <Storage>/<JobID>/shared/, and refers to the others (Flink's
	// incremental RocksDB checkpoints). Savepoints stay full and canonical.
	// It needs StateBackend "pebble": with "heap" the job does not start
	// (the heap backend takes full snapshots only). Default: false.
	Incremental bool
	// LocalRecovery keeps each keyed subtask's last incremental checkpoint
	// on local disk (under LocalStateDir, hard links), so that a restart in
	// the same process restores from it without downloading, once its files
	// match the checkpoint's metadata (sizes and CRCs); otherwise the files
	// are downloaded. Needs Incremental. Default: false.
	LocalRecovery bool
	// Changelog configures changelog-based incremental checkpoints
	// (Flink's state.changelog.*, FLIP-158): with Enabled, each checkpoint
	// of the pebble backend uploads the log of the writes made since the
	// previous one instead of the database files the writes and the
	// compactions produced, and the database is materialized in the
	// background from time to time. Needs Incremental (and so "pebble");
	// not with LocalRecovery. Default: off.
	Changelog ChangelogOptions
	// Unaligned lets checkpoint barriers overtake the records queued in the
	// channels (Flink's unaligned checkpoints, FLIP-76): a task snapshots as
	// soon as the first barrier reaches it, and the records the barrier
	// overtook go into the checkpoint as channel state, replayed on restore.
	// Checkpoints then complete under backpressure; they store more.
	// Needs Mode ExactlyOnce and MaxConcurrent 1; savepoints stay aligned.
	// Default: false (aligned).
	Unaligned bool
	// AlignedTimeout, with Unaligned, starts each checkpoint aligned and
	// switches a task to unaligned once the checkpoint is this old (counted
	// from its trigger time) and the task's alignment has not finished
	// (Flink's execution.checkpointing.aligned-checkpoint-timeout).
	// Default: 0: always unaligned, as in Flink. Range: >= 0; > 0 only with
	// Unaligned.
	AlignedTimeout time.Duration

	// store overrides Storage (tests: a store with injected faults).
	store storage.Store
	// faults injects task failures at protocol points (tests).
	faults *iruntime.FaultHooks
	// test holds per-job test hooks (export_test.go); nil in production.
	test *testHooks
}

// testHooks are per-job settings and observers of tests, set through
// export_test.go, so that tests running in parallel do not see each
// other's jobs. Every field may be left zero.
type testHooks struct {
	// noCompactions stops the pebble backends from compacting (uploads
	// are then exactly the files flushed since the last checkpoint).
	noCompactions bool
	// onKeyedOpen is told of every keyed operator instance opened, with a
	// view of its checkpoint lifecycle (incremental and changelog
	// checkpoints not yet known complete or aborted). It runs on the task
	// goroutine; the view may be called from any goroutine.
	onKeyedOpen func(uid string, subtask int, pending func() int)
	// onRestore is told how every incremental restore got its files; it
	// runs on task goroutines.
	onRestore func(job, uid string, subtask int, st incremental.RestoreStats)
	// onMaterialized is told of every background changelog
	// materialization uploaded; it runs on the materialization's goroutine.
	onMaterialized func(uid string, subtask int)
	// localFS is the file system of the incremental lifecycle's local
	// files (native checkpoints, changelog, local recovery, restores), to
	// inject local-disk errors; nil: the disk. The pebble databases keep
	// the disk: the same files, seen through another vfs.FS.
	localFS vfs.FS
	// clock is the lifecycle's clock (materialization intervals); nil:
	// time.Now.
	clock func() time.Time
	// pebbleEvents returns the listener of the database events of a keyed
	// operator instance's pebble backend (nil: none).
	pebbleEvents func(uid string, subtask int) *cpebble.EventListener
}

// periodic reports whether automatic checkpoints (by interval or record
// count) are configured.
func (c CheckpointOptions) periodic() bool { return c.Interval > 0 || c.EveryNRecords > 0 }

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.Parallelism == 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.MaxParallelism == 0 {
		o.MaxParallelism = 128
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1024
	}
	if o.QueueSize == 0 {
		o.QueueSize = 4
	}
	if o.BufferTimeout == 0 {
		o.BufferTimeout = iruntime.DefaultBufferTimeout
	}
	if o.StateBackend == "" {
		o.StateBackend = "heap"
	}
	if o.Exchange == "" {
		o.Exchange = os.Getenv("WEIR_EXCHANGE")
	}
	if o.Exchange == "" {
		o.Exchange = "local"
	}
	if o.LocalStateDir == "" {
		o.LocalStateDir = filepath.Join(os.TempDir(), "weir-state")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &o.Checkpointing
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 1
	}
	if c.Retained == 0 {
		c.Retained = 1
	}
	if c.Storage == "" {
		c.Storage = "memory://"
	}
	if o.Restart == "" {
		o.Restart = "none"
		if c.periodic() {
			o.Restart = "exponential-delay"
		}
	}
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	switch {
	case o.Parallelism < 1:
		return fmt.Errorf("weir: Options.Parallelism is %d; want >= 1 (0 means GOMAXPROCS)", o.Parallelism)
	case o.MaxParallelism < 1 || o.MaxParallelism > 32768:
		return fmt.Errorf("weir: Options.MaxParallelism is %d; want 1..32768 (0 means 128)", o.MaxParallelism)
	case o.Parallelism > o.MaxParallelism:
		return fmt.Errorf("weir: Options.Parallelism %d exceeds Options.MaxParallelism %d", o.Parallelism, o.MaxParallelism)
	case o.BatchSize < 1 || o.BatchSize > 1<<20:
		return fmt.Errorf("weir: Options.BatchSize is %d; want 1..1048576 (0 means 1024)", o.BatchSize)
	case o.BufferTimeout >= 0 && o.BufferTimeout < time.Millisecond:
		return fmt.Errorf("weir: Options.BufferTimeout is %v; want >= 1ms, or NoBufferTimeout (0 means 100ms)", o.BufferTimeout)
	case o.QueueSize < 1 || o.QueueSize > 1024:
		return fmt.Errorf("weir: Options.QueueSize is %d; want 1..1024 (0 means 4)", o.QueueSize)
	case o.StateBackend != "heap" && o.StateBackend != "pebble":
		return fmt.Errorf("weir: Options.StateBackend is %q; want \"heap\" or \"pebble\"", o.StateBackend)
	case o.Exchange != "local" && o.Exchange != "tcp":
		return fmt.Errorf("weir: Options.Exchange is %q (or WEIR_EXCHANGE); want \"local\" or \"tcp\" (empty means local)", o.Exchange)
	}
	c := o.Checkpointing
	switch {
	case c.Interval < 0 || (c.Interval > 0 && c.Interval < time.Millisecond):
		return fmt.Errorf("weir: Options.Checkpointing.Interval is %v; want 0 (off) or >= 1ms", c.Interval)
	case c.Mode != ExactlyOnce && c.Mode != AtLeastOnce:
		return fmt.Errorf("weir: Options.Checkpointing.Mode is %d; want ExactlyOnce or AtLeastOnce", c.Mode)
	case c.MinPause < 0:
		return fmt.Errorf("weir: Options.Checkpointing.MinPause is %v; want >= 0", c.MinPause)
	case c.Timeout < time.Millisecond:
		return fmt.Errorf("weir: Options.Checkpointing.Timeout is %v; want >= 1ms (0 means 10m)", c.Timeout)
	case c.MaxConcurrent < 1:
		return fmt.Errorf("weir: Options.Checkpointing.MaxConcurrent is %d; want >= 1 (0 means 1)", c.MaxConcurrent)
	case c.TolerableFailures < -1:
		return fmt.Errorf("weir: Options.Checkpointing.TolerableFailures is %d; want >= 0, or -1 for unlimited", c.TolerableFailures)
	case c.Retained < 1:
		return fmt.Errorf("weir: Options.Checkpointing.Retained is %d; want >= 1 (0 means 1)", c.Retained)
	case c.EveryNRecords < 0:
		return fmt.Errorf("weir: Options.Checkpointing.EveryNRecords is %d; want >= 0 (0 means off)", c.EveryNRecords)
	case c.RetainOnCancel && c.DiscardOnCancel:
		return fmt.Errorf("weir: Options.Checkpointing.RetainOnCancel and DiscardOnCancel are both set: choose one")
	case c.Incremental && o.StateBackend != "pebble":
		return fmt.Errorf("weir: Options.Checkpointing.Incremental needs Options.StateBackend \"pebble\", not %q: the heap backend takes full snapshots only", o.StateBackend)
	case c.Changelog.Enabled && (!c.Incremental || o.StateBackend != "pebble"):
		return fmt.Errorf("weir: Options.Checkpointing.Changelog.Enabled needs Options.StateBackend \"pebble\" (now %q) with Options.Checkpointing.Incremental (now %t): the changelog is the pebble backend's", o.StateBackend, c.Incremental)
	case c.Changelog.Enabled && c.LocalRecovery:
		return fmt.Errorf("weir: Options.Checkpointing.Changelog.Enabled does not support Options.Checkpointing.LocalRecovery yet: turn one of them off")
	case c.Changelog.MaterializationLogRatio != c.Changelog.MaterializationLogRatio: // NaN
		return fmt.Errorf("weir: Options.Checkpointing.Changelog.MaterializationLogRatio is NaN; want > 0, 0 (default 0.5) or < 0 (off)")
	case c.LocalRecovery && !c.Incremental:
		return fmt.Errorf("weir: Options.Checkpointing.LocalRecovery needs Options.Checkpointing.Incremental (local recovery keeps the last incremental checkpoint on disk)")
	case c.AlignedTimeout < 0:
		return fmt.Errorf("weir: Options.Checkpointing.AlignedTimeout is %v; want >= 0 (0 means always unaligned)", c.AlignedTimeout)
	case c.AlignedTimeout > 0 && !c.Unaligned:
		return fmt.Errorf("weir: Options.Checkpointing.AlignedTimeout is %v but Unaligned is off: the timeout switches aligned checkpoints to unaligned ones; set Unaligned too, or leave AlignedTimeout 0", c.AlignedTimeout)
	case c.Unaligned && c.Mode != ExactlyOnce:
		return fmt.Errorf("weir: Options.Checkpointing.Unaligned needs Mode ExactlyOnce: at-least-once checkpoints do not align, so there is nothing for the barrier to overtake")
	case c.Unaligned && c.MaxConcurrent != 1:
		return fmt.Errorf("weir: Options.Checkpointing.Unaligned needs MaxConcurrent 1 (now %d), as in Flink: the channel state of one checkpoint would hold the barriers of the next", c.MaxConcurrent)
	}
	return nil
}
