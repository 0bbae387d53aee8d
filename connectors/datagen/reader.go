package datagen

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirstream/weir/connector"
)

// maxCatchUp bounds how far behind its schedule a rate-limited reader
// remembers being, so that a long stall is not followed by a long burst.
const maxCatchUp = time.Second

var errClosed = errors.New("datagen: reader is closed")

// ready is returned by Available when Poll can make progress now.
var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// cursor is a split being read.
type cursor struct {
	id   string
	span span
	next int64
}

// remaining is the number of records the split still has to emit.
func (c *cursor) remaining() int64 {
	limit := c.span.limit()
	if c.next >= limit {
		return 0
	}
	return (limit-c.next-1)/c.span.step + 1
}

type reader[T any] struct {
	gen   func(i int64) T
	fill  func(buf []T, first, step int64) // nil: call gen per record
	n     int64
	batch int
	// buf holds one Poll's records of a split when the emitter takes
	// batches (connector.BatchEmitter); reused from Poll to Poll, and
	// cleared after use when T holds pointers (clearBuf).
	buf      []T
	clearBuf bool

	// splits holds the unfinished splits in the order they were assigned;
	// Poll reads the first one.
	splits []*cursor
	ids    map[string]bool
	noMore bool
	// wake is closed when AddSplits or NoMoreSplits ends a wait for splits.
	wake chan struct{}

	// interval is the time between two records of this subtask; 0 means no
	// rate limit.
	interval time.Duration
	// due is when the next record may be emitted; zero until the first Poll
	// (the schedule starts when reading does, not when the reader is built).
	due time.Time
	// alarm signals when the next record is due, while rateWait is set.
	alarm    connector.Alarm
	rateWait bool

	closed bool
}

func (r *reader[T]) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	// Check every split before taking any, so that a bad one leaves the
	// reader as it was.
	cursors := make([]*cursor, 0, len(splits))
	seen := make(map[string]bool, len(splits))
	for _, st := range splits {
		if r.ids[st.ID] || seen[st.ID] {
			return fmt.Errorf("datagen: split %q assigned twice", st.ID)
		}
		seen[st.ID] = true
		s, next, err := decodeSplit(st, r.n)
		if err != nil {
			return fmt.Errorf("datagen: add splits: %w", err)
		}
		cursors = append(cursors, &cursor{id: st.ID, span: s, next: next})
	}
	for _, c := range cursors {
		r.ids[c.id] = true
		if c.remaining() > 0 {
			r.splits = append(r.splits, c)
		}
	}
	r.wakeUp()
	return nil
}

func (r *reader[T]) NoMoreSplits() {
	r.noMore = true
	r.wakeUp()
}

func (r *reader[T]) wakeUp() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func (r *reader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	r.rateWait = false
	budget := int64(r.batch)
	if r.interval > 0 && len(r.splits) > 0 {
		now := time.Now()
		if r.due.IsZero() {
			r.due = now
		}
		if now.Before(r.due) {
			r.waitUntil(now)
			return connector.NothingAvailable, nil
		}
		if now.Sub(r.due) > maxCatchUp {
			r.due = now.Add(-maxCatchUp)
		}
		budget = min(budget, 1+int64(now.Sub(r.due)/r.interval))
	}

	var emitted int64
	for emitted < budget && len(r.splits) > 0 {
		c := r.splits[0]
		rem := c.remaining()
		n := min(budget-emitted, rem)
		// c.next + j*step stays below the span's limit, so it cannot
		// overflow even for an unbounded span near math.MaxInt64.
		if bo, ok := out.(connector.BatchEmitter[T]); ok {
			r.emitBatch(bo, c, n)
		} else {
			for j := range n {
				out.Emit(r.gen(c.next + j*c.span.step))
			}
		}
		emitted += n
		if n == rem {
			c.next = c.span.limit()
			r.splits = r.splits[1:]
		} else {
			c.next += n * c.span.step
		}
	}
	if r.interval > 0 {
		r.due = r.due.Add(time.Duration(emitted) * r.interval)
	}

	switch {
	case len(r.splits) > 0:
		return connector.MoreAvailable, nil
	case r.noMore:
		return connector.EndOfInput, nil
	default:
		return connector.NothingAvailable, nil
	}
}

// emitBatch generates the n records of c from c.next into r.buf and hands
// them to out in one call. n is at most the batch size.
func (r *reader[T]) emitBatch(out connector.BatchEmitter[T], c *cursor, n int64) {
	buf := r.buf[:0]
	if int64(cap(buf)) < n {
		buf = make([]T, 0, r.batch)
	}
	buf = buf[:n]
	if r.fill != nil {
		r.fill(buf, c.next, c.span.step)
	} else {
		gen, next, step := r.gen, c.next, c.span.step
		for j := range buf {
			buf[j] = gen(next + int64(j)*step)
		}
	}
	out.EmitBatch(buf)
	if r.clearBuf {
		clear(buf) // hold no references to records that went on
	}
	r.buf = buf
}

// waitUntil arms the timer for r.due.
func (r *reader[T]) waitUntil(now time.Time) {
	r.alarm.Set(r.due.Sub(now))
	r.rateWait = true
}

// Available returns the rate timer's channel when Poll was ahead of the
// schedule, a channel closed by the next AddSplits or NoMoreSplits when the
// reader waits for splits, and a closed channel otherwise.
func (r *reader[T]) Available() <-chan struct{} {
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

func (r *reader[T]) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	states := make([]connector.SplitState, 0, len(r.splits))
	for _, c := range r.splits {
		st := c.span.splitState(c.id)
		st.Position = encodePosition(c.next)
		states = append(states, st)
	}
	return states, nil
}

func (r *reader[T]) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.alarm.Stop()
	r.wakeUp()
	r.splits = nil
	r.buf = nil
	return nil
}

// durationFromSeconds converts seconds to a Duration, clamped to
// [0, math.MaxInt64] nanoseconds; less than a nanosecond gives 0.
func durationFromSeconds(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case ns < 1:
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	default:
		return time.Duration(ns)
	}
}
