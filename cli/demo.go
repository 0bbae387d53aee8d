package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/state"
)

type demoFlags struct {
	events   int64
	rate     float64
	failAt   int64
	interval time.Duration
	dir      string
	par      int
	rest     restFlags
}

func newDemoCommand() *cobra.Command {
	var f demoFlags
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run a stateful job, crash it part-way, recover from a checkpoint, and verify exactly-once output",
		Long: `Runs a local job with keyed state (a running count and sum per sensor),
checkpoints it every second into a local directory, injects a failure
part-way, recovers from the latest checkpoint, and at the end checks the
committed output against the expected one: nothing lost, nothing duplicated.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	c.Flags().Int64Var(&f.events, "events", 200_000, "number of sensor readings")
	c.Flags().Float64Var(&f.rate, "rate", 50_000, "readings per second")
	c.Flags().Int64Var(&f.failAt, "fail-at", 0, "fail once after this many readings (default: 60% of --events)")
	c.Flags().DurationVar(&f.interval, "checkpoint-interval", time.Second, "checkpoint interval")
	c.Flags().StringVar(&f.dir, "dir", "out/demo", "directory for checkpoints and output")
	c.Flags().IntVar(&f.par, "parallelism", 2, "number of subtasks per operator")
	f.rest.register(c)
	return c
}

type reading struct {
	Seq    int64
	Sensor int32
	Value  int64
}

func demoReading(i int64) reading {
	return reading{Seq: i, Sensor: int32((i*7919 + i/13) % 100), Value: (i * 31) % 1000}
}

// sensorTotals keeps a running count and sum per sensor in keyed state.
type sensorTotals struct {
	count state.Value[int64]
	sum   state.Value[int64]
}

func (s *sensorTotals) Open(ctx *weir.KeyedContext[int32]) (err error) {
	if s.count, err = weir.Value[int64](ctx, "count"); err != nil {
		return err
	}
	s.sum, err = weir.Value[int64](ctx, "sum")
	return err
}

func (s *sensorTotals) ProcessElement(ctx *weir.KeyedContext[int32], r reading, out weir.Collector[string]) error {
	n, _ := s.count.Value()
	sum, _ := s.sum.Value()
	n, sum = n+1, sum+r.Value
	s.count.Update(n)
	s.sum.Update(sum)
	out.Collect(fmt.Sprintf("sensor-%02d,%d,%d", r.Sensor, n, sum))
	return nil
}

// expectedDemoOutput is the output computed by a plain loop.
func expectedDemoOutput(events int64) []string {
	count := map[int32]int64{}
	sum := map[int32]int64{}
	out := make([]string, 0, events)
	for i := range events {
		r := demoReading(i)
		count[r.Sensor]++
		sum[r.Sensor] += r.Value
		out = append(out, fmt.Sprintf("sensor-%02d,%d,%d", r.Sensor, count[r.Sensor], sum[r.Sensor]))
	}
	return out
}

func runDemo(ctx context.Context, f demoFlags, stdout io.Writer) error {
	if f.events < 1 {
		return fmt.Errorf("--events is %d: use a positive number", f.events)
	}
	if f.failAt == 0 {
		f.failAt = f.events * 6 / 10
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ckptDir, err := filepath.Abs(filepath.Join(f.dir, "checkpoints"))
	if err != nil {
		return err
	}
	outDir := filepath.Join(f.dir, "output")
	for _, d := range []string{ckptDir, outDir} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("cannot clear %s: %w", d, err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cannot create %s: %w (choose a writable --dir)", d, err)
		}
	}

	opts := weir.Options{Parallelism: f.par, JobID: "demo", Restart: "fixed-delay:attempts=3,delay=100ms"}
	opts.Checkpointing.Interval = f.interval
	opts.Checkpointing.Storage = ckptDir
	env := weir.NewEnvironment(opts)

	var failed atomic.Bool
	var failedAt atomic.Int64
	var seen atomic.Int64
	src := datagen.Generator(f.events, demoReading).WithOptions(datagen.Options{RecordsPerSecond: f.rate})
	// One source subtask, chained to the failure injector, keeps each
	// sensor's readings in order, so that the running sums are
	// deterministic and the output can be checked line by line.
	readings := env.FromSource("sensors", src).UID("sensors").Parallelism(1).
		Map("inject-failure", func(r reading) reading {
			if seen.Add(1) >= f.failAt && !failed.Swap(true) {
				failedAt.Store(time.Now().UnixNano())
				panic(fmt.Sprintf("injected failure at reading %d", r.Seq))
			}
			return r
		}).Parallelism(1)
	readings.KeyBy(func(r reading) int32 { return r.Sensor }).
		Process("totals", &sensorTotals{}).UID("totals").
		SinkTo("output", file.ExactlyOnce(outDir, file.ExactlyOnceOptions{})).UID("output")

	fmt.Fprintf(stdout, "weir demo: %d sensor readings at %.0f/s, checkpoint every %v into %s; a failure is injected at reading %d\n",
		f.events, f.rate, f.interval, ckptDir, f.failAt)
	rs, err := listenREST(f.rest, os.Stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	job, err := env.ExecuteAsync(ctx, "demo")
	if err != nil {
		rs.close()
		return err
	}
	defer rs.serve(job)()
	if err := job.Wait(); err != nil {
		return fmt.Errorf("demo job failed: %w", err)
	}
	elapsed := time.Since(start)

	got, err := readCommitted(outDir)
	if err != nil {
		return err
	}
	want := expectedDemoOutput(f.events)
	lost, dup := diffMultisets(want, got)
	sum, hist := job.Checkpoints()
	fmt.Fprintf(stdout, "records in:        %d\n", f.events)
	fmt.Fprintf(stdout, "records out:       %d (committed, in %s)\n", len(got), outDir)
	fmt.Fprintf(stdout, "lost:              %d\n", lost)
	fmt.Fprintf(stdout, "duplicated:        %d\n", dup)
	fmt.Fprintf(stdout, "checkpoints:       %d completed, %d failed\n", sum.Completed, sum.Failed)
	if sum.Restarts > 0 {
		fmt.Fprintf(stdout, "restored from:     checkpoint %d (%s)\n", sum.Restored, sum.RestorePath)
		if at := failedAt.Load(); at > 0 && !sum.RestoreTime.IsZero() {
			fmt.Fprintf(stdout, "recovery took:     %v (failure to restored job running)\n", sum.RestoreTime.Sub(time.Unix(0, at)).Round(time.Millisecond))
		}
	} else {
		fmt.Fprintf(stdout, "restored from:     (no failure happened)\n")
	}
	if n := len(hist); n > 0 {
		last := hist[n-1]
		fmt.Fprintf(stdout, "last checkpoint:   %d, %v end to end, %d bytes of state\n", last.ID, last.Duration.Round(time.Millisecond), last.StateSize)
	}
	fmt.Fprintf(stdout, "wall time:         %v\n", elapsed.Round(time.Millisecond))
	if lost != 0 || dup != 0 {
		return fmt.Errorf("exactly-once violated: %d lost, %d duplicated", lost, dup)
	}
	fmt.Fprintln(stdout, "exactly-once:      verified")
	return nil
}

// readCommitted reads the lines of the committed files of dir (names not
// starting with "." or "_").
func readCommitted(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for l := range strings.Lines(string(data)) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out, nil
}

// diffMultisets counts the records of want missing from got and the extra
// copies in got.
func diffMultisets(want, got []string) (lost, dup int) {
	count := make(map[string]int, len(want))
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	for _, n := range count {
		switch {
		case n > 0:
			lost += n
		case n < 0:
			dup -= n
		}
	}
	return lost, dup
}
