package credit

import (
	"errors"
	"fmt"
)

// Kind is the kind of an item queued in an Outbox.
type Kind uint8

const (
	// Data is a buffer of records: it needs one credit.
	Data Kind = iota + 1
	// Event is an in-band event (watermark, end of partition, cancel
	// marker, unaligned barrier): it needs no credit, since the receiver
	// keeps events outside its buffer pool (as Flink does), but it never
	// overtakes the data queued before it.
	Event
	// BlockingEvent is an aligned checkpoint barrier: like Event, and once
	// it is sent the channel sends nothing more until Resume.
	BlockingEvent
	// PriorityEvent is an unaligned checkpoint barrier or a barrier
	// announcement (Flink's priority events): pushed with PushPriority, it
	// overtakes every item not sent yet (but the priority events queued
	// before it), needs no credit, and goes even while an aligned barrier
	// blocks the channel, since it is no data.
	PriorityEvent
)

func (k Kind) String() string {
	switch k {
	case Data:
		return "data"
	case Event:
		return "event"
	case BlockingEvent:
		return "blocking-event"
	case PriorityEvent:
		return "priority-event"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ErrNotBlocked is returned by Resume on a channel that is not blocked.
var ErrNotBlocked = errors.New("resume-consumption on a channel that is not blocked")

// Outbox is the sending side's accounting of one channel: the items queued
// in order, the credit its receiver granted, and whether an aligned barrier
// blocked it. The shell pushes what the producer writes, and pops what may
// go on the wire; Available says whether Pop may be called.
//
// An Outbox is not safe for concurrent use; it does no I/O and reads no
// clock.
type Outbox[B any] struct {
	items   []item[B] // ring buffer
	head, n int
	data    int // queued Data items
	prio    int // queued priority events, all at the head
	credit  int
	blocked bool
}

type item[B any] struct {
	kind Kind
	val  B
}

// Push queues v of kind k (not PriorityEvent: see PushPriority) behind
// everything queued before.
func (o *Outbox[B]) Push(k Kind, v B) {
	if k == PriorityEvent {
		panic("credit: Push of a priority event; call PushPriority")
	}
	o.grow()
	o.items[(o.head+o.n)%len(o.items)] = item[B]{k, v}
	o.n++
	if k == Data {
		o.data++
	}
}

func (o *Outbox[B]) grow() {
	if o.n == len(o.items) {
		grown := make([]item[B], max(4, 2*len(o.items)))
		for i := range o.n {
			grown[i] = o.items[(o.head+i)%len(o.items)]
		}
		o.items, o.head = grown, 0
	}
}

// PushPriority queues v, a priority event, ahead of every item not sent
// yet but behind the priority events queued before it, and calls
// overtaken (when not nil) with each item it overtook, in order: they stay
// queued behind it. The items a priority event overtakes are what an
// unaligned barrier stores as the sender's output channel state.
func (o *Outbox[B]) PushPriority(v B, overtaken func(Kind, B)) {
	o.grow()
	if overtaken != nil {
		for i := o.prio; i < o.n; i++ {
			it := o.items[(o.head+i)%len(o.items)]
			overtaken(it.kind, it.val)
		}
	}
	// Shift the non-priority items back by one, from the tail.
	for i := o.n; i > o.prio; i-- {
		o.items[(o.head+i)%len(o.items)] = o.items[(o.head+i-1)%len(o.items)]
	}
	o.items[(o.head+o.prio)%len(o.items)] = item[B]{PriorityEvent, v}
	o.n++
	o.prio++
}

// Prioritize moves the first queued event that match accepts (an aligned
// barrier whose timeout passed while it was still queued) to the head as a
// priority event, replacing its value by to, and calls overtaken with each
// item before it, in order. It reports false, changing nothing, when no
// queued event matches: the event was sent already.
func (o *Outbox[B]) Prioritize(match func(B) bool, to B, overtaken func(Kind, B)) bool {
	at := -1
	for i := o.prio; i < o.n; i++ {
		it := o.items[(o.head+i)%len(o.items)]
		if it.kind != Data && match(it.val) {
			at = i
			break
		}
	}
	if at < 0 {
		return false
	}
	for i := o.prio; i < at; i++ {
		it := o.items[(o.head+i)%len(o.items)]
		if overtaken != nil {
			overtaken(it.kind, it.val)
		}
	}
	for i := at; i > o.prio; i-- {
		o.items[(o.head+i)%len(o.items)] = o.items[(o.head+i-1)%len(o.items)]
	}
	o.items[(o.head+o.prio)%len(o.items)] = item[B]{PriorityEvent, to}
	o.prio++
	return true
}

// AddCredit adds n (>= 1) credits granted by the receiver.
func (o *Outbox[B]) AddCredit(n int) error {
	if n < 1 {
		return fmt.Errorf("add-credit of %d, want >= 1", n)
	}
	o.credit += n
	return nil
}

// Resume unblocks a channel blocked by an aligned barrier.
func (o *Outbox[B]) Resume() error {
	if !o.blocked {
		return ErrNotBlocked
	}
	o.blocked = false
	return nil
}

// Available reports whether the head item may be sent now: it is a
// priority event, or the channel is not blocked and the head is an event
// or a buffer with credit for it.
func (o *Outbox[B]) Available() bool {
	if o.n == 0 {
		return false
	}
	if o.prio > 0 {
		return true
	}
	return !o.blocked && (o.items[o.head].kind != Data || o.credit > 0)
}

// Pop takes the head item, which must be Available (Pop panics otherwise: a
// bug in the shell, not bad input). A data item spends one credit; backlog
// is the number of data items still queued, which the shell sends with it
// so that the receiver can ask for floating buffers. A blocking event
// blocks the channel.
func (o *Outbox[B]) Pop() (k Kind, v B, backlog int) {
	if !o.Available() {
		panic("credit: Pop on an Outbox that is not available")
	}
	it := o.items[o.head]
	var zero item[B]
	o.items[o.head] = zero
	o.head = (o.head + 1) % len(o.items)
	o.n--
	switch it.kind {
	case Data:
		o.data--
		o.credit--
	case BlockingEvent:
		o.blocked = true
	case PriorityEvent:
		o.prio--
	}
	return it.kind, it.val, o.data
}

// Credit is the credit left; Backlog the queued data items; Queued all
// queued items; Priority the queued priority events; Blocked whether an
// aligned barrier blocks the channel.
func (o *Outbox[B]) Credit() int   { return o.credit }
func (o *Outbox[B]) Priority() int { return o.prio }
func (o *Outbox[B]) Backlog() int  { return o.data }
func (o *Outbox[B]) Queued() int   { return o.n }
func (o *Outbox[B]) Blocked() bool { return o.blocked }

// Drain removes and returns every queued item in order, for a channel that
// is cancelled or failed.
func (o *Outbox[B]) Drain(yield func(Kind, B)) {
	for o.n > 0 {
		it := o.items[o.head]
		var zero item[B]
		o.items[o.head] = zero
		o.head = (o.head + 1) % len(o.items)
		o.n--
		yield(it.kind, it.val)
	}
	o.data, o.prio = 0, 0
}
