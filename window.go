package weir

import (
	"fmt"
	"math"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/window"
	"github.com/weirstream/weir/state"
)

// Window is what a window assigner assigns records to: a TimeWindow or the
// GlobalWindow. MaxTimestamp is the largest timestamp in the window; window
// results carry it as their timestamp.
type Window interface {
	comparable
	MaxTimestamp() int64
}

// TimeWindow is the interval [Start, End) in epoch milliseconds.
type TimeWindow = window.TimeWindow

// GlobalWindow is the one window of GlobalWindows: every record of a key
// is in it, and only a trigger (CountTrigger, say) fires it.
type GlobalWindow struct{}

// MaxTimestamp returns math.MaxInt64.
func (GlobalWindow) MaxTimestamp() int64 { return math.MaxInt64 }

func (GlobalWindow) String() string { return "GlobalWindow" }

// WindowAssignerContext is what an assigner may read.
type WindowAssignerContext interface {
	CurrentProcessingTime() int64
}

// WindowAssigner assigns a record with timestamp (the record's event time
// for an event-time assigner, the processing time otherwise) to zero or
// more windows, as Flink's WindowAssigner. The built-in assigners are
// TumblingEventTimeWindows, SlidingEventTimeWindows,
// EventTimeSessionWindows, their processing-time counterparts and
// GlobalWindows; an assigner of the caller's may not merge windows.
type WindowAssigner[W Window] interface {
	AssignWindows(timestamp int64, ctx WindowAssignerContext) []W
	// IsEventTime reports whether the assigner works in event time: its
	// windows then fire by the watermark (EventTimeTrigger), records
	// need timestamps, and late records exist.
	IsEventTime() bool
}

// assignerSpec describes a built-in assigner to the window operator.
type assignerSpec struct {
	kind                string // "tumbling", "sliding", "session", "global"
	size, slide, offset int64  // ms; tumbling: slide = size
	gap                 int64  // session
	err                 error
}

type specified interface{ spec() assignerSpec }

// TimeWindows assigns tumbling or sliding time windows.
type TimeWindows struct {
	s         assignerSpec
	eventTime bool
}

// TumblingEventTimeWindows assigns each record to the window of length size
// holding its event time; windows are aligned to the epoch (see
// WithOffset).
func TumblingEventTimeWindows(size time.Duration) TimeWindows {
	return newTimeWindows("tumbling", size, size, true)
}

// TumblingProcessingTimeWindows is TumblingEventTimeWindows in processing
// time.
func TumblingProcessingTimeWindows(size time.Duration) TimeWindows {
	return newTimeWindows("tumbling", size, size, false)
}

// SlidingEventTimeWindows assigns each record to the windows of length
// size, one starting every slide, that hold its event time.
func SlidingEventTimeWindows(size, slide time.Duration) TimeWindows {
	return newTimeWindows("sliding", size, slide, true)
}

// SlidingProcessingTimeWindows is SlidingEventTimeWindows in processing
// time.
func SlidingProcessingTimeWindows(size, slide time.Duration) TimeWindows {
	return newTimeWindows("sliding", size, slide, false)
}

func newTimeWindows(kind string, size, slide time.Duration, eventTime bool) TimeWindows {
	s := assignerSpec{kind: kind, size: size.Milliseconds(), slide: slide.Milliseconds()}
	s.err = window.Validate(describe(kind, eventTime), s.size, s.slide, 0)
	return TimeWindows{s: s, eventTime: eventTime}
}

func describe(kind string, eventTime bool) string {
	if eventTime {
		return kind + " event-time windows"
	}
	return kind + " processing-time windows"
}

// WithOffset shifts the windows' alignment by offset, as Flink's offset
// (for time zones: windows of a day starting at 00:00 UTC+8 have offset
// -8 h). |offset| must be less than the slide (the size when tumbling).
func (a TimeWindows) WithOffset(offset time.Duration) TimeWindows {
	a.s.offset = offset.Milliseconds()
	a.s.err = window.Validate(describe(a.s.kind, a.eventTime), a.s.size, a.s.slide, a.s.offset)
	return a
}

