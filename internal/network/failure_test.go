package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// TestSlowConsumerDoesNotBlockOthers: two channels share one connection;
// one consumer never reads. Its sender runs out of credit and blocks, the
// receiver holds no more than its credit allows, and the other channel
// still delivers everything.
func TestSlowConsumerDoesNotBlockOthers(t *testing.T) {
	opts := Options{BufferSize: 1024}
	prod := newNode(t, opts, true)
	cons := newNode(t, opts, false)
	slowGate, fastGate := cons.NewGate(), cons.NewGate()
	slowIn, err := Subscribe(slowGate, prod.Addr(), "slow", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	fastIn, err := Subscribe(fastGate, prod.Addr(), "fast", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cons.conns); n != 1 {
		t.Fatalf("%d connections to one producer, want 1", n)
	}
	slowDone := make(chan struct{})
	slowOut, err := NewOutput(prod, "slow", codec.String(), slowDone)
	if err != nil {
		t.Fatal(err)
	}
	fastOut, err := NewOutput(prod, "fast", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := strings.Repeat("r", 100)
	slowErr := make(chan error, 1)
	go func() {
		for {
			if err := slowOut.WriteRecord(rec, NoTimestamp); err != nil {
				slowErr <- err
				return
			}
		}
	}()
	const n = 20_000 // about 2000 buffers, far beyond any credit
	go func() {
		for range n {
			if err := fastOut.WriteRecord(rec, NoTimestamp); err != nil {
				t.Error(err)
				return
			}
		}
		fastOut.Emit(Event{Kind: EndOfPartition})
	}()
	got, err := drain(t, fastGate, fastIn, ident, 30*time.Second)
	if err != nil {
		t.Fatalf("the fast channel stalled behind the slow one: %v", err)
	}
	if len(got) != n+1 {
		t.Fatalf("fast channel delivered %d items, want %d", len(got), n+1)
	}
	// The slow channel received at most its credit: 2 exclusive + 8
	// floating buffers.
	in := slowIn.Metrics().Snapshot()
	if in.BuffersIn > 10 || in.BuffersIn < 2 {
		t.Fatalf("slow channel received %d buffers, want 2 to 10 (its credit)", in.BuffersIn)
	}
	select {
	case err := <-slowErr:
		t.Fatalf("slow producer ended: %v", err)
	default:
	}
	// Cancelling the slow producer's task unblocks it.
	close(slowDone)
	select {
	case err := <-slowErr:
		if !errors.Is(err, ErrCancelled) {
			t.Fatalf("slow producer: %v, want ErrCancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not unblock the slow producer")
	}
	out := slowOut.Metrics().Snapshot()
	if out.BackPressured <= 0 || out.Credit != 0 {
		t.Fatalf("slow sender metrics %+v: want back-pressured time and no credit left", out)
	}
}

// rawDial opens a plain connection and says hello as a dialer would.
func rawDial(t *testing.T, addr string, version uint8, bufferSize int, token string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(clientHello(version, bufferSize, token)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	_, status, msg, err := readServerHello(br)
	if err != nil || status != statusOK {
		t.Fatalf("handshake: status %d %q, %v", status, msg, err)
	}
	return nc, br
}

func frame(t frameType, ch uint32, body []byte) []byte {
	b := make([]byte, frameHeaderLen, frameHeaderLen+len(body))
	putHeader(b, 5+len(body), t, ch)
	return append(b, body...)
}

func requestBody(credit int, name string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(credit))
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// TestNoCredit: a consumer that requests a channel and never grants credit.
// The producer blocks once its buffers are full; closing its done channel
// (the task is cancelled), or closing the node, ends it.
func TestNoCredit(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			prod := newNode(t, Options{BufferSize: 256, SenderBuffers: 3}, true)
			done := make(chan struct{})
			out, err := NewOutput(prod, "stuck", codec.String(), done)
			if err != nil {
				t.Fatal(err)
			}
			nc, _ := rawDial(t, prod.Addr(), ProtocolVersion, 256, "")
			if _, err := nc.Write(frame(framePartitionRequest, 1, requestBody(0, "stuck"))); err != nil {
				t.Fatal(err)
			}
			werr := writeUntilError(out, strings.Repeat("x", 50))
			select {
			case err := <-werr:
				t.Fatalf("write without credit returned %v, want it to block", err)
			case <-time.After(200 * time.Millisecond):
			}
			if s := out.Metrics().Snapshot(); s.Credit != 0 || s.Backlog < 1 {
				t.Fatalf("metrics %+v: want no credit and a backlog", s)
			}
			want := ErrCancelled
			if how == "cancel" {
				close(done)
			} else {
				want = ErrClosed
				prod.Close()
			}
			select {
			case err := <-werr:
				if !errors.Is(err, want) || !strings.Contains(err.Error(), `channel "stuck"`) {
					t.Fatalf("blocked write: %v, want %v naming the channel", err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not unblock the producer", how)
			}
		})
	}
}

// proxy forwards one connection to upstream and cuts it after limit bytes
// from upstream to the client, in the middle of whatever frame is passing.
func proxy(t *testing.T, upstream string, limit int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 2)
	t.Cleanup(func() {
		ln.Close()
		for len(conns) > 0 {
			(<-conns).Close()
		}
		wg.Wait()
	})
	wg.Go(func() {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		conns <- down
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			down.Close()
			return
		}
		conns <- up
		wg.Go(func() { io.Copy(up, down); up.Close(); down.Close() })
		io.CopyN(down, up, limit)
		// Half-close: the consumer reads the limit's bytes and then EOF. A
		// full close with the consumer's credit frames unread would reset
		// the connection, and the reset can discard those bytes before the
		// consumer reads them. The consumer then closes its end, which ends
		// the copy above and closes the producer's connection.
		down.(*net.TCPConn).CloseWrite()
	})
	return ln.Addr().String()
}

// TestConnectionKilledMidBuffer: the connection dies in the middle of a
// buffer frame. The consumer's channel and the producer's both fail with an
// error naming the channel and the peer; nothing hangs.
func TestConnectionKilledMidBuffer(t *testing.T) {
	prod := newNode(t, Options{}, true)
	cons := newNode(t, Options{}, false)
	addr := proxy(t, prod.Addr(), 20_000) // the handshake, then part of the first 32 KiB buffer
	g := cons.NewGate()
	in, err := Subscribe(g, addr, "cut", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "cut", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	werr := writeUntilError(out, strings.Repeat("y", 1000))
	_, err = drain(t, g, in, ident, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), `channel "cut"`) || !strings.Contains(err.Error(), "peer "+addr) ||
		!strings.Contains(err.Error(), "mid-frame") {
		t.Fatalf("consumer: %v, want a mid-frame loss naming the channel and peer %s", err, addr)
	}
	select {
	case err := <-werr:
		if !strings.Contains(err.Error(), `channel "cut", peer 127.0.0.1:`) || !strings.Contains(err.Error(), "connection lost") {
			t.Fatalf("producer: %v, want a lost connection naming the channel and peer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the producer did not notice the lost connection")
	}
}

// fakeProducer accepts one dialer, answers its handshake, reads its
// partition request and then sends reply.
func fakeProducer(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(nc)
		if _, _, _, err := readClientHello(br); err != nil {
			return
		}
		nc.Write(serverHello(ProtocolVersion, statusOK, ""))
		var hdr [frameHeaderLen]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		br.Discard(int(binary.BigEndian.Uint32(hdr[:4])) - 5)
		nc.Write(reply)
		io.Copy(io.Discard, br) // until the consumer hangs up
	})
	return ln.Addr().String()
}

