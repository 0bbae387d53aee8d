package network

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirstream/weir/codec"
)

// op is one step of a producer's script: a batch of records, an event or a
// flush.
type op struct {
	recs  []string
	ts    []int64
	ev    *Event
	flush bool
}

// TestPropertyDelivery runs random scripts on several channels of one
// connection, with small buffers (records from 0 bytes to 3 buffers), few
// credits (down to 1), random events and object reuse on or off per
// channel: every channel receives every record once, in order, with its
// timestamp, and every event in its place.
func TestPropertyDelivery(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bufSize := rapid.IntRange(64, 512).Draw(rt, "bufferSize")
		opts := Options{
			BufferSize:       bufSize,
			ExclusiveBuffers: rapid.IntRange(1, 3).Draw(rt, "exclusive"),
			FloatingBuffers:  rapid.SampledFrom([]int{-1, 1, 2, 4}).Draw(rt, "floating"),
			SenderBuffers:    rapid.IntRange(2, 4).Draw(rt, "senderBuffers"),
			FlushTimeout:     rapid.SampledFrom([]time.Duration{-1, 100 * time.Microsecond, time.Millisecond}).Draw(rt, "flushTimeout"),
			Logger:           quietLogger(),
		}
		nch := rapid.IntRange(1, 4).Draw(rt, "channels")
		scripts := make([][]op, nch)
		wants := make([][]item, nch)
		for c := range nch {
			nops := rapid.IntRange(0, 25).Draw(rt, fmt.Sprintf("ops%d", c))
			for i := range nops {
				var o op
				switch rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("kind%d.%d", c, i)) {
				case 0:
					o.ev = &Event{Kind: Watermark, Timestamp: int64(i)}
				case 1:
					o.ev = &Event{Kind: Barrier, ID: int64(i), Aligned: rapid.Bool().Draw(rt, "aligned")}
				case 2:
					o.ev = &Event{Kind: CancelBarrier, ID: int64(i)}
				case 3:
					o.flush = true
				default:
					n := rapid.IntRange(1, 8).Draw(rt, "batch")
					withTS := rapid.Bool().Draw(rt, "withTS")
					for k := range n {
						size := rapid.IntRange(0, 3*bufSize).Draw(rt, "size")
						r := fmt.Sprintf("%d.%d.%d:", c, i, k)
						r += strings.Repeat(string(rune('a'+k%26)), max(0, size-len(r)))
						o.recs = append(o.recs, r)
						if withTS {
							o.ts = append(o.ts, int64(i*100+k))
						}
					}
				}
				scripts[c] = append(scripts[c], o)
			}
			scripts[c] = append(scripts[c], op{ev: &Event{Kind: EndOfPartition}})
			for _, o := range scripts[c] {
				if o.ev != nil {
					wants[c] = append(wants[c], item{ev: o.ev})
				}
				for k, r := range o.recs {
					it := item{rec: r, ts: NoTimestamp}
					if o.ts != nil {
						it.ts = o.ts[k]
					}
					wants[c] = append(wants[c], it)
				}
			}
		}

		prod, err := New(opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer prod.Close()
		if err := prod.Listen("127.0.0.1:0"); err != nil {
			rt.Fatal(err)
		}
		cons, err := New(opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer cons.Close()
		g := cons.NewGate()
		ins := make([]*InputChannel[string], nch)
		for c := range nch {
			if ins[c], err = Subscribe(g, prod.Addr(), fmt.Sprintf("ch%d", c), codec.String()); err != nil {
				rt.Fatal(err)
			}
			// Object reuse: the strings point into the receive buffers,
			// so the consumer below clones what it keeps (under -race, a
			// buffer given back too early is a reported race).
			ins[c].SetObjectReuse(rapid.Bool().Draw(rt, fmt.Sprintf("reuse%d", c)))
		}
		var wg sync.WaitGroup
		errs := make([]error, nch)
		for c := range nch {
			out, err := NewOutput(prod, fmt.Sprintf("ch%d", c), codec.String(), nil)
			if err != nil {
				rt.Fatal(err)
			}
			wg.Go(func() {
				for _, o := range scripts[c] {
					var err error
					switch {
					case o.ev != nil:
						err = out.Emit(*o.ev)
					case o.flush:
						err = out.Flush()
					default:
						err = out.Write(o.recs, o.ts)
					}
					if err != nil {
						errs[c] = err
						return
					}
				}
			})
		}
		gots := make([][]item, nch)
		done := make([]bool, nch)
		deadline := time.After(20 * time.Second)
		for left := nch; left > 0; {
			progress := false
			for c, in := range ins {
				if done[c] {
					continue
				}
				what, recs, ts, ev, err := in.Poll()
				switch what {
				case Records:
					progress = true
					for i, r := range recs {
						it := item{rec: strings.Clone(r), ts: NoTimestamp}
						if ts != nil {
							it.ts = ts[i]
						}
						gots[c] = append(gots[c], it)
					}
				case Control:
					progress = true
					e := ev
					gots[c] = append(gots[c], item{ev: &e})
					if ev.Kind == Barrier && ev.Aligned {
						in.Resume()
					}
					if ev.Kind == EndOfPartition {
						done[c] = true
						left--
					}
				default:
					if err != nil {
						rt.Fatalf("channel %d: %v", c, err)
					}
				}
			}
			if progress {
				continue
			}
			select {
			case <-g.Doorbell():
			case <-deadline:
				rt.Fatalf("timed out; received %v items of %v", lens(gots), lens(wants))
			}
		}
		wg.Wait()
		for c := range nch {
			if errs[c] != nil {
				rt.Fatalf("producer %d: %v", c, errs[c])
			}
			if fmt.Sprint(gots[c]) != fmt.Sprint(wants[c]) {
				rt.Fatalf("channel %d:\ngot  %s\nwant %s", c, trunc(gots[c]), trunc(wants[c]))
			}
		}
	})
}

func lens(x [][]item) []int {
	var n []int
	for _, i := range x {
		n = append(n, len(i))
	}
	return n
}
