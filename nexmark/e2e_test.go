package nexmark_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/nexmark"
)

// TestJobExactlyOnce runs the source in a job that fails once half-way and
// recovers from a checkpoint: the sink must hold every event of the stream
// exactly once.
func TestJobExactlyOnce(t *testing.T) {
	const n = 20_000
	// 40000 events/s of event time, emitted at that pace: half a second.
	cfg := nexmark.Config{Events: n, Rate: 40_000, RateLimited: true, Seed: 5}
	opts := weir.Options{Parallelism: 2, Restart: "fixed-delay:attempts=3,delay=10ms"}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	env := weir.NewEnvironment(opts)
	var seen atomic.Int64
	var failed atomic.Bool
	sink := collect.Transactional[string]()
	env.FromSource("nexmark", nexmark.Source(cfg)).UID("nexmark").
		Map("json", func(ev nexmark.Event) string {
			if seen.Add(1) == n/2 && !failed.Swap(true) {
				panic("injected failure")
			}
			return string(nexmark.AppendJSON(nil, &ev))
		}).
		SinkTo("out", sink)
	job, err := env.ExecuteAsync(context.Background(), "nexmark")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if sum, _ := job.Checkpoints(); !failed.Load() || sum.Restarts != 1 || sum.Restored == 0 {
		t.Fatalf("failure injected: %v; summary %+v: want one restart from a checkpoint", failed.Load(), sum)
	}
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range want {
		ev := g.Event(int64(i))
		want[i] = string(nexmark.AppendJSON(nil, &ev))
	}
	got := sink.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the sink holds %d events, want the %d of the stream exactly once", len(got), n)
	}
}
