package network

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/weirstream/weir/codec"
)

// NoTimestamp marks a record without an event-time timestamp (the value of
// connector.NoTimestamp).
const NoTimestamp int64 = -1 << 63

// Records travel as one byte stream per channel, cut into buffers of at
// most BufferSize bytes wherever the cut falls: a record may span several
// buffers, and a buffer holds as many records as fit. Each record is
//
//	uvarint(len(value)<<1 | hasTimestamp) [varint(timestamp)] value
//
// where value is the edge codec's encoding.

// maxRecordHeader is the most bytes a record header takes.
const maxRecordHeader = 2 * binary.MaxVarintLen64

// maxRecordLen bounds a record's encoding (1 GiB), so that a corrupt
// header cannot make the receiver allocate without limit.
const maxRecordLen = 1 << 30

// recordEncoder encodes records straight into the channel's buffer when
// they fit (encodeInto), else into a reused scratch slice (encode).
type recordEncoder[T any] struct {
	c       codec.Codec[T]
	pc      codec.PointerCodec[T] // c's, or nil: encodes from the caller's memory
	scratch []byte
	// lastVal is the length of the last value encoded and maxVal the
	// longest since the current buffer started: encodeInto tries a buffer
	// only when maxVal and a header fit in what is left of it, so that the
	// codec's Append seldom outgrows the buffer (which would allocate).
	lastVal, maxVal int
}

func newRecordEncoder[T any](c codec.Codec[T]) recordEncoder[T] {
	pc, _ := c.(codec.PointerCodec[T])
	return recordEncoder[T]{c: c, pc: pc}
}

// appendValue appends the encoding of *v, without copying *v first when
// the codec can (a PointerCodec).
func (e *recordEncoder[T]) appendValue(dst []byte, v *T) []byte {
	if e.pc != nil {
		return e.pc.AppendFrom(dst, v)
	}
	return e.c.Append(dst, *v)
}

// putRecordHeader writes the header of a record with a value of vlen bytes
// to h and returns its length.
func putRecordHeader(h []byte, vlen int, ts int64) int {
	hdr := uint64(vlen) << 1
	if ts != NoTimestamp {
		hdr |= 1
	} else if hdr < 0x80 {
		h[0] = byte(hdr) // the usual header: one byte
		return 1
	}
	n := binary.PutUvarint(h, hdr)
	if ts != NoTimestamp {
		n += binary.PutVarint(h[n:], ts)
	}
	return n
}

// headerLen is the length of a record header for a value of vlen bytes.
func headerLen(vlen int, ts int64) int {
	n := uvarintLen(uint64(vlen) << 1)
	if ts != NoTimestamp {
		n += uvarintLen(uint64(ts<<1) ^ uint64(ts>>63)) // varint's zig-zag
	}
	return n
}

// uvarintLen is the length of binary.PutUvarint's encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// encode returns the record's bytes, header included; they are valid until
// the next call.
func (e *recordEncoder[T]) encode(v *T, ts int64) []byte {
	if cap(e.scratch) < maxRecordHeader {
		e.scratch = make([]byte, 0, 256)
	}
	s := e.appendValue(e.scratch[:maxRecordHeader], v)
	e.scratch = s[:0]
	vlen := len(s) - maxRecordHeader
	e.note(vlen)
	var h [maxRecordHeader]byte
	n := putRecordHeader(h[:], vlen, ts)
	start := maxRecordHeader - n
	copy(s[start:], h[:n])
	return s[start:]
}

func (e *recordEncoder[T]) note(vlen int) {
	e.lastVal = vlen
	e.maxVal = max(e.maxVal, vlen)
}

