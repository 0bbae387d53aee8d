package network

import (
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runtime"
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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// keyGroup hashes the record's first 8 bytes (FNV-1a), as a key selector
// and codec would; both exchanges call it once per record.
func keyGroup(s string) int {
	h := uint32(2166136261)
	for i := range 8 {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return int(h % 128)
}

// BenchmarkKeyedShuffle: 100-byte records partitioned by key over 4
// consumers, through the in-process exchange (internal/runtime's channels
// and record writer) and then over TCP in the same run. Reports records per
// CPU-second of each and their ratio (tcp/in-process, per core).
func BenchmarkKeyedShuffle(b *testing.B) {
	const targets, batch = 4, 256
	recs := make([]string, 4096)
	for i := range recs {
		k := strings.Repeat(string(rune('a'+i%26)), 4) + string(rune('0'+i%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i/100%10)) + string(rune('0'+i/1000%10))
		recs[i] = k + strings.Repeat("v", 100-len(k))
	}

	// In process.
	cpu0, wall0 := cpuTime(), time.Now()
	{
		doorbell := make(chan struct{}, 1)
		chans := make([]*runtime.Channel[string], targets)
		for i := range chans {
			chans[i] = runtime.NewChannel[string](16, doorbell, nil)
		}
		done := make(chan struct{})
		w := runtime.NewRecordWriter(chans, runtime.WriterOptions[string]{
			Partitioner: graph.Hash, KeyGroup: keyGroup, MaxParallelism: 128, BatchSize: batch, Done: done,
		})
		var count int
		sink := countOutput{&count}
		ins := make([]*runtime.Input[string], targets)
		for i := range ins {
			ins[i] = runtime.NewInput(chans[i], runtime.Output[string](sink), nil)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			eops := 0
			for eops < targets {
				progress := false
				for _, in := range ins {
					ev, isEvent, ok := in.Poll()
					if ok {
						progress = true
						if isEvent && ev.Kind == runtime.EndOfPartition {
							eops++
						}
					}
				}
				if !progress {
					<-doorbell
				}
			}
		})
		for i := range b.N {
			w.Emit(recs[i%len(recs)], NoTimestamp)
		}
		w.Broadcast(runtime.Event{Kind: runtime.EndOfPartition})
		wg.Wait()
		if count != b.N {
			b.Fatalf("in-process shuffle delivered %d, want %d", count, b.N)
		}
	}
	inCPU, inWall := cpuTime()-cpu0, time.Since(wall0)

	// Over TCP.
	cpu0, wall0 = cpuTime(), time.Now()
	{
		prod, err := New(Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer prod.Close()
		prod.Listen("127.0.0.1:0")
		cons, err := New(Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		g := cons.NewGate()
		ins := make([]*InputChannel[string], targets)
		outs := make([]*OutputChannel[string], targets)
		for i := range targets {
			name := "shuffle-" + string(rune('0'+i))
			if ins[i], err = Subscribe(g, prod.Addr(), name, codec.String()); err != nil {
				b.Fatal(err)
			}
			if outs[i], err = NewOutput(prod, name, codec.String(), nil); err != nil {
				b.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var count int
		wg.Go(func() {
			eops := 0
			for eops < targets {
				progress := false
				for _, in := range ins {
					what, rs, _, ev, err := in.Poll()
					if err != nil {
						b.Error(err)
						return
					}
					switch what {
					case Records:
						count += len(rs)
						progress = true
					case Control:
						progress = true
						if ev.Kind == EndOfPartition {
							eops++
						}
					}
				}
				if !progress {
					<-g.Doorbell()
				}
			}
		})
		// The record writer of a task: one batch per target.
		bufs := make([][]string, targets)
		for i := range b.N {
			r := i % len(recs)
			t := keyGroup(recs[r]) * targets / 128
			bufs[t] = append(bufs[t], recs[r])
			if len(bufs[t]) == batch {
				outs[t].Write(bufs[t], nil)
				bufs[t] = bufs[t][:0]
			}
		}
		for t := range targets {
			outs[t].Write(bufs[t], nil)
			outs[t].Emit(Event{Kind: EndOfPartition})
		}
		wg.Wait()
		if count != b.N {
			b.Fatalf("tcp shuffle delivered %d, want %d", count, b.N)
		}
	}
	tcpCPU, tcpWall := cpuTime()-cpu0, time.Since(wall0)
	inRate := float64(b.N) / inCPU.Seconds()
	tcpRate := float64(b.N) / tcpCPU.Seconds()
	b.ReportMetric(inRate, "inproc-recs/cpu-s")
	b.ReportMetric(tcpRate, "tcp-recs/cpu-s")
	b.ReportMetric(float64(b.N)/inWall.Seconds(), "inproc-recs/s")
	b.ReportMetric(float64(b.N)/tcpWall.Seconds(), "tcp-recs/s")
	b.ReportMetric(tcpRate/inRate, "ratio-per-core")
}

type countOutput struct{ n *int }

func (c countOutput) Emit(string, int64) { *c.n++ }
func (c countOutput) EmitBatch(r []string, _ []int64) {
	*c.n += len(r)
}
