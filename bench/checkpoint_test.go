package bench

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
)

var (
	ckptRecords  = flag.Int64("ckpt.records", 20_000_000, "records of the checkpointed keyed count")
	ckptKeys     = flag.Int64("ckpt.keys", 1_000_000, "distinct keys of the checkpointed keyed count")
	ckptInterval = flag.Duration("ckpt.interval", time.Second, "checkpoint interval")
	ckptRounds   = flag.Int("ckpt.rounds", 2, "alternating rounds of checkpoints off and on")
)

// runKeyedJob runs the keyed running count of RunKeyed with opts and returns
// the sum of the counts and the job's checkpoint history.
func runKeyedJob(n, keys int64, opts weir.Options) (int64, []weir.CheckpointStats, error) {
	env := weir.NewEnvironment(opts)
	sink := new(SumSink)
	env.FromSource("keys", datagen.Generator(n, func(i int64) int64 { return IntKey(i, keys) })).
		KeyBy(func(k int64) int64 { return k }).
		Process("count", &runningCount[int64]{}).
		SinkTo("sum", sink)
	job, err := env.ExecuteAsync(context.Background(), "bench-ckpt")
	if err != nil {
		return 0, nil, err
	}
	if err := job.Wait(); err != nil {
		return 0, nil, err
	}
	_, hist := job.Checkpoints()
	return sink.Sum(), hist, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkCheckpointOverhead runs the keyed running count (parallelism 2,
// 1M int64 keys) with exactly-once checkpoints every second and without
// periodic checkpoints, alternating, in one run (target: on/off >= 0.95);
// it reports the synchronous phase per subtask (p50, p99, max: target p99
// <= 1 ms with 1M keys of heap state) and the end-to-end duration and size
// of the checkpoints.
func BenchmarkCheckpointOverhead(b *testing.B) {
	n, keys := *ckptRecords, *ckptKeys
	off := &throughput{name: "off"}
	on := &throughput{name: "on"}
	var syncs, e2e []time.Duration
	var sizes []int64
	want := KeyedBaselineInt(n, keys)
	for range b.N {
		for range max(1, *ckptRounds) {
			got, d := timed(b, func() (int64, error) {
				sum, _, err := runKeyedJob(n, keys, jobOptions(2))
				return sum, err
			})
			checkSum(b, "checkpoints off", got, want)
			off.run(d)
			opts := jobOptions(2)
			opts.Checkpointing.Interval = *ckptInterval
			var hist []weir.CheckpointStats
			got, d = timed(b, func() (int64, error) {
				sum, h, err := runKeyedJob(n, keys, opts)
				hist = h
				return sum, err
			})
			checkSum(b, "checkpoints on", got, want)
			on.run(d)
			for _, c := range hist {
				if c.Status != "COMPLETED" {
					continue
				}
				e2e = append(e2e, c.Duration)
				sizes = append(sizes, c.StateSize)
				for _, s := range c.Subtasks {
					syncs = append(syncs, s.Sync)
				}
			}
		}
		off.endIteration(n)
		on.endIteration(n)
	}
	b.ReportMetric(0, "ns/op")
	off.report(b)
	on.report(b)
	reportRatio(b, "on/off", on, off)
	b.ReportMetric(float64(len(e2e)), "checkpoints")
	b.ReportMetric(float64(percentile(syncs, 0.5).Microseconds()), "sync-p50-µs")
	b.ReportMetric(float64(percentile(syncs, 0.99).Microseconds()), "sync-p99-µs")
	b.ReportMetric(float64(percentile(syncs, 1).Microseconds()), "sync-max-µs")
	b.ReportMetric(float64(percentile(e2e, 0.5).Milliseconds()), "e2e-p50-ms")
	b.ReportMetric(float64(percentile(e2e, 0.99).Milliseconds()), "e2e-p99-ms")
	if len(sizes) > 0 {
		b.ReportMetric(float64(slices.Max(sizes))/(1<<20), "max-size-MiB")
	}
}
