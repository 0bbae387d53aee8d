package network

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is wrapped by the errors of channels whose Node was closed.
var ErrClosed = errors.New("network node closed")

// ErrCancelled is wrapped by the errors of a channel its consumer cancelled.
var ErrCancelled = errors.New("channel cancelled")

// Node is one process's end of the data plane: it listens for the
// connections of consumers (Listen), serves the output channels registered
// with NewOutput to them, and dials producers for the input channels of its
// gates (Subscribe). It keeps one TCP connection per producer process it
// reads from, carrying all of that pair's channels.
//
// A Node is safe for concurrent use. New starts no goroutine; Listen, the
// first output and every connection do, and Close waits for all of them.
type Node struct {
	opts    Options
	log     *slog.Logger
	tlsConf *tls.Config
	version uint8 // ProtocolVersion; tests change it

	mu       sync.Mutex
	closed   bool
	ln       net.Listener
	conns    map[*conn]struct{}
	raw      map[net.Conn]struct{} // accepted, still in the handshake
	dialed   map[string]*dialing
	outputs  map[string]*outChan
	inputs   map[*inChan]struct{} // live input channels, for Channels
	requests map[string]pendingRequest

	flushMu      sync.Mutex
	dirty        []*outChan
	flushStarted bool
	wakeFlush    chan struct{}

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	done    <-chan struct{} // ctx.Done()
	wg      sync.WaitGroup
	refused atomic.Int64
}

type dialing struct {
	ready chan struct{}
	c     *conn
	err   error
}

type pendingRequest struct {
	c      *conn
	id     uint32
	credit int
}

// New returns a node with opts (defaults filled). It starts no goroutine.
func New(opts Options) (*Node, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		opts:      opts,
		log:       opts.Logger,
		version:   ProtocolVersion,
		conns:     map[*conn]struct{}{},
		raw:       map[net.Conn]struct{}{},
		dialed:    map[string]*dialing{},
		outputs:   map[string]*outChan{},
		inputs:    map[*inChan]struct{}{},
		requests:  map[string]pendingRequest{},
		wakeFlush: make(chan struct{}, 1),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.done = n.ctx.Done()
	if opts.TLS != nil {
		conf, err := opts.TLS.Load("network TLS")
		if err != nil {
			return nil, err
		}
		n.tlsConf = conf
	}
	return n, nil
}

// Listen accepts consumers' connections on addr (host:port; port 0 picks
// one, see Addr) until Close.
func (n *Node) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("network: listen on %s: %w", addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		ln.Close()
		return ErrClosed
	case n.ln != nil:
		ln.Close()
		return fmt.Errorf("network: already listening on %s", n.ln.Addr())
	}
	n.ln = ln
	n.wg.Add(1)
	go n.acceptLoop(ln)
	return nil
}

// Addr is the address Listen listens on, or "" before Listen.
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ln == nil {
		return ""
	}
	return n.ln.Addr().String()
}

// Refused counts the connections refused in the handshake (a stranger, a
// wrong token or certificate, another version).
func (n *Node) Refused() int64 { return n.refused.Load() }

func (n *Node) acceptLoop(ln net.Listener) {
	defer n.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-n.done:
			default:
				n.log.Error("network: accept failed; no more connections are accepted", "addr", ln.Addr().String(), "err", err)
			}
			return
		}
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			nc.Close()
			return
		}
		n.raw[nc] = struct{}{}
		n.wg.Add(1)
		n.mu.Unlock()
		go n.serve(nc)
	}
}

// serve runs the listener's side of the handshake on nc, then reads its
// frames until the connection ends.
func (n *Node) serve(nc net.Conn) {
	defer n.wg.Done()
	peer := nc.RemoteAddr().String()
	c, err := n.acceptHandshake(nc)
	n.mu.Lock()
	delete(n.raw, nc)
	if err == nil && n.closed {
		err = ErrClosed
	}
	if err != nil {
		n.mu.Unlock()
		nc.Close()
		if !errors.Is(err, ErrClosed) {
			n.refused.Add(1)
			n.log.Warn("network: connection refused", "peer", peer, "err", err)
		}
		return
	}
	n.conns[c] = struct{}{}
	n.wg.Add(1)
	n.mu.Unlock()
	go c.writeLoop()
	c.readLoop()
}

func (n *Node) acceptHandshake(nc net.Conn) (*conn, error) {
	nc.SetDeadline(time.Now().Add(n.opts.HandshakeTimeout))
	if n.tlsConf != nil {
		tc := tls.Server(nc, n.tlsConf)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("%w: TLS handshake: %v", ErrRefused, err)
		}
		nc = tc
	}
	br := bufio.NewReaderSize(nc, readBufferSize(n.opts.BufferSize))
	version, bufSize, token, err := readClientHello(br)
	if err != nil {
		return nil, err
	}
	reply := func(status uint8, msg string) {
		nc.Write(serverHello(n.version, status, msg))
	}
	switch {
	case version != n.version:
		reply(statusVersion, "")
		return nil, fmt.Errorf("%w: the peer speaks data-plane protocol version %d, this process version %d: run the same weir build on every process", ErrRefused, version, n.version)
	case subtle.ConstantTimeCompare([]byte(token), []byte(n.opts.Token)) != 1:
		reply(statusToken, "wrong cluster token")
		return nil, fmt.Errorf("%w: wrong cluster token (%d bytes): give every process the same token", ErrRefused, len(token))
	case bufSize != n.opts.BufferSize:
		reply(statusBufferSize, fmt.Sprintf("buffer size %d, this process %d", bufSize, n.opts.BufferSize))
		return nil, fmt.Errorf("%w: the peer's buffers are %d bytes, this process's %d: give every process the same BufferSize", ErrRefused, bufSize, n.opts.BufferSize)
	}
	if _, err := nc.Write(serverHello(n.version, statusOK, "")); err != nil {
		return nil, fmt.Errorf("write handshake reply: %w", err)
	}
	nc.SetDeadline(time.Time{})
	return newConn(n, nc, br, false), nil
}

