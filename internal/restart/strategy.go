package restart

import (
	"math"
	"math/rand/v2"
	"time"
)

// Strategy decides, at each failure of a job, whether the job restarts and
// after how long. A Strategy keeps the history of one job's failures: make a
// new one per job (New). It reads no clock — `now` is the caller's, and must
// not go backwards (use a monotonic clock) — and is not safe for concurrent
// use; the job's failover loop owns it.
type Strategy interface {
	// OnFailure records a failure at now. restart false means the job must
	// fail for good; otherwise it restarts after delay (>= 0).
	OnFailure(now time.Time) (restart bool, delay time.Duration)
	// String describes the strategy as a spec Parse reads
	// ("fixed-delay:attempts=3,delay=1s"), for logs and error messages.
	String() string
}

// Rand is the source of exponential-delay's jitter: *rand.Rand of
// math/rand/v2 satisfies it, seeded by tests for repeatable delays.
type Rand interface {
	// Int64N returns a uniform random number in [0, n); n > 0.
	Int64N(n int64) int64
}

// globalRand is the jitter source when none is given.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// New returns a fresh strategy for one job. It fills the defaults of a copy
// of o and validates it. rnd is the jitter source of exponential-delay; nil
// uses math/rand/v2's global source.
func New(o Options, rnd Rand) (Strategy, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	switch o.Kind {
	case KindNone:
		return None{}, nil
	case KindFixedDelay:
		return &FixedDelay{opts: o.FixedDelay}, nil
	case KindFailureRate:
		return &FailureRate{opts: o.FailureRate}, nil
	}
	if rnd == nil {
		rnd = globalRand{}
	}
	return &ExponentialDelay{opts: o.ExponentialDelay, rnd: rnd}, nil
}

// None never restarts.
type None struct{}

// OnFailure always says no.
func (None) OnFailure(time.Time) (bool, time.Duration) { return false, 0 }

func (None) String() string { return "none" }

// FixedDelay restarts up to Attempts times, each after Delay. The Attempts
// are for the job's whole life: they are not renewed by a long healthy run.
type FixedDelay struct {
	opts     FixedDelayOptions
	failures int
}

// OnFailure counts the failure and allows a restart while attempts remain.
func (s *FixedDelay) OnFailure(time.Time) (bool, time.Duration) {
	if s.failures < s.opts.Attempts {
		s.failures++
		return true, effective(s.opts.Delay)
	}
	return false, 0
}

func (s *FixedDelay) String() string {
	return Options{Kind: KindFixedDelay, FixedDelay: s.opts}.String()
}

// FailureRate restarts after Delay unless the failure is the
// (MaxFailures+1)-th within Interval: MaxFailures failures are tolerated in
// any window of Interval, as in Flink's failure-rate strategy.
type FailureRate struct {
	opts FailureRateOptions
	// recent holds the times of the last MaxFailures+1 failures at most,
	// oldest first.
	recent []time.Time
}

// OnFailure records the failure and checks the rate.
func (s *FailureRate) OnFailure(now time.Time) (bool, time.Duration) {
	if len(s.recent) == s.opts.MaxFailures+1 {
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, now)
	if len(s.recent) == s.opts.MaxFailures+1 && now.Sub(s.recent[0]) <= s.opts.Interval {
		return false, 0
	}
	return true, effective(s.opts.Delay)
}

func (s *FailureRate) String() string {
	return Options{Kind: KindFailureRate, FailureRate: s.opts}.String()
}

// ExponentialDelay restarts with a growing delay, as Flink's
// exponential-delay strategy (1.19+): see ExponentialDelayOptions.
//
// Failures while a restart is already scheduled (now before its time, e.g.
// several tasks of one job failing together) join that restart: they are
// not counted as attempts and get the remaining delay.
type ExponentialDelay struct {
	opts ExponentialDelayOptions
	rnd  Rand

	failed      bool      // a failure was recorded
	attempt     int       // restarts in a row since the last reset
	nextRestart time.Time // when the last restart was scheduled to happen
}

// OnFailure schedules the next restart, or refuses once the attempts in a
// row are used up.
func (s *ExponentialDelay) OnFailure(now time.Time) (bool, time.Duration) {
	if s.failed && !now.After(s.nextRestart) {
		if s.attempt > s.opts.Attempts {
			return false, 0
		}
		return true, s.nextRestart.Sub(now)
	}
	if !s.failed || now.Sub(s.nextRestart) >= s.opts.ResetThreshold {
		s.attempt = 0 // ran long enough since the last restart: start over
	}
	s.failed = true
	delay := s.backoff()
	s.nextRestart = now.Add(delay)
	if s.attempt < math.MaxInt {
		s.attempt++
	}
	if s.attempt > s.opts.Attempts {
		return false, 0
	}
	return true, delay
}

// backoff is the delay of restart number s.attempt (from 0) in a row:
// InitialBackoff × Multiplier^attempt, capped at MaxBackoff, plus or minus
// up to Jitter of it, kept within [InitialBackoff, MaxBackoff]. (Flink adds
// the jitter before the cap, so that capped delays get none; here the jitter
// also spreads restarts at the cap, below it.)
func (s *ExponentialDelay) backoff() time.Duration {
	lo, hi := s.opts.InitialBackoff, s.opts.MaxBackoff
	b := float64(lo) * math.Pow(s.opts.Multiplier, float64(s.attempt))
	d := hi
	if b < float64(hi) { // also false for +Inf
		d = time.Duration(b)
	}
	if j := s.opts.Jitter; j > 0 {
		if off := int64(float64(d) * j); off > 0 && off < math.MaxInt64/2 {
			d += time.Duration(s.rnd.Int64N(2*off+1) - off)
		}
	}
	return min(max(d, lo), hi)
}

func (s *ExponentialDelay) String() string {
	return Options{Kind: KindExponentialDelay, ExponentialDelay: s.opts}.String()
}

// effective turns the NoDelay sentinel into a zero delay.
func effective(d time.Duration) time.Duration {
	return max(d, 0)
}
