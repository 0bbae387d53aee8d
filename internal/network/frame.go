package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format. Every integer is big-endian.
//
// Handshake, first thing on a connection (after TLS when configured):
//
//	dialer → listener: "WRNT" version:u8 bufferSize:u32 tokenLen:u16 token
//	listener → dialer: "WRNT" version:u8 status:u8 msgLen:u16 msg
//
// Then frames, in both directions:
//
//	length:u32 type:u8 channel:u32 body[length-5]
//
// length counts the type, the channel and the body. Channel 0 means the
// connection itself (close, error); logical channels are numbered from 1 by
// the dialer, the consuming side, in its partition requests.
const (
	magic = "WRNT"
	// ProtocolVersion is the version of the wire format; a peer of another
	// version is refused in the handshake. 2: an event may carry a payload
	// (flag bit 2: a barrier's storage URL and directory, across processes).
	// 3: priority events, unaligned barriers, aligned timeouts and barrier
	// announcements (flag bits 4, 8 and 16, event kind 6).
	ProtocolVersion uint8 = 3

	frameHeaderLen = 4 + 1 + 4
	maxNameLen     = 1 << 12
	maxTokenLen    = 1 << 12
	maxErrorLen    = 1 << 12
)

type frameType uint8

const (
	// consumer → producer
	framePartitionRequest  frameType = iota + 1 // credit:u32 nameLen:u16 name
	frameAddCredit                              // credit:u32
	frameResumeConsumption                      // (empty)
	frameCancel                                 // (empty): the consumer gives the channel up
	// producer → consumer
	frameBuffer // backlog:u32 data
	frameEvent  // kind:u8 flags:u8 id:i64 timestamp:i64 [timeout:i64, when flags&16] [payload, when flags&2]
	// either way
	frameClose // (empty), channel 0: a graceful end of the connection
	frameError // msgLen:u16 msg; channel 0 fails the whole connection
)

func (t frameType) String() string {
	switch t {
	case framePartitionRequest:
		return "partition-request"
	case frameAddCredit:
		return "add-credit"
	case frameResumeConsumption:
		return "resume-consumption"
	case frameCancel:
		return "cancel"
	case frameBuffer:
		return "buffer"
	case frameEvent:
		return "event"
	case frameClose:
		return "close"
	case frameError:
		return "error"
	}
	return fmt.Sprintf("frame-type(0x%02x)", uint8(t))
}

const eventBodyLen = 1 + 1 + 8 + 8

// maxEventBodyLen is the longest event body before its payload.
const maxEventBodyLen = eventBodyLen + 8

// Handshake statuses.
const (
	statusOK uint8 = iota
	statusVersion
	statusToken
	statusBufferSize
)

// ErrMalformed is wrapped by the errors for bytes on the wire that break the
// protocol: a garbage frame, a frame too long, a buffer without credit.
var ErrMalformed = errors.New("malformed frame")

// ErrRefused is wrapped by the errors of a handshake the peer refused, or
// that this process refused: another protocol version, a wrong cluster
// token, a different buffer size, or a stranger that does not speak the
// protocol at all.
var ErrRefused = errors.New("connection refused in handshake")

func putHeader(b []byte, length int, t frameType, ch uint32) {
	binary.BigEndian.PutUint32(b[0:4], uint32(length))
	b[4] = byte(t)
	binary.BigEndian.PutUint32(b[5:9], ch)
}

// clientHello is what a dialer says first.
func clientHello(version uint8, bufferSize int, token string) []byte {
	b := make([]byte, 0, 4+1+4+2+len(token))
	b = append(b, magic...)
	b = append(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(bufferSize))
	b = binary.BigEndian.AppendUint16(b, uint16(len(token)))
	return append(b, token...)
}

// readClientHello reads a dialer's hello. A peer that does not start with
// the magic is a stranger and is not read further.
func readClientHello(r io.Reader) (version uint8, bufferSize int, token string, err error) {
	var h [4 + 1 + 4 + 2]byte
	if _, err := io.ReadFull(r, h[:4]); err != nil {
		return 0, 0, "", fmt.Errorf("read handshake: %w", err)
	}
	if string(h[:4]) != magic {
		return 0, 0, "", fmt.Errorf("%w: the peer does not speak weir's data-plane protocol (first bytes %q)", ErrRefused, h[:4])
	}
	if _, err := io.ReadFull(r, h[4:]); err != nil {
		return 0, 0, "", fmt.Errorf("read handshake: %w", err)
	}
	version = h[4]
	bufferSize = int(binary.BigEndian.Uint32(h[5:9]))
	n := int(binary.BigEndian.Uint16(h[9:11]))
	if n > maxTokenLen {
		return version, bufferSize, "", fmt.Errorf("%w: cluster token of %d bytes, at most %d", ErrRefused, n, maxTokenLen)
	}
	tok := make([]byte, n)
	if _, err := io.ReadFull(r, tok); err != nil {
		return version, bufferSize, "", fmt.Errorf("read handshake: %w", err)
	}
	return version, bufferSize, string(tok), nil
}

func serverHello(version, status uint8, msg string) []byte {
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	b := make([]byte, 0, 4+1+1+2+len(msg))
	b = append(b, magic...)
	b = append(b, version, status)
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

func readServerHello(r io.Reader) (version, status uint8, msg string, err error) {
	var h [4 + 1 + 1 + 2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, "", fmt.Errorf("read handshake reply: %w", err)
	}
	if string(h[:4]) != magic {
		return 0, 0, "", fmt.Errorf("%w: the peer does not speak weir's data-plane protocol (first bytes %q)", ErrRefused, h[:4])
	}
	n := int(binary.BigEndian.Uint16(h[6:8]))
	m := make([]byte, n)
	if _, err := io.ReadFull(r, m); err != nil {
		return 0, 0, "", fmt.Errorf("read handshake reply: %w", err)
	}
	return h[4], h[5], string(m), nil
}
