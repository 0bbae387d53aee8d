package weir

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/state"
)

// --- interval join -----------------------------------------------------------

// IntervalJoin joins the records of s with those of other that have the
// same key and whose timestamps lie within an interval of each other, as
// Flink's KeyedStream.intervalJoin: a record a of s and b of other join when
// a.ts + lower <= b.ts <= a.ts + upper (see Between). It needs event time:
// both inputs must carry timestamps and watermarks.
func (s *KeyedStream[K, A]) IntervalJoin[B any](other *KeyedStream[K, B]) *IntervalJoin[K, A, B] {
	return &IntervalJoin[K, A, B]{left: s, right: other}
}

// IntervalJoin is a join of two keyed streams waiting for its bounds.
type IntervalJoin[K comparable, A, B any] struct {
	left  *KeyedStream[K, A]
	right *KeyedStream[K, B]
}

// Between sets the interval, relative to the left record's timestamp, in
// which right records join it: both bounds are inclusive (see
// LowerBoundExclusive and UpperBoundExclusive) and lower must not exceed
// upper. Negative bounds reach into the past.
func (j *IntervalJoin[K, A, B]) Between(lower, upper time.Duration) *IntervalJoined[K, A, B] {
	return &IntervalJoined[K, A, B]{join: j, lower: lower.Milliseconds(), upper: upper.Milliseconds()}
}

// IntervalJoined is an interval join with its bounds, ready for Process.
type IntervalJoined[K comparable, A, B any] struct {
	join                      *IntervalJoin[K, A, B]
	lower, upper              int64
	lowerExclusive, upperExcl bool
}

// LowerBoundExclusive excludes the lower bound from the interval.
func (j *IntervalJoined[K, A, B]) LowerBoundExclusive() *IntervalJoined[K, A, B] {
	j.lowerExclusive = true
	return j
}

// UpperBoundExclusive excludes the upper bound from the interval.
func (j *IntervalJoined[K, A, B]) UpperBoundExclusive() *IntervalJoined[K, A, B] {
	j.upperExcl = true
	return j
}

// ProcessJoinFunction receives every joined pair of an interval join, as
// Flink's ProcessJoinFunction. Records it collects carry the larger of the
// two timestamps (ctx.Timestamp). Optional hooks: Open(*KeyedContext[K])
// error, Close() error are not offered: the join owns its keyed state.
type ProcessJoinFunction[A, B, OUT any] interface {
	ProcessElement(ctx *JoinContext, left A, right B, out Collector[OUT]) error
}

// JoinFunc adapts a function of a pair to a ProcessJoinFunction.
func JoinFunc[A, B, OUT any](fn func(left A, right B) OUT) ProcessJoinFunction[A, B, OUT] {
	return joinFunc[A, B, OUT](fn)
}

type joinFunc[A, B, OUT any] func(A, B) OUT

func (f joinFunc[A, B, OUT]) ProcessElement(_ *JoinContext, a A, b B, out Collector[OUT]) error {
	out.Collect(f(a, b))
	return nil
}

// JoinContext tells a ProcessJoinFunction the timestamps of the pair.
type JoinContext struct {
	*Context
	left, right int64
}

// LeftTimestamp returns the timestamp of the left record.
func (c *JoinContext) LeftTimestamp() int64 { return c.left }

// RightTimestamp returns the timestamp of the right record.
func (c *JoinContext) RightTimestamp() int64 { return c.right }

// Process applies fn to every joined pair. Each side's records are kept in
// keyed state (a map from timestamp to records) until the watermark passes
// the last time a record of the other side could still join them, then
// dropped by an event-time timer; records behind the watermark when they
// arrive are late and dropped, as in Flink.
func (j *IntervalJoined[K, A, B]) Process[OUT any](name string, fn ProcessJoinFunction[A, B, OUT]) *Stream[OUT] {
	lower, upper := j.lower, j.upper
	if j.lowerExclusive {
		lower++
	}
	if j.upperExcl {
		upper--
	}
	env := j.join.left.in.env
	if fn == nil {
		env.fail(fmt.Errorf("operator %q: nil join function", name))
	}
	if lower > upper {
		env.fail(fmt.Errorf("operator %q: interval join bounds [%d ms, %d ms] (after exclusions): the lower bound must not exceed the upper one", name, lower, upper))
	}
	f := &intervalJoinFunction[K, A, B, OUT]{fn: fn, lower: lower, upper: upper}
	return j.join.left.Connect(j.join.right).Process(name, KeyedCoProcessFunction[K, A, B, OUT](f))
}

