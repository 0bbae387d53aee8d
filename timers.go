package weir

import (
	"errors"
	"fmt"
	"math"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/timerqueue"
)

// TimeDomain says which clock fired a timer.
type TimeDomain uint8

const (
	// EventTime timers fire when the watermark reaches their timestamp.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock reaches their
	// timestamp.
	ProcessingTime
)

func (d TimeDomain) String() string {
	if d == ProcessingTime {
		return "processing time"
	}
	return "event time"
}

// TimerService reads the time and registers timers for the current key, as
// Flink's TimerService. Timestamps are epoch milliseconds. There is at most
// one timer per key, domain and timestamp: registering it again does
// nothing. Timers are keyed state: they are checkpointed, restored (with
// their key groups when rescaling) and re-armed after recovery.
type TimerService interface {
	// CurrentProcessingTime returns the task's processing time.
	CurrentProcessingTime() int64
	// CurrentWatermark returns the task's event-time watermark.
	CurrentWatermark() int64
	// RegisterEventTimeTimer registers a timer that fires once the
	// watermark reaches ts (ts <= watermark), before the watermark goes
	// downstream. A timer at or before the current watermark fires with
	// the next watermark.
	RegisterEventTimeTimer(ts int64)
	// RegisterProcessingTimeTimer registers a timer that fires once the
	// processing time reaches ts, on the task goroutine.
	RegisterProcessingTimeTimer(ts int64)
	// DeleteEventTimeTimer deletes the current key's event-time timer at
	// ts, if there is one.
	DeleteEventTimeTimer(ts int64)
	// DeleteProcessingTimeTimer deletes the current key's processing-time
	// timer at ts, if there is one.
	DeleteProcessingTimeTimer(ts int64)
}

// OnTimerContext is the context of OnTimer: the current key is the timer's
// key (keyed state is scoped to it), Timestamp returns the timer's
// timestamp.
type OnTimerContext[K comparable] struct {
	*KeyedContext[K]
	domain TimeDomain
}

// TimeDomain says whether an event-time or a processing-time timer fired.
func (c *OnTimerContext[K]) TimeDomain() TimeDomain { return c.domain }

// OnTimerFunction is the optional hook of a KeyedProcessFunction or a
// KeyedCoProcessFunction that its timers call. Records collected from an
// event-time timer carry the timer's timestamp; records collected from a
// processing-time timer carry none (NoTimestamp), as in Flink.
type OnTimerFunction[K comparable, OUT any] interface {
	OnTimer(ctx *OnTimerContext[K], timestamp int64, out Collector[OUT]) error
}

// --- the internal timer service ------------------------------------------------

// timerCallback receives a fired timer; the keyed backend's current key is
// the timer's key.
type timerCallback[K comparable, N comparable] func(key K, ns N, ts int64) error

// internalTimers is the timer service of one keyed operator instance,
// generic over the namespace N of its timers (a window for window
// operators, timerqueue.Void for process functions). Timers are stored as entries
// of two namespaced value states (namespace: timestamp and N), so they are
// snapshotted and restored by key group with the rest of the keyed state;
// two queues in memory order them for firing, rebuilt from the states when
// the service is created.
//
// Everything runs on the task goroutine: registration from the operator's
// record or timer processing, event-time firing from ProcessWatermark
// (advanceWatermark), processing-time firing from the task's
// runtime.ProcessingTimers.
type internalTimers[K comparable, N comparable] struct {
	keyed      *keyedEnv[K]
	pt         *runtime.ProcessingTimers
	event      *timerqueue.Queue[K, N]
	proc       *timerqueue.Queue[K, N]
	eventState nsValue[K, timerqueue.Namespace[N], bool]
	procState  nsValue[K, timerqueue.Namespace[N], bool]
	onEvent    timerCallback[K, N]
	onProc     timerCallback[K, N]
	// armed is the earliest time a processing-time callback is registered
	// for and has not run yet (math.MaxInt64 when none is known).
	armed int64
}

