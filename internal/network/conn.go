package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/weirstream/weir/internal/network/credit"
)

// errPeerClosed is the cause of the failure of channels still open when
// their peer closed the connection with a close frame.
var errPeerClosed = errors.New("the peer closed the connection")

// errClosedHere ends a connection this process closed.
var errClosedHere = errors.New("connection closed by this process")

// conn is one TCP connection and the logical channels it carries. The
// dialer is the consuming side: it sends partition requests, credits,
// resume-consumption and cancel frames, and receives buffers and events;
// the listener is the producing side.
//
// Two goroutines own it: readLoop reads and dispatches frames, writeLoop
// writes what the channels queued. c.mu is a leaf lock: no other lock is
// taken while it is held.
type conn struct {
	node   *Node
	nc     net.Conn
	peer   string
	dialer bool
	br     *bufio.Reader
	bw     *bufio.Writer // writeLoop only, over TLS
	tcp    bool          // nc is a plain TCP connection: writev
	maxLen int           // the longest frame accepted

	wake     chan struct{} // rung when ready or ctrl gained something
	closing  chan struct{} // closed by fail
	failOnce sync.Once
	err      error // the cause, set before closing is closed

	mu          sync.Mutex
	ready       []*outChan // producer: channels with something to send, in turn
	ctrl        []byte     // encoded control frames, in order
	credits     map[uint32]int
	creditOrder []uint32
	closeAsked  bool
	outs        map[uint32]*outChan // producer: channels bound to this connection
	ins         map[uint32]*inChan  // consumer: channels requested on it
	nextID      uint32
}

func newConn(n *Node, nc net.Conn, br *bufio.Reader, dialer bool) *conn {
	_, tcp := nc.(*net.TCPConn)
	return &conn{
		node:    n,
		tcp:     tcp,
		nc:      nc,
		peer:    nc.RemoteAddr().String(),
		dialer:  dialer,
		br:      br,
		bw:      bufio.NewWriterSize(nc, readBufferSize(n.opts.BufferSize)),
		maxLen:  max(5+4+n.opts.BufferSize, 5+4+2+maxNameLen, 5+2+maxErrorLen),
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		credits: map[uint32]int{},
		outs:    map[uint32]*outChan{},
		ins:     map[uint32]*inChan{},
	}
}

func (c *conn) ring() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// fail ends the connection with err and fails every channel on it.
func (c *conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.closing)
		c.nc.Close()
		c.mu.Lock()
		outs, ins := c.outs, c.ins
		c.outs, c.ins = map[uint32]*outChan{}, map[uint32]*inChan{}
		c.ready = nil
		c.mu.Unlock()
		for _, o := range outs {
			o.connFailed(c, err)
		}
		for _, in := range ins {
			in.fail(fmt.Errorf("network: channel %q, peer %s: %w", in.name, c.peer, err))
		}
		c.node.removeConn(c)
	})
}

// requestClose asks writeLoop to send a close frame and end the connection.
func (c *conn) requestClose() {
	c.mu.Lock()
	c.closeAsked = true
	c.mu.Unlock()
	c.ring()
}

// queueFrame appends a control frame with body to the write queue.
func (c *conn) queueFrame(t frameType, ch uint32, body []byte) {
	c.mu.Lock()
	var h [frameHeaderLen]byte
	putHeader(h[:], 5+len(body), t, ch)
	c.ctrl = append(append(c.ctrl, h[:]...), body...)
	c.mu.Unlock()
	c.ring()
}

func (c *conn) queueError(ch uint32, msg string) {
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	body := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	c.queueFrame(frameError, ch, append(body, msg...))
}

// addCredit queues credit for channel id, merged with what is queued for it.
func (c *conn) addCredit(id uint32, n int) {
	c.mu.Lock()
	if _, ok := c.credits[id]; !ok {
		c.creditOrder = append(c.creditOrder, id)
	}
	c.credits[id] += n
	c.mu.Unlock()
	c.ring()
}

