package kafka

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir"
)

// TestJobPerPartitionWatermarksAndIdleness runs event-time windows over a
// topic of 3 partitions in one subtask. Partition 1 gets one record at
// t=1000 and then nothing; partition 0 moves on to t=5000 and beyond;
// partition 2 stays empty. Without idleness partition 1 holds the
// watermark at 1000, so the window [1000, 2000) does not fire — which
// also shows the watermark is tracked per partition (one watermark for the
// whole subtask would be past 5000). With idleness, partition 1 is idle
// after the timeout and the window fires.
func TestJobPerPartitionWatermarksAndIdleness(t *testing.T) {
	for _, idle := range []bool{false, true} {
		t.Run(map[bool]string{false: "no idleness", true: "idleness"}[idle], func(t *testing.T) {
			c := newCluster(t, 3, "in")
			strategy := weir.ForBoundedOutOfOrderness[string](0)
			if idle {
				strategy = strategy.WithIdleness(300 * time.Millisecond)
			}
			o := sourceOpts(c, "in")
			o.Stop = StopNever
			env := weir.NewEnvironment(weir.Options{Parallelism: 1})
			var mu sync.Mutex
			var fired []string
			env.FromSource("in", NewSource(o, String()), strategy).
				KeyBy(func(string) string { return "k" }).
				Window(weir.TumblingEventTimeWindows(time.Second)).
				Reduce("concat", func(a, b string) string { return a + " " + b }).
				Map("log", func(s string) string {
					mu.Lock()
					fired = append(fired, s)
					mu.Unlock()
					return s
				}).SinkTo("out", discard[string]{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			job, err := env.ExecuteAsync(ctx, "wm")
			if err != nil {
				t.Fatal(err)
			}
			at := func(p int32, ts int64, v string) {
				produceAt(t, c, p, ts, v)
			}
			at(1, 1000, "p1@1000")
			time.Sleep(100 * time.Millisecond)
			at(0, 1000, "p0@1000")
			at(0, 1500, "p0@1500")
			// Partition 0 stays busy, its event time past 5000.
			deadline := time.Now().Add(1500 * time.Millisecond)
			if idle {
				deadline = time.Now().Add(15 * time.Second)
			}
			var got []string
			for ts := int64(5000); time.Now().Before(deadline); ts += 10 {
				at(0, ts, "p0@later")
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				got = slices.Clone(fired)
				mu.Unlock()
				if len(got) > 0 {
					break
				}
			}
			cancel()
			job.Wait()
			switch {
			case !idle && len(got) > 0:
				t.Fatalf("fired %q while partition 1 holds the watermark at 1000", got)
			case idle && len(got) == 0:
				t.Fatal("the window [1000, 2000) did not fire once partition 1 was idle")
			case idle:
				words := strings.Fields(got[0])
				slices.Sort(words)
				if !slices.Equal(words, []string{"p0@1000", "p0@1500", "p1@1000"}) {
					t.Fatalf("first window fired %q, want the three records of [1000, 2000)", got[0])
				}
			}
		})
	}
}

func produceAt(t *testing.T, c *kfake.Cluster, p int32, ts int64, v string) {
	t.Helper()
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: "in", Partition: p, Value: []byte(v), Timestamp: time.UnixMilli(ts)}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
}