// newInternalTimers registers the timer states of an operator (named after
// suffix, which tells apart several services of one operator; "" for one)
// and queues the timers restored in them. pt may be nil for an operator
// that uses event-time timers only. The callbacks run with the timer's key
// current.
func newInternalTimers[K comparable, N comparable](keyed *keyedEnv[K], suffix string, nsCodec codec.Codec[N], pt *runtime.ProcessingTimers, onEvent, onProc timerCallback[K, N]) (*internalTimers[K, N], error) {
	t := &internalTimers[K, N]{keyed: keyed, pt: pt, event: timerqueue.New[K, N](), proc: timerqueue.New[K, N](),
		onEvent: onEvent, onProc: onProc, armed: math.MaxInt64}
	evName, procName := timerqueue.StateNames(suffix)
	nc := timerqueue.NamespaceCodec[N]{NS: nsCodec}
	var err error
	if t.eventState, err = newNSValue(keyed.backend, evName, codec.Codec[timerqueue.Namespace[N]](nc), codec.Bool()); err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	if t.procState, err = newNSValue(keyed.backend, procName, codec.Codec[timerqueue.Namespace[N]](nc), codec.Bool()); err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	for k, tn := range t.eventState.Entries() {
		t.event.Add(timerqueue.ID[K, N]{Key: k, NS: tn.NS, TS: tn.TS})
	}
	for k, tn := range t.procState.Entries() {
		t.proc.Add(timerqueue.ID[K, N]{Key: k, NS: tn.NS, TS: tn.TS})
	}
	if head, ok := t.proc.Peek(); ok {
		if pt == nil {
			return nil, errors.New("timers: processing-time timers were restored but the operator has no processing-time service")
		}
		t.arm(head.TS)
	}
	return t, nil
}

// RegisterEventTime registers an event-time timer of the current key.
func (t *internalTimers[K, N]) RegisterEventTime(ns N, ts int64) {
	id := timerqueue.ID[K, N]{Key: t.keyed.backend.CurrentKey(), NS: ns, TS: ts}
	if t.event.Add(id) {
		t.eventState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: ts, NS: ns})
		t.eventState.Update(true)
	}
}

// DeleteEventTime deletes an event-time timer of the current key.
func (t *internalTimers[K, N]) DeleteEventTime(ns N, ts int64) {
	if t.event.Remove(timerqueue.ID[K, N]{Key: t.keyed.backend.CurrentKey(), NS: ns, TS: ts}) {
		t.eventState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: ts, NS: ns})
		t.eventState.Clear()
	}
}

// RegisterProcessingTime registers a processing-time timer of the current
// key.
func (t *internalTimers[K, N]) RegisterProcessingTime(ns N, ts int64) {
	if t.pt == nil {
		runtime.Fail(errors.New("processing-time timers are not available to this operator"))
	}
	id := timerqueue.ID[K, N]{Key: t.keyed.backend.CurrentKey(), NS: ns, TS: ts}
	if t.proc.Add(id) {
		t.procState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: ts, NS: ns})
		t.procState.Update(true)
		t.arm(ts)
	}
}

// DeleteProcessingTime deletes a processing-time timer of the current key.
// The callback registered for it, if any, finds nothing to fire.
func (t *internalTimers[K, N]) DeleteProcessingTime(ns N, ts int64) {
	if t.proc.Remove(timerqueue.ID[K, N]{Key: t.keyed.backend.CurrentKey(), NS: ns, TS: ts}) {
		t.procState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: ts, NS: ns})
		t.procState.Clear()
	}
}

// NumEventTimers and NumProcessingTimers count the queued timers.
func (t *internalTimers[K, N]) NumEventTimers() int      { return t.event.Len() }
func (t *internalTimers[K, N]) NumProcessingTimers() int { return t.proc.Len() }

// AdvanceWatermark fires, in timestamp order, every event-time timer at or
// before wm, including those the callbacks register at or before wm.
func (t *internalTimers[K, N]) AdvanceWatermark(wm int64) error {
	for {
		id, ok := t.event.PopDue(wm)
		if !ok {
			return nil
		}
		t.keyed.setKey(id.Key)
		t.eventState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: id.TS, NS: id.NS})
		t.eventState.Clear()
		if err := t.onEvent(id.Key, id.NS, id.TS); err != nil {
			return err
		}
	}
}

// arm makes sure a processing-time callback runs at ts or earlier.
func (t *internalTimers[K, N]) arm(ts int64) {
	if ts >= t.armed {
		return
	}
	t.armed = ts
	t.pt.Register(ts, func(now int64) error {
		if t.armed == ts {
			t.armed = math.MaxInt64
		}
		return t.fireProcessing(now)
	})
}

// fireProcessing fires every processing-time timer due at now and arms the
// next.
func (t *internalTimers[K, N]) fireProcessing(now int64) error {
	env := t.keyed.env
	env.cursor.Current = env.index
	for {
		id, ok := t.proc.PopDue(now)
		if !ok {
			break
		}
		t.keyed.setKey(id.Key)
		t.procState.SetCurrentNamespace(timerqueue.Namespace[N]{TS: id.TS, NS: id.NS})
		t.procState.Clear()
		if err := t.onProc(id.Key, id.NS, id.TS); err != nil {
			return err
		}
	}
	if head, ok := t.proc.Peek(); ok {
		t.arm(head.TS)
	}
	return nil
}

