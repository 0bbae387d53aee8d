package network

import (
	"fmt"
	"sync"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/network/credit"
	"github.com/weirstream/weir/internal/typeinfo"
)

// Gate is a consuming task's input gate: its input channels, possibly from
// several producer processes, and the buffers they share. Each channel owns
// ExclusiveBuffers buffers; FloatingBuffers more go to the channels whose
// senders announce a backlog (credit.Gate decides). The gate's memory is
// therefore at most (channels × ExclusiveBuffers + FloatingBuffers) ×
// BufferSize bytes, however fast the producers are.
//
// The gate's doorbell is rung whenever one of its channels gains something
// to Poll, as a task's mailbox is.
type Gate struct {
	node     *Node
	doorbell chan struct{}

	mu    sync.Mutex
	core  *credit.Gate
	free  [][]byte
	chans map[int]*inChan
	next  int
}

// NewGate returns an empty gate of n.
func (n *Node) NewGate() *Gate {
	core, err := credit.NewGate(n.opts.credit())
	if err != nil {
		panic(err) // n.opts passed Validate in New
	}
	return &Gate{node: n, doorbell: make(chan struct{}, 1), core: core, chans: map[int]*inChan{}}
}

// Doorbell is rung (a value sent, never blocking) after a channel of the
// gate gains something to poll or fails.
func (g *Gate) Doorbell() <-chan struct{} { return g.doorbell }

func (g *Gate) ring() {
	select {
	case g.doorbell <- struct{}{}:
	default:
	}
}

// onBuffer accounts for a buffer frame arriving for in and returns the
// buffer to read it into.
func (g *Gate) onBuffer(in *inChan, backlog int) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	grants, err := g.core.OnBuffer(in.idx, backlog)
	if err != nil {
		return nil, err
	}
	g.grant(grants)
	if s, ok := g.core.Channel(in.idx); ok {
		in.m.Credit.Store(int64(s.Free))
		in.m.Backlog.Store(int64(s.Backlog))
	}
	if k := len(g.free); k > 0 {
		b := g.free[k-1]
		g.free = g.free[:k-1]
		return b, nil
	}
	return make([]byte, g.node.opts.BufferSize), nil
}

// grant sends grants to the channels' senders (g.mu held).
func (g *Gate) grant(grants []credit.Grant) {
	for _, gr := range grants {
		if in := g.chans[gr.Channel]; in != nil && in.conn != nil {
			in.conn.addCredit(in.id, gr.Credit)
			if s, ok := g.core.Channel(gr.Channel); ok {
				in.m.Credit.Store(int64(s.Free))
			}
		}
	}
}

func (g *Gate) recycle(b []byte) {
	g.mu.Lock()
	g.free = append(g.free, b[:cap(b)])
	g.mu.Unlock()
}

// release returns a consumed buffer of in, granting what the core decides.
func (g *Gate) release(in *inChan, b []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free = append(g.free, b[:cap(b)])
	if g.chans[in.idx] != in {
		return // removed: its buffers went back with it
	}
	grants, err := g.core.Release(in.idx)
	if err != nil {
		panic(fmt.Sprintf("network: gate accounting broken: %v", err)) // a bug here, not bad input
	}
	g.grant(grants)
}

// remove drops in from the gate, returning its floating buffers, and from
// the node's live channels.
func (g *Gate) remove(in *inChan) {
	g.node.mu.Lock()
	delete(g.node.inputs, in)
	g.node.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.chans[in.idx] != in {
		return
	}
	delete(g.chans, in.idx)
	grants, _ := g.core.RemoveChannel(in.idx)
	g.grant(grants)
}

// inItem is a received buffer, or an event.
type inItem struct {
	buf     []byte
	ev      Event
	isEvent bool
}

// inChan is the untyped part of an InputChannel, shared with its
// connection's reader.
type inChan struct {
	gate *Gate
	idx  int // in the gate
	name string
	conn *conn
	id   uint32 // on conn

	mu       sync.Mutex
	inbox    []inItem
	head     int
	prio     int           // priority events in the inbox
	prioBell chan struct{} // rung when a priority event arrives
	err      error
	finished bool
	m        ChannelMetrics
}

