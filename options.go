package weir

import (
	"fmt"
	"log/slog"
	"runtime"
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
	// QueueSize is the number of batches a channel between two subtasks holds
	// before its sender blocks (backpressure). Default: 4; range [1, 1024].
	QueueSize int
	// StateBackend is where keyed state lives while the job runs: "heap"
	// (Go maps in memory). Default: "heap". ("pebble" arrives with the state
	// issue.)
	StateBackend string
	// JobID identifies the job in logs and to connectors. Default: the job
	// name given to Execute.
	JobID string
	// Logger receives the runtime's structured logs. Default: a logger that
	// discards everything.
	Logger *slog.Logger
}

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
	if o.StateBackend == "" {
		o.StateBackend = "heap"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
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
	case o.QueueSize < 1 || o.QueueSize > 1024:
		return fmt.Errorf("weir: Options.QueueSize is %d; want 1..1024 (0 means 4)", o.QueueSize)
	case o.StateBackend != "heap":
		return fmt.Errorf("weir: Options.StateBackend is %q; want \"heap\"", o.StateBackend)
	}
	return nil
}