// pushReady queues o for sending; o.mu is held and o.inReady was false.
func (c *conn) pushReady(o *outChan) {
	c.mu.Lock()
	c.ready = append(c.ready, o)
	c.mu.Unlock()
	c.ring()
}

// Limits of one batch of writeLoop: it gathers frames until it holds this
// many bytes or items, or nothing more is ready, then writes them with one
// system call (writev).
const (
	maxBatchBytes = 256 << 10
	maxBatchItems = 64
)

// sentBuf is a buffer of a batch, to give back to its channel once written.
type sentBuf struct {
	o  *outChan
	it outItem
}

// writeBatch is writeLoop's scratch: the frames gathered for one write.
type writeBatch struct {
	vec  net.Buffers
	hdrs []byte // headers of the batch's frames; vec points into it
	sent []sentBuf
	eops []uint32 // channels whose end of partition is in the batch
	n    int      // bytes gathered
}

func (b *writeBatch) reset() {
	clear(b.vec)
	clear(b.sent)
	b.vec, b.hdrs, b.sent, b.eops, b.n = b.vec[:0], b.hdrs[:0], b.sent[:0], b.eops[:0], 0
}

// header appends a frame header (with room for extra body bytes) to the
// batch's header space and returns it to fill.
func (b *writeBatch) header(size int) []byte {
	i := len(b.hdrs)
	b.hdrs = b.hdrs[:i+size] // within the capacity writeLoop reserved
	return b.hdrs[i : i+size : i+size]
}

// writeLoop writes control frames and the channels' buffers and events,
// taking the ready channels in turn, one item each, and gathering them into
// batches written with one system call each (writev, without copying the
// buffers): writes are batched under load and immediate when idle.
func (c *conn) writeLoop() {
	defer c.node.wg.Done()
	var ctrl []byte
	var order []uint32
	var b writeBatch
	// Headers are at most frameHeaderLen+maxEventBodyLen bytes; reserving
	// the whole batch's worth keeps vec's slices into hdrs valid.
	b.hdrs = make([]byte, 0, (maxBatchItems+1)*(frameHeaderLen+maxEventBodyLen))
	for {
		select {
		case <-c.wake:
		case <-c.closing:
			return
		}
		for {
			c.mu.Lock()
			ctrl, c.ctrl = c.ctrl, ctrl[:0]
			for _, id := range c.creditOrder {
				var h [frameHeaderLen + 4]byte
				putHeader(h[:], 5+4, frameAddCredit, id)
				binary.BigEndian.PutUint32(h[frameHeaderLen:], uint32(c.credits[id]))
				ctrl = append(ctrl, h[:]...)
				delete(c.credits, id)
			}
			order, c.creditOrder = c.creditOrder, order[:0]
			closeAsked := c.closeAsked
			c.mu.Unlock()
			if len(ctrl) > 0 {
				b.vec = append(b.vec, ctrl)
				b.n += len(ctrl)
			}
			for len(b.vec) < maxBatchItems && b.n < maxBatchBytes {
				c.mu.Lock()
				var o *outChan
				if len(c.ready) > 0 {
					o = c.ready[0]
					c.ready[0] = nil
					c.ready = c.ready[1:]
				}
				c.mu.Unlock()
				if o == nil {
					break
				}
				c.gather(o, &b)
			}
			if len(b.vec) == 0 {
				if closeAsked {
					var h [frameHeaderLen]byte
					putHeader(h[:], 5, frameClose, 0)
					c.nc.Write(h[:])
					c.fail(errClosedHere)
					return
				}
				break
			}
			err := c.flushBatch(&b)
			// ctrl's bytes are written: it may be reused.
			if err != nil {
				c.fail(c.lost(err))
				return
			}
		}
	}
}

