package weir

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/window"
	"github.com/weirstream/weir/state"
)

// WindowContext is the context of a window function: the keyed context of
// the window's key, and the window.
type WindowContext[K comparable, W Window] struct {
	*KeyedContext[K]
	window W
	pt     *runtime.ProcessingTimers
}

// Window returns the window that fired.
func (c *WindowContext[K, W]) Window() W { return c.window }

// CurrentProcessingTime returns the task's processing time.
func (c *WindowContext[K, W]) CurrentProcessingTime() int64 { return c.pt.Now() }

// windowContents holds the contents of the windows of the current key, in
// namespaced keyed state (namespace: the window): R is what a firing reads
// (the reduced value, the aggregate's result, the records).
type windowContents[W Window, T, R any] interface {
	setWindow(w W)
	add(v T)
	get() (R, bool)
	clear()
	merge(target W, sources []W)
}

// contentsFactory registers the contents' state on a backend.
type contentsFactory[K comparable, W Window, T, R any] func(b statebackend.KeyedBackend[K], wc codec.Codec[W]) (windowContents[W, T, R], error)

const contentsState = "_window_contents"

type reducingContents[K comparable, W Window, T any] struct{ s nsReducing[K, W, T] }

func (c reducingContents[K, W, T]) setWindow(w W)  { c.s.SetCurrentNamespace(w) }
func (c reducingContents[K, W, T]) add(v T)        { c.s.Add(v) }
func (c reducingContents[K, W, T]) get() (T, bool) { return c.s.Get() }
func (c reducingContents[K, W, T]) clear()         { c.s.Clear() }
func (c reducingContents[K, W, T]) merge(target W, sources []W) {
	c.s.MergeNamespaces(target, sources...)
}

func reduceContents[K comparable, W Window, T any](reduce func(acc, v T) T, tc codec.Codec[T]) contentsFactory[K, W, T, T] {
	return func(b statebackend.KeyedBackend[K], wc codec.Codec[W]) (windowContents[W, T, T], error) {
		s, err := newNSReducing[K, W, T](b, contentsState, reduce, wc, tc)
		if err != nil {
			return nil, err
		}
		return reducingContents[K, W, T]{s}, nil
	}
}

type aggregatingContents[K comparable, W Window, T, R any] struct{ s nsAggregating[K, W, T, R] }

func (c aggregatingContents[K, W, T, R]) setWindow(w W)  { c.s.SetCurrentNamespace(w) }
func (c aggregatingContents[K, W, T, R]) add(v T)        { c.s.Add(v) }
func (c aggregatingContents[K, W, T, R]) get() (R, bool) { return c.s.Get() }
func (c aggregatingContents[K, W, T, R]) clear()         { c.s.Clear() }
func (c aggregatingContents[K, W, T, R]) merge(target W, sources []W) {
	c.s.MergeNamespaces(target, sources...)
}

func aggregateContents[K comparable, W Window, T, ACC, R any](f state.AggregateFunction[T, ACC, R], ac codec.Codec[ACC]) contentsFactory[K, W, T, R] {
	return func(b statebackend.KeyedBackend[K], wc codec.Codec[W]) (windowContents[W, T, R], error) {
		s, err := newNSAggregating[K, W, T, ACC, R](b, contentsState, f, wc, ac)
		if err != nil {
			return nil, err
		}
		return aggregatingContents[K, W, T, R]{s}, nil
	}
}

type listContents[K comparable, W Window, T any] struct{ s nsList[K, W, T] }

func (c listContents[K, W, T]) setWindow(w W) { c.s.SetCurrentNamespace(w) }
func (c listContents[K, W, T]) add(v T)       { c.s.Add(v) }
func (c listContents[K, W, T]) get() ([]T, bool) {
	l := c.s.Get()
	return l, len(l) > 0
}
func (c listContents[K, W, T]) clear()                      { c.s.Clear() }
func (c listContents[K, W, T]) merge(target W, sources []W) { c.s.MergeNamespaces(target, sources...) }

func collectContents[K comparable, W Window, T any](tc codec.Codec[T]) contentsFactory[K, W, T, []T] {
	return func(b statebackend.KeyedBackend[K], wc codec.Codec[W]) (windowContents[W, T, []T], error) {
		s, err := newNSList[K, W, T](b, contentsState, wc, tc)
		if err != nil {
			return nil, err
		}
		return listContents[K, W, T]{s}, nil
	}
}

// windowConfig is what a WindowedStream decided, shared by the subtasks.
type windowConfig[K comparable, T any, W Window] struct {
	assigner  WindowAssigner[W]
	trigger   Trigger[T, W]
	lateness  int64
	lateTag   *OutputTag[T]
	eventTime bool
	merging   bool // session windows
	key       func(T) K
	codec     codec.Codec[K]
}

