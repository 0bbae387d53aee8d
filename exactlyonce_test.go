package weir_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

// keyedCount emits "key,n" for the n-th record of each key.
type keyedCount struct{ runningCount }

func TestRecoverFromCheckpointSimple(t *testing.T) {
	const n = 20000
	opts := weir.Options{Parallelism: 2, Restart: "fixed-delay:attempts=3,delay=10ms"}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	env := weir.NewEnvironment(opts)
	var failed atomic.Bool
	var seen atomic.Int64
	src := datagen.Generator(n, func(i int64) string { return fmt.Sprint("k", i%37) }).
		WithOptions(datagen.Options{RecordsPerSecond: 40000})
	sink := collect.Transactional[string]()
	env.FromSource("src", src).Parallelism(1).
		Map("fail", func(s string) string {
			if seen.Add(1) == n/2 && !failed.Swap(true) {
				panic("injected")
			}
			return s
		}).Parallelism(1).
		KeyBy(func(s string) string { return s }).
		Process("count", &runningCount{}).
		SinkTo("out", sink)
	c, err := env.ExecuteAsync(context.Background(), "simple")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	sum, hist := c.Checkpoints()
	t.Logf("summary %+v, %d checkpoints", sum, len(hist))
	counts := map[string]int{}
	var want []string
	for i := range n {
		k := fmt.Sprint("k", i%37)
		counts[k]++
		want = append(want, fmt.Sprintf("%s,%d", k, counts[k]))
	}
	got := sink.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		cnt := map[string]int{}
		for _, w := range want {
			cnt[w]++
		}
		for _, g := range got {
			cnt[g]--
		}
		var miss, extra []string
		for k, v := range cnt {
			if v > 0 {
				miss = append(miss, k)
			} else if v < 0 {
				extra = append(extra, k)
			}
		}
		slices.Sort(miss)
		slices.Sort(extra)
		t.Logf("missing %d: %v", len(miss), miss[:min(20, len(miss))])
		t.Logf("extra %d: %v", len(extra), extra[:min(20, len(extra))])
		t.Fatalf("got %d records, want %d; first got %v", len(got), len(want), strings.Join(got[:min(5, len(got))], " "))
	}
}