// AssignWindows implements WindowAssigner.
func (a TimeWindows) AssignWindows(ts int64, _ WindowAssignerContext) []TimeWindow {
	if a.s.kind == "tumbling" {
		return []TimeWindow{window.Tumbling(ts, a.s.size, a.s.offset)}
	}
	return window.Sliding(nil, ts, a.s.size, a.s.slide, a.s.offset)
}

// IsEventTime implements WindowAssigner.
func (a TimeWindows) IsEventTime() bool  { return a.eventTime }
func (a TimeWindows) spec() assignerSpec { return a.s }

// SessionWindows assigns each record to a window [ts, ts+gap); windows of
// a key that overlap or touch merge, so a session ends after gap without
// records.
type SessionWindows struct {
	s         assignerSpec
	eventTime bool
}

// EventTimeSessionWindows returns session windows in event time.
func EventTimeSessionWindows(gap time.Duration) SessionWindows {
	return newSessionWindows(gap, true)
}

// ProcessingTimeSessionWindows returns session windows in processing time.
func ProcessingTimeSessionWindows(gap time.Duration) SessionWindows {
	return newSessionWindows(gap, false)
}

func newSessionWindows(gap time.Duration, eventTime bool) SessionWindows {
	s := assignerSpec{kind: "session", gap: gap.Milliseconds()}
	s.err = window.ValidateGap(describe("session", eventTime), s.gap)
	return SessionWindows{s: s, eventTime: eventTime}
}

// AssignWindows implements WindowAssigner.
func (a SessionWindows) AssignWindows(ts int64, _ WindowAssignerContext) []TimeWindow {
	return []TimeWindow{{Start: ts, End: ts + a.s.gap}}
}

// IsEventTime implements WindowAssigner.
func (a SessionWindows) IsEventTime() bool  { return a.eventTime }
func (a SessionWindows) spec() assignerSpec { return a.s }

// GlobalWindowAssigner puts every record of a key into the GlobalWindow.
type GlobalWindowAssigner struct{}

// GlobalWindows returns the global window assigner. Its default trigger
// never fires: give it one (CountTrigger, a custom trigger).
func GlobalWindows() GlobalWindowAssigner { return GlobalWindowAssigner{} }

var globalWindows = []GlobalWindow{{}}

// AssignWindows implements WindowAssigner.
func (GlobalWindowAssigner) AssignWindows(int64, WindowAssignerContext) []GlobalWindow {
	return globalWindows
}

// IsEventTime implements WindowAssigner.
func (GlobalWindowAssigner) IsEventTime() bool  { return false }
func (GlobalWindowAssigner) spec() assignerSpec { return assignerSpec{kind: "global"} }

// --- codecs of windows ---------------------------------------------------------

type timeWindowCodec struct{}

func (timeWindowCodec) Append(dst []byte, w TimeWindow) []byte {
	return codec.Int64().Append(codec.Int64().Append(dst, w.Start), w.End)
}

func (timeWindowCodec) Decode(src []byte) (TimeWindow, int, error) {
	s, n, err := codec.Int64().Decode(src)
	if err != nil {
		return TimeWindow{}, 0, fmt.Errorf("window start: %w", err)
	}
	e, m, err := codec.Int64().Decode(src[n:])
	if err != nil {
		return TimeWindow{}, 0, fmt.Errorf("window end: %w", err)
	}
	return TimeWindow{Start: s, End: e}, n + m, nil
}

type globalWindowCodec struct{}

func (globalWindowCodec) Append(dst []byte, _ GlobalWindow) []byte { return dst }
func (globalWindowCodec) Decode([]byte) (GlobalWindow, int, error) { return GlobalWindow{}, 0, nil }