// --- keyed process functions -----------------------------------------------------

// keyedTimers is the TimerService of a keyed (co-)process function: an
// internalTimers without namespaces, created when the function implements
// OnTimerFunction (so that restored timers fire) or else on first use.
type keyedTimers[K comparable, OUT any] struct {
	ctx      *KeyedContext[K]
	fn       OnTimerFunction[K, OUT] // nil when the function has no OnTimer
	coll     *collector[OUT]         // the function's collector: the context's timestamp
	procColl collector[OUT]          // no timestamp, for processing-time timers
	noTS     int64
	pt       *runtime.ProcessingTimers
	svc      *internalTimers[K, timerqueue.Void]
	tctx     OnTimerContext[K]
}

func newKeyedTimers[K comparable, OUT any](ctx *KeyedContext[K], fn any, coll *collector[OUT]) *keyedTimers[K, OUT] {
	k := &keyedTimers[K, OUT]{ctx: ctx, coll: coll, noTS: NoTimestamp}
	k.fn, _ = fn.(OnTimerFunction[K, OUT])
	k.procColl = collector[OUT]{out: coll.out, ts: &k.noTS, cur: coll.cur, idx: coll.idx}
	k.tctx.KeyedContext = ctx
	ctx.timers = k
	return k
}

// BindWatermarks implements runtime.WatermarkEmitter: the operator emits no
// watermarks, but it gets the task's processing-time service this way.
func (k *keyedTimers[K, OUT]) BindWatermarks(_ runtime.WatermarkOutput, pt *runtime.ProcessingTimers) {
	k.pt = pt
}

// open creates the service now when the function has OnTimer: its
// restored timers must fire.
func (k *keyedTimers[K, OUT]) open() error {
	if k.fn == nil {
		return nil
	}
	_, err := k.service()
	return err
}

func (k *keyedTimers[K, OUT]) service() (*internalTimers[K, timerqueue.Void], error) {
	if k.svc != nil {
		return k.svc, nil
	}
	svc, err := newInternalTimers(k.ctx.keyed, "", codec.Codec[timerqueue.Void](timerqueue.VoidCodec{}), k.pt, k.fire(EventTime), k.fire(ProcessingTime))
	if err != nil {
		return nil, err
	}
	k.svc = svc
	return svc, nil
}

func (k *keyedTimers[K, OUT]) mustService() *internalTimers[K, timerqueue.Void] {
	svc, err := k.service()
	if err != nil {
		runtime.Fail(err)
	}
	return svc
}

func (k *keyedTimers[K, OUT]) fire(domain TimeDomain) timerCallback[K, timerqueue.Void] {
	return func(_ K, _ timerqueue.Void, ts int64) error {
		if k.fn == nil {
			return nil
		}
		k.ctx.ts = ts
		k.tctx.domain = domain
		out := k.coll
		if domain == ProcessingTime {
			out = &k.procColl
		}
		if err := k.fn.OnTimer(&k.tctx, ts, out); err != nil {
			return fmt.Errorf("%s timer at %d: %w", domain, ts, err)
		}
		return nil
	}
}

// ProcessWatermark implements runtime.WatermarkHandler.
func (k *keyedTimers[K, OUT]) ProcessWatermark(wm int64) error {
	if k.svc == nil {
		return nil
	}
	return k.svc.AdvanceWatermark(wm)
}

func (k *keyedTimers[K, OUT]) CurrentProcessingTime() int64 { return k.pt.Now() }
func (k *keyedTimers[K, OUT]) CurrentWatermark() int64      { return k.ctx.CurrentWatermark() }
func (k *keyedTimers[K, OUT]) RegisterEventTimeTimer(ts int64) {
	k.mustService().RegisterEventTime(timerqueue.Void{}, ts)
}
func (k *keyedTimers[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	k.mustService().RegisterProcessingTime(timerqueue.Void{}, ts)
}
func (k *keyedTimers[K, OUT]) DeleteEventTimeTimer(ts int64) {
	k.mustService().DeleteEventTime(timerqueue.Void{}, ts)
}
func (k *keyedTimers[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	k.mustService().DeleteProcessingTime(timerqueue.Void{}, ts)
}

var (
	_ TimerService             = (*keyedTimers[string, int])(nil)
	_ runtime.WatermarkHandler = (*keyedTimers[string, int])(nil)
	_ runtime.WatermarkEmitter = (*keyedTimers[string, int])(nil)
)
