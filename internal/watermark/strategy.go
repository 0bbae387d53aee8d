package watermark

import (
	"errors"
	"fmt"
	"math"
)

const (
	// MinWatermark is the watermark of an input that has not emitted one yet
	// (Flink's Long.MIN_VALUE). It equals connector.NoTimestamp, so a record
	// without a timestamp never advances a watermark.
	MinWatermark int64 = math.MinInt64
	// MaxWatermark ends event time: no record follows it, every event-time
	// timer may fire. A bounded source sends it at the end of its input; an
	// input that reached it no longer holds back a merged watermark.
	MaxWatermark int64 = math.MaxInt64
	// DefaultInterval is how often, in milliseconds, a source task calls
	// Splits.Periodic: 200, Flink's pipeline.auto-watermark-interval.
	DefaultInterval int64 = 200
)

// ErrInvalidStrategy is wrapped by the errors of a Strategy built with bad
// arguments (a negative delay, a non-positive idleness timeout, no
// generator).
var ErrInvalidStrategy = errors.New("watermark: invalid strategy")

// Generator decides the watermarks of one input (a split of a source, or a
// stream), as Flink's WatermarkGenerator. A watermark t promises that no
// record with a timestamp <= t follows.
//
// OnEvent is called with the event-time timestamp of every record of the
// input, in arrival order; ts is MinWatermark for a record without one. A
// punctuated generator returns emit=true when a record carries a watermark.
// OnPeriodic is called every DefaultInterval (or the configured interval) of
// processing time while the input is not idle; a periodic generator returns
// the watermark it has reached. Returning a watermark that does not advance
// on the last one is harmless: it is ignored. Returning MaxWatermark ends the
// input's event time.
//
// A Generator is owned by one input of one task: it is called from the
// task's goroutine only and needs no locking. It reads no clock; processing
// time (idleness) is the caller's business.
type Generator interface {
	OnEvent(ts int64) (wm int64, emit bool)
	OnPeriodic() (wm int64, emit bool)
}

// Strategy says how the watermarks of a source are made, as Flink's
// WatermarkStrategy: a factory of one Generator per split, and an optional
// idleness timeout. It is a value, cheap to copy and safe to share between
// subtasks. The zero Strategy is invalid.
//
// Constructors never fail; a bad argument is reported by Validate, by
// NewGenerator and by NewSplits.
type Strategy struct {
	newGenerator func() Generator
	idleTimeout  int64 // milliseconds; 0: inputs are never idle
	err          error
}

// BoundedOutOfOrderness allows records to arrive up to maxDelay milliseconds
// behind the greatest timestamp seen: the watermark is
// maxTimestampSeen - maxDelay - 1 (Flink's definition: a record with the
// greatest timestamp seen minus maxDelay is still on time), emitted on every
// periodic call once a record with a timestamp was seen. maxDelay must be
// >= 0.
func BoundedOutOfOrderness(maxDelay int64) Strategy {
	if maxDelay < 0 {
		return Strategy{err: fmt.Errorf("%w: out-of-orderness bound is %d ms, want >= 0", ErrInvalidStrategy, maxDelay)}
	}
	return Strategy{newGenerator: func() Generator { return newBoundedOutOfOrderness(maxDelay) }}
}

// Monotonous is for inputs whose timestamps never decrease: bounded
// out-of-orderness with no delay, so the watermark is the greatest timestamp
// seen minus 1. A record behind it is late.
func Monotonous() Strategy { return BoundedOutOfOrderness(0) }

// NoWatermarks never emits a watermark (Flink's noWatermarks): event time
// does not advance downstream, except to MaxWatermark at the end of a
// bounded input.
func NoWatermarks() Strategy {
	return Strategy{newGenerator: func() Generator { return noWatermarks{} }}
}

// ForGenerator uses a custom generator; newGenerator is called once per
// split and must return a new Generator each time.
func ForGenerator(newGenerator func() Generator) Strategy {
	if newGenerator == nil {
		return Strategy{err: fmt.Errorf("%w: ForGenerator(nil)", ErrInvalidStrategy)}
	}
	return Strategy{newGenerator: newGenerator}
}

// WithIdleness returns s with an idleness timeout in milliseconds, as
// Flink's withIdleness: an input with no records for at least timeout is
// marked idle and no longer holds back the watermark; its next record makes
// it active again. timeout must be > 0. Idleness is measured by the `now`
// given to Splits.Periodic, so an input is marked idle between timeout and
// timeout plus one interval after its last record.
func (s Strategy) WithIdleness(timeout int64) Strategy {
	if s.err == nil && timeout <= 0 {
		s.err = fmt.Errorf("%w: idleness timeout is %d ms, want > 0", ErrInvalidStrategy, timeout)
	}
	s.idleTimeout = timeout
	return s
}

// IdleTimeout returns the idleness timeout in milliseconds; 0 means inputs
// are never idle.
func (s Strategy) IdleTimeout() int64 { return s.idleTimeout }

// Validate reports why s cannot be used, or nil.
func (s Strategy) Validate() error {
	if s.err != nil {
		return s.err
	}
	if s.newGenerator == nil {
		return fmt.Errorf("%w: no generator; use BoundedOutOfOrderness, Monotonous, NoWatermarks or ForGenerator", ErrInvalidStrategy)
	}
	return nil
}

// NewGenerator returns a new generator of the strategy, for one input.
func (s Strategy) NewGenerator() (Generator, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	g := s.newGenerator()
	if g == nil {
		return nil, fmt.Errorf("%w: the generator factory returned nil", ErrInvalidStrategy)
	}
	return g, nil
}

var (
	_ Generator = (*boundedOutOfOrderness)(nil)
	_ Generator = noWatermarks{}
)

// boundedOutOfOrderness is Flink's BoundedOutOfOrdernessWatermarks.
type boundedOutOfOrderness struct {
	maxDelay int64
	maxTS    int64 // MinWatermark until a record with a timestamp is seen
}

func newBoundedOutOfOrderness(maxDelay int64) *boundedOutOfOrderness {
	return &boundedOutOfOrderness{maxDelay: maxDelay, maxTS: MinWatermark}
}

func (g *boundedOutOfOrderness) OnEvent(ts int64) (int64, bool) {
	g.maxTS = max(g.maxTS, ts)
	return 0, false
}

func (g *boundedOutOfOrderness) OnPeriodic() (int64, bool) {
	if g.maxTS == MinWatermark {
		return 0, false
	}
	// maxTS - maxDelay - 1 without wrapping below MinWatermark; the bound
	// itself cannot overflow because maxDelay >= 0.
	if g.maxTS < MinWatermark+g.maxDelay+1 {
		return MinWatermark, true
	}
	return g.maxTS - g.maxDelay - 1, true
}

type noWatermarks struct{}

func (noWatermarks) OnEvent(int64) (int64, bool) { return 0, false }
func (noWatermarks) OnPeriodic() (int64, bool)   { return 0, false }
