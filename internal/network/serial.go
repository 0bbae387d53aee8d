package network

import (
	"encoding/binary"
	"fmt"

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

// recordEncoder encodes records into a reused scratch slice.
type recordEncoder[T any] struct {
	c       codec.Codec[T]
	scratch []byte
}

// encode returns the record's bytes, header included; they are valid until
// the next call.
func (e *recordEncoder[T]) encode(v T, ts int64) []byte {
	if cap(e.scratch) < maxRecordHeader {
		e.scratch = make([]byte, 0, 256)
	}
	s := e.c.Append(e.scratch[:maxRecordHeader], v)
	e.scratch = s[:0]
	vlen := len(s) - maxRecordHeader
	var h [maxRecordHeader]byte
	hdr := uint64(vlen) << 1
	if ts != NoTimestamp {
		hdr |= 1
	}
	n := binary.PutUvarint(h[:], hdr)
	if ts != NoTimestamp {
		n += binary.PutVarint(h[n:], ts)
	}
	start := maxRecordHeader - n
	copy(s[start:], h[:n])
	return s[start:]
}

// recordDecoder decodes the records of a channel's buffers in order,
// carrying a record that spans buffers over from one to the next.
type recordDecoder[T any] struct {
	c       codec.Codec[T]
	pending []byte // the start of a record that continues in the next buffer
	recs    []T
	ts      []int64 // nil (len 0) when no record of the batch has a timestamp
	clear   bool    // T holds pointers: clear recs before reuse
}

// recordSize parses the header at the start of b: ok is false when b is too
// short to hold the whole header.
func recordSize(b []byte) (total int, ts int64, hdrLen int, ok bool, err error) {
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
			take := min(total-len(d.pending), len(b))
			d.pending = append(d.pending, b[:take]...)
			b = b[take:]
			if len(d.pending) < total {
				return nil // continues in the next buffer
			}
			if err := d.add(d.pending[hl:total], ts); err != nil {
				return err
			}
			d.pending = d.pending[:0]
			break
		}
	}
	for len(b) > 0 {
		total, ts, hl, ok, err := recordSize(b)
		if err != nil {
			return err
		}
		if !ok || total > len(b) {
			d.pending = append(d.pending, b...)
			return nil
		}
		if err := d.add(b[hl:total], ts); err != nil {
			return err
		}
		b = b[total:]
	}
	return nil
}

func (d *recordDecoder[T]) add(val []byte, ts int64) error {
	v, n, err := d.c.Decode(val)
	if err != nil {
		return fmt.Errorf("%w: decode record: %v", ErrMalformed, err)
	}
	if n != len(val) {
		return fmt.Errorf("%w: record of %d bytes, the codec decoded %d", ErrMalformed, len(val), n)
	}
	if ts != NoTimestamp && len(d.ts) < len(d.recs) {
		// First timestamped record of the batch: earlier ones had none.
		for range len(d.recs) - len(d.ts) {
			d.ts = append(d.ts, NoTimestamp)
		}
	}
	d.recs = append(d.recs, v)
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
