package window

import (
	"math"
	"slices"
)

// Cleanup holds the clean-up rules of a window operator: a window's state
// goes at its cleanup time (its max timestamp plus the allowed lateness),
// measured in event time or in processing time.
type Cleanup struct {
	// EventTime tells that windows are measured against the watermark;
	// otherwise against processing time.
	EventTime bool
	// Lateness is the allowed lateness in milliseconds (0: none).
	Lateness int64
}

// Time is when the state of a window whose max timestamp is maxTimestamp
// goes: math.MaxInt64 (never: no timer is needed) for the global window.
func (c Cleanup) Time(maxTimestamp int64) int64 { return CleanupTime(maxTimestamp, c.Lateness) }

// Gone reports whether the state of a window whose max timestamp is
// maxTimestamp is gone already at watermark wm (event time only: in
// processing time a window assigned now is never gone).
func (c Cleanup) Gone(maxTimestamp, wm int64) bool {
	return c.EventTime && c.Time(maxTimestamp) <= wm
}

// Dropped reports whether a record at ts that no window took is late
// beyond the allowed lateness at watermark wm (Flink: ts + lateness <=
// watermark); such a record goes to the late-data side output.
func (c Cleanup) Dropped(ts, wm int64) bool {
	return c.EventTime && ts <= wm-c.Lateness
}

// IsCleanupTimer reports whether a timer at ts, of the operator's own time
// domain (eventTime), is the cleanup timer of a window whose max timestamp
// is maxTimestamp.
func (c Cleanup) IsCleanupTimer(eventTime bool, ts, maxTimestamp int64) bool {
	return eventTime == c.EventTime && ts == c.Time(maxTimestamp)
}

// NeedsTimer reports whether a window whose max timestamp is maxTimestamp
// needs a cleanup timer (the global window is kept for good).
func (c Cleanup) NeedsTimer(maxTimestamp int64) bool { return c.Time(maxTimestamp) != math.MaxInt64 }

// MergeSet updates the set of session windows in flight of a key after a
// merge (MergeSession) gave result from the windows merged: it returns the
// windows that go (merged without result, in their order) and the new set
// (cur without result and the windows that go, then result). cur is
// modified in place, as slices.DeleteFunc does; merged is too.
func MergeSet[W comparable](cur []W, result W, merged []W) (set, gone []W) {
	gone = slices.DeleteFunc(merged, func(m W) bool { return m == result })
	cur = slices.DeleteFunc(cur, func(w W) bool { return w == result || slices.Contains(gone, w) })
	return append(cur, result), gone
}
