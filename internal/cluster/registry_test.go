package cluster

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/state"
)

// testJobs is the registry of the tests' jobs: every process (here every
// JobManager and TaskManager of the test) builds them from the same code.
//
//	counts --n N --out DIR --ckpt DIR [--parallelism P] [--slow D] [--restarts K] [--interval D]
//
// counts numbers 0..N-1 from a generator, keys them by n%10, counts each
// key's records in keyed state and writes "key,count" lines through the
// exactly-once file sink: the committed output holds every (key, 1..n_key)
// line exactly once, whatever the order, restarts included. --slow
// sleeps that long per record (so that a test can cut a TaskManager while
// the job runs).
type testJobs struct{}

func (testJobs) Names() []string { return []string{"counts"} }

func (testJobs) Job(name string, args []string) (deploy.Job, error) {
	if name != "counts" {
		return nil, fmt.Errorf("unknown job %q (known: counts)", name)
	}
	env, err := countsEnv(args)
	if err != nil {
		return nil, err
	}
	j, err := env.Deployable(name)
	if err != nil {
		return nil, err
	}
	out := ""
	for i, a := range args {
		if a == "--out" && i+1 < len(args) {
			out = args[i+1]
		}
	}
	return preparedJob{Job: j, out: out}, nil
}

// preparedJob is a deploy.Preparer: its Prepare appends a line to
// <out>.prepared (so a test counts the calls), and fails when out's name
// is "prepare-fails".
type preparedJob struct {
	deploy.Job
	out string
}

func (j preparedJob) Prepare(ctx context.Context) error {
	if p, ok := j.Job.(deploy.Preparer); ok {
		if err := p.Prepare(ctx); err != nil {
			return err
		}
	}
	if filepath.Base(j.out) == "prepare-fails" {
		return fmt.Errorf("output %s is not usable", j.out)
	}
	f, err := os.OpenFile(j.out+".prepared", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("prepared\n")
	return err
}

// countsEnv builds the counts job's Environment from its flags.
func countsEnv(args []string) (*weir.Environment, error) {
	fs := flag.NewFlagSet("counts", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int64("n", 1000, "numbers")
	out := fs.String("out", "", "output directory")
	ckpt := fs.String("ckpt", "", "checkpoint storage")
	par := fs.Int("parallelism", 2, "parallelism")
	slow := fs.Duration("slow", 0, "sleep per record")
	restarts := fs.Int("restarts", 0, "restart attempts")
	interval := fs.Duration("interval", 50*time.Millisecond, "checkpoint interval")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("job counts: %w", err)
	}
	if *out == "" {
		return nil, fmt.Errorf("job counts: --out is required")
	}
	restart := "none"
	if *restarts > 0 {
		restart = fmt.Sprintf("fixed-delay:attempts=%d,delay=50ms", *restarts)
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: *par, MaxParallelism: 32, Restart: restart,
		Checkpointing: weir.CheckpointOptions{Interval: *interval, Storage: *ckpt}})
	d := *slow
	gen := datagen.Generator(*n, func(i int64) int64 { return i })
	if d > 0 {
		// Small polls: the slow map is chained to the source, and a source
		// task takes its mail (checkpoint triggers, whose barriers flush
		// the records sent so far) between polls only; a poll of 1024
		// records at 1 ms each would hold both for a second.
		gen = gen.WithOptions(datagen.Options{BatchSize: 10})
	}
	env.FromSource("numbers", gen).
		Map("slow", func(i int64) int64 {
			if d > 0 {
				time.Sleep(d)
			}
			return i
		}).
		KeyBy(func(i int64) string { return fmt.Sprint(i % 10) }).
		Process("count", &keyCounter{}).
		SinkTo("out", file.ExactlyOnce(*out, file.ExactlyOnceOptions{NoSync: true}))
	return env, nil
}

type keyCounter struct{ count state.Value[int64] }

func (c *keyCounter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *keyCounter) ProcessElement(ctx *weir.KeyedContext[string], _ int64, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	out.Collect(fmt.Sprintf("%s,%d", ctx.CurrentKey(), n+1))
	return nil
}

// wantCounts is the counts job's output for n numbers, sorted.
func wantCounts(n int64) []string {
	per := map[int64]int64{}
	for i := range n {
		per[i%10]++
	}
	var out []string
	for k, c := range per {
		for j := int64(1); j <= c; j++ {
			out = append(out, fmt.Sprintf("%d,%d", k, j))
		}
	}
	slices.Sort(out)
	return out
}
