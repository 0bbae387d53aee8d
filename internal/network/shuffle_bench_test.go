package network_test

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/runtime"
)

// This benchmark is in an external test package: it compares with
// internal/runtime, which imports this package.

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

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

// record100 is a 100-byte record without pointers: decoding it allocates
// nothing, unlike a string's.
type record100 [100]byte

func keyGroup100(r record100) int {
	h := uint32(2166136261)
	for i := range 8 {
		h = (h ^ uint32(r[i])) * 16777619
	}
	return int(h % 128)
}

// BenchmarkKeyedShuffle: 100-byte records partitioned by key over 4
// consumers, through the in-process exchange (internal/runtime's channels
// and record writer) and then over TCP in the same run. Reports records per
// CPU-second of each and their ratio (tcp/in-process, per core). The
// records are strings (string-100B: each decoded into a new allocation;
// string-100B-reuse: with object reuse at the consumer, pointing into the
// receive buffer) and arrays of 100 bytes (array-100B: decoded in place,
// no allocation). bare-ratio-per-core is the ceiling set by the kernel: a
// bare socket loop moving the same bytes in 1 MiB writes, in records per
// CPU-second, over the in-process rate.
func BenchmarkKeyedShuffle(b *testing.B) {
	strs := make([]string, 4096)
	arrs := make([]record100, len(strs))
	for i := range strs {
		k := strings.Repeat(string(rune('a'+i%26)), 4) + string(rune('0'+i%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i/100%10)) + string(rune('0'+i/1000%10))
		strs[i] = k + strings.Repeat("v", 100-len(k))
		copy(arrs[i][:], strs[i])
	}
	b.Run("string-100B", func(b *testing.B) { benchShuffle(b, strs, keyGroup, codec.String(), false) })
	b.Run("string-100B-reuse", func(b *testing.B) { benchShuffle(b, strs, keyGroup, codec.String(), true) })
	arrCodec, err := codec.Of[record100]()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("array-100B", func(b *testing.B) { benchShuffle(b, arrs, keyGroup100, arrCodec, false) })
}

// benchShuffle runs the shuffle in process and over TCP; reuse turns
// object reuse on at the TCP consumer (InputChannel.SetObjectReuse: the
// strings point into the receive buffers); the in-process side is the same
// either way.
func benchShuffle[T any](b *testing.B, recs []T, keyGroup func(T) int, c codec.Codec[T], reuse bool) {
	const targets, batch = 4, 256

	// In process.
	cpu0, wall0 := cpuTime(), time.Now()
	{
		doorbell := make(chan struct{}, 1)
		chans := make([]*runtime.Channel[T], targets)
		for i := range chans {
			chans[i] = runtime.NewChannel[T](16, doorbell, nil)
		}
		done := make(chan struct{})
		w := runtime.NewRecordWriter(chans, runtime.WriterOptions[T]{
			Partitioner: graph.Hash, KeyGroup: keyGroup, MaxParallelism: 128, BatchSize: batch, Done: done,
		})
		var count int
		sink := countOutput[T]{&count}
		ins := make([]*runtime.Input[T], targets)
		for i := range ins {
			ins[i] = runtime.NewInput(chans[i], runtime.Output[T](sink), nil)
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
			w.Emit(recs[i%len(recs)], network.NoTimestamp)
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
		prod, err := network.New(network.Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer prod.Close()
		prod.Listen("127.0.0.1:0")
		cons, err := network.New(network.Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		g := cons.NewGate()
		ins := make([]*network.InputChannel[T], targets)
		outs := make([]*network.OutputChannel[T], targets)
		for i := range targets {
			name := "shuffle-" + string(rune('0'+i))
			if ins[i], err = network.Subscribe(g, prod.Addr(), name, c); err != nil {
				b.Fatal(err)
			}
			ins[i].SetObjectReuse(reuse)
			if outs[i], err = network.NewOutput(prod, name, c, nil); err != nil {
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
					case network.Records:
						count += len(rs)
						progress = true
					case network.Control:
						progress = true
						if ev.Kind == network.EndOfPartition {
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
		bufs := make([][]T, targets)
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
			outs[t].Emit(network.Event{Kind: network.EndOfPartition})
		}
		wg.Wait()
		if count != b.N {
			b.Fatalf("tcp shuffle delivered %d, want %d", count, b.N)
		}
	}
	tcpCPU, tcpWall := cpuTime()-cpu0, time.Since(wall0)

	// The kernel's share: the same bytes (102 per record: the record and
	// its header) through a bare loopback socket in 1 MiB writes and reads.
	// No exchange over TCP can cost less per record than this.
	chunk := make([]byte, 1<<20)
	cpu0 = cpuTime()
	network.BareTCP(b, chunk, max(1, b.N*102/len(chunk)))
	bareCPU := cpuTime() - cpu0
	bareRate := float64(max(1, b.N*102/len(chunk))*len(chunk)/102) / bareCPU.Seconds()

	inRate := float64(b.N) / inCPU.Seconds()
	tcpRate := float64(b.N) / tcpCPU.Seconds()
	b.ReportMetric(bareRate/inRate, "bare-ratio-per-core")
	b.ReportMetric(inRate, "inproc-recs/cpu-s")
	b.ReportMetric(tcpRate, "tcp-recs/cpu-s")
	b.ReportMetric(float64(b.N)/inWall.Seconds(), "inproc-recs/s")
	b.ReportMetric(float64(b.N)/tcpWall.Seconds(), "tcp-recs/s")
	b.ReportMetric(tcpRate/inRate, "ratio-per-core")
}

type countOutput[T any] struct{ n *int }

func (c countOutput[T]) Emit(T, int64) { *c.n++ }
func (c countOutput[T]) EmitBatch(r []T, _ []int64) {
	*c.n += len(r)
}
