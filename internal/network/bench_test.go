package network

import (
	"flag"
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

func newPipe[T any](b *testing.B, o Options, c codec.Codec[T], reuse bool) *pipe[T] {
	prod := newNode(b, o, true)
	cons := newNode(b, o, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "bench", c)
	if err != nil {
		b.Fatal(err)
	}
	in.SetObjectReuse(reuse)
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

// benchBufferSize sets Options.BufferSize in BenchmarkThroughput (0: the
// default, 32 KiB).
var benchBufferSize = flag.Int("network.bench-buffer-size", 0, "BufferSize of BenchmarkThroughput's nodes (0: the default)")

// BenchmarkThroughput: one connection, one channel, records of 1 MiB
// (codec.Bytes, 32 default buffers each), and in the same run a bare loop
// moving the same bytes through a loopback socket with 1 MiB writes and
// 1 MiB reads (the most a plain socket loop gets here: a loop reading with
// io.Copy into io.Discard reads 8 KiB per system call and reaches about
// half of it). Reports both in MB per wall second and per CPU second of
// the process, and weir's ratios to the bare loop.
func BenchmarkThroughput(b *testing.B) { benchThroughput(b, false) }

// BenchmarkThroughputReuse is BenchmarkThroughput with object reuse at the
// consumer (InputChannel.SetObjectReuse): a record is decoded into one of
// two reused slices, not a new megabyte.
func BenchmarkThroughputReuse(b *testing.B) { benchThroughput(b, true) }

func benchThroughput(b *testing.B, reuse bool) {
	const size = 1 << 20
	rec := make([]byte, size)
	total := int64(b.N) * size

	cpu0, wall0 := processCPU(), time.Now()
	bareTCP(b, rec, b.N)
	bareCPU, bareWall := processCPU()-cpu0, time.Since(wall0)

	cpu0, wall0 = processCPU(), time.Now()
	p := newPipe(b, Options{BufferSize: *benchBufferSize}, codec.Bytes(), reuse)
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
	weirCPU, weirWall := processCPU()-cpu0, time.Since(wall0)

	mb := float64(total) / 1e6
	b.ReportMetric(mb/weirWall.Seconds(), "weir-MB/s")
	b.ReportMetric(mb/bareWall.Seconds(), "bare-MB/s")
	b.ReportMetric(mb/(float64(weirCPU)/1e9), "weir-MB/cpu-s")
	b.ReportMetric(mb/(float64(bareCPU)/1e9), "bare-MB/cpu-s")
	b.ReportMetric(bareWall.Seconds()/weirWall.Seconds(), "ratio-wall")
	b.ReportMetric(float64(bareCPU)/float64(weirCPU), "ratio-per-core")
}

// bareTCP writes n copies of rec through a loopback connection, 1 MiB per
// write, read 1 MiB per read.
func bareTCP(b *testing.B, rec []byte, n int) {
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
		defer c.Close()
		buf := make([]byte, 1<<20)
		var got int64
		for {
			k, err := c.Read(buf)
			got += int64(k)
			if err != nil {
				break
			}
		}
		done <- got
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		for off := 0; off < len(rec); off += 1 << 20 {
			if _, err := c.Write(rec[off:min(len(rec), off+1<<20)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	c.Close()
	if got := <-done; got != int64(n)*int64(len(rec)) {
		b.Fatalf("bare loop moved %d bytes, want %d", got, int64(n)*int64(len(rec)))
	}
}

// BenchmarkIdleLatency: one record at a time through an idle channel at the
// default settings (1 ms flush timeout); reports p50 and p99.
func BenchmarkIdleLatency(b *testing.B) {
	p := newPipe(b, Options{}, codec.Int64(), false)
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
