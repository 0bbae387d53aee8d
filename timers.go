package weir

import (
	"container/heap"
	"errors"
	"fmt"
	"math"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
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

// --- the queue ---------------------------------------------------------------

// timerID identifies a timer: at most one per (key, namespace, timestamp).
type timerID[K comparable, N comparable] struct {
	key K
	ns  N
	ts  int64
}

// timerQueue orders timers by timestamp (then by registration) and finds
// one by its id for deletion. Pure: no clock, no state.
type timerQueue[K comparable, N comparable] struct {
	items []*queuedTimer[K, N]
	index map[timerID[K, N]]*queuedTimer[K, N]
	seq   uint64
}

// queuedTimer knows its position in items: moving a timer in the heap
// updates it, not the index map.
type queuedTimer[K comparable, N comparable] struct {
	id  timerID[K, N]
	seq uint64
	pos int
}

func newTimerQueue[K comparable, N comparable]() *timerQueue[K, N] {
	return &timerQueue[K, N]{index: make(map[timerID[K, N]]*queuedTimer[K, N])}
}

// add queues id; it returns false if id is queued already.
func (q *timerQueue[K, N]) add(id timerID[K, N]) bool {
	if _, ok := q.index[id]; ok {
		return false
	}
	q.seq++
	heap.Push(q, &queuedTimer[K, N]{id: id, seq: q.seq})
	return true
}

// remove removes id; it returns false if id is not queued.
func (q *timerQueue[K, N]) remove(id timerID[K, N]) bool {
	t, ok := q.index[id]
	if !ok {
		return false
	}
	heap.Remove(q, t.pos)
	return true
}

// contains reports whether id is queued.
func (q *timerQueue[K, N]) contains(id timerID[K, N]) bool {
	_, ok := q.index[id]
	return ok
}

// peek returns the earliest timer.
func (q *timerQueue[K, N]) peek() (timerID[K, N], bool) {
	if len(q.items) == 0 {
		return timerID[K, N]{}, false
	}
	return q.items[0].id, true
}

// popDue removes and returns the earliest timer if its timestamp is at most
// upTo.
func (q *timerQueue[K, N]) popDue(upTo int64) (timerID[K, N], bool) {
	if len(q.items) == 0 || q.items[0].id.ts > upTo {
		return timerID[K, N]{}, false
	}
	return heap.Pop(q).(*queuedTimer[K, N]).id, true
}

func (q *timerQueue[K, N]) Len() int { return len(q.items) }
func (q *timerQueue[K, N]) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.id.ts != b.id.ts {
		return a.id.ts < b.id.ts
	}
	return a.seq < b.seq
}
func (q *timerQueue[K, N]) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].pos = i
	q.items[j].pos = j
}
func (q *timerQueue[K, N]) Push(x any) {
	t := x.(*queuedTimer[K, N])
	t.pos = len(q.items)
	q.index[t.id] = t
	q.items = append(q.items, t)
}
func (q *timerQueue[K, N]) Pop() any {
	last := len(q.items) - 1
	t := q.items[last]
	q.items[last] = nil
	q.items = q.items[:last]
	delete(q.index, t.id)
	return t
}

// --- the internal timer service ------------------------------------------------

// timerNS is the namespace under which a timer is stored in keyed state:
// its timestamp and the user's namespace.
type timerNS[N comparable] struct {
	ts int64
	ns N
}

// timerNSCodec encodes a timerNS as the timestamp (8 bytes, ordered) and
// then the user namespace.
type timerNSCodec[N comparable] struct{ ns codec.Codec[N] }

func (c timerNSCodec[N]) Append(dst []byte, v timerNS[N]) []byte {
	dst = codec.Int64().Append(dst, v.ts)
	return c.ns.Append(dst, v.ns)
}

func (c timerNSCodec[N]) Decode(src []byte) (timerNS[N], int, error) {
	ts, n, err := codec.Int64().Decode(src)
	if err != nil {
		return timerNS[N]{}, 0, fmt.Errorf("timer timestamp: %w", err)
	}
	ns, m, err := c.ns.Decode(src[n:])
	if err != nil {
		return timerNS[N]{}, 0, fmt.Errorf("timer namespace: %w", err)
	}
	return timerNS[N]{ts: ts, ns: ns}, n + m, nil
}

// voidNS is the namespace of timers that need none (keyed process
// functions).
type voidNS struct{}

type voidCodec struct{}

func (voidCodec) Append(dst []byte, _ voidNS) []byte { return dst }
func (voidCodec) Decode([]byte) (voidNS, int, error) { return voidNS{}, 0, nil }

// timerStateNames returns the names of the keyed states holding the timers
// of a service.
func timerStateNames(suffix string) (event, processing string) {
	return "_timer_event" + suffix, "_timer_proc" + suffix
}

// timerCallback receives a fired timer; the keyed backend's current key is
// the timer's key.
type timerCallback[K comparable, N comparable] func(key K, ns N, ts int64) error

