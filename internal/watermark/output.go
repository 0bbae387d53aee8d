package watermark

import (
	"strconv"
	"strings"
)

// Output is what Splits or Merger asks its task to send downstream after one
// call, in this order: an active status if BecameActive, a watermark if
// Advanced, an idle status if BecameIdle. The zero Output sends nothing.
//
// Sent watermarks strictly increase, and a watermark is only sent while the
// output is active: an output that was idle becomes active first.
type Output struct {
	// BecameActive: the output was idle and holds back downstream again.
	// BecameActive and BecameIdle are never both set.
	BecameActive bool
	// Advanced: Watermark is the new watermark, greater than every one sent
	// before.
	Advanced  bool
	Watermark int64
	// BecameIdle: every input is idle; downstream stops waiting for this one.
	// A watermark sent in the same Output is the last before the idle status
	// (the greatest watermark of the idle inputs, so that the order in which
	// inputs went idle does not matter).
	BecameIdle bool
}

// Empty reports whether o sends nothing.
func (o Output) Empty() bool { return !o.BecameActive && !o.Advanced && !o.BecameIdle }

// String lists what o sends, in order, one item a line: "active",
// "watermark 500", "idle".
func (o Output) String() string {
	var lines []string
	if o.BecameActive {
		lines = append(lines, "active")
	}
	if o.Advanced {
		lines = append(lines, "watermark "+FormatWatermark(o.Watermark))
	}
	if o.BecameIdle {
		lines = append(lines, "idle")
	}
	return strings.Join(lines, "\n")
}

// FormatWatermark formats a watermark for logs and scripts: "min" and "max"
// for MinWatermark and MaxWatermark, the number of milliseconds otherwise.
func FormatWatermark(wm int64) string {
	switch wm {
	case MinWatermark:
		return "min"
	case MaxWatermark:
		return "max"
	}
	return strconv.FormatInt(wm, 10)
}

// InputState is what a Splits or Merger knows of one of its inputs, for
// metrics and tests.
type InputState struct {
	// Watermark is the greatest watermark the input reached, MinWatermark
	// before its first.
	Watermark int64
	// Idle reports whether the input is idle, so that it does not hold back
	// the combined watermark.
	Idle bool
	// Ended reports (Merger only) that end of partition arrived on the
	// channel. A split that finished is forgotten instead.
	Ended bool
}

func (s InputState) String() string {
	if s.Ended {
		return "ended"
	}
	str := FormatWatermark(s.Watermark)
	if s.Idle {
		str += "/idle"
	}
	return str
}

// summary is what combine needs to know of the inputs of a Splits or
// Merger. An input is live until it ended or reached MaxWatermark: a live
// input may still send records.
type summary struct {
	live       int   // live inputs
	active     int   // live inputs that are not idle
	minActive  int64 // least watermark of the active live inputs
	maxLive    int64 // greatest watermark of the live inputs
	reachedMax bool  // some input reached MaxWatermark
}

func newSummary() summary {
	return summary{minActive: MaxWatermark, maxLive: MinWatermark}
}

func (s *summary) add(wm int64, idle bool) {
	if wm == MaxWatermark {
		s.reachedMax = true
		return
	}
	s.live++
	s.maxLive = max(s.maxLive, wm)
	if !idle {
		s.active++
		s.minActive = min(s.minActive, wm)
	}
}

// combined is the watermark and status a Splits or Merger sent downstream.
// Both start active with MinWatermark, as Flink's outputs do.
type combined struct {
	wm   int64
	idle bool
}

func newCombined() combined { return combined{wm: MinWatermark} }

// update moves the combined watermark and status to what the inputs allow
// and returns what to send:
//
//   - while some live input is active, the watermark is the least watermark
//     of the active inputs: an idle input does not hold it back, but an
//     active one always does, also one that came back from idleness behind
//     the watermark already sent (the output waits for it to catch up,
//     rather than making its records late as Flink's valve does);
//   - when every live input is idle, the output becomes idle, after a last
//     watermark: the greatest of the idle inputs (Flink's valve does this
//     flush too), so that the result does not depend on the order in which
//     the inputs went idle;
//   - when no input is live and some reached MaxWatermark, MaxWatermark is
//     sent: it passes once every input reached it or ended. When every input
//     ended without it (a stop without drain), nothing is sent, so that
//     event-time timers do not fire;
//   - a watermark is only sent when it advances, and nothing follows
//     MaxWatermark.
func (c *combined) update(s summary) Output {
	var out Output
	if c.wm == MaxWatermark {
		return out
	}
	switch {
	case s.live == 0:
		if !s.reachedMax {
			return out
		}
		out.BecameActive = c.idle
		c.idle = false
		c.advance(MaxWatermark, &out)
	case s.active == 0:
		if c.idle {
			return out
		}
		c.advance(s.maxLive, &out)
		c.idle = true
		out.BecameIdle = true
	default:
		out.BecameActive = c.idle
		c.idle = false
		c.advance(s.minActive, &out)
	}
	return out
}

func (c *combined) advance(wm int64, out *Output) {
	if wm > c.wm {
		c.wm = wm
		out.Advanced, out.Watermark = true, wm
	}
}
