package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/adapt"
)

// The benchmarks do a fixed amount of work per iteration and time the weir
// job and its baseline separately, in the same iteration, so that
// `-benchtime 1x` gives meaningful figures and the ratio compares two runs
// made on the same machine a moment apart. An iteration may run each side
// several times, alternating, and keep the fastest run of each: other
// processes on the machine can only slow a run down, so the fastest is the
// least disturbed. ns/op is suppressed: an iteration runs both sides, so it
// would describe neither.

var (
	statelessRecords = flag.Int64("stateless.records", 30_000_000, "records of BenchmarkStatelessChain")
	statelessRounds  = flag.Int("stateless.rounds", 5, "runs of each side per iteration of BenchmarkStatelessChain; the fastest counts")
	statelessLoop    = flag.String("stateless.filterloop", "", "the filter loop of BenchmarkStatelessChain: branch-free or branching (adapt.ForceFilterLoop; empty: adaptive)")
	keyedRecords     = flag.Int64("keyed.records", 50_000_000, "records of BenchmarkKeyedCount")
	keyedRounds      = flag.Int("keyed.rounds", 1, "runs of each side per iteration of BenchmarkKeyedCount; the fastest counts")
	keyedKeys        = flag.Int64("keyed.keys", 1_000_000, "distinct keys of BenchmarkKeyedCount")
	batchSize        = flag.Int("batchsize", 0, "weir Options.BatchSize of the jobs (0: the default, 1024)")
	slowSinkSizes    = flag.String("slowsink.records", "1000000,10000000", "input sizes of BenchmarkBackpressureMemory, comma-separated")
)

// timed runs fn after a garbage collection, so that it is not charged for
// the previous phase's garbage, and returns its result and how long it took.
func timed(b *testing.B, fn func() (int64, error)) (int64, elapsed) {
	b.Helper()
	runtime.GC()
	cpu, start := CPUTime(), time.Now()
	sum, err := fn()
	e := elapsed{wall: time.Since(start), cpu: CPUTime() - cpu}
	if err != nil {
		b.Fatal(err)
	}
	return sum, e
}

// elapsed is the wall-clock and CPU time of a run.
type elapsed struct {
	wall, cpu time.Duration
}

// throughput accumulates the records and time of one side of a comparison.
type throughput struct {
	name    string
	records int64
	total   elapsed
	// best is the fastest run of the current iteration.
	best elapsed
}

// run records one run of the current iteration.
func (t *throughput) run(e elapsed) {
	if t.best.wall == 0 || e.wall < t.best.wall {
		t.best = e
	}
}

// endIteration adds the fastest run of the iteration, of records records.
func (t *throughput) endIteration(records int64) {
	t.records += records
	t.total.wall += t.best.wall
	t.total.cpu += t.best.cpu
	t.best = elapsed{}
}

func (t *throughput) nsPerRecord() float64 {
	return float64(t.total.wall.Nanoseconds()) / float64(t.records)
}

// report reports the throughput, and the cores used on average (CPU time
// over wall-clock time): a parallel job that gets less than its share of
// the machine shows it there.
func (t *throughput) report(b *testing.B) {
	b.ReportMetric(t.nsPerRecord(), t.name+"-ns/rec")
	b.ReportMetric(1e3/t.nsPerRecord(), t.name+"-Mrec/s")
	if t.total.cpu > 0 {
		b.ReportMetric(t.total.cpu.Seconds()/t.total.wall.Seconds(), t.name+"-cores")
	}
}

// reportRatio reports the throughput of weir over that of the baseline: the
// figure the targets are stated in.
func reportRatio(b *testing.B, unit string, weir, base *throughput) {
	b.ReportMetric(base.nsPerRecord()/weir.nsPerRecord(), unit)
}

func checkSum(b *testing.B, what string, got, want int64) {
	b.Helper()
	if got != want {
		b.Fatalf("%s: weir's checksum is %d, the baseline's %d: the two did not do the same work", what, got, want)
	}
}

func jobOptions(par int) weir.Options {
	return weir.Options{Parallelism: par, BatchSize: *batchSize}
}

// BenchmarkStatelessChain compares source → map → filter → sink, chained
// into one task, with a hand-written loop (target: ratio >= 0.5).
func BenchmarkStatelessChain(b *testing.B) {
	n := *statelessRecords
	gen := func(i int64) int64 { return i }
	base := &throughput{name: "base"}
	indirect := &throughput{name: "indirect"}
	job := &throughput{name: "weir"}
	for range b.N {
		for range max(1, *statelessRounds) {
			want, d := timed(b, func() (int64, error) { return StatelessBaseline(n), nil })
			base.run(d)
			got, d := timed(b, func() (int64, error) { return StatelessBaselineIndirect(n, gen, Scale, NotFifth), nil })
			checkSum(b, "indirect baseline", got, want)
			indirect.run(d)
			opts := jobOptions(1)
			if err := adapt.ForceFilterLoop(*statelessLoop); err != nil {
				b.Fatal(err)
			}
			got, d = timed(b, func() (int64, error) { return RunStateless(context.Background(), n, opts) })
			checkSum(b, "stateless chain", got, want)
			job.run(d)
		}
		base.endIteration(n)
		indirect.endIteration(n)
		job.endIteration(n)
	}
	b.ReportMetric(0, "ns/op")
	base.report(b)
	indirect.report(b)
	job.report(b)
	reportRatio(b, "ratio", job, base)
	reportRatio(b, "ratio-vs-indirect", job, indirect)
}