// internalTimers is the timer service of one keyed operator instance,
// generic over the namespace N of its timers (a window for window
// operators, voidNS for process functions). Timers are stored as entries
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
	event      *timerQueue[K, N]
	proc       *timerQueue[K, N]
	eventState nsValue[K, timerNS[N], bool]
	procState  nsValue[K, timerNS[N], bool]
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
	t := &internalTimers[K, N]{keyed: keyed, pt: pt, event: newTimerQueue[K, N](), proc: newTimerQueue[K, N](),
		onEvent: onEvent, onProc: onProc, armed: math.MaxInt64}
	evName, procName := timerStateNames(suffix)
	nc := timerNSCodec[N]{ns: nsCodec}
	var err error
	if t.eventState, err = newNSValue(keyed.backend, evName, codec.Codec[timerNS[N]](nc), codec.Bool()); err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	if t.procState, err = newNSValue(keyed.backend, procName, codec.Codec[timerNS[N]](nc), codec.Bool()); err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	for k, tn := range t.eventState.Entries() {
		t.event.add(timerID[K, N]{key: k, ns: tn.ns, ts: tn.ts})
	}
	for k, tn := range t.procState.Entries() {
		t.proc.add(timerID[K, N]{key: k, ns: tn.ns, ts: tn.ts})
	}
	if head, ok := t.proc.peek(); ok {
		if pt == nil {
			return nil, errors.New("timers: processing-time timers were restored but the operator has no processing-time service")
		}
		t.arm(head.ts)
	}
	return t, nil
}

// RegisterEventTime registers an event-time timer of the current key.
func (t *internalTimers[K, N]) RegisterEventTime(ns N, ts int64) {
	id := timerID[K, N]{key: t.keyed.backend.CurrentKey(), ns: ns, ts: ts}
	if t.event.add(id) {
		t.eventState.SetCurrentNamespace(timerNS[N]{ts: ts, ns: ns})
		t.eventState.Update(true)
	}
}

// DeleteEventTime deletes an event-time timer of the current key.
func (t *internalTimers[K, N]) DeleteEventTime(ns N, ts int64) {
	if t.event.remove(timerID[K, N]{key: t.keyed.backend.CurrentKey(), ns: ns, ts: ts}) {
		t.eventState.SetCurrentNamespace(timerNS[N]{ts: ts, ns: ns})
		t.eventState.Clear()
	}
}

// RegisterProcessingTime registers a processing-time timer of the current
// key.
func (t *internalTimers[K, N]) RegisterProcessingTime(ns N, ts int64) {
	if t.pt == nil {
		runtime.Fail(errors.New("processing-time timers are not available to this operator"))
	}
	id := timerID[K, N]{key: t.keyed.backend.CurrentKey(), ns: ns, ts: ts}
	if t.proc.add(id) {
		t.procState.SetCurrentNamespace(timerNS[N]{ts: ts, ns: ns})
		t.procState.Update(true)
		t.arm(ts)
	}
}

// DeleteProcessingTime deletes a processing-time timer of the current key.
// The callback registered for it, if any, finds nothing to fire.
func (t *internalTimers[K, N]) DeleteProcessingTime(ns N, ts int64) {
	if t.proc.remove(timerID[K, N]{key: t.keyed.backend.CurrentKey(), ns: ns, ts: ts}) {
		t.procState.SetCurrentNamespace(timerNS[N]{ts: ts, ns: ns})
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
		id, ok := t.event.popDue(wm)
		if !ok {
			return nil
		}
		t.keyed.setKey(id.key)
		t.eventState.SetCurrentNamespace(timerNS[N]{ts: id.ts, ns: id.ns})
		t.eventState.Clear()
		if err := t.onEvent(id.key, id.ns, id.ts); err != nil {
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
		id, ok := t.proc.popDue(now)
		if !ok {
			break
		}
		t.keyed.setKey(id.key)
		t.procState.SetCurrentNamespace(timerNS[N]{ts: id.ts, ns: id.ns})
		t.procState.Clear()
		if err := t.onProc(id.key, id.ns, id.ts); err != nil {
			return err
		}
	}
	if head, ok := t.proc.peek(); ok {
		t.arm(head.ts)
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
	svc      *internalTimers[K, voidNS]
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

func (k *keyedTimers[K, OUT]) service() (*internalTimers[K, voidNS], error) {
	if k.svc != nil {
		return k.svc, nil
	}
	svc, err := newInternalTimers(k.ctx.keyed, "", codec.Codec[voidNS](voidCodec{}), k.pt, k.fire(EventTime), k.fire(ProcessingTime))
	if err != nil {
		return nil, err
	}
	k.svc = svc
	return svc, nil
}

func (k *keyedTimers[K, OUT]) mustService() *internalTimers[K, voidNS] {
	svc, err := k.service()
	if err != nil {
		runtime.Fail(err)
	}
	return svc
}

func (k *keyedTimers[K, OUT]) fire(domain TimeDomain) timerCallback[K, voidNS] {
	return func(_ K, _ voidNS, ts int64) error {
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
	k.mustService().RegisterEventTime(voidNS{}, ts)
}
func (k *keyedTimers[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	k.mustService().RegisterProcessingTime(voidNS{}, ts)
}
func (k *keyedTimers[K, OUT]) DeleteEventTimeTimer(ts int64) {
	k.mustService().DeleteEventTime(voidNS{}, ts)
}
func (k *keyedTimers[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	k.mustService().DeleteProcessingTime(voidNS{}, ts)
}

var (
	_ TimerService                 = (*keyedTimers[string, int])(nil)
	_ runtime.WatermarkHandler     = (*keyedTimers[string, int])(nil)
	_ runtime.WatermarkEmitter     = (*keyedTimers[string, int])(nil)
	_ codec.Codec[timerNS[voidNS]] = timerNSCodec[voidNS]{}
)