// encodeInto appends the record to buf within its capacity, without a
// copy: the codec appends the value right after room for the header. It
// returns false, and buf unchanged, when the record may not fit (the
// caller then encodes it with encode, and it spans buffers).
func (e *recordEncoder[T]) encodeInto(buf []byte, v *T, ts int64) ([]byte, bool) {
	start := len(buf)
	if start == 0 {
		e.maxVal = e.lastVal // a new buffer: forget what earlier ones held
	}
	if cap(buf)-start < e.maxVal+maxRecordHeader {
		return buf, false
	}
	hl := headerLen(e.lastVal, ts) // the usual case: the same length class as the last one
	dst := buf[start : start+hl : cap(buf)]
	s := e.appendValue(dst, v)
	vlen := len(s) - hl
	if unsafe.SliceData(s) != unsafe.SliceData(dst) {
		// Append outgrew the buffer and moved the record elsewhere.
		e.note(vlen)
		return buf, false
	}
	n := headerLen(vlen, ts)
	if n != hl {
		if start+n+vlen > cap(buf) {
			e.note(vlen)
			return buf, false
		}
		copy(buf[start+n:start+n+vlen], s[hl:]) // memmove: they overlap
	}
	e.note(vlen)
	putRecordHeader(buf[start:start+n], vlen, ts)
	return buf[:start+n+vlen], true
}

// recordDecoder decodes the records of a channel's buffers in order,
// carrying a record that spans buffers over from one to the next.
//
// With a codec that can decode without copying (codec.AliasDecoder), a
// record that spans buffers is gathered in a fresh slice of its size that
// its value then keeps (one copy of its bytes, not two); with reuse on
// (object reuse), records inside a buffer are decoded without a copy too,
// their values pointing into the buffer, and one that spans buffers is
// gathered in one of two reused slices, taken in turn, so that a value
// stays intact until the decode after the one that returned it.
type recordDecoder[T any] struct {
	c       codec.Codec[T]
	alias   codec.AliasDecoder[T] // c's, or nil
	into    codec.PointerCodec[T] // c's, or nil: decodes straight into recs
	reuse   bool                  // values of records inside a buffer may point into it
	pending []byte                // the start of a record that continues in the next buffer
	given   bool                  // pending is a fresh slice that the record's value keeps
	spare   []byte                // the reused pending slice while pending is a given one; with reuse, the other one
	recs    []T
	ts      []int64 // nil (len 0) when no record of the batch has a timestamp
	clear   bool    // T holds pointers: clear recs before reuse
}

func newRecordDecoder[T any](c codec.Codec[T], clear bool) recordDecoder[T] {
	a, _ := c.(codec.AliasDecoder[T])
	pc, _ := c.(codec.PointerCodec[T])
	return recordDecoder[T]{c: c, alias: a, into: pc, clear: clear}
}

// maxGivenRecord bounds the records gathered in a fresh slice of their
// size, allocated when their header arrives; a larger one (up to
// maxRecordLen) grows with its bytes, so a header alone never makes the
// receiver allocate a gigabyte.
const maxGivenRecord = 64 << 20

// freshBytes returns an empty slice with room for n bytes, not zeroed
// (strings.Builder's Grow allocates without zeroing): the record gathered
// in it overwrites every byte.
func freshBytes(n int) []byte {
	var sb strings.Builder
	sb.Grow(max(n, 1))
	sb.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(sb.String()), max(n, 1))[:0:n]
}

// give moves the pending start of a record of total bytes into a fresh
// slice that its value may keep.
func (d *recordDecoder[T]) give(total int) {
	d.spare = d.pending[:0]
	d.pending = append(freshBytes(total), d.pending...)
	d.given = true
}

// recordSize parses the header at the start of b: ok is false when b is too
// short to hold the whole header.
func recordSize(b []byte) (total int, ts int64, hdrLen int, ok bool, err error) {
	if len(b) > 0 && b[0]&0x81 == 0 {
		// The usual header: one byte, no timestamp.
		return 1 + int(b[0]>>1), NoTimestamp, 1, true, nil
	}
	hdr, n := binary.Uvarint(b)
	if n == 0 {
		return 0, 0, 0, false, nil
	}
	if n < 0 {
		return 0, 0, 0, false, fmt.Errorf("%w: bad record header", ErrMalformed)
	}
	vlen := hdr >> 1
	if vlen > maxRecordLen {
		return 0, 0, 0, false, fmt.Errorf("%w: record of %d bytes, at most %d", ErrMalformed, vlen, maxRecordLen)
	}
	ts = NoTimestamp
	if hdr&1 != 0 {
		t, m := binary.Varint(b[n:])
		if m == 0 {
			return 0, 0, 0, false, nil
		}
		if m < 0 {
			return 0, 0, 0, false, fmt.Errorf("%w: bad record timestamp", ErrMalformed)
		}
		ts, n = t, n+m
	}
	return n + int(vlen), ts, n, true, nil
}