// flushBatch writes the batch, then gives its buffers back to their
// channels (queueing those that have more to send) and forgets the
// channels whose end of partition went.
func (c *conn) flushBatch(b *writeBatch) error {
	var err error
	if c.tcp {
		v := b.vec
		_, err = v.WriteTo(c.nc)
	} else {
		// TLS: one record per write, so the frames go through a buffer.
		for _, p := range b.vec {
			if _, err = c.bw.Write(p); err != nil {
				break
			}
		}
		if err == nil {
			err = c.bw.Flush()
		}
	}
	for _, s := range b.sent {
		o := s.o
		o.mu.Lock()
		o.release(s.it)
		if !o.inReady && o.conn == c && o.box.Available() {
			o.inReady = true
			c.pushReady(o)
		}
		o.mu.Unlock()
	}
	if len(b.eops) > 0 {
		c.mu.Lock()
		for _, id := range b.eops {
			delete(c.outs, id)
		}
		c.mu.Unlock()
	}
	b.reset()
	return err
}

// gather adds o's next item, if it still may go, to the batch; o goes back
// in the ready queue at once if it has more to send, else when its buffer
// is written.
func (c *conn) gather(o *outChan, b *writeBatch) {
	o.mu.Lock()
	o.inReady = false
	if o.conn != c || !o.box.Available() {
		o.mu.Unlock()
		return
	}
	kind, it, backlog := o.box.Pop()
	if it.sent != nil {
		it.sent()
	}
	id := o.id
	o.m.Credit.Store(int64(o.box.Credit()))
	o.m.Backlog.Store(int64(backlog))
	eop := kind != credit.Data && it.ev.Kind == EndOfPartition
	if eop {
		o.unbindLocked()
	}
	if kind == credit.Data {
		h := b.header(frameHeaderLen + 4)
		putHeader(h, 5+4+len(it.buf), frameBuffer, id)
		binary.BigEndian.PutUint32(h[frameHeaderLen:], uint32(backlog))
		b.vec = append(b.vec, h, it.buf)
		b.n += len(h) + len(it.buf)
		b.sent = append(b.sent, sentBuf{o: o, it: it})
		o.m.BuffersOut.Add(1)
		o.m.BytesOut.Add(int64(len(it.buf)))
	} else {
		bl := it.ev.bodyLen()
		h := b.header(frameHeaderLen + bl)
		putHeader(h, 5+bl+len(it.ev.Payload), frameEvent, id)
		it.ev.appendBody(h[frameHeaderLen:frameHeaderLen])
		b.vec = append(b.vec, h)
		b.n += len(h)
		if len(it.ev.Payload) > 0 {
			b.vec = append(b.vec, it.ev.Payload)
			b.n += len(it.ev.Payload)
		}
		if eop {
			b.eops = append(b.eops, id)
		}
	}
	if !o.inReady && o.conn == c && o.box.Available() {
		o.inReady = true
		c.pushReady(o)
	}
	o.mu.Unlock()
}

// lost describes a broken connection.
func (c *conn) lost(err error) error {
	select {
	case <-c.closing:
		return c.err
	default:
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("connection lost mid-frame: %w", err)
	}
	return fmt.Errorf("connection lost: %w", err)
}

