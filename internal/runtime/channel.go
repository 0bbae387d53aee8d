package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/typeinfo"
)

// NoTimestamp marks a record without an event-time timestamp.
const NoTimestamp = connector.NoTimestamp

// EventKind is the kind of an in-band control event.
type EventKind uint8

const (
	// EndOfPartition says the sending subtask will send nothing more.
	EndOfPartition EventKind = iota + 1
	// Barrier carries a checkpoint id (ID).
	Barrier
	// CancelBarrier aborts the alignment of a checkpoint (ID).
	CancelBarrier
	// Watermark carries event-time progress (Timestamp).
	Watermark
	// WatermarkStatus says the sending subtask became idle (ID 1) or active
	// again (ID 0): an idle input does not hold the watermark back.
	WatermarkStatus
	// BarrierAnnouncement announces barrier ID (with its Timestamp and
	// AlignedTimeoutMs), queued behind data, ahead of that data, so that
	// the consumer can switch to an unaligned snapshot before the barrier
	// reaches the head of the queue. Over the network it travels as a
	// priority event.
	BarrierAnnouncement
)

func (k EventKind) String() string {
	switch k {
	case EndOfPartition:
		return "end-of-partition"
	case Barrier:
		return "barrier"
	case CancelBarrier:
		return "cancel-barrier"
	case Watermark:
		return "watermark"
	case WatermarkStatus:
		return "watermark-status"
	case BarrierAnnouncement:
		return "barrier-announcement"
	}
	return "unknown-event"
}

// Event is an in-band control event.
type Event struct {
	Kind      EventKind
	ID        int64 // checkpoint id of a barrier or cancel marker
	Timestamp int64 // watermark time, or the trigger time (epoch ms) of a barrier
	// Options of a barrier; nil for other events.
	Options *BarrierOptions
	// Unaligned: the barrier overtook the data (an unaligned checkpoint).
	Unaligned bool
	// AlignedTimeoutMs > 0: the barrier is aligned, and a task still
	// aligning it that long after Timestamp switches to unaligned.
	AlignedTimeoutMs int64
	// slot, on an aligned barrier with a timeout queued for one target,
	// tells its producer that the consumer took it (channelstate.go).
	slot *barrierSlot
	// priority: an unaligned barrier or an announcement put at the head of
	// a bridged channel's queue, which its network pump sends as a
	// priority event (netexchange.go); net receives the records it
	// overtook in the network's queues (output state). inflight, on a
	// barrier a receiving pump moved ahead of records received and not yet
	// consumed, holds copies of those records (input state).
	priority bool
	net      *netSlot
	inflight any
}

// envelope is one element of a channel's queue: a batch of records, or an
// event when recs is nil.
type envelope[T any] struct {
	recs []T
	ts   []int64 // nil when no record of the batch has a timestamp
	ev   Event
}

// Channel connects one producing subtask to one consuming subtask.
type Channel[T any] struct {
	queue    chan envelope[T]
	free     chan []T
	freeTS   chan []int64
	doorbell chan struct{} // the consuming task's; rung after each send
	stats    *ChannelStats
	// clearRecs: T holds pointers, so a recycled batch is cleared first.
	clearRecs bool
	// ended: the end of partition was queued (a network pump then sends
	// what is queued even after the attempt's stop).
	ended atomic.Bool
	// bridged: a network pump reads the queue (Send); prio counts the
	// priority envelopes put at its head and not yet taken, and prioBell
	// wakes the pump when one is put there while it waits for the network.
	bridged  bool
	prio     atomic.Int32
	prioBell chan struct{}
	// recv makes a drain atomic for the consumer: the consumer takes
	// envelopes only under it (tryRecv), and drainQueue holds it while it
	// empties the queue. Without it a consumer could take an envelope
	// from the middle of what a drain takes (the drain got the ones
	// before and after it), and the envelopes put back behind an
	// overtaking barrier would then be out of order with it: a record
	// queued behind a barrier read before it, or one queued in front of
	// an aligned barrier read after it (duplicates and losses in the
	// exactly-once harness with aligned-checkpoint timeouts).
	recv sync.Mutex
	// net is the figures of the network channel that carries this one
	// across processes: the output's for Send's channel, the input's for
	// the one Receive fills; nil for a channel in process.
	net *network.ChannelMetrics
}