// TestGarbageFrames: frames that break the protocol fail the connection's
// channels with ErrMalformed, naming the channel, the peer and the fault.
func TestGarbageFrames(t *testing.T) {
	bigBuffer := make([]byte, frameHeaderLen)
	putHeader(bigBuffer, 1<<30, frameBuffer, 1)
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"unknown type", string(frame(0xEE, 1, []byte("junk"))), "unexpected frame-type(0xee) frame"},
		{"too long", string(bigBuffer), "buffer frame of 1073741824 bytes"},
		{"bad event", string(frame(frameEvent, 1, make([]byte, eventBodyLen))), "unknown event kind 0"},
		{"buffer beyond credit", strings.Repeat(string(frame(frameBuffer, 1, make([]byte, 4))), 3), "buffer received without credit"},
		{"request to a consumer", string(frame(framePartitionRequest, 1, requestBody(1, "x"))), "unexpected partition-request frame"},
		{"garbage record", string(frame(frameBuffer, 1, append(make([]byte, 4), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))), "bad record header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeProducer(t, []byte(tc.reply))
			cons := newNode(t, Options{}, false)
			g := cons.NewGate()
			in, err := Subscribe(g, addr, "victim", codec.String())
			if err != nil {
				t.Fatal(err)
			}
			_, err = drain(t, g, in, ident, 10*time.Second)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), `channel "victim", peer `+addr) {
				t.Fatalf("got %v, want ErrMalformed with %q naming the channel and peer %s", err, tc.want, addr)
			}
		})
	}
}