func (in *inChan) push(it inItem) {
	in.mu.Lock()
	if in.err != nil || in.finished {
		in.mu.Unlock()
		if !it.isEvent {
			in.gate.recycle(it.buf)
		}
		return
	}
	in.inbox = append(in.inbox, it)
	prio := it.isEvent && it.ev.Priority
	if prio {
		in.prio++
	}
	in.mu.Unlock()
	if prio {
		select {
		case in.prioBell <- struct{}{}:
		default:
		}
	}
	in.gate.ring()
}

// PriorityBell is rung (a value sent, never blocking) when a priority
// event arrives: the consumer may want to take it ahead of the records it
// holds (an unaligned barrier overtakes them, Flink's priority events).
// The event itself is in order in the channel: it arrives behind the
// buffers its sender had sent already.
func (in *inChan) PriorityBell() <-chan struct{} { return in.prioBell }

// PriorityQueued is the number of priority events received and not polled.
func (in *inChan) PriorityQueued() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.prio
}

func (in *inChan) pop() (inItem, bool, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.head == len(in.inbox) {
		in.inbox, in.head = in.inbox[:0], 0
		return inItem{}, false, in.err
	}
	it := in.inbox[in.head]
	in.inbox[in.head] = inItem{}
	in.head++
	if it.isEvent && it.ev.Priority {
		in.prio--
	}
	return it, true, nil
}

// fail ends in with err: what it holds is dropped, Poll returns err.
func (in *inChan) fail(err error) {
	in.mu.Lock()
	if in.err != nil || in.finished {
		in.mu.Unlock()
		return
	}
	in.err = err
	items := in.inbox[in.head:]
	in.inbox, in.head = nil, 0
	in.mu.Unlock()
	for _, it := range items {
		if !it.isEvent {
			in.gate.recycle(it.buf)
		}
	}
	in.gate.remove(in)
	in.gate.node.log.Debug("network: input channel failed", "channel", in.name, "err", err)
	in.gate.ring()
}

// Polled says what Poll returned.
type Polled uint8

const (
	// Empty: nothing to take now (or the channel failed: see the error).
	Empty Polled = iota
	// Records: a batch of records.
	Records
	// Control: an event.
	Control
)

// InputChannel is the consuming end of one logical channel. Poll, Resume
// and Cancel are called by one goroutine, the consuming task's; records are
// decoded on it, not on the network's goroutines.
type InputChannel[T any] struct {
	*inChan
	dec  recordDecoder[T]
	held []byte // object reuse: the buffer the last batch points into
}

// Subscribe requests the output channel name from the producer process at
// addr (dialing it unless this node is connected to it already) and adds
// the channel to g. c must be the codec the producer encodes with, and its
// Decode must not alias its input (the built-in codecs copy).
func Subscribe[T any](g *Gate, addr, name string, c codec.Codec[T]) (*InputChannel[T], error) {
	if len(name) == 0 || len(name) > maxNameLen {
		return nil, fmt.Errorf("network: channel name of %d bytes, want 1 to %d", len(name), maxNameLen)
	}
	conn, err := g.node.connect(addr)
	if err != nil {
		return nil, fmt.Errorf("network: channel %q: %w", name, err)
	}
	g.mu.Lock()
	idx := g.next
	g.next++
	cr, err := g.core.AddChannel(idx)
	if err != nil {
		g.mu.Unlock()
		return nil, err
	}
	in := &InputChannel[T]{
		inChan: &inChan{gate: g, idx: idx, name: name, conn: conn, id: conn.reserveID(), prioBell: make(chan struct{}, 1)},
		dec:    newRecordDecoder(c, typeinfo.HoldsPointers[T]()),
	}
	in.m.Credit.Store(int64(cr))
	g.chans[idx] = in.inChan
	g.mu.Unlock()
	g.node.mu.Lock()
	g.node.inputs[in.inChan] = struct{}{}
	g.node.mu.Unlock()
	if err := conn.addInput(in.inChan, cr); err != nil {
		in.fail(err)
		return nil, err
	}
	return in, nil
}