// NetworkMetrics returns the figures of the network channel that carries
// c to or from another process (Send's channel: its network output;
// Receive's destination: its network input), whose BytesOut or BytesIn
// count the payload bytes sent or received; nil when c stays in process.
func (c *Channel[T]) NetworkMetrics() *network.ChannelMetrics { return c.net }

// tryRecv takes the envelope at the head of the queue without waiting;
// the only way a consumer takes one. A consumer that waits for one waits
// on the doorbell, which every send rings.
func (c *Channel[T]) tryRecv() (envelope[T], bool) {
	c.recv.Lock()
	defer c.recv.Unlock()
	select {
	case env := <-c.queue:
		return env, true
	default:
		return envelope[T]{}, false
	}
}

// drainQueue appends every envelope queued to out, in order, and returns
// it: the queue is empty then, and until its producer (the caller) sends
// again. The consumer may have taken the head of the queue just before,
// never one behind an envelope drained.
func (c *Channel[T]) drainQueue(out []envelope[T]) []envelope[T] {
	c.recv.Lock()
	defer c.recv.Unlock()
	for {
		select {
		case env := <-c.queue:
			out = append(out, env)
		default:
			return out
		}
	}
}

// putPriority puts env, an unaligned barrier or an announcement, in the
// queue, which the caller has just drained: at its head. On a bridged
// channel it marks it for the pump and wakes the pump (before the drained
// envelopes go back behind it, so that a pump waiting for the network
// takes it even while the queue is full).
func (c *Channel[T]) putPriority(env envelope[T], done <-chan struct{}) (waited int64, ok bool) {
	if c.bridged {
		env.ev.priority = true
	}
	waited, ok = c.send(env, done)
	if ok && c.bridged {
		c.prio.Add(1)
		select {
		case c.prioBell <- struct{}{}:
		default:
		}
	}
	return waited, ok
}

// ChannelStats are a channel's counters, read concurrently by metrics.
type ChannelStats struct {
	// BackpressuredNanos is the time senders spent waiting for queue space.
	BackpressuredNanos atomic.Int64
	// BatchesAllocated counts the batches ever allocated for the channel;
	// with recycling it stays near the queue's capacity however many records
	// flow, which is what bounds a job's memory.
	BatchesAllocated atomic.Int64
}

// A batch is either queued, held by the sender (being filled), held by the
// receiver (being processed) or free. Allocation happens only when none is
// free, so at most capacity+2 batches ever exist, and the free list, with room
// for all of them, never drops one.

// NewChannel creates a channel holding at most capacity batches (>= 1) that
// wakes the consuming task through doorbell.
func NewChannel[T any](capacity int, doorbell chan struct{}, stats *ChannelStats) *Channel[T] {
	if stats == nil {
		stats = new(ChannelStats)
	}
	return &Channel[T]{
		queue:     make(chan envelope[T], capacity),
		free:      make(chan []T, capacity+2),
		freeTS:    make(chan []int64, capacity+2),
		doorbell:  doorbell,
		stats:     stats,
		clearRecs: typeinfo.HoldsPointers[T](),
	}
}

// send enqueues env, waiting while the queue is full; it gives up when done
// is closed and reports false. It returns how long it waited (0 when the
// queue had room: the clock is read only on the backpressured path).
func (c *Channel[T]) send(env envelope[T], done <-chan struct{}) (waited int64, ok bool) {
	waited, ok, _ = c.sendOrWake(env, done, nil)
	return waited, ok
}

// sendOrWake is send that also gives up, without sending (woke), when wake
// is closed while it waits.
func (c *Channel[T]) sendOrWake(env envelope[T], done, wake <-chan struct{}) (waited int64, ok, woke bool) {
	return c.sendOrWake2(env, done, wake, nil)
}

// sendOrWake2 is sendOrWake with two channels that wake it.
func (c *Channel[T]) sendOrWake2(env envelope[T], done, wake, wake2 <-chan struct{}) (waited int64, ok, woke bool) {
	select {
	case c.queue <- env:
	default:
		start := time.Now()
		select {
		case c.queue <- env:
		case <-done:
			return 0, false, false
		case <-wake:
			woke = true
		case <-wake2:
			woke = true
		}
		waited = int64(time.Since(start))
		c.stats.BackpressuredNanos.Add(waited)
		if woke {
			return waited, true, true
		}
	}
	if env.recs == nil && env.ev.Kind == EndOfPartition {
		c.ended.Store(true)
	}
	select {
	case c.doorbell <- struct{}{}:
	default:
	}
	return waited, true, false
}

