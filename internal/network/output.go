package network

import (
	"errors"
	"fmt"
	"time"

	"sync"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/network/credit"
)

// ErrFinished is returned by a write to a channel after its end of partition.
var ErrFinished = errors.New("channel finished: end of partition already sent")

// outItem is a queued buffer, or an event when buf is nil. A buffer is
// one of the channel's, or a slice of a lent record (lent set); either
// goes back through outChan.release once written or dropped. partial is
// the number of bytes at the start of buf that end a record begun in an
// earlier buffer (Flink's partial record length): a priority event that
// overtakes the buffer leaves that record to the receiver, which has its
// start.
type outItem struct {
	buf     []byte
	lent    *lentRecord
	partial int
	ev      Event
	sent    func() // EmitTracked's: called when the event goes on the wire
}

// outChan is the untyped part of an OutputChannel, shared with the
// connection that serves it. mu guards everything but the identity fields.
type outChan struct {
	node *Node
	name string
	done <-chan struct{}

	mu        sync.Mutex
	box       credit.Outbox[outItem]
	cur       []byte   // the buffer being filled
	curPart   int      // cur's partial (see outItem)
	free      [][]byte // recycled buffers
	allocated int
	lentOut   int           // large records lent to the connection (lend)
	lentIdle  []*lentRecord // lent records given back, for reuse
	space     chan struct{} // rung when a buffer is recycled or the channel fails
	conn      *conn         // the connection serving the channel; nil before the request
	id        uint32
	requested bool // a consumer requested the channel (it stays so)
	inReady   bool
	dirty     bool
	finished  bool
	err       error
	m         ChannelMetrics
	// wake and onWake (SetPriorityHook): a write waiting for a free buffer
	// calls onWake, without mu, when wake is rung.
	wake   <-chan struct{}
	onWake func()
}

// OutputChannel is the producing end of one logical channel: records
// written to it are encoded with the edge's codec into buffers, which go to
// the consumer that requested the channel by name, one per credit.
//
// Write, Flush and Emit are called by one goroutine, the producing task's;
// they block while the channel holds SenderBuffers buffers (waiting for
// credit), until the done channel given to NewOutput is closed or the
// channel fails.
type OutputChannel[T any] struct {
	*outChan
	enc recordEncoder[T]
	// hand is the batch Write is writing and handAt the record it is at,
	// for a priority event emitted while it waits (mu held to read them).
	hand   []T
	handTS []int64
	handAt int
	one    [1]T // WriteRecord's hand
	oneTS  [1]int64
}

// NewOutput registers the output channel name on n. The consumer that
// requests name (see Subscribe) receives what is written to it; data
// written before the request waits in the channel's buffers. done, when
// closed, makes a blocked write give up with ErrCancelled.
func NewOutput[T any](n *Node, name string, c codec.Codec[T], done <-chan struct{}) (*OutputChannel[T], error) {
	if len(name) == 0 || len(name) > maxNameLen {
		return nil, fmt.Errorf("network: channel name of %d bytes, want 1 to %d", len(name), maxNameLen)
	}
	o := &OutputChannel[T]{
		outChan: &outChan{node: n, name: name, done: done, space: make(chan struct{}, 1)},
		enc:     newRecordEncoder(c),
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("network: channel %q: %w", name, ErrClosed)
	}
	if _, ok := n.outputs[name]; ok {
		return nil, fmt.Errorf("network: output channel %q registered twice", name)
	}
	n.outputs[name] = o.outChan
	if r, ok := n.requests[name]; ok {
		delete(n.requests, name)
		o.bind(r.c, r.id, r.credit)
	}
	if !n.flushStarted && n.opts.FlushTimeout > 0 {
		n.flushStarted = true
		n.wg.Add(1)
		go n.flushLoop()
	}
	return o, nil
}

// request binds the channel a consumer requested, now or when it is
// registered.
func (n *Node) request(c *conn, id uint32, cr int, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	o, ok := n.outputs[name]
	if !ok {
		if _, dup := n.requests[name]; dup {
			c.queueError(id, fmt.Sprintf("channel %q is requested by another consumer already", name))
			return
		}
		n.requests[name] = pendingRequest{c: c, id: id, credit: cr}
		return
	}
	o.mu.Lock()
	requested := o.requested
	o.mu.Unlock()
	if requested {
		c.queueError(id, fmt.Sprintf("channel %q is requested by another consumer already", name))
		return
	}
	o.bind(c, id, cr)
}

