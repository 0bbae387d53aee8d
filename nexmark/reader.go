package nexmark

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/weirstream/weir/connector"
)

// maxCatchUp bounds how far behind its schedule a rate-limited reader
// remembers being, so that a long stall is not followed by a long burst.
const maxCatchUp = time.Second

// ready is returned by Available when Poll can make progress now.
var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// cursor is a split being generated.
type cursor struct {
	id   string
	sp   splitSpec
	tl   timeline
	next int64 // index of the next event
}

// number is the event number of the cursor's next event.
func (c *cursor) number() int64 { return c.sp.firstEventNumber + c.next }

// generatorReader generates the events of its splits. With several splits
// it merges them in the order of their events' (unpermuted) event times, so
// that a reader restored from the splits of several subtasks still moves
// through event time as they did.
type generatorReader struct {
	gen   *Generator
	hash  uint64
	batch int
	paced bool

	// splits holds the unfinished splits in the order they were assigned.
	splits []*cursor
	ids    map[string]bool
	noMore bool
	// wake is closed when AddSplits or NoMoreSplits ends a wait for splits.
	wake chan struct{}

	// A paced reader emits the event of (unpermuted) event time t at
	// startWall + (t - startTS); the schedule starts with the first Poll.
	started   bool
	startWall time.Time
	startTS   int64
	// alarm signals when the next record is due, while rateWait is set.
	alarm    connector.Alarm
	rateWait bool

	closed bool
}

func (r *generatorReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	// Check every split before taking any, so that a bad one leaves the
	// reader as it was.
	cursors := make([]*cursor, 0, len(splits))
	seen := make(map[string]bool, len(splits))
	for _, st := range splits {
		if r.ids[st.ID] || seen[st.ID] {
			return fmt.Errorf("nexmark: split %q assigned twice", st.ID)
		}
		seen[st.ID] = true
		sp, next, err := decodeSplit(st, r.hash)
		if err != nil {
			return fmt.Errorf("nexmark: add splits: %w", err)
		}
		tl := newTimeline(&r.gen.cfg, sp.firstEventID, sp.generators)
		cursors = append(cursors, &cursor{id: st.ID, sp: sp, tl: tl, next: next})
	}
	for _, c := range cursors {
		r.ids[c.id] = true
		if c.next < c.sp.limit() {
			r.splits = append(r.splits, c)
		}
	}
	r.wakeUp()
	return nil
}

func (r *generatorReader) NoMoreSplits() {
	r.noMore = true
	r.wakeUp()
}

func (r *generatorReader) wakeUp() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// wallTS is the event time that paces the cursor's next event: that of its
// event number before the out-of-order permutation, which never decreases.
func (r *generatorReader) wallTS(c *cursor) int64 {
	return c.tl.timestamp(r.gen.cfg.BaseTime, c.number())
}

// pick returns the index of the split whose next event comes first.
func (r *generatorReader) pick() int {
	best, bestTS, bestNum := 0, r.wallTS(r.splits[0]), r.splits[0].number()
	for i, c := range r.splits[1:] {
		ts, num := r.wallTS(c), c.number()
		if ts < bestTS || (ts == bestTS && num < bestNum) {
			best, bestTS, bestNum = i+1, ts, num
		}
	}
	return best
}

func (r *generatorReader) Poll(out connector.Emitter[Event]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	r.rateWait = false
	var now time.Time
	if r.paced && len(r.splits) > 0 {
		now = time.Now()
	}
	for emitted := 0; emitted < r.batch && len(r.splits) > 0; emitted++ {
		i := 0
		if len(r.splits) > 1 {
			i = r.pick()
		}
		c := r.splits[i]
		if r.paced && !r.onSchedule(c, now) {
			break
		}
		ev := r.gen.event(&c.tl, c.number())
		out.EmitAt(ev, ev.DateTime())
		c.next += c.sp.step
		if c.next >= c.sp.limit() {
			r.splits = append(r.splits[:i], r.splits[i+1:]...)
		}
	}
	switch {
	case r.rateWait:
		return connector.NothingAvailable, nil
	case len(r.splits) > 0:
		return connector.MoreAvailable, nil
	case r.noMore:
		return connector.EndOfInput, nil
	default:
		return connector.NothingAvailable, nil
	}
}

// onSchedule reports whether c's next event is due at now; if it is not, it
// arms the timer for when it will be.
func (r *generatorReader) onSchedule(c *cursor, now time.Time) bool {
	ts := r.wallTS(c)
	if !r.started {
		r.started, r.startWall, r.startTS = true, now, ts
	}
	due := r.startWall.Add(time.Duration(ts-r.startTS) * time.Millisecond)
	if lag := now.Sub(due); lag > maxCatchUp {
		r.startWall = r.startWall.Add(lag - maxCatchUp)
	} else if lag < 0 {
		r.waitFor(-lag)
		return false
	}
	return true
}

// waitFor arms the timer to fire after d.
func (r *generatorReader) waitFor(d time.Duration) {
	r.alarm.Set(d)
	r.rateWait = true
}

// Available returns the rate timer's channel when Poll was ahead of the
// schedule, a channel closed by the next AddSplits or NoMoreSplits when the
// reader waits for splits, and a closed channel otherwise.
func (r *generatorReader) Available() <-chan struct{} {
	switch {
	case r.rateWait:
		return r.alarm.C()
	case len(r.splits) == 0 && !r.noMore:
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		return r.wake
	default:
		return ready
	}
}

func (r *generatorReader) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	states := make([]connector.SplitState, 0, len(r.splits))
	for _, c := range r.splits {
		st := c.sp.state(c.id)
		st.Position = binary.BigEndian.AppendUint64(nil, uint64(c.number()))
		states = append(states, st)
	}
	return states, nil
}

func (r *generatorReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.alarm.Stop()
	r.wakeUp()
	r.splits = nil
	return nil
}
