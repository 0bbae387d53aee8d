package network

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// TestSerialAllocs: encoding records into buffers and decoding them back,
// records spanning buffers included, allocates nothing once the scratch
// slices have grown.
func TestSerialAllocs(t *testing.T) {
	enc := recordEncoder[int64]{c: codec.Int64()}
	dec := newRecordDecoder(codec.Int64(), false)
	buf := make([]byte, 0, 100) // small: many records span two buffers
	var v int64
	run := func() {
		n := 0
		for i := range int64(1000) {
			v = i
			p := enc.encode(&v, i)
			for len(p) > 0 {
				k := copy(buf[len(buf):cap(buf)], p)
				buf, p = buf[:len(buf)+k], p[k:]
				if len(buf) == cap(buf) {
					if err := dec.decode(buf); err != nil {
						t.Fatal(err)
					}
					n += len(dec.recs)
					buf = buf[:0]
				}
			}
		}
		if err := dec.decode(buf); err != nil {
			t.Fatal(err)
		}
		buf = buf[:0]
	}
	run()
	if a := testing.AllocsPerRun(20, run); a != 0 {
		t.Fatalf("%.1f allocations per 1000 records, want 0", a)
	}
}

// TestWriteAllocs: the whole path, a producer writing batches while a
// consumer polls them over TCP, does not allocate per record: buffers and
// encoders are reused at both ends.
func TestWriteAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	prod := newNode(t, Options{FlushTimeout: -1}, true)
	cons := newNode(t, Options{}, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "allocs", codec.Int64())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "allocs", codec.Int64(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var received int
	wg.Go(func() {
		for {
			what, recs, _, _, err := in.Poll()
			if err != nil {
				return
			}
			if what == Records {
				received += len(recs)
				continue
			}
			select {
			case <-g.Doorbell():
			case <-stop:
				return
			}
		}
	})
	batch := make([]int64, 1000)
	ts := make([]int64, 1000)
	write := func() {
		if err := out.Write(batch, ts); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 { // warm up: every buffer allocated at both ends
		write()
	}
	allocs := testing.AllocsPerRun(200, write)
	out.Flush()
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	// The gate, the ready queue and the credit map grow now and then; the
	// bound is far below one allocation per record.
	if perRecord := allocs / 1000; perRecord > 0.01 {
		t.Fatalf("%.2f allocations per batch of 1000 records, want < 10", allocs)
	}
	t.Logf("%.2f allocations per batch of 1000 records; %d received", allocs, received)
}

// TestReuseAllocs: with object reuse, 100-byte strings encoded straight
// into buffers (or across two) and decoded back allocate nothing: the
// strings point into the buffer, or into the decoder's two reused slices
// when they span buffers.
func TestReuseAllocs(t *testing.T) {
	enc := recordEncoder[string]{c: codec.String()}
	dec := newRecordDecoder(codec.String(), true)
	dec.reuse = true
	rec := strings.Repeat("s", 100)
	buf := make([]byte, 0, 1000) // many records span two buffers
	n := 0
	emit := func() {
		if err := dec.decode(buf); err != nil {
			t.Fatal(err)
		}
		n += len(dec.recs)
		buf = buf[:0]
	}
	run := func() {
		for range 1000 {
			if b, ok := enc.encodeInto(buf, &rec, NoTimestamp); ok {
				buf = b
				if len(buf) == cap(buf) {
					emit()
				}
				continue
			}
			for p := enc.encode(&rec, NoTimestamp); len(p) > 0; {
				k := copy(buf[len(buf):cap(buf)], p)
				buf, p = buf[:len(buf)+k], p[k:]
				if len(buf) == cap(buf) {
					emit()
				}
			}
		}
	}
	run()
	if a := testing.AllocsPerRun(20, run); a != 0 {
		t.Fatalf("%.1f allocations per 1000 records, want 0", a)
	}
	if n < 21*990 {
		t.Fatalf("%d records decoded, want about %d", n, 21*1000)
	}
}
