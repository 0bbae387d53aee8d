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
)

func (k Kind) String() string {
	switch k {
	case Data:
		return "data"
	case Event:
		return "event"
	case BlockingEvent:
		return "blocking-event"
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
	credit  int
	blocked bool
}

type item[B any] struct {
	kind Kind
	val  B
}

// Push queues v of kind k behind everything queued before.
func (o *Outbox[B]) Push(k Kind, v B) {
	if o.n == len(o.items) {
		grown := make([]item[B], max(4, 2*len(o.items)))
		for i := range o.n {
			grown[i] = o.items[(o.head+i)%len(o.items)]
		}
		o.items, o.head = grown, 0
	}
	o.items[(o.head+o.n)%len(o.items)] = item[B]{k, v}
	o.n++
	if k == Data {
		o.data++
	}
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

// Available reports whether the head item may be sent now: the channel is
// not blocked, and the head is an event or a buffer with credit for it.
func (o *Outbox[B]) Available() bool {
	if o.n == 0 || o.blocked {
		return false
	}
	return o.items[o.head].kind != Data || o.credit > 0
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
	}
	return it.kind, it.val, o.data
}

// Credit is the credit left; Backlog the queued data items; Queued all
// queued items; Blocked whether an aligned barrier blocks the channel.
func (o *Outbox[B]) Credit() int   { return o.credit }
func (o *Outbox[B]) Backlog() int  { return o.data }
func (o *Outbox[B]) Queued() int   { return o.n }
func (o *Outbox[B]) Blocked() bool { return o.blocked }

// Drain removes and returns every queued item in order, for a channel that
// is cancelled or failed (and, later, for an unaligned barrier, which
// overtakes the queued buffers and persists them with the snapshot).
func (o *Outbox[B]) Drain(yield func(Kind, B)) {
	for o.n > 0 {
		it := o.items[o.head]
		var zero item[B]
		o.items[o.head] = zero
		o.head = (o.head + 1) % len(o.items)
		o.n--
		yield(it.kind, it.val)
	}
	o.data = 0
}