// windowCodec returns the codec of the window type W.
func windowCodec[W Window]() (codec.Codec[W], error) {
	var zero W
	switch any(zero).(type) {
	case TimeWindow:
		return any(codec.Codec[TimeWindow](timeWindowCodec{})).(codec.Codec[W]), nil
	case GlobalWindow:
		return any(codec.Codec[GlobalWindow](globalWindowCodec{})).(codec.Codec[W]), nil
	}
	return codec.Of[W]()
}

// --- triggers ------------------------------------------------------------------

// TriggerResult is what a trigger decides for a window.
type TriggerResult uint8

const (
	// Continue does nothing.
	Continue TriggerResult = iota
	// Fire emits the window's result and keeps its contents.
	Fire
	// Purge drops the window's contents without emitting.
	Purge
	// FireAndPurge emits the window's result and drops its contents.
	FireAndPurge
)

func (r TriggerResult) fires() bool  { return r == Fire || r == FireAndPurge }
func (r TriggerResult) purges() bool { return r == Purge || r == FireAndPurge }

func (r TriggerResult) String() string {
	return [...]string{"CONTINUE", "FIRE", "PURGE", "FIRE_AND_PURGE"}[r]
}

// TriggerContext is what a trigger may do for the current key and window:
// read the time, register and delete timers (in the window's namespace:
// they call the trigger back with the window) and keep a count.
type TriggerContext interface {
	CurrentWatermark() int64
	CurrentProcessingTime() int64
	RegisterEventTimeTimer(ts int64)
	RegisterProcessingTimeTimer(ts int64)
	DeleteEventTimeTimer(ts int64)
	DeleteProcessingTimeTimer(ts int64)
	// State is the trigger's int64 for the current key and window (the
	// count of CountTrigger): keyed state, checkpointed, summed when
	// session windows merge, cleared with the window.
	State() state.Value[int64]
}

// Trigger decides when a window fires and purges, as Flink's Trigger. It
// runs on the task goroutine with the window's key current. A trigger of
// merging (session) windows may implement MergingTrigger.
type Trigger[T any, W Window] interface {
	// OnElement is called for each record added to window w.
	OnElement(rec T, timestamp int64, w W, ctx TriggerContext) TriggerResult
	// OnEventTime is called when an event-time timer of w fires.
	OnEventTime(time int64, w W, ctx TriggerContext) TriggerResult
	// OnProcessingTime is called when a processing-time timer of w fires.
	OnProcessingTime(time int64, w W, ctx TriggerContext) TriggerResult
	// Clear removes what the trigger keeps for w (its timers); the
	// operator calls it when the window's state goes.
	Clear(w W, ctx TriggerContext)
}

// MergingTrigger is the optional hook of a trigger of merging windows:
// OnMerge is called for the window that merged windows became (the
// trigger's State is summed already).
type MergingTrigger[W Window] interface {
	OnMerge(w W, ctx TriggerContext)
}

// EventTimeTrigger fires a window once the watermark passes its end, and
// again for each late record within the allowed lateness. It is the
// default trigger of event-time assigners.
func EventTimeTrigger[T any, W Window]() Trigger[T, W] { return eventTimeTrigger[T, W]{} }

type eventTimeTrigger[T any, W Window] struct{}

func (eventTimeTrigger[T, W]) OnElement(_ T, _ int64, w W, ctx TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire // late, within the allowed lateness
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	return Continue
}

func (eventTimeTrigger[T, W]) OnEventTime(time int64, w W, _ TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	return Continue
}

func (eventTimeTrigger[T, W]) OnProcessingTime(int64, W, TriggerContext) TriggerResult {
	return Continue
}
func (eventTimeTrigger[T, W]) Clear(w W, ctx TriggerContext) {
	ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}
