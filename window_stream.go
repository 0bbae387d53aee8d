package weir

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// WindowedStream is a keyed stream cut into windows by an assigner, as
// Flink's WindowedStream: configure it (Trigger, AllowedLateness,
// SideOutputLateData) and end it with a window function (Reduce,
// Aggregate, Process, AggregateProcess).
type WindowedStream[K comparable, T any, W Window] struct {
	in        *KeyedStream[K, T]
	assigner  WindowAssigner[W]
	trigger   Trigger[T, W]
	lateness  time.Duration
	lateTag   *OutputTag[T]
	noSlicing bool
	all       bool // WindowAll: one subtask
}

// Window cuts the keyed stream into the windows of assigner. The default
// trigger is EventTimeTrigger for event-time assigners,
// ProcessingTimeTrigger for processing-time ones, and a trigger that never
// fires for GlobalWindows.
func (s *KeyedStream[K, T]) Window[W Window](assigner WindowAssigner[W]) *WindowedStream[K, T, W] {
	return &WindowedStream[K, T, W]{in: s, assigner: assigner}
}

// Trigger replaces the assigner's default trigger.
func (w *WindowedStream[K, T, W]) Trigger(t Trigger[T, W]) *WindowedStream[K, T, W] {
	w.trigger = t
	return w
}

// AllowedLateness keeps each event-time window's state until the watermark
// passes its end plus d: a record late by at most d is still added, and
// the window fires again (a late firing). Records later than that are
// dropped, or sent to the side output of SideOutputLateData. Default 0.
func (w *WindowedStream[K, T, W]) AllowedLateness(d time.Duration) *WindowedStream[K, T, W] {
	w.lateness = d
	return w
}

// SideOutputLateData sends the records that arrive after their windows'
// state is gone (later than the allowed lateness) to the side output tag;
// read it with SideOutput(tag) on the window function's stream.
func (w *WindowedStream[K, T, W]) SideOutputLateData(tag OutputTag[T]) *WindowedStream[K, T, W] {
	w.lateTag = &tag
	return w
}

// DisableSlicing keeps one state entry per sliding window. By default a
// sliding window with Reduce or Aggregate (and the default trigger, no
// allowed lateness) is sliced into panes of gcd(size, slide): a record
// updates one pane, and a window's result combines its panes when it
// fires. A tumbling window is one pane (the same operator: it keeps the
// pane a key's records update in memory). Slicing changes nothing in the
// results; this switch exists to measure it.
func (w *WindowedStream[K, T, W]) DisableSlicing() *WindowedStream[K, T, W] {
	w.noSlicing = true
	return w
}

// ProcessWindowFunction computes the result of a window from all its
// records, as Flink's ProcessWindowFunction. Optional hooks:
// Open(*KeyedContext[K]) error (keyed state of the function's own),
// Close() error. Each subtask gets its own shallow copy of the function.
type ProcessWindowFunction[K comparable, IN, OUT any, W Window] interface {
	Process(ctx *WindowContext[K, W], elements []IN, out Collector[OUT]) error
}

// Reduce combines the records of each window with fn and emits the result
// when the window fires, with the window's max timestamp.
func (w *WindowedStream[K, T, W]) Reduce(name string, fn func(acc, v T) T) *Stream[T] {
	tc, err := codec.Of[T]()
	if err != nil {
		w.env().fail(fmt.Errorf("operator %q: window contents: %w", name, err))
	}
	if fn == nil {
		w.env().fail(fmt.Errorf("operator %q: nil reduce function", name))
	}
	if w.sliced() {
		return buildSliced(any(w).(*WindowedStream[K, T, TimeWindow]), name, reducePanes[K, T](fn, tc))
	}
	return buildWindow(w, name, reduceContents[K, W, T](fn, tc))
}

// Aggregate folds the records of each window with f (incrementally: one
// accumulator per window) and emits f's result when the window fires.
func (w *WindowedStream[K, T, W]) Aggregate[ACC, R any](name string, f state.AggregateFunction[T, ACC, R]) *Stream[R] {
	ac, err := codec.Of[ACC]()
	if err != nil {
		w.env().fail(fmt.Errorf("operator %q: window accumulator: %w", name, err))
	}
	if f == nil {
		w.env().fail(fmt.Errorf("operator %q: nil aggregate function", name))
	}
	if w.sliced() {
		return buildSliced(any(w).(*WindowedStream[K, T, TimeWindow]), name, aggregatePanes[K, T, ACC, R](f, ac))
	}
	return buildWindow(w, name, aggregateContents[K, W, T, ACC, R](f, ac))
}

// Process keeps the records of each window and gives them all to fn when
// the window fires.
func (w *WindowedStream[K, T, W]) Process[OUT any](name string, fn ProcessWindowFunction[K, T, OUT, W]) *Stream[OUT] {
	tc, err := codec.Of[T]()
	if err != nil {
		w.env().fail(fmt.Errorf("operator %q: window contents: %w", name, err))
	}
	if fn == nil {
		w.env().fail(fmt.Errorf("operator %q: nil window function", name))
	}
	return buildWindowFn(w, name, collectContents[K, W, T](tc), func() (any, func(*WindowContext[K, W], []T, Collector[OUT]) error) {
		f := cloneFunc(fn)
		return f, func(ctx *WindowContext[K, W], elems []T, out Collector[OUT]) error { return f.Process(ctx, elems, out) }
	})
}