// readLoop reads frames until the connection fails.
func (c *conn) readLoop() {
	var hdr [frameHeaderLen]byte
	body := make([]byte, 0, 5+4+2+maxNameLen)
	for {
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			c.fail(c.lost(err))
			return
		}
		length := int(binary.BigEndian.Uint32(hdr[0:4]))
		t := frameType(hdr[4])
		ch := binary.BigEndian.Uint32(hdr[5:9])
		if length < 5 || length > c.maxLen {
			c.malformed(fmt.Errorf("%w: %s frame of %d bytes, want 5 to %d", ErrMalformed, t, length, c.maxLen))
			return
		}
		n := length - 5
		if t == frameBuffer && c.dialer {
			if err := c.readBuffer(ch, n); err != nil {
				c.malformed(err)
				return
			}
			continue
		}
		if n > cap(body) {
			c.malformed(fmt.Errorf("%w: %s frame of %d bytes", ErrMalformed, t, length))
			return
		}
		b := body[:n]
		if _, err := io.ReadFull(c.br, b); err != nil {
			c.fail(c.lost(err))
			return
		}
		var err error
		switch {
		case t == frameClose:
			c.fail(errPeerClosed)
			return
		case t == frameError:
			err = c.onError(ch, b)
		case c.dialer && t == frameEvent:
			err = c.onEvent(ch, b)
		case !c.dialer && t == framePartitionRequest:
			err = c.onRequest(ch, b)
		case !c.dialer && t == frameAddCredit:
			err = c.onCredit(ch, b)
		case !c.dialer && (t == frameResumeConsumption || t == frameCancel):
			err = c.onControl(ch, t, b)
		default:
			err = fmt.Errorf("%w: unexpected %s frame (type 0x%02x) on channel %d", ErrMalformed, t, uint8(t), ch)
		}
		if err != nil {
			c.malformed(err)
			return
		}
	}
}

// malformed tells the peer what was wrong with its bytes and ends the
// connection.
func (c *conn) malformed(err error) {
	msg := err.Error()
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	var b [frameHeaderLen + 2]byte
	putHeader(b[:], 5+2+len(msg), frameError, 0)
	binary.BigEndian.PutUint16(b[frameHeaderLen:], uint16(len(msg)))
	// Best effort, bypassing writeLoop: the connection ends anyway.
	c.nc.Write(append(b[:], msg...))
	c.node.log.Warn("network: malformed frame; connection closed", "peer", c.peer, "err", err)
	c.fail(err)
}

func (c *conn) readBuffer(ch uint32, n int) error {
	if n < 4 {
		return fmt.Errorf("%w: buffer frame of %d bytes, want >= 4", ErrMalformed, n)
	}
	var b [4]byte
	if _, err := io.ReadFull(c.br, b[:]); err != nil {
		c.fail(c.lost(err))
		return nil
	}
	backlog := int(binary.BigEndian.Uint32(b[:]))
	n -= 4
	c.mu.Lock()
	in := c.ins[ch]
	c.mu.Unlock()
	if in == nil {
		// A channel this side cancelled: the peer may still have sent.
		if _, err := c.br.Discard(n); err != nil {
			c.fail(c.lost(err))
		}
		return nil
	}
	buf, err := in.gate.onBuffer(in, backlog)
	if err != nil {
		return fmt.Errorf("%w: channel %q: %v", ErrMalformed, in.name, err)
	}
	buf = buf[:n]
	if err := c.readPayload(buf); err != nil {
		in.gate.recycle(buf)
		c.fail(c.lost(err))
		return nil
	}
	in.m.BuffersIn.Add(1)
	in.m.BytesIn.Add(int64(n))
	in.push(inItem{buf: buf})
	return nil
}

// readPayload fills buf from the connection: the bytes already buffered
// are copied, and the rest, when it is at least minDirectRead, is read
// straight into buf rather than through the reader's buffer (one copy less
// for large buffers).
func (c *conn) readPayload(buf []byte) error {
	k := c.br.Buffered()
	if len(buf)-k < minDirectRead {
		_, err := io.ReadFull(c.br, buf)
		return err
	}
	if _, err := io.ReadFull(c.br, buf[:k]); err != nil {
		return err
	}
	// The reader's buffer is empty now: reading around it keeps the order.
	_, err := io.ReadFull(c.nc, buf[k:])
	return err
}

// minDirectRead is the least remainder of a buffer frame that readPayload
// reads around the reader's buffer.
const minDirectRead = 16 << 10