// bind attaches o to the connection that requested it.
func (o *outChan) bind(c *conn, id uint32, cr int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		c.queueError(id, fmt.Sprintf("channel %q: %v", o.name, o.err))
		return
	}
	o.requested = true
	o.conn, o.id = c, id
	if cr > 0 {
		o.box.AddCredit(cr)
	}
	o.m.Credit.Store(int64(o.box.Credit()))
	c.mu.Lock()
	c.outs[id] = o
	c.mu.Unlock()
	o.notifyLocked()
}

// notifyLocked puts o in its connection's ready queue when it has
// something to send.
func (o *outChan) notifyLocked() {
	if o.conn != nil && !o.inReady && o.box.Available() {
		o.inReady = true
		o.conn.pushReady(o)
	}
}

func (o *outChan) unbindLocked() {
	o.conn = nil
	o.inReady = false
}

func (o *outChan) addCredit(c *conn, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != c {
		return
	}
	o.box.AddCredit(n)
	o.m.Credit.Store(int64(o.box.Credit()))
	o.notifyLocked()
}

func (o *outChan) resume(c *conn) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != c {
		return nil
	}
	if err := o.box.Resume(); err != nil {
		return err
	}
	o.notifyLocked()
	return nil
}

// cancelled: the consumer gave the channel up.
func (o *outChan) cancelled(c *conn) {
	o.fail(fmt.Errorf("network: channel %q, peer %s: %w by the consumer", o.name, c.peer, ErrCancelled))
}

// connFailed: the connection serving o broke.
func (o *outChan) connFailed(c *conn, err error) {
	o.mu.Lock()
	mine := o.conn == c
	o.mu.Unlock()
	if mine {
		o.fail(fmt.Errorf("network: channel %q, peer %s: %w", o.name, c.peer, err))
	}
}

// fail ends o with err: queued buffers are dropped, and a blocked or later
// write returns err.
func (o *outChan) fail(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
		o.node.log.Debug("network: output channel failed", "channel", o.name, "err", err)
	}
	o.box.Drain(func(k credit.Kind, it outItem) {
		if k == credit.Data {
			o.release(it)
		}
	})
	o.m.Backlog.Store(0)
	o.unbindLocked()
	o.mu.Unlock()
	select {
	case o.space <- struct{}{}:
	default:
	}
}

// lentRecord is the encoding of a large record, sent as it is: its whole
// buffers go on the wire as slices of it (no copy into the channel's
// buffers), and it comes back to the channel when the last is written.
type lentRecord struct {
	b   []byte
	out int // slices of b queued or being written
}

// maxLent is the number of large records a channel lends at once: one is
// on its way while the producer encodes the next, so the sending side
// holds at most two encodings of a large record besides its buffers.
const maxLent = 1

// lend queues the large record p, which is *scratch's encoding: the part
// that fits goes into the open buffer, then every whole buffer's worth as
// a slice of p itself, and the rest into a new buffer. *scratch is
// swapped for the encoding of an earlier record the connection gave back,
// so the producer does not write over p while it is being sent (o.mu
// held; released while waiting for the earlier record to go).
func (o *outChan) lend(p []byte, scratch *[]byte) error {
	n := copy(o.cur[len(o.cur):cap(o.cur)], p)
	o.cur = o.cur[:len(o.cur)+n]
	p = p[n:]
	o.sendCur()
	var start time.Time
	for o.lentOut >= maxLent {
		if o.err != nil {
			return o.err
		}
		if start.IsZero() {
			start = time.Now()
		}
		o.waitSpace()
	}
	if o.err != nil {
		return o.err
	}
	if !start.IsZero() {
		o.m.BackPressuredNanos.Add(int64(time.Since(start)))
	}
	var lr *lentRecord
	if k := len(o.lentIdle); k > 0 {
		lr, o.lentIdle = o.lentIdle[k-1], o.lentIdle[:k-1]
	} else {
		lr = &lentRecord{}
	}
	lr.b, *scratch = *scratch, lr.b[:0]
	o.lentOut++
	bs := o.node.opts.BufferSize
	for len(p) >= bs {
		// Each slice continues the record begun in the buffer sent above.
		o.box.Push(credit.Data, outItem{buf: p[:bs:bs], lent: lr, partial: bs})
		lr.out++
		p = p[bs:]
	}
	o.m.Backlog.Store(int64(o.box.Backlog()))
	o.notifyLocked()
	return o.put(p, true)
}