// AggregateProcess aggregates each window incrementally with f and gives
// the result, as a single element, to fn with the window, as Flink's
// aggregate(AggregateFunction, ProcessWindowFunction).
func (w *WindowedStream[K, T, W]) AggregateProcess[ACC, R, OUT any](name string, f state.AggregateFunction[T, ACC, R], fn ProcessWindowFunction[K, R, OUT, W]) *Stream[OUT] {
	ac, err := codec.Of[ACC]()
	if err != nil {
		w.env().fail(fmt.Errorf("operator %q: window accumulator: %w", name, err))
	}
	if f == nil || fn == nil {
		w.env().fail(fmt.Errorf("operator %q: nil aggregate or window function", name))
	}
	return buildWindowFn(w, name, aggregateContents[K, W, T, ACC, R](f, ac), func() (any, func(*WindowContext[K, W], R, Collector[OUT]) error) {
		pf := cloneFunc(fn)
		return pf, func(ctx *WindowContext[K, W], r R, out Collector[OUT]) error { return pf.Process(ctx, []R{r}, out) }
	})
}

func (w *WindowedStream[K, T, W]) env() *Environment { return w.in.in.env }

// sliced reports whether Reduce and Aggregate slice the windows into
// panes.
func (w *WindowedStream[K, T, W]) sliced() bool {
	sp, ok := w.assigner.(specified)
	return ok && (sp.spec().kind == "sliding" || sp.spec().kind == "tumbling") && sp.spec().err == nil && w.trigger == nil && w.lateness == 0 && !w.noSlicing
}

// config validates the windowed stream for the operator name and returns
// the operator's configuration; errors go to the environment (Execute
// returns them).
func (w *WindowedStream[K, T, W]) config(name string) *windowConfig[K, T, W] {
	env := w.env()
	fail := func(err error) { env.fail(fmt.Errorf("operator %q: %w", name, err)) }
	cfg := &windowConfig[K, T, W]{assigner: w.assigner, trigger: w.trigger, lateness: w.lateness.Milliseconds(),
		lateTag: w.lateTag, key: w.in.key, codec: w.in.codec}
	if w.assigner == nil {
		fail(fmt.Errorf("nil window assigner"))
		return cfg
	}
	cfg.eventTime = w.assigner.IsEventTime()
	sp, builtin := w.assigner.(specified)
	if builtin {
		if err := sp.spec().err; err != nil {
			fail(err)
		}
		cfg.merging = sp.spec().kind == "session"
	}
	if w.lateness < 0 {
		fail(fmt.Errorf("allowed lateness %v, want >= 0", w.lateness))
	}
	if w.lateness > 0 && !cfg.eventTime {
		fail(fmt.Errorf("allowed lateness applies to event-time windows only"))
	}
	if cfg.trigger == nil {
		switch {
		case builtin && sp.spec().kind == "global":
			cfg.trigger = neverTrigger[T, W]{}
		case cfg.eventTime:
			cfg.trigger = EventTimeTrigger[T, W]()
		default:
			cfg.trigger = ProcessingTimeTrigger[T, W]()
		}
	} else if v, ok := cfg.trigger.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			fail(err)
		}
	}
	if cfg.eventTime && !hasTimestamps(w.in.in) {
		fail(fmt.Errorf("event-time windows need timestamps and watermarks: give the source a WatermarkStrategy or call AssignTimestampsAndWatermarks upstream (or use a processing-time assigner)"))
	}
	if _, err := windowCodec[W](); err != nil {
		fail(fmt.Errorf("window type: %w", err))
	}
	return cfg
}

// buildWindow adds a window operator that emits the contents' result as it
// is (Reduce, Aggregate).
func buildWindow[K comparable, T any, W Window, R any](w *WindowedStream[K, T, W], name string, mk contentsFactory[K, W, T, R]) *Stream[R] {
	return buildWindowFn(w, name, mk, func() (any, func(*WindowContext[K, W], R, Collector[R]) error) {
		return nil, func(_ *WindowContext[K, W], r R, out Collector[R]) error {
			out.Collect(r)
			return nil
		}
	})
}

// buildWindowFn adds a window operator; newFn returns, per subtask, the
// user's function (for its hooks; nil if none) and what a firing does.
func buildWindowFn[K comparable, T any, W Window, R, OUT any](w *WindowedStream[K, T, W], name string, mk contentsFactory[K, W, T, R], newFn func() (any, func(*WindowContext[K, W], R, Collector[OUT]) error)) *Stream[OUT] {
	cfg := w.config(name)
	out := addKeyed(w.in, name, func(env *opEnv, out runtime.Output[OUT]) oneInputOp[T] {
		fn, emit := newFn()
		return newWindowOp(env, cfg, fn, mk, emit, out)
	})
	if w.all {
		out.Parallelism(1)
	}
	return out
}

