package checkpoint

import (
	"errors"
	"fmt"
)

// DefaultTimeout is the default Options.Timeout: 10 minutes, as in Flink.
const DefaultTimeout int64 = 10 * 60 * 1000

// Options configures a Coordinator. All durations are milliseconds on the
// caller's clock: the coordinator never reads one, it only compares the `now`
// values it is given.
//
// The zero value is usable after EnsureDefaults: no periodic checkpoints, one
// checkpoint at a time, a 10 minute timeout, no tolerated failures, one
// retained checkpoint.
type Options struct {
	// Interval is the time between two periodic checkpoint triggers, in
	// milliseconds. A periodic checkpoint that cannot start when it is due
	// (MaxConcurrent reached, MinPause not yet over) starts as soon as it may.
	// Default 0: no periodic checkpoints; manual, external, record-count and
	// marker triggers still work.
	Interval int64

	// MinPause is the least time, in milliseconds, between the completion of
	// the last checkpoint and the start of the next automatic one (periodic,
	// record-count, marker). Manual and external requests ignore it, as in
	// Flink. Default 0.
	MinPause int64

	// MaxConcurrent is the most checkpoints and savepoints that may be pending
	// at once, counting those whose metadata is being written. Requests
	// beyond it wait. Default 1.
	MaxConcurrent int

	// Timeout is how long, in milliseconds, a checkpoint may wait for all its
	// acknowledgements before it is aborted as expired. Default 600000
	// (10 minutes).
	Timeout int64

	// TolerableFailures is how many consecutive checkpoint failures (declined,
	// expired, metadata write failed) are tolerated; one more emits FailJob.
	// Success resets the count. Subsumed checkpoints, aborts caused by a task
	// failure or a stop, and savepoint failures do not count. Default 0: the
	// first counted failure fails the job (Flink's default).
	TolerableFailures int

	// Retained is how many completed checkpoints are kept; older ones are
	// discarded. Savepoints are never counted nor discarded. Default 1.
	Retained int

	// EveryNRecords triggers a checkpoint each time the sources have read this
	// many records since the last checkpoint started. Default 0: off.
	EveryNRecords int64
}

// EnsureDefaults fills the fields whose zero value means "default" and returns
// o, so that it can be chained: opts.EnsureDefaults().Validate().
func (o *Options) EnsureDefaults() *Options {
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 1
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Retained == 0 {
		o.Retained = 1
	}
	return o
}

// Validate reports every field outside its accepted range. Each error wraps
// ErrInvalidOptions and names the field and the range. Validate does not fill
// defaults: call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, field string, value int64, want string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s is %d, want %s", ErrInvalidOptions, field, value, want))
		}
	}
	check(o.Interval >= 0, "Interval", o.Interval, ">= 0 milliseconds (0 disables periodic checkpoints)")
	check(o.MinPause >= 0, "MinPause", o.MinPause, ">= 0 milliseconds")
	check(o.MaxConcurrent >= 1, "MaxConcurrent", int64(o.MaxConcurrent), ">= 1")
	check(o.Timeout >= 1, "Timeout", o.Timeout, ">= 1 millisecond")
	check(o.TolerableFailures >= 0, "TolerableFailures", int64(o.TolerableFailures), ">= 0")
	check(o.Retained >= 1, "Retained", int64(o.Retained), ">= 1")
	check(o.EveryNRecords >= 0, "EveryNRecords", o.EveryNRecords, ">= 0 (0 disables record-count triggers)")
	return errors.Join(errs...)
}
