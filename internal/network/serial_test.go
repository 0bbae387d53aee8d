package network

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/weirstream/weir/codec"
)

// cutter fills buffers of size bs as OutputChannel.write does: a record
// straight into the open buffer when encodeInto takes it, else encoded
// into the scratch and copied across buffers; full buffers go to emit.
type cutter[T any] struct {
	enc  recordEncoder[T]
	bs   int
	cur  []byte
	emit func([]byte)
	// into counts the records encodeInto took.
	into int
}

func (c *cutter[T]) write(v T, ts int64) {
	if c.cur == nil {
		c.cur = make([]byte, 0, c.bs)
	}
	if b, ok := c.enc.encodeInto(c.cur, &v, ts); ok {
		c.into++
		c.cur = b
		if len(c.cur) == cap(c.cur) {
			c.flush()
		}
		return
	}
	for p := c.enc.encode(&v, ts); len(p) > 0; {
		if c.cur == nil {
			c.cur = make([]byte, 0, c.bs)
		}
		k := copy(c.cur[len(c.cur):cap(c.cur)], p)
		c.cur, p = c.cur[:len(c.cur)+k], p[k:]
		if len(c.cur) == cap(c.cur) {
			c.flush()
		}
	}
}

func (c *cutter[T]) flush() {
	if len(c.cur) > 0 {
		c.emit(c.cur)
	}
	c.cur = nil
}

// TestSerialRoundTrip: records of random sizes (across the lengths where
// the header grows a byte), with and without timestamps, written the way
// an output channel writes them into buffers of random size, decode to the
// same records in order: with the copying decoder, with a codec that may
// alias (records that span buffers gathered in a slice of their own) and
// with object reuse (records inside a buffer pointing into it).
func TestSerialRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bs := rapid.IntRange(64, 4096).Draw(rt, "bufferSize")
		mode := rapid.IntRange(0, 2).Draw(rt, "mode") // 0 copy, 1 alias, 2 reuse
		sizes := rapid.SliceOfN(rapid.OneOf(
			rapid.IntRange(0, 200),
			rapid.IntRange(60, 70),     // header: 1 byte up to 63
			rapid.IntRange(8185, 8200), // 2 bytes up to 8191
			rapid.IntRange(0, 3*4096),
		), 1, 60).Draw(rt, "sizes")
		var c codec.Codec[string] = codec.String()
		if mode == 0 {
			c = copyOnly[string]{c}
		}
		dec := newRecordDecoder(c, true)
		dec.reuse = mode == 2
		var want, got []string
		var wantTS, gotTS []int64
		cut := &cutter[string]{enc: recordEncoder[string]{c: c}, bs: bs}
		cut.emit = func(b []byte) {
			// A received buffer is a copy: the producer's is reused.
			rb := append([]byte(nil), b...)
			if err := dec.decode(rb); err != nil {
				rt.Fatal(err)
			}
			recs, ts := dec.batch()
			for i, r := range recs {
				got = append(got, strings.Clone(r))
				if ts != nil {
					gotTS = append(gotTS, ts[i])
				} else {
					gotTS = append(gotTS, NoTimestamp)
				}
			}
			clear(rb) // the buffer is given back: what was kept must not change
		}
		for i, n := range sizes {
			r := fmt.Sprintf("%d:", i)
			r += strings.Repeat(string(rune('a'+i%26)), max(0, n-len(r)))
			ts := NoTimestamp
			if rapid.Bool().Draw(rt, "ts") {
				ts = rapid.Int64().Draw(rt, "t")
			}
			want, wantTS = append(want, r), append(wantTS, ts)
			cut.write(r, ts)
		}
		cut.flush()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("got %d records %.200q\nwant %d %.200q", len(got), got, len(want), want)
		}
		if fmt.Sprint(gotTS) != fmt.Sprint(wantTS) {
			rt.Fatalf("timestamps: got %v, want %v", gotTS, wantTS)
		}
	})
}

// ptrRecord is a record whose codec (codec.Of) is a PointerCodec: the
// encoder appends from the caller's memory and the decoder decodes straight
// into its batch's slots.
type ptrRecord struct {
	ID    int64
	Name  string
	Tags  []string
	Inner *struct{ X int32 }
	Arr   [3]uint16
}