// Poll takes the next item of the channel without waiting: a batch of
// records (recs and ts are valid until the next Poll; ts is nil when no
// record has a timestamp), an event, or Empty. A failed channel returns
// Empty and its error, naming the channel and the peer. After
// EndOfPartition the channel is finished and returns Empty.
func (in *InputChannel[T]) Poll() (what Polled, recs []T, ts []int64, ev Event, err error) {
	in.releaseHeld()
	for {
		it, ok, err := in.pop()
		if !ok {
			return Empty, nil, nil, Event{}, err
		}
		if it.isEvent {
			if it.ev.Kind == EndOfPartition {
				in.finish()
			}
			return Control, nil, nil, it.ev, nil
		}
		err = in.dec.decode(it.buf)
		recs, ts := in.dec.batch()
		if in.dec.reuse && err == nil && len(recs) > 0 {
			in.held = it.buf // the records point into it
		} else {
			in.gate.release(in.inChan, it.buf)
		}
		if err != nil {
			err = fmt.Errorf("network: channel %q, peer %s: %w", in.name, in.conn.peer, err)
			in.fail(err)
			return Empty, nil, nil, Event{}, err
		}
		if len(recs) > 0 {
			return Records, recs, ts, Event{}, nil
		}
		// The buffer only continued a record that goes on in the next one.
	}
}

// SetObjectReuse turns object reuse on or off (Flink's
// enableObjectReuse; off by default). With it on, the records of a batch
// may point into the receive buffer they came in (strings and []byte
// decoded by a codec.AliasDecoder, such as codec.String and codec.Bytes,
// are not copied out of it), and that buffer is given back, to be
// overwritten by later data, at the next Poll. The consumer
// therefore promises to keep no record, nor any string or slice of one,
// past its next call to Poll: what it keeps it must copy (strings.Clone,
// slices.Clone). Records that span buffers are always decoded into memory
// of their own. Call it from the consuming goroutine, between Polls.
func (in *InputChannel[T]) SetObjectReuse(on bool) {
	in.releaseHeld()
	in.dec.reuse = on
}

// releaseHeld gives back the buffer the last batch pointed into.
func (in *InputChannel[T]) releaseHeld() {
	if in.held != nil {
		in.gate.release(in.inChan, in.held)
		in.held = nil
	}
}

// Partial reports whether the records polled so far end inside a record
// that the next buffers complete: after a priority event that overtook its
// sender's buffers, that record began before the event (see EmitPriority).
func (in *InputChannel[T]) Partial() bool { return len(in.dec.pending) > 0 }

func (in *inChan) finish() {
	in.mu.Lock()
	in.finished = true
	in.mu.Unlock()
	in.conn.dropInput(in)
	in.gate.remove(in)
}

// Resume lets the producer send again after an aligned barrier, once the
// snapshot is taken (Flink's resume-consumption).
func (in *inChan) Resume() {
	in.conn.queueFrame(frameResumeConsumption, in.id, nil)
}

// Cancel gives the channel up: the producer is told, frames still in
// flight are dropped, and the channel's buffers return to the gate (but
// for the one an object-reusing consumer's last batch points into, which
// is left to the garbage collector).
func (in *inChan) Cancel() {
	in.mu.Lock()
	done := in.err != nil || in.finished
	in.mu.Unlock()
	if !done {
		in.conn.dropInput(in)
		in.conn.queueFrame(frameCancel, in.id, nil)
	}
	in.fail(fmt.Errorf("network: channel %q: %w", in.name, ErrCancelled))
}

// Metrics returns the channel's figures.
func (in *inChan) Metrics() *ChannelMetrics { return &in.m }

// Name is the channel's name.
func (in *inChan) Name() string { return in.name }