// windowOp is the window operator (Flink's WindowOperator): it assigns each
// record to windows, keeps their contents in namespaced keyed state, asks
// the trigger when to fire and purge, and removes a window's state at its
// cleanup time (end + allowed lateness). Session windows merge: the
// windows in flight of each key are kept in state too (_window_set), so
// that merges survive a restore. Everything runs on the task goroutine.
type windowOp[K comparable, T any, W Window, R, OUT any] struct {
	cfg      *windowConfig[K, T, W]
	cleanup  window.Cleanup // when a window's state goes (cfg's time and lateness)
	env      *opEnv
	ctx      *KeyedContext[K]
	wctx     WindowContext[K, W]
	tctx     triggerCtx[K, W]
	fn       any // the user's function, for its hooks
	mk       contentsFactory[K, W, T, R]
	emit     func(ctx *WindowContext[K, W], r R, out Collector[OUT]) error
	coll     collector[OUT]
	contents windowContents[W, T, R]
	timers   *internalTimers[K, W]
	trigSt   nsValue[K, W, int64]
	set      nsValue[K, W, bool] // merging only: the windows in flight
	late     Collector[T]
	pt       *runtime.ProcessingTimers
	assigned []W
	setBuf   []W
	// sets holds, for the keys seen lately (at most maxHotKeys), a copy
	// of the key's _window_set entries (merging only): writes go to both,
	// and a record reads the copy instead of listing the key's entries in
	// state (a prefix scan on pebble, over the entries that merges
	// deleted). Empty after a restore: filled from state on first use.
	sets map[K][]W
	// mergeSessions is window.MergeSession when W is TimeWindow (merging
	// assigners are session windows).
	mergeSessions func(existing []W, nw W) (W, []W)
}

func newWindowOp[K comparable, T any, W Window, R, OUT any](env *opEnv, cfg *windowConfig[K, T, W], fn any, mk contentsFactory[K, W, T, R],
	emit func(ctx *WindowContext[K, W], r R, out Collector[OUT]) error, out runtime.Output[OUT]) *windowOp[K, T, W, R, OUT] {
	o := &windowOp[K, T, W, R, OUT]{cfg: cfg, env: env, fn: fn, mk: mk, emit: emit,
		cleanup: window.Cleanup{EventTime: cfg.eventTime, Lateness: cfg.lateness}}
	o.ctx = &KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, cfg.codec)}
	o.wctx.KeyedContext = o.ctx
	o.coll = newCollector(out, &o.ctx.ts, env)
	return o
}

// BindWatermarks implements runtime.WatermarkEmitter: the operator emits no
// watermarks of its own but gets the task's processing-time service.
func (o *windowOp[K, T, W, R, OUT]) BindWatermarks(_ runtime.WatermarkOutput, pt *runtime.ProcessingTimers) {
	o.pt = pt
}

func (o *windowOp[K, T, W, R, OUT]) Open() error {
	if err := o.ctx.keyed.open(); err != nil {
		return err
	}
	o.wctx.pt = o.pt
	wc, err := windowCodec[W]()
	if err != nil {
		return fmt.Errorf("window codec: %w", err)
	}
	b := o.ctx.keyed.backend
	if o.contents, err = o.mk(b, wc); err != nil {
		return err
	}
	if o.trigSt, err = newNSValue[K, W, int64](b, "_window_trigger", wc, codec.Int64()); err != nil {
		return err
	}
	if o.cfg.merging {
		if o.set, err = newNSValue[K, W, bool](b, "_window_set", wc, codec.Bool()); err != nil {
			return err
		}
		o.sets = make(map[K][]W)
		var ok bool
		if o.mergeSessions, ok = any(window.MergeSession).(func([]W, W) (W, []W)); !ok {
			return fmt.Errorf("merging windows of type %T: only session windows (TimeWindow) merge", *new(W))
		}
	}
	o.timers, err = newInternalTimers(o.ctx.keyed, "", wc, o.pt, o.onEventTime, o.onProcessingTime)
	if err != nil {
		return err
	}
	o.tctx = triggerCtx[K, W]{op: &windowTimers[K, W]{timers: o.timers, trig: o.trigSt, pt: o.pt, env: o.env}}
	if o.cfg.lateTag != nil {
		if o.late, err = SideOutput(o.ctx, *o.cfg.lateTag); err != nil {
			return err
		}
	}
	return openClose[*KeyedContext[K]]{o.fn, o.ctx}.open()
}

func (o *windowOp[K, T, W, R, OUT]) Finish() error { return nil }
func (o *windowOp[K, T, W, R, OUT]) Close() error {
	err := openClose[*KeyedContext[K]]{o.fn, o.ctx}.close()
	return errors.Join(err, o.ctx.keyed.close())
}

