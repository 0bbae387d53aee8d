package window

import (
	"fmt"
	"math"
)

// TimeWindow is the half-open interval [Start, End) in epoch milliseconds.
type TimeWindow struct {
	Start, End int64
}

// MaxTimestamp returns the largest timestamp in the window, End-1: the
// event-time trigger fires the window when the watermark reaches it.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// Intersects reports whether w and o overlap or touch (as Flink's
// TimeWindow.intersects: session windows that touch merge).
func (w TimeWindow) Intersects(o TimeWindow) bool { return w.Start <= o.End && w.End >= o.Start }

// Cover returns the smallest window holding w and o.
func (w TimeWindow) Cover(o TimeWindow) TimeWindow {
	return TimeWindow{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

func (w TimeWindow) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// Start returns the start of the window of length size (and alignment
// offset) holding ts; it works for negative timestamps too.
func Start(ts, offset, size int64) int64 {
	r := (ts - offset) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// Tumbling returns the tumbling window of size (aligned to offset) holding
// ts.
func Tumbling(ts, size, offset int64) TimeWindow {
	s := Start(ts, offset, size)
	return TimeWindow{Start: s, End: s + size}
}

// Sliding appends to dst the sliding windows of size, every slide (aligned
// to offset), that hold ts, latest start first (as Flink).
func Sliding(dst []TimeWindow, ts, size, slide, offset int64) []TimeWindow {
	last := Start(ts, offset, slide)
	for s := last; s > ts-size; s -= slide {
		dst = append(dst, TimeWindow{Start: s, End: s + size})
	}
	return dst
}

// Validate checks the parameters of a window assigner: size and gap > 0;
// slide > 0 and at most size; |offset| < slide (or size). what names the
// assigner in the error.
func Validate(what string, size, slide, offset int64) error {
	switch {
	case size <= 0:
		return fmt.Errorf("%s: size %d ms, want > 0", what, size)
	case slide <= 0:
		return fmt.Errorf("%s: slide %d ms, want > 0", what, slide)
	case slide > size:
		return fmt.Errorf("%s: slide %d ms is larger than the size %d ms; want 0 < slide <= size", what, slide, size)
	case offset <= -slide || offset >= slide:
		return fmt.Errorf("%s: offset %d ms, want |offset| < %d ms", what, offset, slide)
	}
	return nil
}

// ValidateGap checks a session gap.
func ValidateGap(what string, gap int64) error {
	if gap <= 0 {
		return fmt.Errorf("%s: gap %d ms, want > 0", what, gap)
	}
	return nil
}

// CleanupTime returns when a window's state can go: its max timestamp plus
// the allowed lateness, saturating at math.MaxInt64.
func CleanupTime(maxTimestamp, lateness int64) int64 {
	if maxTimestamp > math.MaxInt64-lateness {
		return math.MaxInt64
	}
	return maxTimestamp + lateness
}

// MergeSession merges a new session window into the existing windows of a
// key, which do not intersect each other. It returns the resulting window
// and the existing windows merged into it (none when nw intersects no
// window; the result is then nw). Since the existing windows are disjoint,
// a window between two that nw intersects intersects nw too: one pass is
// enough.
func MergeSession(existing []TimeWindow, nw TimeWindow) (result TimeWindow, merged []TimeWindow) {
	result = nw
	for _, w := range existing {
		if w.Intersects(nw) {
			merged = append(merged, w)
			result = result.Cover(w)
		}
	}
	return result, merged
}