func (eventTimeTrigger[T, W]) OnMerge(w W, ctx TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

// ProcessingTimeTrigger fires a window when the processing time reaches
// its end. It is the default trigger of processing-time assigners.
func ProcessingTimeTrigger[T any, W Window]() Trigger[T, W] { return processingTimeTrigger[T, W]{} }

type processingTimeTrigger[T any, W Window] struct{}

func (processingTimeTrigger[T, W]) OnElement(_ T, _ int64, w W, ctx TriggerContext) TriggerResult {
	ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	return Continue
}
func (processingTimeTrigger[T, W]) OnEventTime(int64, W, TriggerContext) TriggerResult {
	return Continue
}
func (processingTimeTrigger[T, W]) OnProcessingTime(int64, W, TriggerContext) TriggerResult {
	return Fire
}
func (processingTimeTrigger[T, W]) Clear(w W, ctx TriggerContext) {
	ctx.DeleteProcessingTimeTimer(w.MaxTimestamp())
}
func (processingTimeTrigger[T, W]) OnMerge(w W, ctx TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentProcessingTime() {
		ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	}
}

// CountTrigger fires a window each time it received n more records (n
// >= 1). It counts in the TriggerContext's State.
func CountTrigger[T any, W Window](n int64) Trigger[T, W] { return countTrigger[T, W]{n: n} }

type countTrigger[T any, W Window] struct{ n int64 }

func (c countTrigger[T, W]) OnElement(_ T, _ int64, _ W, ctx TriggerContext) TriggerResult {
	s := ctx.State()
	n, _ := s.Value()
	n++
	if n >= c.n {
		s.Clear()
		return Fire
	}
	s.Update(n)
	return Continue
}
func (countTrigger[T, W]) OnEventTime(int64, W, TriggerContext) TriggerResult      { return Continue }
func (countTrigger[T, W]) OnProcessingTime(int64, W, TriggerContext) TriggerResult { return Continue }
func (countTrigger[T, W]) Clear(_ W, ctx TriggerContext)                           { ctx.State().Clear() }
func (c countTrigger[T, W]) OnMerge(_ W, ctx TriggerContext)                       {}
func (c countTrigger[T, W]) validate() error {
	if c.n < 1 {
		return fmt.Errorf("count trigger of %d records, want >= 1", c.n)
	}
	return nil
}

// PurgingTrigger turns the Fire of trigger t into FireAndPurge: each firing
// emits only what arrived since the previous one.
func PurgingTrigger[T any, W Window](t Trigger[T, W]) Trigger[T, W] { return purgingTrigger[T, W]{t} }

type purgingTrigger[T any, W Window] struct{ t Trigger[T, W] }

func purge(r TriggerResult) TriggerResult {
	if r == Fire {
		return FireAndPurge
	}
	return r
}

func (p purgingTrigger[T, W]) OnElement(rec T, ts int64, w W, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnElement(rec, ts, w, ctx))
}
func (p purgingTrigger[T, W]) OnEventTime(time int64, w W, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnEventTime(time, w, ctx))
}
func (p purgingTrigger[T, W]) OnProcessingTime(time int64, w W, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnProcessingTime(time, w, ctx))
}
func (p purgingTrigger[T, W]) Clear(w W, ctx TriggerContext) { p.t.Clear(w, ctx) }
func (p purgingTrigger[T, W]) OnMerge(w W, ctx TriggerContext) {
	if m, ok := p.t.(MergingTrigger[W]); ok {
		m.OnMerge(w, ctx)
	}
}
func (p purgingTrigger[T, W]) validate() error {
	if v, ok := p.t.(interface{ validate() error }); ok {
		return v.validate()
	}
	return nil
}

// neverTrigger is the default trigger of GlobalWindows.
type neverTrigger[T any, W Window] struct{}

func (neverTrigger[T, W]) OnElement(T, int64, W, TriggerContext) TriggerResult { return Continue }
func (neverTrigger[T, W]) OnEventTime(int64, W, TriggerContext) TriggerResult  { return Continue }
func (neverTrigger[T, W]) OnProcessingTime(int64, W, TriggerContext) TriggerResult {
	return Continue
}
func (neverTrigger[T, W]) Clear(W, TriggerContext) {}