// trySend enqueues env if the queue has room, without waiting.
func (c *Channel[T]) trySend(env envelope[T]) bool {
	select {
	case c.queue <- env:
		c.sent(env)
		return true
	default:
		return false
	}
}

// sent does what follows a send: note the end of partition, ring the
// consumer's doorbell.
func (c *Channel[T]) sent(env envelope[T]) {
	if env.recs == nil && env.ev.Kind == EndOfPartition {
		c.ended.Store(true)
	}
	select {
	case c.doorbell <- struct{}{}:
	default:
	}
}

// batch returns an empty batch with room for n records, recycled if possible.
func (c *Channel[T]) batch(n int) []T {
	select {
	case b := <-c.free:
		return b
	default:
		c.stats.BatchesAllocated.Add(1)
		return make([]T, 0, n)
	}
}

func (c *Channel[T]) timestamps(n int) []int64 {
	select {
	case b := <-c.freeTS:
		return b
	default:
		return make([]int64, 0, n)
	}
}

func (c *Channel[T]) recycle(env envelope[T]) {
	if c.clearRecs {
		clear(env.recs) // drop references so that the GC can free what records point to
	}
	select {
	case c.free <- env.recs[:0]:
	default:
	}
	if env.ts != nil {
		select {
		case c.freeTS <- env.ts[:0]:
		default:
		}
	}
}

// InputChannel is the untyped face of a channel's receiving end, as a task
// sees it.
type InputChannel interface {
	// Poll takes the next envelope without waiting. A batch of records is
	// delivered to the typed consumer and reported as data (ok, !isEvent); an
	// event is returned. ok is false when the queue is empty.
	Poll() (ev Event, isEvent, ok bool)
}

// Input binds a channel's receiving end to the operator input that consumes it.
type Input[T any] struct {
	ch  *Channel[T]
	dst BatchOutput[T] // a whole envelope per call
	// Records counts the records received.
	records *atomic.Int64
	// rec records the channel state of unaligned checkpoints; nil unless
	// SetChannelState was called. recovered is the restored input state.
	rec         *channelRecorder[T]
	recovered   []T
	recoveredTS []int64
	// inflight holds the records a receiving network pump overtook with
	// barrier inflightID: input state of that checkpoint.
	inflight   *inflightRecords[T]
	inflightID int64
}

// bindMetrics makes the input count its records in m (see Task).
func (in *Input[T]) bindMetrics(m *metrics.Task) { in.records = &m.RecordsIn }

// NewInput returns the receiving end of ch, delivering records to dst.
func NewInput[T any](ch *Channel[T], dst Output[T], records *atomic.Int64) *Input[T] {
	if records == nil {
		records = new(atomic.Int64)
	}
	return &Input[T]{ch: ch, dst: Batched(dst), records: records}
}

// Poll implements InputChannel.
func (in *Input[T]) Poll() (Event, bool, bool) {
	if env, ok := in.ch.tryRecv(); ok {
		if env.recs == nil {
			if env.ev.slot != nil {
				env.ev.slot.taken()
			}
			if env.ev.inflight != nil && (in.inflight == nil || env.ev.ID > in.inflightID) {
				// A stale barrier (of an aborted checkpoint, overtaken by
				// the next one) must not replace the newer one's records.
				in.inflight, _ = env.ev.inflight.(*inflightRecords[T])
				in.inflightID = env.ev.ID
			}
			return env.ev, true, true
		}
		if in.rec != nil && in.rec.enabled {
			in.rec.appendCopy(env.recs, env.ts)
		}
		in.dst.EmitBatch(env.recs, env.ts)
		in.records.Add(int64(len(env.recs)))
		in.ch.recycle(env)
		return Event{}, false, true
	}
	return Event{}, false, false
}

// errSendCancelled unwinds a task whose job stopped while it waited to send.
var errSendCancelled = context.Canceled
