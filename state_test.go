package weir_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/testutil/multiset"
	"github.com/weirstream/weir/state"
)

type avg struct{}

func (avg) CreateAccumulator() [2]int64        { return [2]int64{} }
func (avg) Add(v int64, acc [2]int64) [2]int64 { return [2]int64{acc[0] + v, acc[1] + 1} }
func (avg) GetResult(acc [2]int64) float64     { return float64(acc[0]) / float64(acc[1]) }
func (avg) Merge(a, b [2]int64) [2]int64       { return [2]int64{a[0] + b[0], a[1] + b[1]} }

// allKinds keeps every kind of keyed state per key and reports them.
type allKinds struct {
	list  state.List[int64]
	m     state.Map[int64, string]
	sum   state.Reducing[int64]
	mean  state.Aggregating[int64, float64]
	fresh state.Value[int64]
}

func (f *allKinds) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if f.list, err = weir.List[int64](ctx, "list"); err != nil {
		return err
	}
	if f.m, err = weir.Map[int64, string](ctx, "map"); err != nil {
		return err
	}
	if f.sum, err = weir.Reducing(ctx, "sum", func(a, b int64) int64 { return a + b }); err != nil {
		return err
	}
	if f.mean, err = weir.Aggregating[int64, [2]int64, float64](ctx, "mean", avg{}); err != nil {
		return err
	}
	f.fresh, err = weir.Value[int64](ctx, "ttl", weir.WithTTL(state.TTLConfig{TTL: time.Hour}))
	return err
}

func (f *allKinds) ProcessElement(ctx *weir.KeyedContext[int64], v int64, out weir.Collector[string]) error {
	f.list.Add(v)
	f.m.Put(v, fmt.Sprint("v", v))
	f.sum.Add(v)
	f.mean.Add(v)
	f.fresh.Update(v)
	if len(f.list.Get()) == 4 { // the last record of the key
		s, _ := f.sum.Get()
		m, _ := f.mean.Get()
		last, _ := f.fresh.Value()
		out.Collect(fmt.Sprintf("k%d list=%v map=%d sum=%d mean=%.2f last=%d", ctx.CurrentKey(), f.list.Get(), f.m.Len(), s, m, last))
	}
	return nil
}

func TestStateKindsThroughRecovery(t *testing.T) {
	for _, backend := range []string{"heap", "pebble"} {
		t.Run(backend, func(t *testing.T) { testStateKindsThroughRecovery(t, backend) })
	}
}

// testStateKindsThroughRecovery runs the job, which fails once at record
// 250, and checks the rows it committed. The failure is meant to come after
// a checkpoint completed, so that the restart restores state; on a loaded
// machine the first checkpoint can take longer than the 250 ms the source
// needs to reach record 250 (a stall of the process, then the rate-limited
// source catching up), and the job then restarts without state. Its rows
// are checked anyway, and the job runs again, up to three times, until one
// run restarts from a checkpoint.
func testStateKindsThroughRecovery(t *testing.T, backend string) {
	for try := 1; ; try++ {
		sum := runStateKinds(t, backend)
		if sum.Restored != 0 {
			return
		}
		if try == 3 {
			t.Fatalf("in %d runs the job never failed after a completed checkpoint; last run: %+v", try, sum)
		}
		t.Logf("run %d failed before its first checkpoint completed (restarted without state: %+v); running the job again", try, sum)
	}
}

// runStateKinds runs the job once, checks that it restarted once and that
// its committed rows are the expected ones, and returns its checkpoint
// summary.
func runStateKinds(t *testing.T, backend string) weir.CheckpointSummary {
	t.Helper()
	opts := weir.Options{Parallelism: 2, Restart: "fixed-delay:attempts=3,delay=0", StateBackend: backend, LocalStateDir: t.TempDir()}
	opts.Checkpointing.Interval = 5 * time.Millisecond
	env := weir.NewEnvironment(opts)
	sink := collect.Transactional[string]()
	var failed atomic.Bool
	env.FromSource("nums", datagen.Sequence(0, 399).WithOptions(datagen.Options{RecordsPerSecond: 1000})).Parallelism(1).
		Map("fail-once", func(v int64) int64 {
			if v == 250 && !failed.Swap(true) {
				panic("injected")
			}
			return v
		}).Parallelism(1).
		KeyBy(func(v int64) int64 { return v % 100 }).
		Process("kinds", &allKinds{}).
		SinkTo("out", sink)
	job, err := env.ExecuteAsync(context.Background(), "kinds")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	sum, _ := job.Checkpoints()
	if sum.Restarts != 1 {
		t.Fatalf("want one restart, got %+v", sum)
	}
	var want []string
	for k := int64(0); k < 100; k++ {
		l := []int64{k, k + 100, k + 200, k + 300}
		want = append(want, fmt.Sprintf("k%d list=%v map=4 sum=%d mean=%.2f last=%d", k, l, 4*k+600, float64(4*k+600)/4, k+300))
	}
	got := sink.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		// The difference as multisets: a row committed twice shows.
		missing, extra := multiset.Diff(want, got)
		t.Fatalf("got %d results, want %d (restored from checkpoint %d)\nnot wanted: %v\nmissing:    %v", len(got), len(want), sum.Restored, extra, missing)
	}
	return sum
}
