package network

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// pipe is one producer node, one consumer node and one channel between
// them, with a goroutine that drains the consumer.
type pipe[T any] struct {
	out      *OutputChannel[T]
	received chan int // records received, sent after each batch
	wg       sync.WaitGroup
}

func newPipe[T any](b *testing.B, o Options, c codec.Codec[T]) *pipe[T] {
	prod := newNode(b, o, true)
	cons := newNode(b, o, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "bench", c)
	if err != nil {
		b.Fatal(err)
	}
	out, err := NewOutput(prod, "bench", c, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := &pipe[T]{out: out, received: make(chan int, 1024)}
	p.wg.Go(func() {
		for {
			what, recs, _, ev, err := in.Poll()
			switch {
			case err != nil:
				return
			case what == Records:
				p.received <- len(recs)
			case what == Control && ev.Kind == EndOfPartition:
				close(p.received)
				return
			case what == Empty:
				<-g.Doorbell()
			}
		}
	})
	b.Cleanup(p.wg.Wait)
	return p
}

// BenchmarkThroughput: one connection, one channel, records of 1 MiB
// (codec.Bytes, 32 buffers each), against a bare loop writing the same
// bytes through a loopback socket in the same run.
func BenchmarkThroughput(b *testing.B) {
	const size = 1 << 20
	rec := make([]byte, size)
	b.Run("weir", func(b *testing.B) {
		p := newPipe(b, Options{}, codec.Bytes())
		b.SetBytes(size)
		b.ResetTimer()
		go func() {
			for range b.N {
				if err := p.out.WriteRecord(rec, NoTimestamp); err != nil {
					b.Error(err)
					return
				}
			}
			p.out.Emit(Event{Kind: EndOfPartition})
		}()
		n := 0
		for k := range p.received {
			n += k
		}
		if n != b.N {
			b.Fatalf("received %d records, want %d", n, b.N)
		}
	})
	b.Run("bare-tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		done := make(chan int64)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- 0
				return
			}
			n, _ := io.Copy(io.Discard, c)
			c.Close()
			done <- n
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ResetTimer()
		for range b.N {
			for off := 0; off < size; off += 64 << 10 {
				if _, err := c.Write(rec[off : off+64<<10]); err != nil {
					b.Fatal(err)
				}
			}
		}
		c.Close()
		if n := <-done; n != int64(b.N)*size {
			b.Fatalf("copied %d bytes", n)
		}
	})
}

// BenchmarkIdleLatency: one record at a time through an idle channel at the
// default settings (1 ms flush timeout); reports p50 and p99.
func BenchmarkIdleLatency(b *testing.B) {
	p := newPipe(b, Options{}, codec.Int64())
	lat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		start := time.Now()
		if err := p.out.WriteRecord(int64(i), NoTimestamp); err != nil {
			b.Fatal(err)
		}
		<-p.received
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	p.out.Emit(Event{Kind: EndOfPartition})
	for range p.received {
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