// TestGarbageFromConsumer: a producer that receives garbage answers with an
// error frame and fails the channels of that connection.
func TestGarbageFromConsumer(t *testing.T) {
	prod := newNode(t, Options{}, true)
	out, err := NewOutput(prod, "p", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, br := rawDial(t, prod.Addr(), ProtocolVersion, 32<<10, "")
	nc.Write(frame(framePartitionRequest, 1, requestBody(5, "p")))
	nc.Write(frame(frameResumeConsumption, 1, nil)) // nothing blocked it
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:4])-5)
	io.ReadFull(br, body)
	if frameType(hdr[4]) != frameError || !strings.Contains(string(body), "resume-consumption on a channel that is not blocked") {
		t.Fatalf("got a %s frame %q, want an error frame saying what was wrong", frameType(hdr[4]), body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := out.WriteRecord("x", NoTimestamp)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `channel "p", peer 127.0.0.1:`) {
				t.Fatalf("producer: %v, want ErrMalformed naming the channel and peer", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the producer's channel did not fail")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandshakeRefusals: strangers, other versions, wrong tokens and other
// buffer sizes are refused before any frame is read, with errors that say
// what to do; the listener keeps serving.
func TestHandshakeRefusals(t *testing.T) {
	logs := &logBuffer{}
	prod := newNode(t, Options{Token: "s3cret", Logger: slog.New(slog.NewTextHandler(logs, nil))}, true)

	// A stranger (an HTTP client) gets nothing back and is logged.
	nc, err := net.Dial("tcp", prod.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("stranger read %d bytes, %v: want nothing", n, err)
	}
	stranger := nc.LocalAddr().String()
	nc.Close()

	for _, tc := range []struct {
		name string
		opts Options
		ver  uint8
		want string
	}{
		{"wrong token", Options{Token: "guess"}, ProtocolVersion, "refused this process's cluster token"},
		{"no token", Options{}, ProtocolVersion, "refused this process's cluster token"},
		{"other version", Options{Token: "s3cret"}, 7, fmt.Sprintf("the peer speaks data-plane protocol version %d, this process version 7", ProtocolVersion)},
		{"buffer size", Options{Token: "s3cret", BufferSize: 4096}, ProtocolVersion, "buffer size 4096, this process 32768"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cons := newNode(t, tc.opts, false)
			cons.version = tc.ver
			_, err := Subscribe(cons.NewGate(), prod.Addr(), "c", codec.String())
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), prod.Addr()) {
				t.Fatalf("got %v, want ErrRefused naming %s and saying %q", err, prod.Addr(), tc.want)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for prod.Refused() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := prod.Refused(); got != 5 {
		t.Fatalf("Refused() = %d, want 5", got)
	}
	l := logs.String()
	for _, want := range []string{"peer=" + stranger, "does not speak weir's data-plane protocol", "wrong cluster token", fmt.Sprintf("version 7, this process version %d", ProtocolVersion)} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}

	// The right token still gets through.
	cons := newNode(t, Options{Token: "s3cret"}, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "ok", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "ok", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out.WriteRecord("hello", NoTimestamp)
	out.Emit(Event{Kind: EndOfPartition})
	if got, err := drain(t, g, in, ident, 10*time.Second); err != nil || len(got) != 2 {
		t.Fatalf("after refusals: %v, %v", got, err)
	}
}

// TestConsumerCancel: a consumer that gives its channel up tells the
// producer, whose blocked write ends with ErrCancelled naming the channel
// and the peer; the gate's other channel goes on.
func TestConsumerCancel(t *testing.T) {
	prod := newNode(t, Options{BufferSize: 256}, true)
	cons := newNode(t, Options{BufferSize: 256}, false)
	g := cons.NewGate()
	gone, err := Subscribe(g, prod.Addr(), "gone", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	stays, err := Subscribe(g, prod.Addr(), "stays", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "gone", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewOutput(prod, "stays", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	werr := writeUntilError(out, strings.Repeat("c", 100))
	time.Sleep(50 * time.Millisecond) // the writer fills its credit and blocks
	gone.Cancel()
	select {
	case err := <-werr:
		if !errors.Is(err, ErrCancelled) || !strings.Contains(err.Error(), `channel "gone", peer 127.0.0.1:`) {
			t.Fatalf("producer: %v, want ErrCancelled naming the channel and peer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not reach the producer")
	}
	if what, _, _, _, err := gone.Poll(); what != Empty || !errors.Is(err, ErrCancelled) {
		t.Fatalf("Poll after Cancel: %v, %v; want Empty and ErrCancelled", what, err)
	}
	other.Write([]string{"a", "b"}, nil)
	other.Emit(Event{Kind: EndOfPartition})
	if got, err := drain(t, g, stays, ident, 10*time.Second); err != nil || trunc(got) != `"a" "b" end-of-partition ` {
		t.Fatalf("the other channel: %s, %v", trunc(got), err)
	}
}

// writeUntilError writes rec to out again and again from a goroutine of
// its own and sends the first error the write returns.
func writeUntilError(out *OutputChannel[string], rec string) <-chan error {
	werr := make(chan error, 1)
	go func() {
		for {
			if err := out.WriteRecord(rec, NoTimestamp); err != nil {
				werr <- err
				return
			}
		}
	}()
	return werr
}
