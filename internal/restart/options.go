package restart

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind names a restart strategy.
type Kind uint8

const (
	// KindDefault is the zero Kind; EnsureDefaults turns it into
	// KindExponentialDelay.
	KindDefault Kind = iota
	// KindNone never restarts: the first failure fails the job.
	KindNone
	// KindFixedDelay restarts a fixed number of times, after a fixed delay.
	KindFixedDelay
	// KindExponentialDelay restarts after a delay that grows with each
	// failure in a row and resets after a quiet period. The default, as in
	// Flink (1.19+) for jobs with checkpointing.
	KindExponentialDelay
	// KindFailureRate restarts while failures stay below a rate.
	KindFailureRate
)

func (k Kind) String() string {
	switch k {
	case KindDefault:
		return "default"
	case KindNone:
		return "none"
	case KindFixedDelay:
		return "fixed-delay"
	case KindExponentialDelay:
		return "exponential-delay"
	case KindFailureRate:
		return "failure-rate"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Sentinels for the fields whose zero value means "the default".
const (
	// Unlimited, as an Attempts value, never runs out of attempts.
	Unlimited = math.MaxInt
	// NoDelay, as a Delay value, restarts at once (zero means the default
	// delay).
	NoDelay time.Duration = -1
	// NoJitter, as a Jitter value, disables the jitter (zero means the
	// default jitter).
	NoJitter float64 = -1
)

// Defaults, those of Flink 1.19 (restart-strategy.* options). Flink 1.19
// changed exponential-delay's max-backoff from 5 min to 1 min and its
// backoff-multiplier from 2.0 to 1.5, added attempts-before-reset-backoff
// (default infinite), and made exponential-delay the default strategy of
// jobs with checkpointing.
const (
	DefaultFixedDelayAttempts  = 1           // restart-strategy.fixed-delay.attempts
	DefaultFixedDelay          = time.Second // restart-strategy.fixed-delay.delay
	DefaultInitialBackoff      = time.Second // restart-strategy.exponential-delay.initial-backoff
	DefaultMaxBackoff          = time.Minute // restart-strategy.exponential-delay.max-backoff
	DefaultBackoffMultiplier   = 1.5         // restart-strategy.exponential-delay.backoff-multiplier
	DefaultResetThreshold      = time.Hour   // restart-strategy.exponential-delay.reset-backoff-threshold
	DefaultJitter              = 0.1         // restart-strategy.exponential-delay.jitter-factor
	DefaultExponentialAttempts = Unlimited   // restart-strategy.exponential-delay.attempts-before-reset-backoff
	DefaultMaxFailures         = 1           // restart-strategy.failure-rate.max-failures-per-interval
	DefaultFailureRateInterval = time.Minute // restart-strategy.failure-rate.failure-rate-interval
	DefaultFailureRateDelay    = time.Second // restart-strategy.failure-rate.delay
)

// MinBackoff is the smallest accepted backoff and reset threshold of
// exponential-delay, and interval of failure-rate (Flink's 1 ms).
const MinBackoff = time.Millisecond

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("restart: invalid options")

// Options configures a restart strategy: Kind picks one, and only the
// options of that kind are used. The zero value is the default strategy
// with Flink's defaults, after EnsureDefaults.
type Options struct {
	// Kind is the strategy. Default KindDefault: KindExponentialDelay. (Flink
	// uses none for jobs without checkpointing; a caller that wants that
	// says so.)
	Kind Kind

	// FixedDelay configures KindFixedDelay; ignored for other kinds.
	// Default: each field's default.
	FixedDelay FixedDelayOptions
	// ExponentialDelay configures KindExponentialDelay; ignored for other
	// kinds. Default: each field's default.
	ExponentialDelay ExponentialDelayOptions
	// FailureRate configures KindFailureRate; ignored for other kinds.
	// Default: each field's default.
	FailureRate FailureRateOptions
}

// FixedDelayOptions configures KindFixedDelay: restart up to Attempts times,
// each after Delay; the failure after the last attempt fails the job.
type FixedDelayOptions struct {
	// Attempts is the number of restarts, >= 1, or Unlimited. Default 1.
	Attempts int
	// Delay is the time from a failure to the restart, > 0, or NoDelay.
	// Default 1s.
	Delay time.Duration
}

// ExponentialDelayOptions configures KindExponentialDelay. The n-th restart
// in a row (from 0) waits InitialBackoff × Multiplier^n, at most MaxBackoff,
// give or take Jitter of it; the result stays in [InitialBackoff,
// MaxBackoff]. A job that ran ResetThreshold since its last restart without
// failing starts again from InitialBackoff, with its Attempts renewed.
type ExponentialDelayOptions struct {
	// InitialBackoff is the delay of the first restart, >= 1ms. Default 1s.
	InitialBackoff time.Duration
	// MaxBackoff caps the delay, >= InitialBackoff. Default 1m (or
	// InitialBackoff if that is larger).
	MaxBackoff time.Duration
	// Multiplier grows the delay at each failure in a row, > 1. Default 1.5.
	Multiplier float64
	// ResetThreshold is how long a job must run without failing for the
	// backoff (and Attempts) to start over, >= 1ms. Default 1h.
	ResetThreshold time.Duration
	// Jitter is the fraction of the backoff added or subtracted at random, so
	// that many jobs failing together do not restart together, in [0, 1], or
	// NoJitter. Default 0.1.
	Jitter float64
	// Attempts is the number of restarts in a row (without a reset) before
	// the job fails, >= 1, or Unlimited. Default Unlimited.
	Attempts int
}

// FailureRateOptions configures KindFailureRate: restart after Delay unless
// this failure is more than MaxFailures within Interval.
type FailureRateOptions struct {
	// MaxFailures is the number of failures tolerated within any Interval,
	// >= 1; one more fails the job. Default 1.
	MaxFailures int
	// Interval is the window over which failures are counted, >= 1ms.
	// Default 1m.
	Interval time.Duration
	// Delay is the time from a failure to the restart, > 0, or NoDelay.
	// Default 1s.
	Delay time.Duration
}

// EnsureDefaults replaces zero fields by their defaults, for every kind, and
// returns o so that it can be chained: opts.EnsureDefaults().Validate().
func (o *Options) EnsureDefaults() *Options {
	if o.Kind == KindDefault {
		o.Kind = KindExponentialDelay
	}
	f := &o.FixedDelay
	setDefault(&f.Attempts, DefaultFixedDelayAttempts)
	setDefault(&f.Delay, DefaultFixedDelay)
	e := &o.ExponentialDelay
	setDefault(&e.InitialBackoff, DefaultInitialBackoff)
	setDefault(&e.MaxBackoff, max(DefaultMaxBackoff, e.InitialBackoff))
	setDefault(&e.Multiplier, DefaultBackoffMultiplier)
	setDefault(&e.ResetThreshold, DefaultResetThreshold)
	setDefault(&e.Jitter, DefaultJitter)
	setDefault(&e.Attempts, DefaultExponentialAttempts)
	r := &o.FailureRate
	setDefault(&r.MaxFailures, DefaultMaxFailures)
	setDefault(&r.Interval, DefaultFailureRateInterval)
	setDefault(&r.Delay, DefaultFailureRateDelay)
	return o
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate reports every field of the chosen kind outside its accepted range;
// each error wraps ErrInvalidOptions and names the field and the range.
// Validate does not fill defaults: call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, field string, value any, want string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s is %v, want %s", ErrInvalidOptions, field, value, want))
		}
	}
	switch o.Kind {
	case KindNone:
	case KindFixedDelay:
		f := o.FixedDelay
		check(f.Attempts >= 1, "FixedDelay.Attempts", f.Attempts, ">= 1 (or Unlimited; for no restarts use KindNone)")
		check(f.Delay > 0 || f.Delay == NoDelay, "FixedDelay.Delay", f.Delay, "> 0 (or NoDelay)")
	case KindExponentialDelay:
		e := o.ExponentialDelay
		check(e.InitialBackoff >= MinBackoff, "ExponentialDelay.InitialBackoff", e.InitialBackoff, ">= 1ms")
		check(e.MaxBackoff >= e.InitialBackoff, "ExponentialDelay.MaxBackoff", e.MaxBackoff, fmt.Sprintf(">= InitialBackoff (%v)", e.InitialBackoff))
		check(e.Multiplier > 1 && !math.IsInf(e.Multiplier, 1), "ExponentialDelay.Multiplier", e.Multiplier, "> 1 and finite")
		check(e.ResetThreshold >= MinBackoff, "ExponentialDelay.ResetThreshold", e.ResetThreshold, ">= 1ms")
		check(e.Jitter == NoJitter || (e.Jitter >= 0 && e.Jitter <= 1), "ExponentialDelay.Jitter", e.Jitter, "in [0, 1] (or NoJitter)")
		check(e.Attempts >= 1, "ExponentialDelay.Attempts", e.Attempts, ">= 1 (or Unlimited)")
	case KindFailureRate:
		r := o.FailureRate
		check(r.MaxFailures >= 1, "FailureRate.MaxFailures", r.MaxFailures, ">= 1")
		check(r.Interval >= MinBackoff, "FailureRate.Interval", r.Interval, ">= 1ms")
		check(r.Delay > 0 || r.Delay == NoDelay, "FailureRate.Delay", r.Delay, "> 0 (or NoDelay)")
	default:
		check(false, "Kind", o.Kind, "one of none, fixed-delay, exponential-delay, failure-rate (call EnsureDefaults for the default)")
	}
	return errors.Join(errs...)
}

