package bench

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir"
)

// State-backend benchmarks (issue 4, "Performance"): the keyed running count
// on each backend, and full against incremental checkpoints of the pebble
// backend. Recovery of a large pebble state is in recovery_test.go.

var (
	backendRecords = flag.Int64("backend.records", 10_000_000, "records of BenchmarkKeyedCountBackend (its keys: -keyed.keys)")
	backendRounds  = flag.Int("backend.rounds", 1, "runs of each backend per iteration of BenchmarkKeyedCountBackend; the fastest counts")
	incRecords     = flag.Int64("inc.records", 4_000_000, "records of BenchmarkCheckpointFullVsIncremental")
	incKeys        = flag.Int64("inc.keys", 2_000_000, "distinct keys of BenchmarkCheckpointFullVsIncremental")
	incEvery       = flag.Int64("inc.every", 400_000, "records between two checkpoints of BenchmarkCheckpointFullVsIncremental (Options.Checkpointing.EveryNRecords)")
)

// backendOptions are the job options of the benchmarks with keyed state in
// backend; the pebble backend's working files go under dir, private to the
// benchmark (other processes may run jobs of the same name).
func backendOptions(par int, backend, dir string) weir.Options {
	opts := jobOptions(par)
	opts.StateBackend = backend
	opts.LocalStateDir = dir
	return opts
}

// BenchmarkKeyedCountBackend runs the workload of BenchmarkKeyedCount
// (int64 keys, keyed running count in value state, parallelism 2) on the
// heap and on the pebble backend, alternating, in one run, and reports the
// throughput of each and the ratio pebble/heap of their throughputs.
func BenchmarkKeyedCountBackend(b *testing.B) {
	n, keys := *backendRecords, *keyedKeys
	key := func(i int64) int64 { return IntKey(i, keys) }
	want := KeyedBaselineInt(n, keys)
	heap := &throughput{name: "heap"}
	peb := &throughput{name: "pebble"}
	for range b.N {
		for range max(1, *backendRounds) {
			for _, side := range []*throughput{heap, peb} {
				opts := backendOptions(2, side.name, b.TempDir())
				got, d := timed(b, func() (int64, error) { return RunKeyed(context.Background(), n, key, opts) })
				checkSum(b, side.name+" backend", got, want)
				side.run(d)
			}
		}
		heap.endIteration(n)
		peb.endIteration(n)
	}
	b.ReportMetric(0, "ns/op")
	heap.report(b)
	peb.report(b)
	reportRatio(b, "pebble/heap", peb, heap)
}

// checkpointFigures sums up the completed checkpoints of runs.
type checkpointFigures struct {
	name      string
	durations []time.Duration
	uploaded  []int64 // CheckpointedSize: what the checkpoint wrote
	full      []int64 // StateSize: the state it stands for
	run       time.Duration
}

func (f *checkpointFigures) add(hist []weir.CheckpointStats) {
	for _, c := range hist {
		if c.Status != "COMPLETED" || c.Savepoint {
			continue
		}
		f.durations = append(f.durations, c.Duration)
		f.uploaded = append(f.uploaded, c.CheckpointedSize)
		f.full = append(f.full, c.StateSize)
	}
}

func mean(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

func (f *checkpointFigures) report(b *testing.B) {
	b.ReportMetric(float64(len(f.durations)), f.name+"-checkpoints")
	b.ReportMetric(mean(f.uploaded)/(1<<20), f.name+"-uploaded-MiB")
	if len(f.uploaded) > 0 {
		b.ReportMetric(float64(slices.Max(f.uploaded))/(1<<20), f.name+"-uploaded-max-MiB")
	}
	b.ReportMetric(mean(f.full)/(1<<20), f.name+"-state-MiB")
	b.ReportMetric(float64(percentile(f.durations, 0.5).Milliseconds()), f.name+"-p50-ms")
	b.ReportMetric(float64(percentile(f.durations, 1).Milliseconds()), f.name+"-max-ms")
	b.ReportMetric(f.run.Seconds(), f.name+"-job-s")
}

// BenchmarkCheckpointFullVsIncremental runs the keyed running count on the
// pebble backend (parallelism 2, checkpoints in a directory) with a
// checkpoint every -inc.every records, once with full checkpoints and once
// with incremental ones, and reports for each the mean and largest size
// written per checkpoint (CheckpointedSize), the mean StateSize, the p50
// and largest end-to-end duration, and the job's wall time. (The runtime
// reports the uploaded size as the StateSize of an incremental checkpoint
// too, not the size of all the state it refers to as Flink does: the
// incremental state-MiB figure is the uploaded size.) With the defaults (2M keys, 4M records, a checkpoint every 400k) a
// checkpoint interval updates a fifth of the keys: an incremental
// checkpoint uploads the sstables written since the last one, a full one
// writes all the state.
func BenchmarkCheckpointFullVsIncremental(b *testing.B) {
	n, keys := *incRecords, *incKeys
	if *incEvery < 1 {
		b.Fatalf("-inc.every is %d; want >= 1", *incEvery)
	}
	want := KeyedBaselineInt(n, keys)
	full := &checkpointFigures{name: "full"}
	inc := &checkpointFigures{name: "incremental"}
	for range b.N {
		for _, f := range []*checkpointFigures{full, inc} {
			opts := backendOptions(2, "pebble", b.TempDir())
			opts.Checkpointing.Storage = b.TempDir()
			opts.Checkpointing.EveryNRecords = *incEvery
			opts.Checkpointing.Incremental = f == inc
			start := time.Now()
			sum, hist, err := runKeyedJob(n, keys, opts)
			if err != nil {
				b.Fatalf("%s checkpoints: %v", f.name, err)
			}
			f.run += time.Since(start)
			checkSum(b, f.name+" checkpoints", sum, want)
			f.add(hist)
		}
	}
	b.ReportMetric(0, "ns/op")
	full.report(b)
	inc.report(b)
	if m := mean(inc.uploaded); m > 0 {
		b.ReportMetric(mean(full.uploaded)/m, "full/inc-size")
	}
	if p := percentile(inc.durations, 0.5); p > 0 {
		b.ReportMetric(float64(percentile(full.durations, 0.5))/float64(p), "full/inc-p50")
	}
}
