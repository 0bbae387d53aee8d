package runtime

import (
	"container/heap"
	"time"
)

// ProcessingTimers is a task's processing-time service: callbacks due at a
// wall-clock time (epoch milliseconds), run on the task goroutine between
// batches. Periodic watermarks, processing-time timers of keyed functions
// and processing-time windows use it. Not safe for concurrent use: Register
// only from the task goroutine.
type ProcessingTimers struct {
	h     timerHeap
	seq   uint64
	clock func() time.Time
	timer *time.Timer
}

// NewProcessingTimers returns an empty service reading clock (time.Now when
// nil).
func NewProcessingTimers(clock func() time.Time) *ProcessingTimers {
	if clock == nil {
		clock = time.Now
	}
	return &ProcessingTimers{clock: clock}
}

// Now returns the current processing time in epoch milliseconds.
func (p *ProcessingTimers) Now() int64 { return p.clock().UnixMilli() }

// Register runs fn on the task goroutine once the processing time reaches
// at. Callbacks due at the same time run in registration order.
func (p *ProcessingTimers) Register(at int64, fn func(now int64) error) {
	p.seq++
	heap.Push(&p.h, timerEntry{at: at, seq: p.seq, fn: fn})
}

// Len returns the number of registered callbacks.
func (p *ProcessingTimers) Len() int { return len(p.h) }

// fireDue runs every callback due now; it stops at the first error.
func (p *ProcessingTimers) fireDue() error {
	if len(p.h) == 0 {
		return nil
	}
	now := p.Now()
	for len(p.h) > 0 && p.h[0].at <= now {
		e := heap.Pop(&p.h).(timerEntry)
		if err := e.fn(now); err != nil {
			return err
		}
	}
	return nil
}

// wait returns a channel that fires when the earliest callback is due, or
// nil when none is registered.
func (p *ProcessingTimers) wait() <-chan time.Time {
	if len(p.h) == 0 {
		return nil
	}
	d := time.Duration(p.h[0].at-p.Now()) * time.Millisecond
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	return p.timer.C
}

func (p *ProcessingTimers) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

type timerEntry struct {
	at  int64
	seq uint64
	fn  func(now int64) error
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	return e
}
