package weir

import (
	"errors"
	"fmt"
	"iter"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/window"
	"github.com/weirstream/weir/state"
)

// Sliced sliding windows (issue 5, item 5). A sliding window of size S
// every slide D is a run of S/P consecutive panes of P = gcd(S, D): a
// record updates the one pane that holds it, instead of the S/D windows,
// and a window's result combines its panes when the window fires. A key
// has one timer at a time per pending window end: the first pane of a
// window registers it, and each firing registers the next window's if a
// pane of the key is in it. A pane goes when the last window holding it
// has fired.

// paneStore holds the panes of the current key (namespace: the pane) with
// a partial result P each.
type paneStore[T, P any] interface {
	setPane(p TimeWindow)
	add(v T)
	get() (P, bool)
	clear()
	panes() iter.Seq[TimeWindow]
}

// paneKind makes the pane store of a function and combines partial
// results into a window's result.
type paneKind[K comparable, T, P, R any] struct {
	mk      func(b statebackend.KeyedBackend[K]) (paneStore[T, P], error)
	combine func(parts []P) R
}

type reducingPanes[K comparable, T any] struct {
	s nsReducing[K, TimeWindow, T]
}

func (p reducingPanes[K, T]) setPane(w TimeWindow)        { p.s.SetCurrentNamespace(w) }
func (p reducingPanes[K, T]) add(v T)                     { p.s.Add(v) }
func (p reducingPanes[K, T]) get() (T, bool)              { return p.s.Get() }
func (p reducingPanes[K, T]) clear()                      { p.s.Clear() }
func (p reducingPanes[K, T]) panes() iter.Seq[TimeWindow] { return p.s.Namespaces() }

func reducePanes[K comparable, T any](fn func(acc, v T) T, tc codec.Codec[T]) paneKind[K, T, T, T] {
	return paneKind[K, T, T, T]{
		mk: func(b statebackend.KeyedBackend[K]) (paneStore[T, T], error) {
			s, err := newNSReducing[K, TimeWindow, T](b, contentsState, fn, timeWindowCodec{}, tc)
			if err != nil {
				return nil, err
			}
			return reducingPanes[K, T]{s}, nil
		},
		combine: func(parts []T) T {
			acc := parts[0]
			for _, p := range parts[1:] {
				acc = fn(acc, p)
			}
			return acc
		},
	}
}

// accPanes keeps an accumulator per pane in a value state: combining panes
// needs the accumulators (AggregateFunction.Merge), not their results.
type accPanes[K comparable, T, ACC, R any] struct {
	s     nsValue[K, TimeWindow, ACC]
	f     state.AggregateFunction[T, ACC, R]
	clone func(ACC) ACC // nil when ACC shares no memory
}

func (p accPanes[K, T, ACC, R]) setPane(w TimeWindow) { p.s.SetCurrentNamespace(w) }
func (p accPanes[K, T, ACC, R]) add(v T) {
	acc, ok := p.s.Value()
	switch {
	case !ok:
		acc = p.f.CreateAccumulator()
	case p.clone != nil:
		// A stored value is never changed in place: a snapshot may be
		// writing it.
		acc = p.clone(acc)
	}
	p.s.Update(p.f.Add(v, acc))
}
func (p accPanes[K, T, ACC, R]) get() (ACC, bool)            { return p.s.Value() }
func (p accPanes[K, T, ACC, R]) clear()                      { p.s.Clear() }
func (p accPanes[K, T, ACC, R]) panes() iter.Seq[TimeWindow] { return p.s.Namespaces() }

func aggregatePanes[K comparable, T, ACC, R any](f state.AggregateFunction[T, ACC, R], ac codec.Codec[ACC]) paneKind[K, T, ACC, R] {
	var clone func(ACC) ACC
	if mayShareMemory(reflect.TypeFor[ACC]()) {
		clone = func(a ACC) ACC {
			c, _, err := ac.Decode(ac.Append(nil, a))
			if err != nil {
				runtime.Fail(fmt.Errorf("copy window accumulator: %w", err))
			}
			return c
		}
	}
	return paneKind[K, T, ACC, R]{
		mk: func(b statebackend.KeyedBackend[K]) (paneStore[T, ACC], error) {
			s, err := newNSValue[K, TimeWindow, ACC](b, contentsState, timeWindowCodec{}, ac)
			if err != nil {
				return nil, err
			}
			return accPanes[K, T, ACC, R]{s: s, f: f, clone: clone}, nil
		},
		combine: func(parts []ACC) R {
			acc := parts[0]
			if clone != nil {
				acc = clone(acc)
			}
			for _, p := range parts[1:] {
				acc = f.Merge(acc, p)
			}
			return f.GetResult(acc)
		},
	}
}