// waitSpace waits until a buffer or a lent record comes back, the channel
// fails or its producer gives up, calling the priority hook (see
// SetPriorityHook) when its bell rings (o.mu held; released while
// waiting).
func (o *outChan) waitSpace() {
	o.mu.Unlock()
	select {
	case <-o.space:
		o.mu.Lock()
	case <-o.wake:
		o.onWake()
		o.mu.Lock()
	case <-o.done:
		o.mu.Lock()
		if o.err == nil {
			o.err = fmt.Errorf("network: channel %q: %w by its producer", o.name, ErrCancelled)
		}
	}
}

// release takes back a data item that was sent or dropped: a buffer of
// the channel's, or a slice of a lent record (o.mu held).
func (o *outChan) release(it outItem) {
	lr := it.lent
	if lr == nil {
		o.recycle(it.buf)
		return
	}
	lr.out--
	if lr.out > 0 {
		return
	}
	o.lentOut--
	o.lentIdle = append(o.lentIdle, lr)
	select {
	case o.space <- struct{}{}:
	default:
	}
}

// recycle takes a sent buffer back (o.mu held).
func (o *outChan) recycle(b []byte) {
	o.free = append(o.free, b[:0])
	select {
	case o.space <- struct{}{}:
	default:
	}
}

// takeBuffer makes o.cur an empty buffer, waiting while every buffer of the
// channel is in use (o.mu held; released while waiting).
func (o *outChan) takeBuffer() error {
	var start time.Time
	for {
		if o.err != nil {
			return o.err
		}
		if k := len(o.free); k > 0 {
			o.cur, o.free = o.free[k-1], o.free[:k-1]
			break
		}
		if o.allocated < o.node.opts.SenderBuffers {
			o.allocated++
			o.cur = make([]byte, 0, o.node.opts.BufferSize)
			break
		}
		if start.IsZero() {
			start = time.Now()
		}
		o.waitSpace()
	}
	if !start.IsZero() {
		o.m.BackPressuredNanos.Add(int64(time.Since(start)))
	}
	return nil
}

// put appends p, one record (or, with cont, the rest of one), to the
// channel's byte stream, sending each buffer it fills.
func (o *outChan) put(p []byte, cont bool) error {
	for first := !cont; len(p) > 0; first = false {
		if o.cur == nil {
			if err := o.takeBuffer(); err != nil {
				return err
			}
			if !first {
				o.curPart = min(len(p), cap(o.cur))
			}
		}
		n := copy(o.cur[len(o.cur):cap(o.cur)], p)
		o.cur = o.cur[:len(o.cur)+n]
		p = p[n:]
		if len(o.cur) == cap(o.cur) {
			o.sendCur()
		}
	}
	return nil
}

// sendCur queues the open buffer.
func (o *outChan) sendCur() {
	if len(o.cur) == 0 {
		return
	}
	o.box.Push(credit.Data, outItem{buf: o.cur, partial: o.curPart})
	o.cur, o.curPart = nil, 0
	o.m.Backlog.Store(int64(o.box.Backlog()))
	o.notifyLocked()
}

// leaveOpen deals with a partly filled buffer after a write. When nothing
// of the channel waits to be sent (the network keeps up: the channel is
// idle), it goes at once, since waiting would add latency and batch
// nothing. Otherwise buffers are queued anyway, so the open one may fill
// before its turn; the flush timeout bounds how long it may wait.
func (o *outChan) leaveOpen() {
	if len(o.cur) == 0 || o.dirty || o.node.opts.FlushTimeout <= 0 {
		return
	}
	if o.conn != nil && o.box.Queued() == 0 {
		o.sendCur()
		return
	}
	o.dirty = true
	o.node.markDirty(o)
}

func (o *outChan) timedFlush() {
	o.mu.Lock()
	o.dirty = false
	if o.err == nil {
		o.sendCur()
	}
	o.mu.Unlock()
}

func (o *outChan) writable() error {
	if o.err != nil {
		return o.err
	}
	if o.finished {
		return fmt.Errorf("network: channel %q: %w", o.name, ErrFinished)
	}
	return nil
}

// Write encodes recs (with ts, nil or of the same length) into the
// channel's buffers. Full buffers are queued for sending at once; the last,
// partly filled one is sent when it fills, on Flush or Emit, or after
// FlushTimeout.
func (o *OutputChannel[T]) Write(recs []T, ts []int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writable(); err != nil {
		return err
	}
	o.hand, o.handTS = recs, ts
	defer func() { o.hand, o.handTS, o.handAt = nil, nil, 0 }()
	for i := range recs {
		t := NoTimestamp
		if ts != nil {
			t = ts[i]
		}
		o.handAt = i
		if err := o.write(&recs[i], t); err != nil {
			return err
		}
	}
	o.leaveOpen()
	return nil
}