// SnapshotState and the notifications are the function's (its hooks, its
// operator state); the task delivers the keyed state's (runtime.KeyedState).
func (o *windowOp[K, T, W, R, OUT]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.env.ops.snapshot(id, o.fn)
}
func (o *windowOp[K, T, W, R, OUT]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *windowOp[K, T, W, R, OUT]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}

// ProcessWatermark implements runtime.WatermarkHandler: event-time timers
// (triggers, cleanup) fire before the watermark goes on.
func (o *windowOp[K, T, W, R, OUT]) ProcessWatermark(wm int64) error {
	return o.timers.AdvanceWatermark(wm)
}

// CurrentProcessingTime implements WindowAssignerContext.
func (o *windowOp[K, T, W, R, OUT]) CurrentProcessingTime() int64 { return o.pt.Now() }

func (o *windowOp[K, T, W, R, OUT]) watermark() int64 { return o.env.cursor.Watermark }

func (o *windowOp[K, T, W, R, OUT]) cleanupTime(w W) int64 { return o.cleanup.Time(w.MaxTimestamp()) }

// isWindowLate reports whether w's state is gone already (event time).
func (o *windowOp[K, T, W, R, OUT]) isWindowLate(w W) bool {
	return o.cleanup.Gone(w.MaxTimestamp(), o.watermark())
}

func (o *windowOp[K, T, W, R, OUT]) Emit(rec T, ts int64) {
	o.env.cursor.Current = o.env.index
	o.ctx.keyed.setKey(o.cfg.key(rec))
	at := ts
	if o.cfg.eventTime {
		if ts == NoTimestamp {
			runtime.Fail(fmt.Errorf("event-time window got a record without a timestamp: give the source a WatermarkStrategy (WithTimestampAssigner) or call AssignTimestampsAndWatermarks upstream"))
		}
	} else {
		at = o.pt.Now()
	}
	o.assigned = append(o.assigned[:0], o.cfg.assigner.AssignWindows(at, o)...)
	added := false
	for _, w := range o.assigned {
		if o.cfg.merging {
			var ok bool
			if w, ok = o.mergeInto(w); !ok {
				continue
			}
		} else if o.isWindowLate(w) {
			continue
		}
		added = true
		o.contents.setWindow(w)
		o.contents.add(rec)
		o.tctx.window = w
		o.apply(w, o.cfg.trigger.OnElement(rec, ts, w, &o.tctx))
		o.registerCleanup(w)
	}
	if !added && o.cleanup.Dropped(ts, o.watermark()) {
		// Late beyond the allowed lateness.
		if o.late != nil {
			o.ctx.ts = ts
			o.late.Collect(rec)
		}
	}
}

// apply carries out a trigger's decision for window w, whose contents are
// current.
func (o *windowOp[K, T, W, R, OUT]) apply(w W, r TriggerResult) {
	if r.fires() {
		if res, ok := o.contents.get(); ok {
			o.ctx.ts = w.MaxTimestamp()
			o.wctx.window = w
			if err := o.emit(&o.wctx, res, &o.coll); err != nil {
				runtime.Fail(fmt.Errorf("window %v: %w", w, err))
			}
		}
	}
	if r.purges() {
		o.contents.clear()
	}
}

func (o *windowOp[K, T, W, R, OUT]) registerCleanup(w W) {
	if !o.cleanup.NeedsTimer(w.MaxTimestamp()) {
		return // the global window: kept for good
	}
	t := o.cleanupTime(w)
	if o.cfg.eventTime {
		o.timers.RegisterEventTime(w, t)
	} else {
		o.timers.RegisterProcessingTime(w, t)
	}
}

func (o *windowOp[K, T, W, R, OUT]) deleteCleanup(w W) {
	t := o.cleanupTime(w)
	if o.cfg.eventTime {
		o.timers.DeleteEventTime(w, t)
	} else {
		o.timers.DeleteProcessingTime(w, t)
	}
}

// mergeInto adds the new session window nw to the current key's windows,
// merging the windows it overlaps (their contents, trigger state and
// timers), and returns the window the record belongs to; false when that
// window is late.
func (o *windowOp[K, T, W, R, OUT]) mergeInto(nw W) (W, bool) {
	key := o.ctx.keyed.backend.CurrentKey()
	cur := o.sessionsOf(key)
	o.setBuf = append(o.setBuf[:0], cur...)
	result, merged := o.mergeSessions(o.setBuf, nw)
	if o.isWindowLate(result) {
		return result, false
	}
	o.sets[key], merged = window.MergeSet(cur, result, merged)
	if len(merged) > 0 {
		var count int64
		for _, m := range merged {
			o.trigSt.SetCurrentNamespace(m)
			n, _ := o.trigSt.Value()
			count += n
			o.tctx.window = m
			o.cfg.trigger.Clear(m, &o.tctx)
			o.deleteCleanup(m)
			o.trigSt.SetCurrentNamespace(m)
			o.trigSt.Clear()
			o.set.SetCurrentNamespace(m)
			o.set.Clear()
		}
		o.contents.merge(result, merged)
		o.trigSt.SetCurrentNamespace(result)
		if n, _ := o.trigSt.Value(); n+count > 0 {
			o.trigSt.Update(n + count)
		}
		o.tctx.window = result
		if mt, ok := o.cfg.trigger.(MergingTrigger[W]); ok {
			mt.OnMerge(result, &o.tctx)
		}
	}
	o.set.SetCurrentNamespace(result)
	o.set.Update(true)
	return result, true
}