// BenchmarkKeyedCount compares a keyed running count behind a hash shuffle
// (parallelism 2) with a single-goroutine loop over a Go map (target: ratio
// >= 0.25), with int64 keys and with string keys.
func BenchmarkKeyedCount(b *testing.B) {
	n, keys := *keyedRecords, *keyedKeys
	b.Run("key=int64", func(b *testing.B) {
		benchmarkKeyed(b, n,
			func() int64 { return KeyedBaselineInt(n, keys) },
			func(i int64) int64 { return IntKey(i, keys) })
	})
	b.Run("key=string", func(b *testing.B) {
		table := StringKeys(keys)
		benchmarkKeyed(b, n,
			func() int64 { return KeyedBaselineString(n, table) },
			func(i int64) string { return StringKey(i, table) })
	})
}

func benchmarkKeyed[K comparable](b *testing.B, n int64, baseline func() int64, key func(int64) K) {
	base := &throughput{name: "base"}
	job := &throughput{name: "weir"}
	for range b.N {
		for range max(1, *keyedRounds) {
			want, d := timed(b, func() (int64, error) { return baseline(), nil })
			base.run(d)
			got, d := timed(b, func() (int64, error) { return RunKeyed(context.Background(), n, key, jobOptions(2)) })
			checkSum(b, "keyed count", got, want)
			job.run(d)
		}
		base.endIteration(n)
		job.endIteration(n)
	}
	b.ReportMetric(0, "ns/op")
	base.report(b)
	job.report(b)
	reportRatio(b, "ratio", job, base)
}

// slowSinkEnv, when set, turns the test binary into the slow-sink workload:
// it runs RunSlowSink with the JSON-encoded SlowSinkConfig of the variable,
// prints the report as JSON and exits. BenchmarkBackpressureMemory starts it
// as a process of its own so that each input size gets its own peak RSS.
const slowSinkEnv = "WEIR_BENCH_SLOWSINK"

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(slowSinkEnv); ok {
		os.Exit(slowSinkChild(spec))
	}
	verifyNoLeaks(m)
}

func slowSinkChild(spec string) int {
	var cfg SlowSinkConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "slowsink child:", err)
		return 2
	}
	r, err := RunSlowSink(context.Background(), cfg)
	if err == nil {
		r.PeakRSSBytes, err = PeakRSS()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowsink child:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "slowsink child:", err)
		return 1
	}
	return 0
}

// runSlowSinkProcess runs the slow-sink workload in a child process.
func runSlowSinkProcess(ctx context.Context, cfg SlowSinkConfig) (SlowSinkReport, error) {
	spec, err := json.Marshal(cfg)
	if err != nil {
		return SlowSinkReport{}, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slowSinkEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return SlowSinkReport{}, fmt.Errorf("slow sink with %d records: %w", cfg.Records, err)
	}
	var r SlowSinkReport
	if err := json.Unmarshal(out, &r); err != nil {
		return SlowSinkReport{}, fmt.Errorf("slow sink with %d records: %w (output %q)", cfg.Records, err, out)
	}
	return r, nil
}

// BenchmarkBackpressureMemory runs a fast source into a slow sink at each
// input size, each in a fresh process, and reports each one's peak RSS and
// heap, and the ratio of the largest size's peak RSS to the smallest's
// (target: flat, i.e. close to 1).
func BenchmarkBackpressureMemory(b *testing.B) {
	sizes, err := parseSizes(*slowSinkSizes)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		var reports []SlowSinkReport
		for _, n := range sizes {
			cfg := SlowSinkConfig{Records: n, Options: weir.Options{BatchSize: *batchSize}}
			r, err := runSlowSinkProcess(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%+v", r)
			reports = append(reports, r)
		}
		for _, r := range reports {
			size := sizeLabel(r.Records)
			b.ReportMetric(float64(r.PeakRSSBytes)/(1<<20), "rssMB-"+size)
			b.ReportMetric(float64(r.PeakHeapBytes)/(1<<20), "heapMB-"+size)
			b.ReportMetric(float64(r.PeakLiveHeapBytes)/(1<<20), "liveMB-"+size)
			b.ReportMetric(float64(r.MaxInFlight), "inflight-"+size)
			b.ReportMetric(r.Seconds*1e9/float64(r.Records), "ns/rec-"+size)
		}
		first, last := reports[0], reports[len(reports)-1]
		b.ReportMetric(float64(last.PeakRSSBytes)/float64(first.PeakRSSBytes), "rss-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFilterLoop runs a lone filter with each loop (adapt.ForceFilterLoop) on
// answers with a pattern (NotFifth) and on random ones (RandomHalf): the
// adaptive loop should run about as fast as the better fixed one on each.
func BenchmarkFilterLoop(b *testing.B) {
	const n = 10_000_000
	for _, keep := range []struct {
		name string
		fn   func(int64) bool
	}{{"pattern", NotFifth}, {"random", RandomHalf}} {
		var want int64
		for v := range int64(n) {
			if keep.fn(v) {
				want += v
			}
		}
		for _, loop := range []string{"adaptive", "branch-free", "branching"} {
			b.Run(keep.name+"/"+loop, func(b *testing.B) {
				job := &throughput{name: "weir"}
				for range b.N {
					for range 3 {
						got, d := timed(b, func() (int64, error) { return RunFilterLoop(context.Background(), n, keep.fn, loop) })
						checkSum(b, "filter loop", got, want)
						job.run(d)
					}
					job.endIteration(n)
				}
				b.ReportMetric(0, "ns/op")
				job.report(b)
			})
		}
	}
}
