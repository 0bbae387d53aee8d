package nats

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
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

// sinkVariants are the publishers BenchmarkSink compares; each publishes
// n records to subject "out" of the server ts, whose stream OUT allows
// atomic publish.
var sinkVariants = []struct {
	name string
	run  func(b *testing.B, ts *testServer, js jetstream.JetStream, n int)
}{
	{"weir-atomic=false", func(b *testing.B, ts *testServer, _ jetstream.JetStream, n int) { runExactlyOnce(b, ts, AtomicOff, n) }},
	{"weir-atomic=true", func(b *testing.B, ts *testServer, _ jetstream.JetStream, n int) { runExactlyOnce(b, ts, AtomicOn, n) }},
	// The exactly-once sink as it was before batches were deduplicated as
	// a unit: a version 1 committable, committed in atomic batches with an
	// ID on every message.
	{"weir-atomic-msgid-each", func(b *testing.B, ts *testServer, _ jetstream.JetStream, n int) {
		s := StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn})
		ckpt := int64(0)
		commit := func(k int) {
			ckpt++
			c := binary.AppendUvarint(nil, 1)
			c = appendString(c, "bench")
			c = appendString(c, "token")
			c = binary.AppendUvarint(c, uint64(k))
			for range k {
				c = appendMessage(c, &Message{Data: []byte(benchPayload)})
			}
			if err := s.Commit(context.Background(), []connector.Committable{{CheckpointID: ckpt, Data: c}}); err != nil {
				b.Fatal(err)
			}
		}
		for done := 0; done < n; done += perCheckpoint {
			commit(min(perCheckpoint, n-done))
		}
	}},
	{"weir-at-least-once", func(b *testing.B, ts *testServer, _ jetstream.JetStream, n int) {
		s := StringSink(ts.url(), "out", SinkOptions{Delivery: AtLeastOnce})
		w, err := s.NewWriter(connector.WriterContext{JobID: "bench", Parallelism: 1, Logger: slog.Default()})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		for i := range n {
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
	}},
	// The bare loop with a Nats-Msg-Id on every message: the server's
	// duplicate tracking costs server CPU that a plain publisher does not
	// pay.
	{"bare-msgid", func(b *testing.B, _ *testServer, js jetstream.JetStream, n int) {
		stall := jetstream.WithStallWait(time.Minute)
		for i := range n {
			m := &nats.Msg{Subject: "out", Data: []byte(benchPayload), Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprint("bare.", n, ".", i)}}}
			if _, err := js.PublishMsgAsync(m, stall); err != nil {
				b.Fatal(err)
			}
			if (i+1)%perCheckpoint == 0 {
				<-js.PublishAsyncComplete()
			}
		}
		<-js.PublishAsyncComplete()
	}},
	{"bare", func(b *testing.B, _ *testServer, js jetstream.JetStream, n int) {
		stall := jetstream.WithStallWait(time.Minute)
		for i := range n {
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
	}},
}

// perCheckpoint is the records of one checkpoint in the sink benchmarks.
const perCheckpoint = 10_000

// runExactlyOnce publishes n records through the exactly-once writer
// (Write, PreCommit every perCheckpoint records, Commit).
func runExactlyOnce(b *testing.B, ts *testServer, atomic Atomic, n int) {
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
	for i := range n {
		w.Write(benchPayload)
		if (i+1)%perCheckpoint == 0 {
			commit()
		}
	}
	commit()
}

// freshSinkServer starts a server of its own for one run of a variant, so
// that none pays for the message IDs another left in the duplicate window.
func freshSinkServer(b *testing.B) (*testServer, *nats.Conn, jetstream.JetStream) {
	ts := startServer(b)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, Storage: jetstream.MemoryStorage, AllowAtomicPublish: true})
	nc, js := ts.js()
	return ts, nc, js
}

// BenchmarkSink publishes b.N records with each of sinkVariants, one
// sub-benchmark each: compare their recs/cpu-s. (-count repeats each
// sub-benchmark in a row; BenchmarkSinkInterleaved alternates them.)
func BenchmarkSink(b *testing.B) {
	for _, v := range sinkVariants {
		b.Run(v.name, func(b *testing.B) {
			ts, _, js := freshSinkServer(b)
			measureCPU(b, func() { v.run(b, ts, js, b.N) })
		})
	}
}

// BenchmarkSinkInterleaved runs every variant of sinkVariants for b.N
// records in each op batch, one after the other, and reports each one's
// records per CPU second and the exactly-once sinks' ratios to the bare
// loops: with -count 3 the variants alternate three times in one run, so
// that a load that changes during the run weighs on all of them alike.
func BenchmarkSinkInterleaved(b *testing.B) {
	rate := map[string]float64{}
	for _, v := range sinkVariants {
		ts, nc, js := freshSinkServer(b)
		runtime.GC()
		start := cpuNanos()
		v.run(b, ts, js, b.N)
		rate[v.name] = float64(b.N) / (float64(cpuNanos()-start) / 1e9)
		b.ReportMetric(rate[v.name], v.name+"-recs/cpu-s")
		nc.Close()
		ts.stop()
	}
	b.ReportMetric(rate["weir-atomic=true"]/rate["bare"], "atomic/bare")
	b.ReportMetric(rate["weir-atomic=true"]/rate["bare-msgid"], "atomic/bare-msgid")
	b.ReportMetric(rate["weir-atomic-msgid-each"]/rate["bare"], "atomic-msgid-each/bare")
	b.ReportMetric(rate["weir-atomic=false"]/rate["bare"], "async/bare")
	b.ReportMetric(rate["weir-at-least-once"]/rate["bare"], "at-least-once/bare")
}