// WriteRecord is Write of one record.
func (o *OutputChannel[T]) WriteRecord(rec T, ts int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writable(); err != nil {
		return err
	}
	o.one[0] = rec
	o.hand = o.one[:]
	if ts != NoTimestamp {
		o.oneTS[0] = ts
		o.handTS = o.oneTS[:]
	}
	defer func() {
		var zero T
		o.one[0], o.hand, o.handTS = zero, nil, nil
	}()
	if err := o.write(&o.one[0], ts); err != nil {
		return err
	}
	o.leaveOpen()
	return nil
}

// write encodes one record (o.mu held): straight into the open buffer
// when it fits there, else through the encoder's scratch, copied into
// buffers, or, for a record that fills whole buffers, lent to the
// connection as it is (lend).
func (o *OutputChannel[T]) write(r *T, ts int64) error {
	if o.cur == nil {
		if err := o.takeBuffer(); err != nil {
			return err
		}
	}
	if b, ok := o.enc.encodeInto(o.cur, r, ts); ok {
		o.cur = b
		if len(o.cur) == cap(o.cur) {
			o.sendCur()
		}
		return nil
	}
	p := o.enc.encode(r, ts)
	if len(p) >= 2*o.node.opts.BufferSize {
		return o.lend(p, &o.enc.scratch)
	}
	return o.put(p, false)
}

// Flush queues the partly filled buffer, if any, for sending.
func (o *outChan) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writable(); err != nil {
		return err
	}
	o.sendCur()
	return nil
}

// Emit sends ev after every record written before it. An aligned barrier
// (Barrier with Aligned) blocks the channel once sent, until the consumer
// resumes it; after EndOfPartition the channel takes nothing more.
func (o *outChan) Emit(ev Event) error { return o.EmitTracked(ev, nil) }