// String returns the options as a spec Parse reads back, with every
// parameter of the kind: "fixed-delay:attempts=3,delay=1s".
func (o Options) String() string {
	switch o.Kind {
	case KindNone:
		return "none"
	case KindFixedDelay:
		f := o.FixedDelay
		return fmt.Sprintf("fixed-delay:attempts=%s,delay=%s", fmtAttempts(f.Attempts), fmtDelay(f.Delay))
	case KindExponentialDelay:
		e := o.ExponentialDelay
		return fmt.Sprintf("exponential-delay:initial-backoff=%s,max-backoff=%s,multiplier=%s,reset-threshold=%s,jitter=%s,attempts=%s",
			e.InitialBackoff, e.MaxBackoff, strconv.FormatFloat(e.Multiplier, 'g', -1, 64), e.ResetThreshold,
			fmtJitter(e.Jitter), fmtAttempts(e.Attempts))
	case KindFailureRate:
		r := o.FailureRate
		return fmt.Sprintf("failure-rate:max=%d,interval=%s,delay=%s", r.MaxFailures, r.Interval, fmtDelay(r.Delay))
	}
	return o.Kind.String()
}

func fmtAttempts(n int) string {
	if n == Unlimited {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func fmtDelay(d time.Duration) string {
	if d == NoDelay {
		return "0s"
	}
	return d.String()
}

func fmtJitter(j float64) string {
	if j == NoJitter {
		return "0"
	}
	return strconv.FormatFloat(j, 'g', -1, 64)
}

// MarshalText returns String, so that Options work with flag.TextVar and
// text-based configuration.
func (o Options) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses a spec with Parse.
func (o *Options) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*o = p
	return nil
}