// TestSerialRoundTripPointerCodec: records of a struct type, written into
// buffers of random size and decoded batch after batch into the decoder's
// reused slots, come out equal to what was written, in order: a record
// without tags or Inner after one with them has none (the slot of an
// earlier batch is zeroed before the decode), and a malformed record is an
// error that leaves the batch as it was.
func TestSerialRoundTripPointerCodec(t *testing.T) {
	c, err := codec.Of[ptrRecord]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(codec.PointerCodec[ptrRecord]); !ok {
		t.Fatalf("codec.Of[ptrRecord] is a %T, not a PointerCodec", c)
	}
	rapid.Check(t, func(rt *rapid.T) {
		bs := rapid.IntRange(64, 1024).Draw(rt, "bufferSize")
		n := rapid.IntRange(1, 80).Draw(rt, "records")
		enc := newRecordEncoder(c)
		if enc.pc == nil {
			rt.Fatal("the encoder does not use the PointerCodec")
		}
		dec := newRecordDecoder(c, true)
		if dec.into == nil {
			rt.Fatal("the decoder does not use the PointerCodec")
		}
		var got []ptrRecord
		cut := &cutter[ptrRecord]{enc: enc, bs: bs}
		cut.emit = func(b []byte) {
			if err := dec.decode(append([]byte(nil), b...)); err != nil {
				rt.Fatal(err)
			}
			recs, _ := dec.batch()
			got = append(got, recs...)
		}
		var want []ptrRecord
		for i := range n {
			r := ptrRecord{ID: int64(i), Arr: [3]uint16{uint16(i), 7, 9}}
			if rapid.Bool().Draw(rt, "full") {
				r.Name = strings.Repeat("n", rapid.IntRange(0, 300).Draw(rt, "name"))
				r.Tags = rapid.SliceOfN(rapid.StringN(0, 8, -1), 1, 5).Draw(rt, "tags")
				r.Inner = &struct{ X int32 }{int32(i)}
			}
			want = append(want, r)
			cut.write(r, NoTimestamp)
		}
		cut.flush()
		if fmt.Sprintf("%+v", deref(got)) != fmt.Sprintf("%+v", deref(want)) {
			rt.Fatalf("got %+v\nwant %+v", deref(got), deref(want))
		}
	})

	// A record cut short: an error naming the decode, and the batch keeps
	// the records decoded before it, no half-decoded slot after them.
	enc := newRecordEncoder(c)
	good := append([]byte(nil), enc.encode(&ptrRecord{ID: 1, Name: "ok"}, NoTimestamp)...)
	bad := enc.encode(&ptrRecord{ID: 2, Name: "cut", Tags: []string{"a", "b"}}, NoTimestamp)
	bad = append([]byte(nil), bad...)
	bad[0] -= 4 << 1 // the header says 4 bytes fewer than the value has
	dec := newRecordDecoder(c, true)
	err = dec.decode(append(good, bad[:len(bad)-4]...))
	if err == nil || !strings.Contains(err.Error(), "decode record") {
		t.Fatalf("a record cut short decoded with error %v, want a decode error", err)
	}
	if recs, _ := dec.batch(); len(recs) != 1 || recs[0].ID != 1 || recs[0].Name != "ok" {
		t.Fatalf("after the error the batch is %+v, want the one good record", recs)
	}
}

// deref writes Inner's value instead of its address, for comparisons.
func deref(rs []ptrRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		inner := "nil"
		if r.Inner != nil {
			inner = fmt.Sprint(r.Inner.X)
		}
		out[i] = fmt.Sprintf("%d %q %q %s %v", r.ID, r.Name, r.Tags, inner, r.Arr)
	}
	return out
}

// TestReuseAliases: with object reuse on, the strings of a batch point
// into the receive buffer (no copy), and records that span buffers get
// memory of their own, which later buffers do not overwrite.
func TestReuseAliases(t *testing.T) {
	cut := &cutter[string]{enc: recordEncoder[string]{c: codec.String()}, bs: 256}
	var bufs [][]byte
	cut.emit = func(b []byte) { bufs = append(bufs, append([]byte(nil), b...)) }
	for i := range 20 {
		cut.write(fmt.Sprintf("%03d%s", i, strings.Repeat("x", 37)), NoTimestamp)
	}
	cut.flush()
	if cut.into < 12 {
		t.Fatalf("encodeInto took %d of 20 records, want most", cut.into)
	}
	dec := newRecordDecoder(codec.String(), true)
	dec.reuse = true
	var spanning []string
	n := 0
	for _, b := range bufs {
		if err := dec.decode(b); err != nil {
			t.Fatal(err)
		}
		recs, _ := dec.batch()
		for i, r := range recs {
			if want := fmt.Sprintf("%03d%s", n, strings.Repeat("x", 37)); r != want {
				t.Fatalf("record %d: %q, want %q", n, r, want)
			}
			if inside(r, b) {
				n++
				continue
			}
			if i != 0 {
				t.Fatalf("record %d, not the first of its batch, does not point into its buffer", n)
			}
			spanning = append(spanning, r)
			n++
		}
		clear(b)
	}
	if n != 20 || len(spanning) == 0 {
		t.Fatalf("%d records, %d spanning buffers; want 20, some spanning", n, len(spanning))
	}
	for _, r := range spanning {
		if !strings.HasSuffix(r, strings.Repeat("x", 37)) {
			t.Fatalf("a record that spanned buffers was overwritten: %q", r)
		}
	}
}

// inside reports whether s's bytes lie in b.
func inside(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(b))
}

// copyOnly hides a codec's DecodeAlias.
type copyOnly[T any] struct{ codec.Codec[T] }

// TestHeaderLen: headerLen agrees with what putRecordHeader writes, at the
// lengths and timestamps where the varints grow.
func TestHeaderLen(t *testing.T) {
	var h [maxRecordHeader]byte
	for _, vlen := range []int{0, 1, 63, 64, 8191, 8192, 1<<20 - 1, 1 << 20, maxRecordLen} {
		for _, ts := range []int64{NoTimestamp, 0, -1, 63, -64, 64, -65, 1 << 40, -1 << 62, 1<<63 - 1, -1<<63 + 1} {
			if got, want := headerLen(vlen, ts), putRecordHeader(h[:], vlen, ts); got != want {
				t.Errorf("headerLen(%d, %d) = %d, putRecordHeader wrote %d", vlen, ts, got, want)
			}
			total, gotTS, hl, ok, err := recordSize(h[:])
			if !ok || err != nil || hl != headerLen(vlen, ts) || total != hl+vlen || gotTS != ts {
				t.Errorf("header of (%d, %d) parses as total %d ts %d len %d ok %v err %v", vlen, ts, total, gotTS, hl, ok, err)
			}
		}
	}
}