func (c *conn) onEvent(ch uint32, b []byte) error {
	ev, err := decodeEvent(b)
	if err != nil {
		return err
	}
	c.mu.Lock()
	in := c.ins[ch]
	c.mu.Unlock()
	if in != nil {
		in.push(inItem{ev: ev, isEvent: true})
	}
	return nil
}

func (c *conn) onError(ch uint32, b []byte) error {
	if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
		return fmt.Errorf("%w: error frame of %d bytes", ErrMalformed, len(b))
	}
	cause := fmt.Errorf("the peer reported: %s", b[2:])
	if ch == 0 {
		c.fail(cause)
		return nil
	}
	c.mu.Lock()
	in := c.ins[ch]
	delete(c.ins, ch)
	c.mu.Unlock()
	if in != nil {
		in.fail(fmt.Errorf("network: channel %q, peer %s: %w", in.name, c.peer, cause))
	}
	return nil
}

func (c *conn) onRequest(ch uint32, b []byte) error {
	if len(b) < 6 {
		return fmt.Errorf("%w: partition request of %d bytes", ErrMalformed, len(b))
	}
	cr := int(binary.BigEndian.Uint32(b))
	l := int(binary.BigEndian.Uint16(b[4:]))
	if l != len(b)-6 || ch == 0 {
		return fmt.Errorf("%w: partition request for channel %d with a name of %d bytes in %d", ErrMalformed, ch, l, len(b)-6)
	}
	name := string(b[6:])
	c.mu.Lock()
	_, dup := c.outs[ch]
	c.mu.Unlock()
	if dup {
		return fmt.Errorf("%w: second partition request for channel %d (%q)", ErrMalformed, ch, name)
	}
	c.node.request(c, ch, cr, name)
	return nil
}

func (c *conn) onCredit(ch uint32, b []byte) error {
	if len(b) != 4 {
		return fmt.Errorf("%w: add-credit frame of %d bytes", ErrMalformed, len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 1 || n > 1<<24 {
		return fmt.Errorf("%w: add-credit of %d on channel %d", ErrMalformed, n, ch)
	}
	c.mu.Lock()
	o := c.outs[ch]
	c.mu.Unlock()
	if o != nil {
		o.addCredit(c, n)
	}
	return nil
}

func (c *conn) onControl(ch uint32, t frameType, b []byte) error {
	if len(b) != 0 {
		return fmt.Errorf("%w: %s frame with a body of %d bytes", ErrMalformed, t, len(b))
	}
	c.mu.Lock()
	o := c.outs[ch]
	if t == frameCancel {
		delete(c.outs, ch)
	}
	c.mu.Unlock()
	if o == nil {
		return nil
	}
	if t == frameCancel {
		o.cancelled(c)
		return nil
	}
	if err := o.resume(c); err != nil {
		return fmt.Errorf("%w: channel %q: %v", ErrMalformed, o.name, err)
	}
	return nil
}

// reserveID returns a new channel id of the connection.
func (c *conn) reserveID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return c.nextID
}

// addInput registers in (its conn and id set) on the connection and sends
// its partition request.
func (c *conn) addInput(in *inChan, initialCredit int) error {
	c.mu.Lock()
	select {
	case <-c.closing:
		c.mu.Unlock()
		return fmt.Errorf("network: channel %q, peer %s: %w", in.name, c.peer, c.err)
	default:
	}
	id := in.id
	c.ins[id] = in
	c.mu.Unlock()
	body := binary.BigEndian.AppendUint32(nil, uint32(initialCredit))
	body = binary.BigEndian.AppendUint16(body, uint16(len(in.name)))
	c.queueFrame(framePartitionRequest, id, append(body, in.name...))
	return nil
}

// dropInput forgets in (cancelled or finished): later frames for it are
// discarded.
func (c *conn) dropInput(in *inChan) {
	c.mu.Lock()
	if c.ins[in.id] == in {
		delete(c.ins, in.id)
	}
	c.mu.Unlock()
}