// mayShareMemory reports whether values of t can reach memory that a
// copy of the value shares (pointers, slices, maps, ...).
func mayShareMemory(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return mayShareMemory(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if mayShareMemory(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// slicedOp is the window operator of sliced sliding windows with the
// default trigger and no allowed lateness.
type slicedOp[K comparable, T, P, R any] struct {
	cfg    *windowConfig[K, T, TimeWindow]
	panes  window.Panes
	kind   paneKind[K, T, P, R]
	env    *opEnv
	ctx    *KeyedContext[K]
	store  paneStore[T, P]
	timers *internalTimers[K, TimeWindow]
	late   Collector[T]
	pt     *runtime.ProcessingTimers
	coll   collector[R]
	parts  []P
	buf    []TimeWindow
}

func buildSliced[K comparable, T any, P, R any](w *WindowedStream[K, T, TimeWindow], name string, kind paneKind[K, T, P, R]) *Stream[R] {
	cfg := w.config(name)
	sp := w.assigner.(specified).spec()
	panes := window.NewPanes(sp.size, sp.slide, sp.offset)
	out := addKeyed(w.in, name, func(env *opEnv, out runtime.Output[R]) oneInputOp[T] {
		o := &slicedOp[K, T, P, R]{cfg: cfg, panes: panes, kind: kind, env: env}
		o.ctx = &KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, cfg.codec)}
		o.coll = collector[R]{out: out, ts: &o.ctx.ts}
		return o
	})
	if w.all {
		out.Parallelism(1)
	}
	return out
}

// BindWatermarks implements runtime.WatermarkEmitter (for the
// processing-time service).
func (o *slicedOp[K, T, P, R]) BindWatermarks(_ runtime.WatermarkOutput, pt *runtime.ProcessingTimers) {
	o.pt = pt
}

func (o *slicedOp[K, T, P, R]) Open() error {
	if err := o.ctx.keyed.open(); err != nil {
		return err
	}
	var err error
	if o.store, err = o.kind.mk(o.ctx.keyed.backend); err != nil {
		return err
	}
	o.timers, err = newInternalTimers(o.ctx.keyed, "", codec.Codec[TimeWindow](timeWindowCodec{}), o.pt, o.fire, o.fire)
	if err != nil {
		return err
	}
	if o.cfg.lateTag != nil {
		if o.late, err = SideOutput(o.ctx, *o.cfg.lateTag); err != nil {
			return err
		}
	}
	return nil
}

func (o *slicedOp[K, T, P, R]) Finish() error { return nil }
func (o *slicedOp[K, T, P, R]) Close() error  { return errors.Join(o.ctx.keyed.close()) }
func (o *slicedOp[K, T, P, R]) SnapshotState(id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.keyed.snapshot(id, opts, nil)
}
func (o *slicedOp[K, T, P, R]) NotifyCheckpointComplete(int64) error { return nil }
func (o *slicedOp[K, T, P, R]) NotifyCheckpointAborted(int64) error  { return nil }

// ProcessWatermark implements runtime.WatermarkHandler.
func (o *slicedOp[K, T, P, R]) ProcessWatermark(wm int64) error {
	return o.timers.AdvanceWatermark(wm)
}

func (o *slicedOp[K, T, P, R]) Emit(rec T, ts int64) {
	o.env.cursor.Current = o.env.index
	o.ctx.keyed.setKey(o.cfg.key(rec))
	at, wm := ts, o.env.cursor.Watermark
	if o.cfg.eventTime {
		if ts == NoTimestamp {
			runtime.Fail(fmt.Errorf("event-time window got a record without a timestamp: give the source a WatermarkStrategy (WithTimestampAssigner) or call AssignTimestampsAndWatermarks upstream"))
		}
	} else {
		at, wm = o.pt.Now(), NoTimestamp
	}
	pane := o.panes.PaneOf(at)
	end, open := o.panes.FirstOpenEnd(pane, wm)
	if !open {
		if o.late != nil {
			o.ctx.ts = ts
			o.late.Collect(rec)
		}
		return
	}
	o.store.setPane(pane)
	o.store.add(rec)
	o.arm(o.panes.WindowEnding(end))
}

func (o *slicedOp[K, T, P, R]) arm(w TimeWindow) {
	if o.cfg.eventTime {
		o.timers.RegisterEventTime(w, w.MaxTimestamp())
	} else {
		o.timers.RegisterProcessingTime(w, w.MaxTimestamp())
	}
}

// fire emits window w of the current key from its panes, drops the panes
// no later window holds, and arms the next window if a pane is in it. It
// visits the size/pane slots of w and of the next slide directly (panes are
// aligned), so its cost does not grow with the number of panes the key
// holds (many, when the watermark lags far behind).
func (o *slicedOp[K, T, P, R]) fire(_ K, w TimeWindow, _ int64) error {
	step := o.panes.Pane
	keepFrom := w.Start + o.panes.Slide // panes from here on are in the next window too
	next := w.End + o.panes.Slide
	o.parts = o.parts[:0]
	armNext := false
	for start := w.Start; start < w.End; start += step {
		o.store.setPane(TimeWindow{Start: start, End: start + step})
		v, ok := o.store.get()
		if !ok {
			continue
		}
		// The part is read before the pane is cleared: clear drops the
		// entry, not a value handed out.
		o.parts = append(o.parts, v)
		if start < keepFrom {
			o.store.clear()
		} else {
			armNext = true
		}
	}
	for start := w.End; !armNext && start < next; start += step {
		o.store.setPane(TimeWindow{Start: start, End: start + step})
		_, armNext = o.store.get()
	}
	if len(o.parts) > 0 {
		o.ctx.ts = w.MaxTimestamp()
		o.coll.Collect(o.kind.combine(o.parts))
	}
	clear(o.parts)
	if armNext {
		o.arm(o.panes.WindowEnding(next))
	}
	return nil
}