// sessionsOf returns the session windows in flight of key, the current
// key (o.sets, filled from state when key is not in it).
func (o *windowOp[K, T, W, R, OUT]) sessionsOf(key K) []W {
	if cur, ok := o.sets[key]; ok {
		return cur
	}
	if len(o.sets) >= maxHotKeys {
		clear(o.sets)
	}
	cur := slices.Collect(o.set.Namespaces())
	o.sets[key] = cur
	return cur
}

// inFlight reports whether w is a window of the current key: a merged
// session window's timers may still fire once.
func (o *windowOp[K, T, W, R, OUT]) inFlight(w W) bool {
	if !o.cfg.merging {
		return true
	}
	return slices.Contains(o.sessionsOf(o.ctx.keyed.backend.CurrentKey()), w)
}

func (o *windowOp[K, T, W, R, OUT]) onEventTime(_ K, w W, ts int64) error {
	if !o.inFlight(w) {
		return nil
	}
	o.contents.setWindow(w)
	o.tctx.window = w
	o.apply(w, o.cfg.trigger.OnEventTime(ts, w, &o.tctx))
	if o.cleanup.IsCleanupTimer(true, ts, w.MaxTimestamp()) {
		o.clearAll(w)
	}
	return nil
}

func (o *windowOp[K, T, W, R, OUT]) onProcessingTime(_ K, w W, ts int64) error {
	if !o.inFlight(w) {
		return nil
	}
	o.contents.setWindow(w)
	o.tctx.window = w
	o.apply(w, o.cfg.trigger.OnProcessingTime(ts, w, &o.tctx))
	if o.cleanup.IsCleanupTimer(false, ts, w.MaxTimestamp()) {
		o.clearAll(w)
	}
	return nil
}

// clearAll removes the state of window w: contents, trigger, membership.
func (o *windowOp[K, T, W, R, OUT]) clearAll(w W) {
	o.contents.setWindow(w)
	o.contents.clear()
	o.tctx.window = w
	o.cfg.trigger.Clear(w, &o.tctx)
	o.trigSt.SetCurrentNamespace(w)
	o.trigSt.Clear()
	if o.cfg.merging {
		o.set.SetCurrentNamespace(w)
		o.set.Clear()
		key := o.ctx.keyed.backend.CurrentKey()
		if cur, ok := o.sets[key]; ok {
			if cur = slices.DeleteFunc(cur, func(c W) bool { return c == w }); len(cur) > 0 {
				o.sets[key] = cur
			} else {
				delete(o.sets, key) // the key may not come back: do not keep it
			}
		}
	}
}

// windowTimers is the trigger's view of the operator.
type windowTimers[K comparable, W Window] struct {
	timers *internalTimers[K, W]
	trig   nsValue[K, W, int64]
	pt     *runtime.ProcessingTimers
	env    *opEnv
}

// triggerCtx implements TriggerContext for the window in hand.
type triggerCtx[K comparable, W Window] struct {
	op     *windowTimers[K, W]
	window W
}

func (c *triggerCtx[K, W]) w() W                         { return c.window }
func (c *triggerCtx[K, W]) CurrentWatermark() int64      { return c.op.env.cursor.Watermark }
func (c *triggerCtx[K, W]) CurrentProcessingTime() int64 { return c.op.pt.Now() }
func (c *triggerCtx[K, W]) RegisterEventTimeTimer(ts int64) {
	c.op.timers.RegisterEventTime(c.w(), ts)
}
func (c *triggerCtx[K, W]) RegisterProcessingTimeTimer(ts int64) {
	c.op.timers.RegisterProcessingTime(c.w(), ts)
}
func (c *triggerCtx[K, W]) DeleteEventTimeTimer(ts int64) { c.op.timers.DeleteEventTime(c.w(), ts) }
func (c *triggerCtx[K, W]) DeleteProcessingTimeTimer(ts int64) {
	c.op.timers.DeleteProcessingTime(c.w(), ts)
}
func (c *triggerCtx[K, W]) State() state.Value[int64] {
	c.op.trig.SetCurrentNamespace(c.w())
	return c.op.trig
}