// hasTimestamps reports whether every path into s passes a source with a
// watermark strategy or a timestamp assigner.
func hasTimestamps[T any](s *Stream[T]) bool {
	env := s.env
	seen := map[*nodeBase]bool{}
	var ok func(n *nodeBase) bool
	ok = func(n *nodeBase) bool {
		if seen[n] {
			return true
		}
		seen[n] = true
		nd := env.nodes[n.id]
		if src, isSrc := nd.(interface{ hasWatermarkStrategy() bool }); isSrc {
			return src.hasWatermarkStrategy()
		}
		if n.assignsTimestamps {
			return true
		}
		inputs := 0
		for _, e := range env.edges {
			c := e.common()
			if c.to == n {
				inputs++
				if !ok(c.from) {
					return false
				}
			}
		}
		return inputs > 0
	}
	for _, p := range s.ports {
		if !ok(p.node) {
			return false
		}
	}
	return true
}

func (n *sourceNode[T]) hasWatermarkStrategy() bool { return n.strategy != nil }

// --- non-keyed windows -----------------------------------------------------------

// AllWindowedStream is a non-keyed stream cut into windows; its window
// function runs in one subtask, as Flink's windowAll.
type AllWindowedStream[T any, W Window] struct {
	w *WindowedStream[uint8, T, W]
}

// WindowAll cuts the whole stream into the windows of assigner; the window
// operator has parallelism 1.
func (s *Stream[T]) WindowAll[W Window](assigner WindowAssigner[W]) *AllWindowedStream[T, W] {
	w := s.KeyBy(func(T) uint8 { return 0 }).Window(assigner)
	w.all = true
	return &AllWindowedStream[T, W]{w: w}
}

// Trigger replaces the default trigger (see WindowedStream.Trigger).
func (a *AllWindowedStream[T, W]) Trigger(t Trigger[T, W]) *AllWindowedStream[T, W] {
	a.w.Trigger(t)
	return a
}

// AllowedLateness: see WindowedStream.AllowedLateness.
func (a *AllWindowedStream[T, W]) AllowedLateness(d time.Duration) *AllWindowedStream[T, W] {
	a.w.AllowedLateness(d)
	return a
}

// SideOutputLateData: see WindowedStream.SideOutputLateData.
func (a *AllWindowedStream[T, W]) SideOutputLateData(tag OutputTag[T]) *AllWindowedStream[T, W] {
	a.w.SideOutputLateData(tag)
	return a
}

// DisableSlicing: see WindowedStream.DisableSlicing.
func (a *AllWindowedStream[T, W]) DisableSlicing() *AllWindowedStream[T, W] {
	a.w.DisableSlicing()
	return a
}

// Reduce: see WindowedStream.Reduce.
func (a *AllWindowedStream[T, W]) Reduce(name string, fn func(acc, v T) T) *Stream[T] {
	return a.w.Reduce(name, fn)
}

// Aggregate: see WindowedStream.Aggregate.
func (a *AllWindowedStream[T, W]) Aggregate[ACC, R any](name string, f state.AggregateFunction[T, ACC, R]) *Stream[R] {
	return a.w.Aggregate(name, f)
}

// ProcessAllWindowFunction computes the result of a window of a non-keyed
// stream from all its records.
type ProcessAllWindowFunction[IN, OUT any, W Window] interface {
	Process(ctx *AllWindowContext[W], elements []IN, out Collector[OUT]) error
}

// AllWindowContext is the context of a ProcessAllWindowFunction.
type AllWindowContext[W Window] struct {
	*Context
	window W
}

// Window returns the window that fired.
func (c *AllWindowContext[W]) Window() W { return c.window }

// Process: see WindowedStream.Process.
func (a *AllWindowedStream[T, W]) Process[OUT any](name string, fn ProcessAllWindowFunction[T, OUT, W]) *Stream[OUT] {
	return a.w.Process(name, &allWindowAdapter[T, OUT, W]{fn: fn})
}

type allWindowAdapter[T, OUT any, W Window] struct {
	fn  ProcessAllWindowFunction[T, OUT, W]
	ctx AllWindowContext[W]
}

func (a *allWindowAdapter[T, OUT, W]) Open(ctx *KeyedContext[uint8]) error {
	a.fn = cloneFunc(a.fn)
	a.ctx.Context = &ctx.Context
	return openClose[*Context]{a.fn, &ctx.Context}.open()
}

func (a *allWindowAdapter[T, OUT, W]) Close() error { return openClose[*Context]{a.fn, nil}.close() }

func (a *allWindowAdapter[T, OUT, W]) Process(ctx *WindowContext[uint8, W], elems []T, out Collector[OUT]) error {
	a.ctx.window = ctx.Window()
	return a.fn.Process(&a.ctx, elems, out)
}
