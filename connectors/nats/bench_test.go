package nats

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirstream/weir/connector"
)

// countEmitter counts records.
type countEmitter struct{ n int }

func (c *countEmitter) Emit(string)          { c.n++ }
func (c *countEmitter) EmitAt(string, int64) { c.n++ }

// cpuNanos is the CPU time this process (the embedded server included)
// has used.
func cpuNanos() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// measureCPU reports the process's CPU time per op, and records per CPU
// second ("per core"): on a loaded machine this varies less than the wall
// clock.
func measureCPU(b *testing.B, run func()) {
	start := cpuNanos()
	run()
	cpu := cpuNanos() - start
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/(float64(cpu)/1e9), "recs/cpu-s")
}

const benchPayload = "the quick brown fox jumps over the lazy dog 0123456789"

// BenchmarkSource reads b.N messages with the weir reader and with a bare
// nats.go ordered consumer on the same embedded server: compare their
// ns/op (one op is one message).
func BenchmarkSource(b *testing.B) {
	ts := startServer(b)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in"}, Storage: jetstream.MemoryStorage})
	const n = 300_000
	_, js := ts.js()
	for range n {
		js.PublishAsync("in", []byte(benchPayload))
	}
	<-js.PublishAsyncComplete()
	b.Run("weir", func(b *testing.B) {
		measureCPU(b, func() {
			for done := 0; done < b.N; {
				src := Strings(ts.url(), "IN", SourceOptions{})
				splits, _ := src.Splits(context.Background(), 1)
				r, _ := src.NewReader(connector.ReaderContext{Parallelism: 1, Logger: slog.Default()})
				r.AddSplits(splits)
				var c countEmitter
				for c.n < min(n, b.N-done) {
					st, err := r.Poll(&c)
					if err != nil {
						b.Fatal(err)
					}
					if st == connector.NothingAvailable {
						<-r.Available()
					}
				}
				done += c.n
				r.Close()
			}
		})
	})
	b.Run("bare", func(b *testing.B) {
		measureCPU(b, func() {
			for done := 0; done < b.N; {
				want := min(n, b.N-done)
				cons, err := js.OrderedConsumer(context.Background(), "IN", jetstream.OrderedConsumerConfig{})
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan struct{})
				cnt := 0
				cc, err := cons.Consume(func(m jetstream.Msg) {
					cnt++
					_ = m.Data()
					if cnt == want {
						close(got)
					}
				}, jetstream.PullMaxMessages(DefaultPullMaxMessages))
				if err != nil {
					b.Fatal(err)
				}
				<-got
				cc.Stop()
				<-cc.Closed()
				done += want
			}
		})
	})
}

// BenchmarkSink publishes b.N records through the exactly-once writer
// (Write, PreCommit every 10000 records, Commit), with and without atomic
// batches, and with a bare PublishAsync loop: compare their ns/op.
func BenchmarkSink(b *testing.B) {
	// Each sub-benchmark gets a server of its own, so that none pays for
	// the message IDs another left in the duplicate window.
	fresh := func(b *testing.B) (*testServer, jetstream.JetStream) {
		ts := startServer(b)
		ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, Storage: jetstream.MemoryStorage, AllowAtomicPublish: true})
		_, js := ts.js()
		return ts, js
	}
	const perCheckpoint = 10_000
	for _, atomic := range []Atomic{AtomicOff, AtomicOn} {
		b.Run(fmt.Sprint("weir-atomic=", atomic == AtomicOn), func(b *testing.B) {
			ts, js := fresh(b)
			_, _ = ts, js
			measureCPU(b, func() {
				s := StringSink(ts.url(), "out", SinkOptions{Atomic: atomic})
				w, err := s.NewWriter(connector.WriterContext{JobID: "bench", Parallelism: 1, Logger: slog.Default()})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				pc := w.(connector.PreCommitter)
				ckpt := int64(0)
				commit := func() {
					ckpt++
					w.Flush(false)
					data, _ := pc.PreCommit(ckpt)
					if err := s.Commit(context.Background(), []connector.Committable{{CheckpointID: ckpt, Data: data}}); err != nil {
						b.Fatal(err)
					}
				}
				for i := range b.N {
					w.Write(benchPayload)
					if (i+1)%perCheckpoint == 0 {
						commit()
					}
				}
				commit()
			})
		})
	}
	b.Run("weir-at-least-once", func(b *testing.B) {
		ts, js := fresh(b)
		_, _ = ts, js
		measureCPU(b, func() {
			s := StringSink(ts.url(), "out", SinkOptions{Delivery: AtLeastOnce})
			w, err := s.NewWriter(connector.WriterContext{JobID: "bench", Parallelism: 1, Logger: slog.Default()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			for i := range b.N {
				if err := w.Write(benchPayload); err != nil {
					b.Fatal(err)
				}
				if (i+1)%perCheckpoint == 0 {
					w.Flush(false)
				}
			}
			if err := w.Flush(true); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The same loop with a Nats-Msg-Id on every message: the server's
	// duplicate tracking, which the exactly-once sink relies on, costs
	// server CPU that a plain publisher does not pay.
	b.Run("bare-msgid", func(b *testing.B) {
		ts, js := fresh(b)
		_, _ = ts, js
		measureCPU(b, func() {
			stall := jetstream.WithStallWait(time.Minute)
			for i := range b.N {
				m := &nats.Msg{Subject: "out", Data: []byte(benchPayload), Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprint("bare.", b.N, ".", i)}}}
				if _, err := js.PublishMsgAsync(m, stall); err != nil {
					b.Fatal(err)
				}
				if (i+1)%perCheckpoint == 0 {
					<-js.PublishAsyncComplete()
				}
			}
			<-js.PublishAsyncComplete()
		})
	})
	b.Run("bare", func(b *testing.B) {
		ts, js := fresh(b)
		_, _ = ts, js
		measureCPU(b, func() {
			stall := jetstream.WithStallWait(time.Minute)
			for i := range b.N {
				if _, err := js.PublishAsync("out", []byte(benchPayload), stall); err != nil {
					b.Fatal(err)
				}
				if (i+1)%perCheckpoint == 0 {
					<-js.PublishAsyncComplete()
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("acks")
			}
		})
	})
}
