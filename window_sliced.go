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
//
// Per key, the operator keeps in memory (hotPane) the pane its records
// update now, with its partial result, and the end of a window whose timer
// it knows queued: a record of the same pane folds into the partial result
// without a state access, and does not register the timer again. The
// partial result goes to state when the key's records move to another
// pane, before a firing of the key and before a snapshot; the timers are
// in state as always, the cache only saves registering one twice. The
// cache is empty after a restore (a rescale) and is rebuilt as records
// come.

// paneStore holds the panes of the current key (namespace: the pane) with
// a partial result P each.
type paneStore[T, P any] interface {
	setPane(p TimeWindow)
	get() (P, bool)
	put(p P)
	clear()
	panes() iter.Seq[TimeWindow]
	// fold adds v to the partial result p (ok: p holds one, else v
	// starts one). p is the caller's: no state holds it.
	fold(p P, ok bool, v T) P
	// own returns a partial result read from state that the caller may
	// change (p itself when P shares no memory).
	own(p P) P
}

// paneKind makes the pane store of a function and combines partial
// results into a window's result.
type paneKind[K comparable, T, P, R any] struct {
	mk      func(b statebackend.KeyedBackend[K]) (paneStore[T, P], error)
	combine func(parts []P) R
}

type reducingPanes[K comparable, T any] struct {
	s  nsReducing[K, TimeWindow, T]
	fn func(acc, v T) T
}

func (p reducingPanes[K, T]) setPane(w TimeWindow)        { p.s.SetCurrentNamespace(w) }
func (p reducingPanes[K, T]) get() (T, bool)              { return p.s.Get() }
func (p reducingPanes[K, T]) put(v T)                     { p.s.Clear(); p.s.Add(v) }
func (p reducingPanes[K, T]) clear()                      { p.s.Clear() }
func (p reducingPanes[K, T]) panes() iter.Seq[TimeWindow] { return p.s.Namespaces() }
func (p reducingPanes[K, T]) own(v T) T                   { return v }
func (p reducingPanes[K, T]) fold(acc T, ok bool, v T) T {
	if !ok {
		return v
	}
	return p.fn(acc, v)
}

func reducePanes[K comparable, T any](fn func(acc, v T) T, tc codec.Codec[T]) paneKind[K, T, T, T] {
	return paneKind[K, T, T, T]{
		mk: func(b statebackend.KeyedBackend[K]) (paneStore[T, T], error) {
			s, err := newNSReducing[K, TimeWindow, T](b, contentsState, fn, timeWindowCodec{}, tc)
			if err != nil {
				return nil, err
			}
			return reducingPanes[K, T]{s: s, fn: fn}, nil
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
func (p accPanes[K, T, ACC, R]) fold(acc ACC, ok bool, v T) ACC {
	if !ok {
		acc = p.f.CreateAccumulator()
	}
	return p.f.Add(v, acc)
}

// own copies a stored accumulator: a stored value is never changed in
// place (a snapshot may be writing it).
func (p accPanes[K, T, ACC, R]) own(acc ACC) ACC {
	if p.clone != nil {
		return p.clone(acc)
	}
	return acc
}
func (p accPanes[K, T, ACC, R]) get() (ACC, bool)            { return p.s.Value() }
func (p accPanes[K, T, ACC, R]) put(acc ACC)                 { p.s.Update(acc) }
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
	hot    map[K]*hotPane[P]
}

// hotPane is what the operator keeps in memory for a key (see the top of
// the file).
type hotPane[P any] struct {
	pane  TimeWindow
	acc   P    // the partial result of pane, the operator's own (no state holds it)
	live  bool // pane and acc are set
	dirty bool // acc is newer than the state's
	// armed is the end of a window whose timer is queued for the key
	// (when armedOK): a firing of that window clears it.
	armed   int64
	armedOK bool
}

// maxHotKeys bounds the keys the operator keeps a hot pane for: past it,
// the hot panes go to state and the cache starts again (a key space far
// larger than memory, on pebble, costs a state write per record at worst,
// as without the cache).
const maxHotKeys = 1 << 16

func buildSliced[K comparable, T any, P, R any](w *WindowedStream[K, T, TimeWindow], name string, kind paneKind[K, T, P, R]) *Stream[R] {
	cfg := w.config(name)
	sp := w.assigner.(specified).spec()
	panes := window.NewPanes(sp.size, sp.slide, sp.offset)
	out := addKeyed(w.in, name, func(env *opEnv, out runtime.Output[R]) oneInputOp[T] {
		o := &slicedOp[K, T, P, R]{cfg: cfg, panes: panes, kind: kind, env: env, hot: make(map[K]*hotPane[P])}
		o.ctx = &KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, cfg.codec)}
		o.coll = newCollector(out, &o.ctx.ts, env)
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

// SnapshotState writes the hot panes to the keyed state, whose snapshot
// the task takes next (runtime.KeyedState).
func (o *slicedOp[K, T, P, R]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	o.flushAll()
	return o.env.ops.snapshot(id, nil)
}

// flush writes the current key's hot pane h to state; h keeps no partial
// result afterwards (state holds it: it must not change in place).
func (o *slicedOp[K, T, P, R]) flush(h *hotPane[P]) {
	if h.live && h.dirty {
		o.store.setPane(h.pane)
		o.store.put(h.acc)
	}
	var zero P
	h.acc, h.live, h.dirty = zero, false, false
}

// flushAll writes every hot pane to state.
func (o *slicedOp[K, T, P, R]) flushAll() {
	for k, h := range o.hot {
		if h.live && h.dirty {
			o.ctx.keyed.setKey(k)
			o.flush(h)
		}
	}
}

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
	key := o.ctx.keyed.backend.CurrentKey()
	h := o.hot[key]
	if h == nil {
		if len(o.hot) >= maxHotKeys {
			o.flushAll()
			clear(o.hot)
			o.ctx.keyed.setKey(key)
		}
		h = &hotPane[P]{}
		o.hot[key] = h
	}
	if !h.live || h.pane != pane {
		o.flush(h)
		o.store.setPane(pane)
		acc, ok := o.store.get()
		if ok {
			acc = o.store.own(acc)
		}
		h.pane, h.acc, h.live = pane, acc, ok
	}
	h.acc = o.store.fold(h.acc, h.live, rec)
	h.live, h.dirty = true, true
	if !h.armedOK || h.armed != end {
		o.arm(o.panes.WindowEnding(end))
		h.armed, h.armedOK = end, true
	}
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
func (o *slicedOp[K, T, P, R]) fire(key K, w TimeWindow, _ int64) error {
	h := o.hot[key]
	if h != nil {
		o.flush(h)
		if h.armed == w.End {
			h.armedOK = false
		}
	}
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
		if h != nil {
			h.armed, h.armedOK = next, true
		}
	}
	return nil
}
