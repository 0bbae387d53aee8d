package network

import (
	"encoding/binary"
	"fmt"
)

// EventKind is the kind of an in-band event. The values are those of
// internal/runtime's EventKind, so that the runtime maps one to the other
// without a table.
type EventKind uint8

const (
	// EndOfPartition says the producer will send nothing more on the channel.
	EndOfPartition EventKind = iota + 1
	// Barrier carries a checkpoint id (ID) and its trigger time (Timestamp).
	Barrier
	// CancelBarrier aborts the alignment of checkpoint ID.
	CancelBarrier
	// Watermark carries event-time progress (Timestamp).
	Watermark
	// WatermarkStatus says the producer became idle (ID 1) or active (ID 0).
	WatermarkStatus
	// BarrierAnnouncement announces barrier ID (Timestamp,
	// AlignedTimeoutMs) queued behind data, sent ahead of that data as a
	// priority event (Flink's EventAnnouncement).
	BarrierAnnouncement
	maxEventKind = BarrierAnnouncement
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
	return fmt.Sprintf("event-kind(%d)", uint8(k))
}

// Event is an in-band control event. It travels in its channel in order
// with the data: it never overtakes a record written before it.
type Event struct {
	Kind      EventKind
	ID        int64
	Timestamp int64
	// Aligned marks a barrier of an aligned (exactly-once) checkpoint: once
	// the producer sent it, the channel sends nothing more until the
	// consumer calls Resume on its InputChannel, after the snapshot, so that
	// the consumer never buffers data during alignment.
	Aligned bool
	// Unaligned marks a barrier of an unaligned checkpoint, and
	// AlignedTimeoutMs > 0 an aligned barrier (or its announcement) that
	// switches to unaligned that long after Timestamp; both only travel.
	Unaligned        bool
	AlignedTimeoutMs int64
	// Priority: the event overtook the data queued before it (set on the
	// receiving side for an event sent with EmitPriority).
	Priority bool
	// Payload, at most MaxEventPayload bytes, travels with the event (a
	// barrier's checkpoint options across processes); nil for none. The
	// channel keeps it until sent: the caller must not change it.
	Payload []byte
}

// MaxEventPayload is the longest Event.Payload.
const MaxEventPayload = 4000

func (e Event) String() string {
	switch e.Kind {
	case Barrier:
		switch {
		case e.Aligned:
			return fmt.Sprintf("barrier(%d, aligned)", e.ID)
		case e.Unaligned:
			return fmt.Sprintf("barrier(%d, unaligned)", e.ID)
		}
		return fmt.Sprintf("barrier(%d)", e.ID)
	case BarrierAnnouncement:
		return fmt.Sprintf("barrier-announcement(%d)", e.ID)
	case CancelBarrier:
		return fmt.Sprintf("cancel-barrier(%d)", e.ID)
	case Watermark:
		return fmt.Sprintf("watermark(%d)", e.Timestamp)
	case WatermarkStatus:
		return fmt.Sprintf("watermark-status(%d)", e.ID)
	}
	return e.Kind.String()
}

// Event flags.
const (
	flagAligned   = 1 << iota
	flagPayload   // the payload follows the body
	flagPriority  // sent as a priority event
	flagUnaligned // an unaligned barrier
	flagTimeout   // aligned timeout:i64 follows the fixed body
	knownFlags    = flagAligned | flagPayload | flagPriority | flagUnaligned | flagTimeout
)

// bodyLen is the length of the event's body before its payload.
func (e Event) bodyLen() int {
	if e.AlignedTimeoutMs != 0 {
		return eventBodyLen + 8
	}
	return eventBodyLen
}

func (e Event) appendBody(b []byte) []byte {
	var flags byte
	if e.Aligned {
		flags |= flagAligned
	}
	if len(e.Payload) > 0 {
		flags |= flagPayload
	}
	if e.Priority {
		flags |= flagPriority
	}
	if e.Unaligned {
		flags |= flagUnaligned
	}
	if e.AlignedTimeoutMs != 0 {
		flags |= flagTimeout
	}
	b = append(b, byte(e.Kind), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(e.ID))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
	if e.AlignedTimeoutMs != 0 {
		b = binary.BigEndian.AppendUint64(b, uint64(e.AlignedTimeoutMs))
	}
	return b
}

func decodeEvent(b []byte) (Event, error) {
	if len(b) < eventBodyLen {
		return Event{}, fmt.Errorf("%w: event body of %d bytes, want %d", ErrMalformed, len(b), eventBodyLen)
	}
	k := EventKind(b[0])
	if k < EndOfPartition || k > maxEventKind {
		return Event{}, fmt.Errorf("%w: unknown event kind %d", ErrMalformed, b[0])
	}
	f := b[1]
	if f&^knownFlags != 0 {
		return Event{}, fmt.Errorf("%w: unknown event flags 0x%02x", ErrMalformed, f)
	}
	body := eventBodyLen
	if f&flagTimeout != 0 {
		body += 8
	}
	hasPayload := f&flagPayload != 0
	switch n := len(b) - body; {
	case n < 0 || !hasPayload && n != 0:
		return Event{}, fmt.Errorf("%w: event body of %d bytes, want %d", ErrMalformed, len(b), body)
	case hasPayload && (n == 0 || n > MaxEventPayload):
		return Event{}, fmt.Errorf("%w: event payload of %d bytes, want 1 to %d", ErrMalformed, n, MaxEventPayload)
	}
	ev := Event{
		Kind:      k,
		Aligned:   f&flagAligned != 0,
		Priority:  f&flagPriority != 0,
		Unaligned: f&flagUnaligned != 0,
		ID:        int64(binary.BigEndian.Uint64(b[2:10])),
		Timestamp: int64(binary.BigEndian.Uint64(b[10:18])),
	}
	if f&flagTimeout != 0 {
		ev.AlignedTimeoutMs = int64(binary.BigEndian.Uint64(b[18:26]))
	}
	if hasPayload {
		ev.Payload = append([]byte(nil), b[body:]...)
	}
	return ev, nil
}
