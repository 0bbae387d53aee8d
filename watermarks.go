package weir

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/watermark"
)

// WatermarkGenerator generates watermarks from event timestamps: OnEvent
// for each record (return emit true for punctuated watermarks), OnPeriodic
// every 200 ms.
type WatermarkGenerator = watermark.Generator

// WatermarkStrategy says how records get their event-time timestamps and how
// watermarks follow them, as Flink's WatermarkStrategy.
type WatermarkStrategy[T any] struct {
	inner  watermark.Strategy
	assign func(rec T, sourceTimestamp int64) int64
	err    error
}

// ForBoundedOutOfOrderness expects records at most maxDelay late: the
// watermark is the largest timestamp seen minus maxDelay minus 1 ms.
func ForBoundedOutOfOrderness[T any](maxDelay time.Duration) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{inner: watermark.BoundedOutOfOrderness(maxDelay.Milliseconds())}
}

// ForMonotonousTimestamps expects timestamps that never decrease.
func ForMonotonousTimestamps[T any]() WatermarkStrategy[T] {
	return WatermarkStrategy[T]{inner: watermark.Monotonous()}
}

// ForGenerator uses a generator of the caller's, one per split.
func ForGenerator[T any](newGenerator func() WatermarkGenerator) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{inner: watermark.ForGenerator(newGenerator)}
}

// WithTimestampAssigner extracts a record's event time (epoch ms); the
// source's own timestamp is passed in (NoTimestamp when it has none).
// Without an assigner, records keep the source's timestamps.
func (s WatermarkStrategy[T]) WithTimestampAssigner(fn func(rec T, sourceTimestamp int64) int64) WatermarkStrategy[T] {
	s.assign = fn
	return s
}

// WithIdleness marks a split or input idle after timeout without records,
// so that it no longer holds the watermark back.
func (s WatermarkStrategy[T]) WithIdleness(timeout time.Duration) WatermarkStrategy[T] {
	if timeout <= 0 {
		s.err = fmt.Errorf("watermark idleness timeout %v: want > 0", timeout)
		return s
	}
	s.inner = s.inner.WithIdleness(timeout.Milliseconds())
	return s
}

func (s WatermarkStrategy[T]) validate() error {
	if s.err != nil {
		return s.err
	}
	return s.inner.Validate()
}

// NoTimestamp marks a record without an event-time timestamp.
const NoTimestamp = runtime.NoTimestamp

// watermarking generates a subtask's watermarks for a source or an
// assigner operator.
type watermarking[T any] struct {
	strategy WatermarkStrategy[T]
	splits   *watermark.Splits
	out      runtime.WatermarkOutput
	timers   *runtime.ProcessingTimers
	known    map[string]bool
}

func newWatermarking[T any](s WatermarkStrategy[T]) (*watermarking[T], error) {
	splits, err := watermark.NewSplits(s.inner)
	if err != nil {
		return nil, err
	}
	return &watermarking[T]{strategy: s, splits: splits, known: map[string]bool{}}, nil
}

func (w *watermarking[T]) bind(out runtime.WatermarkOutput, timers *runtime.ProcessingTimers) {
	w.out, w.timers = out, timers
	var tick func(now int64) error
	tick = func(now int64) error {
		if err := w.out.EmitWatermarkOutput(w.splits.Periodic(now)); err != nil {
			return err
		}
		w.timers.Register(now+watermark.DefaultInterval, tick)
		return nil
	}
	timers.Register(timers.Now()+watermark.DefaultInterval, tick)
}

func (w *watermarking[T]) timestamp(rec T, ts int64) int64 {
	if w.strategy.assign != nil {
		return w.strategy.assign(rec, ts)
	}
	return ts
}

// before runs before a record of split is emitted; it returns what must
// follow the record.
func (w *watermarking[T]) before(split string, ts int64) (after runtime.WatermarkOutput, out watermark.Output) {
	if ts == NoTimestamp {
		return nil, out
	}
	if !w.known[split] {
		w.known[split] = true
		if o, err := w.splits.AddSplit(split); err == nil {
			w.emit(o)
		}
	}
	out = w.splits.OnEvent(split, ts)
	if out.BecameActive {
		w.emit(watermark.Output{BecameActive: true})
		out.BecameActive = false
	}
	return w.out, out
}

func (w *watermarking[T]) emit(o watermark.Output) {
	if o.Empty() {
		return
	}
	if err := w.out.EmitWatermarkOutput(o); err != nil {
		runtime.Fail(err)
	}
}

func (w *watermarking[T]) release(split string) {
	if w.known[split] {
		delete(w.known, split)
		w.emit(w.splits.FinishSplit(split))
	}
}

// --- mid-stream assigner ------------------------------------------------------

// AssignTimestampsAndWatermarks gives the records new timestamps and
// watermarks from strategy; watermarks from upstream stop here (except the
// final one at the end of input), as in Flink.
func (s *Stream[T]) AssignTimestampsAndWatermarks(name string, strategy WatermarkStrategy[T]) *Stream[T] {
	if err := strategy.validate(); err != nil {
		s.env.fail(fmt.Errorf("operator %q: %w", name, err))
	}
	n, out := addOneInput(s, name, false, func(env *opEnv, out runtime.Output[T]) oneInputOp[T] {
		return &assignOp[T]{strategy: strategy, out: out, env: env}
	})
	n.assignsTimestamps = true
	connectTo(s, n, 0)
	return out
}

type assignOp[T any] struct {
	lifecycle
	strategy WatermarkStrategy[T]
	wm       *watermarking[T]
	out      runtime.Output[T]
	env      *opEnv
	bound    runtime.WatermarkOutput
	timers   *runtime.ProcessingTimers
}

func (o *assignOp[T]) InterceptsWatermarks() {}

func (o *assignOp[T]) BindWatermarks(out runtime.WatermarkOutput, timers *runtime.ProcessingTimers) {
	o.bound, o.timers = out, timers
}

func (o *assignOp[T]) Open() error {
	wm, err := newWatermarking(o.strategy)
	if err != nil {
		return err
	}
	o.wm = wm
	o.wm.bind(o.bound, o.timers)
	return nil
}

func (o *assignOp[T]) Emit(rec T, ts int64) {
	o.env.cursor.Current = o.env.index
	ts = o.wm.timestamp(rec, ts)
	after, out := o.wm.before("", ts)
	o.out.Emit(rec, ts)
	if after != nil && !out.Empty() {
		if err := after.EmitWatermarkOutput(out); err != nil {
			runtime.Fail(err)
		}
	}
}
