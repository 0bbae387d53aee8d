package weir_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// timeHarness is the exactly-once harness (harness_test.go) for event-time
// jobs: a source of the indexes 0..records-1, with event time 10 ms per
// index and a watermark after every record (per split, the largest
// timestamp seen minus lag), runs through build under the same injected
// failures; the committed output must be exactly want.
type timeHarness struct {
	records int64
	lag     int64
	backend string
	build   func(in *weir.Stream[int64]) *weir.Stream[string]
	want    func() []string
}

func (h timeHarness) run(t *testing.T, seed uint64) harnessResult {
	t.Helper()
	plan := newFaultPlan(seed)
	backend := h.backend
	if backend == "" {
		backend = "heap"
	}
	opts := weir.Options{Parallelism: 2, JobID: fmt.Sprint("time-harness-", backend, "-", seed), Restart: "fixed-delay:attempts=100,delay=0",
		StateBackend: backend, LocalStateDir: t.TempDir()}
	opts.Checkpointing.Interval = time.Duration(2+seed%8) * time.Millisecond
	opts.Checkpointing.TolerableFailures = -1
	opts.Checkpointing.MaxConcurrent = 1 + int(seed%2)
	faults := injectFaults(t, &opts, seed, plan, storage.NewMemoryStore())
	env := weir.NewEnvironment(opts)
	src := datagen.Generator(h.records, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 40_000, BatchSize: 64})
	in := env.FromSource("src", connector.Source[int64](flakySource[int64]{src, plan}),
		punctuatedStrategy(h.lag, func(i int64) int64 { return i * 10 })).
		Map("maybe-panic", func(i int64) int64 {
			if plan.maybe("operator-panic", 0.001) {
				panic("injected operator panic")
			}
			return i
		})
	sink := flakySink[string]{collect.Transactional[string](), plan}
	h.build(in).SinkTo("out", connector.Sink[string](sink))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := env.ExecuteAsync(ctx, "time-harness")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("seed %d: job failed: %v (faults fired: %v)", seed, err, plan.fired)
	}
	if lost, dup := multiset.Diff(h.want(), sink.Results()); len(lost)+len(dup) > 0 {
		t.Fatalf("seed %d: exactly-once violated: %d lost (e.g. %v), %d duplicated (e.g. %v); faults fired: %v",
			seed, len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))], plan.fired)
	}
	sum, _ := job.Checkpoints()
	plan.mu.Lock()
	defer plan.mu.Unlock()
	return harnessResult{fired: maps.Clone(plan.fired), restarts: sum.Restarts, storage: faults.Injected(), ckpts: sum.Completed}
}

// runTimeHarness runs h over seeds and checks that failures happened and
// were recovered from.
func runTimeHarness(t *testing.T, h timeHarness, seeds int) {
	if testing.Short() {
		seeds = max(1, seeds/4)
	}
	restarts, ckpts := 0, 0
	for seed := range seeds {
		r := h.run(t, uint64(seed))
		restarts += r.restarts
		ckpts += r.ckpts
	}
	t.Logf("%d seeds: %d restarts, %d checkpoints completed", seeds, restarts, ckpts)
	if restarts == 0 || ckpts == 0 {
		t.Fatalf("%d seeds: %d restarts, %d checkpoints: the harness proved nothing", seeds, restarts, ckpts)
	}
}
