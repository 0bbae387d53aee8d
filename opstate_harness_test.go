package weir_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/multiset"
	"github.com/weirstream/weir/state"
)

// ohBatcher holds records in an operator list state and emits them ten at
// a time (on the record whose index ends in 9, or the last one): whatever
// is buffered at a checkpoint lives only in the list state.
type ohBatcher struct {
	n      int64
	plan   *faultPlan
	buffer state.List[int64]
}

func (b *ohBatcher) Open(ctx *weir.Context) (err error) {
	b.buffer, err = weir.OperatorList[int64](ctx, "buffer")
	return err
}

func (b *ohBatcher) ProcessElement(_ *weir.Context, i int64, out weir.Collector[int64]) error {
	if b.plan.maybe("operator-panic", 0.001) {
		panic("injected operator panic")
	}
	b.buffer.Add(i)
	if i%10 == 9 || i == b.n-1 {
		for _, v := range b.buffer.Get() {
			out.Collect(v)
		}
		b.buffer.Clear()
	}
	return nil
}

// ohEnricher is osEnricher without the recorder: it waits for all rules,
// buffering in an operator list state, and multiplies by their factors.
type ohEnricher struct {
	pending state.List[int64]
}

func (e *ohEnricher) Open(ctx *weir.Context) (err error) {
	e.pending, err = weir.OperatorList[int64](ctx, "pending")
	return err
}

func (e *ohEnricher) flush(out weir.Collector[string]) {
	for _, p := range e.pending.Get() {
		out.Collect(fmt.Sprintf("%d:%d", p, p*osFactor()))
	}
	e.pending.Clear()
}

func (e *ohEnricher) ProcessElement(ctx *weir.ReadOnlyBroadcastContext, i int64, out weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	e.pending.Add(i)
	if rules.Len() == osRules {
		e.flush(out)
	}
	return nil
}

func (e *ohEnricher) ProcessBroadcastElement(ctx *weir.BroadcastContext, r osRule, out weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	rules.Put(r.ID, r.Factor)
	if rules.Len() == osRules {
		e.flush(out)
	}
	return nil
}

// TestExactlyOnceHarnessOperatorState runs a job with operator list state
// (a batcher, and an enricher buffering until it has all broadcast rules)
// and broadcast state under the harness's injected failures; the committed
// output must be exactly the expected multiset.
func TestExactlyOnceHarnessOperatorState(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runOperatorStateHarness(t, uint64(2000+seed)) })
	}
}

func runOperatorStateHarness(t *testing.T, seed uint64) {
	const records = 4000
	plan := newFaultPlan(seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	opts := weir.Options{Parallelism: 2, JobID: fmt.Sprint("opstate-harness-", seed), Restart: "fixed-delay:attempts=100,delay=0"}
	opts.Checkpointing.Interval = time.Duration(2+rng.IntN(8)) * time.Millisecond
	opts.Checkpointing.TolerableFailures = -1
	opts.Checkpointing.MaxConcurrent = 1 + rng.IntN(2)
	faults := injectFaults(t, &opts, seed, plan, storage.NewMemoryStore())

	env := weir.NewEnvironment(opts)
	// The rules trickle in, so that checkpoints and failures find partial
	// maps and non-empty pending lists.
	rules := env.FromSource("rules", datagen.Generator(osRules, func(i int64) osRule { return osRule{ID: i, Factor: i + 1} }).
		WithOptions(datagen.Options{RecordsPerSecond: 500, BatchSize: 1})).Parallelism(1).
		BroadcastState(osRulesDesc)
	src := datagen.Generator(records, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 40_000, BatchSize: 64})
	sink := flakySink[string]{collect.Transactional[string](), plan}
	env.FromSource("src", connector.Source[int64](flakySource[int64]{src, plan})).Parallelism(1).
		Process("batch", &ohBatcher{n: records, plan: plan}).Parallelism(1).
		Rebalance().
		ConnectBroadcast(rules).
		Process("enrich", &ohEnricher{}).
		SinkTo("out", connector.Sink[string](sink))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := env.ExecuteAsync(ctx, "opstate-harness")
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, job, 30*time.Second); err != nil {
		t.Fatalf("seed %d: job failed: %v (faults fired: %v)", seed, err, plan.fired)
	}
	got := sink.Results()
	if lost, dup := multiset.Diff(osWantEnriched(records), got); len(lost)+len(dup) > 0 {
		t.Fatalf("seed %d: exactly-once violated: %d lost (e.g. %v), %d duplicated (e.g. %v); faults fired: %v",
			seed, len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))], plan.fired)
	}
	sum, _ := job.Checkpoints()
	t.Logf("seed %d: faults %v, storage faults %d, restarts %d, checkpoints %d", seed, plan.fired, faults.Injected(), sum.Restarts, sum.Completed)
}
