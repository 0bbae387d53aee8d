package kafka

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/datagen"
)

// Benchmarks compare weir with a bare franz-go loop on the same kfake
// broker in the same run; the ratios are what BENCHMARKS.md records.
//
//	go test -run '^$' -bench . -benchtime 3x ./connectors/kafka/

const benchRecords = 300_000

// discard is a sink that drops what it gets (a blackhole).
type discard[T any] struct{}

func (discard[T]) NewWriter(connector.WriterContext) (connector.Writer[T], error) {
	return discard[T]{}, nil
}
func (discard[T]) Write(T) error        { return nil }
func (discard[T]) WriteBatch([]T) error { return nil }
func (discard[T]) Flush(bool) error     { return nil }
func (discard[T]) Close() error         { return nil }

func fillTopic(b *testing.B, c *kfake.Cluster, topic string, partitions int32, n int) {
	cl := newClient(b, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "line %08d of the input", i)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
	}
	wg.Wait()
}

// bareConsume reads the topic to its end offsets with one franz-go client.
func bareConsume(b *testing.B, c *kfake.Cluster, topic string) int {
	adm := kadm.NewClient(newClient(b, c))
	ends, err := adm.ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		b.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { left[o.Partition] = o.Offset })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for len(left) > 0 {
		fs := cl.PollRecords(context.Background(), DefaultBatchSize)
		fs.EachRecord(func(r *kgo.Record) {
			_ = string(r.Value) // what the String deserializer does
			n++
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
	}
	return n
}

// cpuTime is the CPU time (user and system) the process used so far: the
// per-core figures divide records by it, which the other builds on a
// loaded machine disturb less than wall time. It includes the in-process
// kfake broker's work, the same for both sides.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSource reads a topic of 3 partitions into a blackhole: a weir
// job at parallelism 1 (one core's worth of task) against a bare franz-go
// consumer loop. Metric ratio = weir/bare records per second.
func BenchmarkSource(b *testing.B) {
	c := newCluster(b, 3, "in")
	fillTopic(b, c, "in", 3, benchRecords)
	var bare, weirT, bareCPU, weirCPU time.Duration
	for b.Loop() {
		runtime.GC() // so that neither side pays for the other's garbage
		start, cpu := time.Now(), cpuTime(b)
		if n := bareConsume(b, c, "in"); n != benchRecords {
			b.Fatalf("bare loop read %d records, want %d", n, benchRecords)
		}
		bare += time.Since(start)
		bareCPU += cpuTime(b) - cpu

		runtime.GC()
		start, cpu = time.Now(), cpuTime(b)
		env := weir.NewEnvironment(weir.Options{Parallelism: 1})
		env.FromSource("in", NewSource(sourceOpts(c, "in"), String())).SinkTo("out", discard[string]{})
		if err := env.Execute(context.Background(), "bench"); err != nil {
			b.Fatal(err)
		}
		weirT += time.Since(start)
		weirCPU += cpuTime(b) - cpu
	}
	n := float64(b.N * benchRecords)
	b.ReportMetric(n/bare.Seconds(), "bare-rec/s")
	b.ReportMetric(n/weirT.Seconds(), "weir-rec/s")
	b.ReportMetric(bare.Seconds()/weirT.Seconds(), "ratio")
	b.ReportMetric(n/bareCPU.Seconds(), "bare-rec/cpu-s")
	b.ReportMetric(n/weirCPU.Seconds(), "weir-rec/cpu-s")
	b.ReportMetric(bareCPU.Seconds()/weirCPU.Seconds(), "cpu-ratio")
}

// timedSink measures the commits of an exactly-once sink: each Commit is
// called when a checkpoint completes, so its duration is the latency from
// the checkpoint's completion to the records' visibility.
type timedSink struct {
	*Sink[string]
	mu    sync.Mutex
	times []time.Duration
}

func (s *timedSink) Commit(ctx context.Context, cms []connector.Committable) error {
	start := time.Now()
	err := s.Sink.Commit(ctx, cms)
	s.mu.Lock()
	s.times = append(s.times, time.Since(start))
	s.mu.Unlock()
	return err
}

// BenchmarkSinkExactlyOnce writes generated records with the exactly-once
// sink and 1 s checkpoints, at parallelism 1, against a bare idempotent
// franz-go producer (Produce, then Flush). Metric ratio = weir/bare records
// per second; commit-ms is the mean duration of a commit after its
// checkpoint completed.
func BenchmarkSinkExactlyOnce(b *testing.B) {
	const n = 1_000_000 // a few seconds: several 1 s checkpoints
	c := newCluster(b, 3, "out", "bare")
	value := func(i int64) string { return fmt.Sprintf("line %08d of the output", i) }
	var bare, weirT, bareCPU, weirCPU time.Duration
	var commits []time.Duration
	for b.Loop() {
		runtime.GC() // so that neither side pays for the other's garbage
		start, cpu := time.Now(), cpuTime(b)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("bare"))
		if err != nil {
			b.Fatal(err)
		}
		for i := range int64(n) {
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(value(i))}, nil)
		}
		if err := cl.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		bare += time.Since(start)
		bareCPU += cpuTime(b) - cpu

		runtime.GC()
		start, cpu = time.Now(), cpuTime(b)
		opts := weir.Options{Parallelism: 1}
		opts.Checkpointing.Interval = time.Second
		env := weir.NewEnvironment(opts)
		so := sinkOpts(c, ExactlyOnce)
		so.TransactionalIDPrefix = fmt.Sprintf("bench%d", time.Now().UnixNano())
		sink := &timedSink{Sink: NewSink(so, StringValues())}
		env.FromSource("gen", datagen.Generator(n, value)).SinkTo("out", sink)
		if err := env.Execute(context.Background(), "bench"); err != nil {
			b.Fatal(err)
		}
		weirT += time.Since(start)
		weirCPU += cpuTime(b) - cpu
		commits = append(commits, sink.times...)
	}
	total := float64(b.N * n)
	b.ReportMetric(total/bare.Seconds(), "bare-rec/s")
	b.ReportMetric(total/weirT.Seconds(), "weir-rec/s")
	b.ReportMetric(bare.Seconds()/weirT.Seconds(), "ratio")
	b.ReportMetric(bareCPU.Seconds()/weirCPU.Seconds(), "cpu-ratio")
	if len(commits) > 0 {
		var sum time.Duration
		for _, d := range commits {
			sum += d
		}
		slices.Sort(commits)
		b.ReportMetric(float64(sum.Microseconds())/float64(len(commits))/1000, "commit-ms")
		b.ReportMetric(float64(commits[len(commits)-1].Microseconds())/1000, "commit-max-ms")
		b.ReportMetric(float64(len(commits))/float64(b.N), "commits/op")
	}
}