// EmitTracked is Emit that calls sent (when not nil; with the channel's
// lock held, so it must be quick and call nothing of the channel) once ev
// leaves the queue for the wire. An event ConvertQueued converted never
// calls it.
func (o *outChan) EmitTracked(ev Event, sent func()) error {
	if ev.Kind < EndOfPartition || ev.Kind > maxEventKind {
		return fmt.Errorf("network: channel %q: unknown event kind %d", o.name, ev.Kind)
	}
	if len(ev.Payload) > MaxEventPayload {
		return fmt.Errorf("network: channel %q: event payload of %d bytes, want at most %d", o.name, len(ev.Payload), MaxEventPayload)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writable(); err != nil {
		return err
	}
	o.sendCur()
	ev.Priority = false
	kind := credit.Event
	if ev.Kind == Barrier && ev.Aligned {
		kind = credit.BlockingEvent
	}
	if ev.Kind == EndOfPartition {
		o.finished = true
	}
	o.box.Push(kind, outItem{ev: ev, sent: sent})
	o.notifyLocked()
	return nil
}

// SetPriorityHook makes a Write or WriteRecord that waits for a free
// buffer call f, on the writing goroutine, whenever wake is rung: f may
// call EmitPriority, which then overtakes the rest of the batch being
// written too. Call it before the first write.
func (o *OutputChannel[T]) SetPriorityHook(wake <-chan struct{}, f func()) {
	o.mu.Lock()
	o.wake, o.onWake = wake, f
	o.mu.Unlock()
}

// EmitPriority sends ev as a priority event (Flink's priority events: an
// unaligned barrier, a barrier announcement): ahead of every buffer not
// sent yet, without credit. With collect it returns the records ev
// overtook, in order, which are the sender's output channel state of an
// unaligned barrier: those whose first byte is in a buffer not sent yet
// (queued or being filled), then, when called from the hook of a Write
// waiting for a buffer, the rest of that Write's batch. A record begun in
// a buffer already sent is the receiver's: it has its start. Those
// records are still sent, behind ev.
func (o *OutputChannel[T]) EmitPriority(ev Event, collect bool) (recs []T, ts []int64, err error) {
	if ev.Kind < EndOfPartition || ev.Kind > maxEventKind || ev.Kind == EndOfPartition {
		return nil, nil, fmt.Errorf("network: channel %q: %s cannot be a priority event", o.name, ev.Kind)
	}
	if len(ev.Payload) > MaxEventPayload {
		return nil, nil, fmt.Errorf("network: channel %q: event payload of %d bytes, want at most %d", o.name, len(ev.Payload), MaxEventPayload)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.writable(); err != nil {
		return nil, nil, err
	}
	ev.Priority = true
	if !collect {
		o.box.PushPriority(outItem{ev: ev}, nil)
		o.notifyLocked()
		return nil, nil, nil
	}
	var ov overtaken[T]
	ov.d.c = o.enc.c
	o.box.PushPriority(outItem{ev: ev}, ov.item)
	if len(o.cur) > 0 {
		ov.take(o.cur, o.curPart)
	}
	recs, ts = ov.recs, ov.ts
	if ov.err != nil {
		return nil, nil, fmt.Errorf("network: channel %q: decode the records a priority event overtook: %w", o.name, ov.err)
	}
	// What the decoder holds back is the start of the record Write is
	// at, which is in hand.
	if o.hand != nil {
		var ht []int64
		if o.handTS != nil {
			ht = o.handTS[o.handAt:]
		}
		recs, ts = appendRecords(recs, ts, o.hand[o.handAt:], ht)
	}
	o.notifyLocked()
	return recs, ts, nil
}

// ConvertQueued converts barrier id, sent with EmitTracked as an aligned
// barrier with a timeout and still queued (its timeout passed): it goes
// to the head as an unaligned priority event, and ConvertQueued returns
// the records it overtook, in order (those whose first byte is queued
// before it), which are the sender's output channel state. converted is
// false when the barrier was sent already.
func (o *OutputChannel[T]) ConvertQueued(id int64) (recs []T, ts []int64, converted bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return nil, nil, false, o.err
	}
	var ov overtaken[T]
	ov.d.c = o.enc.c
	converted = o.box.Prioritize(func(it outItem) (outItem, bool) {
		if it.ev.Kind != Barrier || it.ev.ID != id || it.ev.AlignedTimeoutMs <= 0 {
			return it, false
		}
		ev := it.ev
		ev.Unaligned, ev.Priority, ev.AlignedTimeoutMs, ev.Aligned = true, true, 0, false
		return outItem{ev: ev}, true
	}, ov.item)
	if !converted {
		return nil, nil, false, nil
	}
	if ov.err != nil {
		return nil, nil, true, fmt.Errorf("network: channel %q: decode the records a converted barrier overtook: %w", o.name, ov.err)
	}
	o.notifyLocked()
	return ov.recs, ov.ts, true, nil
}

// overtaken decodes the records of the buffers a priority event overtook:
// those whose first byte is in them.
type overtaken[T any] struct {
	d       recordDecoder[T]
	started bool // past the end of the record the first buffers continue
	recs    []T
	ts      []int64
	err     error
}

func (v *overtaken[T]) item(k credit.Kind, it outItem) {
	if k == credit.Data {
		v.take(it.buf, it.partial)
	}
}

func (v *overtaken[T]) take(buf []byte, partial int) {
	if v.err != nil {
		return
	}
	if !v.started {
		if partial >= len(buf) && partial > 0 {
			return // the record goes on in the next buffer
		}
		buf, v.started = buf[partial:], true
	}
	if v.err = v.d.decode(buf); v.err == nil {
		r, t := v.d.batch()
		v.recs, v.ts = appendRecords(v.recs, v.ts, r, t)
	}
}

// appendRecords appends recs (with ts, nil for none) to dst and dts, which
// stays nil until a record has a timestamp.
func appendRecords[T any](dst []T, dts []int64, recs []T, ts []int64) ([]T, []int64) {
	if ts != nil && dts == nil {
		dts = make([]int64, len(dst), len(dst)+len(ts))
		for i := range dts {
			dts[i] = NoTimestamp
		}
	}
	dst = append(dst, recs...)
	switch {
	case dts == nil:
	case ts == nil:
		for range recs {
			dts = append(dts, NoTimestamp)
		}
	default:
		dts = append(dts, ts...)
	}
	return dst, dts
}

// Close abandons the channel: its queued data is dropped, a consumer that
// requested it gets an error unless the end of partition was sent, and
// the name may be registered again.
func (o *outChan) Close() {
	o.node.mu.Lock()
	if o.node.outputs[o.name] == o {
		delete(o.node.outputs, o.name)
	}
	o.node.mu.Unlock()
	o.mu.Lock()
	c, id, finished := o.conn, o.id, o.finished
	o.mu.Unlock()
	if c != nil && !finished {
		c.mu.Lock()
		delete(c.outs, id)
		c.mu.Unlock()
		c.queueError(id, fmt.Sprintf("channel %q closed by its producer before the end of partition", o.name))
	}
	o.fail(fmt.Errorf("network: channel %q: %w", o.name, ErrClosed))
}

// Metrics returns the channel's figures.
func (o *outChan) Metrics() *ChannelMetrics { return &o.m }

// Name is the channel's name.
func (o *outChan) Name() string { return o.name }