// decode appends the records completed by buffer b to d.recs and d.ts,
// which it resets first.
func (d *recordDecoder[T]) decode(b []byte) error {
	if d.clear {
		clear(d.recs)
	}
	d.recs, d.ts = d.recs[:0], d.ts[:0]
	if len(d.pending) > 0 {
		for {
			total, ts, hl, ok, err := recordSize(d.pending)
			if err != nil {
				return err
			}
			if !ok {
				if len(b) == 0 {
					return nil
				}
				d.pending = append(d.pending, b[0])
				b = b[1:]
				continue
			}
			if d.alias != nil && !d.given && !d.reuse && total <= maxGivenRecord {
				d.give(total)
			}
			take := min(total-len(d.pending), len(b))
			d.pending = append(d.pending, b[:take]...)
			b = b[take:]
			if len(d.pending) < total {
				return nil // continues in the next buffer
			}
			if err := d.add(d.pending[hl:total], ts, d.given || d.reuse); err != nil {
				return err
			}
			switch {
			case d.given:
				d.pending, d.given = d.spare[:0], false
			case d.reuse && d.alias != nil:
				// The value points into pending until the next Poll: the
				// next record that spans buffers goes into the other slice.
				d.pending, d.spare = d.spare[:0], d.pending[:0]
			default:
				d.pending = d.pending[:0]
			}
			break
		}
	}
	for len(b) > 0 {
		total, ts, hl, ok, err := recordSize(b)
		if err != nil {
			return err
		}
		if !ok || total > len(b) {
			if ok && d.alias != nil && !d.reuse && total <= maxGivenRecord {
				d.give(total)
			}
			d.pending = append(d.pending, b...)
			return nil
		}
		if err := d.add(b[hl:total], ts, d.reuse); err != nil {
			return err
		}
		b = b[total:]
	}
	return nil
}

// add decodes the value val of a record, without a copy when alias is
// set and the codec can.
func (d *recordDecoder[T]) add(val []byte, ts int64, alias bool) error {
	var n int
	var err error
	switch {
	case alias && d.alias != nil:
		var v T
		v, n, err = d.alias.DecodeAlias(val)
		if err == nil {
			d.recs = append(d.recs, v)
		}
	case d.into != nil:
		// Straight into the batch's next slot (DecodeInto zeroes it
		// first): no copy of the value on the way.
		if len(d.recs) < cap(d.recs) {
			d.recs = d.recs[:len(d.recs)+1]
		} else {
			var zero T
			d.recs = append(d.recs, zero)
		}
		if n, err = d.into.DecodeInto(val, &d.recs[len(d.recs)-1]); err != nil {
			d.recs = d.recs[:len(d.recs)-1]
		}
	default:
		var v T
		v, n, err = d.c.Decode(val)
		if err == nil {
			d.recs = append(d.recs, v)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: decode record: %v", ErrMalformed, err)
	}
	if n != len(val) {
		d.recs = d.recs[:len(d.recs)-1]
		return fmt.Errorf("%w: record of %d bytes, the codec decoded %d", ErrMalformed, len(val), n)
	}
	if ts != NoTimestamp && len(d.ts) < len(d.recs)-1 {
		// First timestamped record of the batch: earlier ones had none.
		for range len(d.recs) - 1 - len(d.ts) {
			d.ts = append(d.ts, NoTimestamp)
		}
	}
	if len(d.ts) > 0 || ts != NoTimestamp {
		d.ts = append(d.ts, ts)
	}
	return nil
}

// batch returns the records decoded by the last call, with their
// timestamps (nil when none has one).
func (d *recordDecoder[T]) batch() ([]T, []int64) {
	if len(d.ts) == 0 {
		return d.recs, nil
	}
	return d.recs, d.ts
}