// intervalJoinFunction is the keyed co-process function of an interval
// join. Per key it buffers each side by timestamp.
type intervalJoinFunction[K comparable, A, B, OUT any] struct {
	fn           ProcessJoinFunction[A, B, OUT]
	lower, upper int64

	left  state.Map[int64, []A]
	right state.Map[int64, []B]
	jctx  JoinContext
}

func (f *intervalJoinFunction[K, A, B, OUT]) Open(ctx *KeyedContext[K]) (err error) {
	if f.left, err = Map[int64, []A](ctx, "interval-join-left"); err != nil {
		return err
	}
	f.right, err = Map[int64, []B](ctx, "interval-join-right")
	return err
}

// cleanup returns when a left and a right record of timestamp ts can no
// longer join anything.
func (f *intervalJoinFunction[K, A, B, OUT]) leftCleanup(ts int64) int64 {
	return ts + max(f.upper, 0)
}

func (f *intervalJoinFunction[K, A, B, OUT]) rightCleanup(ts int64) int64 {
	return ts + max(-f.lower, 0)
}

var errJoinNoTimestamp = errors.New("interval join: a record has no timestamp: assign event-time timestamps and watermarks upstream (WatermarkStrategy)")

func (f *intervalJoinFunction[K, A, B, OUT]) ProcessElement1(ctx *KeyedContext[K], a A, out Collector[OUT]) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		return errJoinNoTimestamp
	}
	if ts < ctx.CurrentWatermark() {
		return nil // late
	}
	list, _ := f.left.Get(ts)
	f.left.Put(ts, append(slices.Clip(list), a))
	for tb, bs := range f.right.All() {
		if tb < ts+f.lower || tb > ts+f.upper {
			continue
		}
		for _, b := range bs {
			if err := f.emit(ctx, a, b, ts, tb, out); err != nil {
				return err
			}
		}
	}
	ctx.TimerService().RegisterEventTimeTimer(f.leftCleanup(ts))
	return nil
}

func (f *intervalJoinFunction[K, A, B, OUT]) ProcessElement2(ctx *KeyedContext[K], b B, out Collector[OUT]) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		return errJoinNoTimestamp
	}
	if ts < ctx.CurrentWatermark() {
		return nil // late
	}
	list, _ := f.right.Get(ts)
	f.right.Put(ts, append(slices.Clip(list), b))
	for ta, as := range f.left.All() {
		if ts < ta+f.lower || ts > ta+f.upper {
			continue
		}
		for _, a := range as {
			if err := f.emit(ctx, a, b, ta, ts, out); err != nil {
				return err
			}
		}
	}
	ctx.TimerService().RegisterEventTimeTimer(f.rightCleanup(ts))
	return nil
}

// emit hands a pair to the user function; what it collects carries the
// larger timestamp.
func (f *intervalJoinFunction[K, A, B, OUT]) emit(ctx *KeyedContext[K], a A, b B, ta, tb int64, out Collector[OUT]) error {
	saved := ctx.ts
	ctx.ts = max(ta, tb)
	f.jctx = JoinContext{Context: &ctx.Context, left: ta, right: tb}
	err := f.fn.ProcessElement(&f.jctx, a, b, out)
	ctx.ts = saved
	return err
}

// OnTimer drops the records whose time to join has passed: the left ones
// of timestamp t-max(upper,0) and the right ones of t-max(-lower,0) (a
// timer at t serves both sides).
func (f *intervalJoinFunction[K, A, B, OUT]) OnTimer(_ *OnTimerContext[K], t int64, _ Collector[OUT]) error {
	f.left.Remove(t - max(f.upper, 0))
	f.right.Remove(t - max(-f.lower, 0))
	return nil
}
