package network

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/weirstream/weir/codec"
)

// TestObjectReuseHoldsBuffer: with object reuse on, the strings of a batch
// point into their receive buffer (consecutive records sit back to back in
// memory), and that buffer, hence its credit, is held until the next Poll:
// a sender with one credit sends nothing more meanwhile, and the batch
// stays intact. Without object reuse the buffer is given back within the
// Poll that decoded it.
func TestObjectReuseHoldsBuffer(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuse=%v", reuse), func(t *testing.T) {
			o := Options{BufferSize: 256, ExclusiveBuffers: 1, FloatingBuffers: -1, FlushTimeout: -1}
			prod := newNode(t, o, true)
			cons := newNode(t, o, false)
			g := cons.NewGate()
			in, err := Subscribe(g, prod.Addr(), "reuse", codec.String())
			if err != nil {
				t.Fatal(err)
			}
			in.SetObjectReuse(reuse)
			out, err := NewOutput(prod, "reuse", codec.String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var recs []string
			for i := range 40 { // about 8 buffers of 256 bytes
				recs = append(recs, fmt.Sprintf("%02d%s", i, strings.Repeat("r", 48)))
			}
			if err := out.Write(recs, nil); err != nil {
				t.Fatal(err)
			}
			if err := out.Emit(Event{Kind: EndOfPartition}); err != nil {
				t.Fatal(err)
			}
			var first []string
			for first == nil {
				what, rs, _, _, err := in.Poll()
				if err != nil {
					t.Fatal(err)
				}
				if what == Records {
					first = rs
					break
				}
				<-g.Doorbell()
			}
			if len(first) < 2 {
				t.Fatalf("first batch of %d records, want several", len(first))
			}
			back2back := unsafe.StringData(first[1]) == (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(first[0])), len(first[0])+2))
			if back2back != reuse {
				t.Fatalf("records of a batch back to back in the receive buffer: %v, want %v", back2back, reuse)
			}
			// One credit: the next buffer comes only once the first is given back.
			deadline := time.Now().Add(2 * time.Second)
			for !reuse && in.Metrics().BuffersIn.Load() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if reuse {
				time.Sleep(50 * time.Millisecond)
			}
			got := in.Metrics().BuffersIn.Load()
			if reuse && got != 1 {
				t.Fatalf("%d buffers received while the first is held, want 1", got)
			}
			if !reuse && got < 2 {
				t.Fatalf("%d buffers received, want the second once the first was decoded", got)
			}
			for i, r := range first {
				if r != recs[i] {
					t.Fatalf("record %d changed while held: %q, want %q", i, r, recs[i])
				}
			}
			n := len(first)
			for {
				what, rs, _, ev, err := in.Poll()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case what == Records:
					for _, r := range rs {
						if r != recs[n] {
							t.Fatalf("record %d: %q, want %q", n, r, recs[n])
						}
						n++
					}
					continue
				case what == Control && ev.Kind == EndOfPartition:
					if n != len(recs) {
						t.Fatalf("%d records, want %d", n, len(recs))
					}
					return
				}
				select {
				case <-g.Doorbell():
				case <-time.After(5 * time.Second):
					t.Fatalf("stuck after %d records", n)
				}
			}
		})
	}
}