// connect returns the connection to the producer at addr, dialing it if
// there is none.
func (n *Node) connect(addr string) (*conn, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	d := n.dialed[addr]
	if d != nil {
		n.mu.Unlock()
		<-d.ready
		if d.err != nil {
			return nil, d.err
		}
		return d.c, nil
	}
	d = &dialing{ready: make(chan struct{})}
	n.dialed[addr] = d
	n.mu.Unlock()

	c, err := n.dial(addr)
	n.mu.Lock()
	if err == nil && n.closed {
		c.nc.Close()
		err = ErrClosed
	}
	if err != nil {
		delete(n.dialed, addr)
	} else {
		n.conns[c] = struct{}{}
		n.wg.Add(2)
		go c.writeLoop()
		go func() {
			defer n.wg.Done()
			c.readLoop()
		}()
	}
	d.c, d.err = c, err
	n.mu.Unlock()
	close(d.ready)
	return c, err
}

func (n *Node) dial(addr string) (*conn, error) {
	// Close interrupts a dial in progress: n.ctx ends with it.
	ctx, cancel := context.WithTimeout(n.ctx, n.opts.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("network: dial %s: %w", addr, err)
	}
	fail := func(err error) (*conn, error) {
		nc.Close()
		return nil, fmt.Errorf("network: connect to %s: %w", addr, err)
	}
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	if n.tlsConf != nil {
		conf := n.tlsConf.Clone()
		host, _, _ := net.SplitHostPort(addr)
		conf.ServerName = host
		tc := tls.Client(nc, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("%w: TLS handshake: %v", ErrRefused, err))
		}
		nc = tc
	}
	if _, err := nc.Write(clientHello(n.version, n.opts.BufferSize, n.opts.Token)); err != nil {
		return fail(fmt.Errorf("write handshake: %w", err))
	}
	br := bufio.NewReaderSize(nc, readBufferSize(n.opts.BufferSize))
	version, status, msg, err := readServerHello(br)
	if err != nil {
		return fail(err)
	}
	switch status {
	case statusOK:
	case statusVersion:
		return fail(fmt.Errorf("%w: the peer speaks data-plane protocol version %d, this process version %d: run the same weir build on every process", ErrRefused, version, n.version))
	case statusToken:
		return fail(fmt.Errorf("%w: the peer refused this process's cluster token: give every process the same token", ErrRefused))
	case statusBufferSize:
		return fail(fmt.Errorf("%w: %s: give every process the same BufferSize", ErrRefused, msg))
	default:
		return fail(fmt.Errorf("%w: unknown handshake status %d (%s)", ErrRefused, status, msg))
	}
	nc.SetDeadline(time.Time{})
	return newConn(n, nc, br, true), nil
}

func readBufferSize(bufferSize int) int { return max(64<<10, bufferSize+frameHeaderLen+4) }

// removeConn forgets a failed connection, so that the next Subscribe to its
// peer dials again.
func (n *Node) removeConn(c *conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.conns, c)
	for addr, d := range n.dialed {
		if d.c == c {
			delete(n.dialed, addr)
		}
	}
	for name, r := range n.requests {
		if r.c == c {
			delete(n.requests, name)
		}
	}
}

// Close ends every connection (telling each peer with a close frame),
// fails the channels still open with ErrClosed, and waits for every
// goroutine of the node to end. It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.wg.Wait()
		return nil
	}
	n.closed = true
	n.cancel()
	if n.ln != nil {
		n.ln.Close()
	}
	for nc := range n.raw {
		nc.Close()
	}
	conns := make([]*conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	outs := make([]*outChan, 0, len(n.outputs))
	for _, o := range n.outputs {
		outs = append(outs, o)
	}
	n.mu.Unlock()

	for _, o := range outs {
		o.fail(fmt.Errorf("network: channel %q: %w", o.name, ErrClosed))
	}
	for _, c := range conns {
		c.requestClose()
	}
	t := time.AfterFunc(time.Second, func() {
		for _, c := range conns {
			c.fail(ErrClosed)
		}
	})
	n.wg.Wait()
	t.Stop()
	return nil
}

// markDirty queues o for the flusher: its open buffer is sent within
// FlushTimeout unless it fills first.
func (n *Node) markDirty(o *outChan) {
	n.flushMu.Lock()
	n.dirty = append(n.dirty, o)
	n.flushMu.Unlock()
	select {
	case n.wakeFlush <- struct{}{}:
	default:
	}
}

// flushLoop sends, FlushTimeout after a buffer was left partly filled,
// every such buffer (Flink's output flusher, but woken only while some
// buffer waits).
func (n *Node) flushLoop() {
	defer n.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	var batch []*outChan
	for {
		select {
		case <-n.wakeFlush:
		case <-n.done:
			return
		}
		t.Reset(n.opts.FlushTimeout)
		select {
		case <-t.C:
		case <-n.done:
			t.Stop()
			return
		}
		n.flushMu.Lock()
		batch, n.dirty = n.dirty, batch[:0]
		n.flushMu.Unlock()
		for i, o := range batch {
			o.timedFlush()
			batch[i] = nil
		}
	}
}
