package network

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// TestEventPayload: an event's payload travels with it, in order with the
// records around it, over TCP and over the buffered (TLS) write path's
// framing alike; an event without one arrives without one; a payload over
// MaxEventPayload is refused by Emit, naming the channel.
func TestEventPayload(t *testing.T) {
	prod := newNode(t, Options{BufferSize: 256}, true)
	cons := newNode(t, Options{BufferSize: 256}, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "p", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "p", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), MaxEventPayload)
	if err := out.Emit(Event{Kind: Barrier, ID: 1, Payload: append(big, 'y')}); err == nil || !strings.Contains(err.Error(), `channel "p": event payload of 4001 bytes`) {
		t.Fatalf("Emit of an oversized payload = %v", err)
	}
	out.WriteRecord("a", NoTimestamp)
	out.Emit(Event{Kind: Barrier, ID: 2, Timestamp: 5, Payload: []byte("options")})
	out.WriteRecord("b", NoTimestamp)
	out.Emit(Event{Kind: Barrier, ID: 3, Payload: big})
	out.Emit(Event{Kind: Watermark, Timestamp: 9})
	out.Emit(Event{Kind: EndOfPartition})
	got, err := drain(t, g, in, ident, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got[0].rec != "a" || got[2].rec != "b" {
		t.Fatalf("got %v", got)
	}
	if e := got[1].ev; e.Kind != Barrier || e.ID != 2 || e.Timestamp != 5 || string(e.Payload) != "options" {
		t.Fatalf("first barrier %+v", e)
	}
	if e := got[3].ev; e.ID != 3 || !bytes.Equal(e.Payload, big) {
		t.Fatalf("second barrier: id %d, %d bytes of payload", e.ID, len(e.Payload))
	}
	if e := got[4].ev; e.Kind != Watermark || e.Payload != nil {
		t.Fatalf("watermark %+v: want no payload", e)
	}
}

func TestDecodeEventPayload(t *testing.T) {
	body := func(flags byte, extra int) []byte {
		b := Event{Kind: Barrier, ID: 1}.appendBody(nil)
		b[1] = flags
		return append(b, bytes.Repeat([]byte("p"), extra)...)
	}
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{body(0, 1), "event body of 19 bytes, want 18"},
		{body(2, 0), "event payload of 0 bytes, want 1 to 4000"},
		{body(2, MaxEventPayload+1), "event payload of 4001 bytes"},
		{body(0x20, 0), "unknown event flags 0x20"},
		{body(0x10, 4), "event body of 22 bytes, want 26"}, // a timeout without its 8 bytes
	} {
		if _, err := decodeEvent(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decodeEvent(flags %#x, %d bytes) = %v, want %q", tc.b[1], len(tc.b), err, tc.want)
		}
	}
	ev, err := decodeEvent(body(3, 2))
	if err != nil || !ev.Aligned || string(ev.Payload) != "pp" {
		t.Fatalf("decodeEvent = %+v, %v", ev, err)
	}
}
