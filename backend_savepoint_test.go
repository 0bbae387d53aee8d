package weir_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/state"
)

// kindsFn keeps every kind of keyed state per key and reports all of them
// with every record, so that the output shows any state lost or changed
// by moving between backends.
type kindsFn struct {
	count state.Value[int64]
	last  state.List[int64]
	mods  state.Map[int64, int64]
	sum   state.Reducing[int64]
	mean  state.Aggregating[int64, float64]
	ttl   state.Value[int64]
}

func (f *kindsFn) Open(ctx *weir.KeyedContext[string]) (err error) {
	if f.count, err = weir.Value[int64](ctx, "count"); err != nil {
		return err
	}
	if f.last, err = weir.List[int64](ctx, "last"); err != nil {
		return err
	}
	if f.mods, err = weir.Map[int64, int64](ctx, "mods"); err != nil {
		return err
	}
	if f.sum, err = weir.Reducing(ctx, "sum", func(a, b int64) int64 { return a + b }); err != nil {
		return err
	}
	if f.mean, err = weir.Aggregating[int64, [2]int64, float64](ctx, "mean", avg{}); err != nil {
		return err
	}
	f.ttl, err = weir.Value[int64](ctx, "ttl", weir.WithTTL(state.TTLConfig{TTL: time.Hour, Update: state.OnReadAndWrite}))
	return err
}

func (f *kindsFn) ProcessElement(ctx *weir.KeyedContext[string], i int64, out weir.Collector[string]) error {
	n, _ := f.count.Value()
	f.count.Update(n + 1)
	last := append(f.last.Get(), i)
	if len(last) > 3 {
		f.last.Update(last[len(last)-3:])
	} else {
		f.last.Add(i)
	}
	f.mods.Put(i%5, i)
	f.sum.Add(i)
	f.mean.Add(i)
	prev, _ := f.ttl.Value()
	f.ttl.Update(i)
	s, _ := f.sum.Get()
	m, _ := f.mean.Get()
	out.Collect(fmt.Sprintf("%s n=%d last=%v mods=%d sum=%d mean=%.2f prev=%d", ctx.CurrentKey(), n+1, f.last.Get(), f.mods.Len(), s, m, prev))
	return nil
}

// kindsWant is the output of the indexes 0..n-1, computed without state.
func kindsWant(n int64) []string {
	type acc struct {
		n, sum, prev int64
		last         []int64
		mods         map[int64]bool
	}
	keys := map[string]*acc{}
	var out []string
	for i := range n {
		k := spKey(i)
		a := keys[k]
		if a == nil {
			a = &acc{mods: map[int64]bool{}}
			keys[k] = a
		}
		a.n++
		a.last = append(a.last, i)
		if len(a.last) > 3 {
			a.last = a.last[len(a.last)-3:]
		}
		a.mods[i%5] = true
		a.sum += i
		out = append(out, fmt.Sprintf("%s n=%d last=%v mods=%d sum=%d mean=%.2f prev=%d", k, a.n, a.last, len(a.mods), a.sum, float64(a.sum)/float64(a.n), a.prev))
		a.prev = i
	}
	return out
}

// TestSavepointMovesBetweenBackends stops a job keeping every kind of keyed
// state with a savepoint on one backend and resumes it on the other (and
// at another parallelism): savepoints are canonical, so the two runs
// together commit exactly the output of one uninterrupted run.
func TestSavepointMovesBetweenBackends(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ from, to string }{{"heap", "pebble"}, {"pebble", "heap"}, {"pebble", "pebble"}} {
		t.Run(c.from+"-to-"+c.to, func(t *testing.T) {
			t.Parallel()
			ctx := spCtx(t)
			const n = 3000
			src := spIndexes(n, 1500) // slow enough that the stop comes well before the end
			sink := collect.Transactional[string]()
			run := func(backend string, par int, restore string, stopAfter int64) string {
				var tap atomic.Int64
				opts := weir.Options{Parallelism: par, JobID: "kinds", Restore: restore, StateBackend: backend, LocalStateDir: t.TempDir()}
				env := weir.NewEnvironment(opts)
				env.FromSource("src", src).UID("src").Parallelism(1).
					KeyBy(spKey).
					Process("kinds", &kindsFn{}).UID("kinds").
					Map("tap", func(v string) string { tap.Add(1); return v }).UID("tap").
					SinkTo("out", sink).UID("out")
				job, err := env.ExecuteAsync(ctx, "kinds")
				if err != nil {
					t.Fatal(err)
				}
				if stopAfter == 0 {
					if err := spWaitJob(t, job, 30*time.Second); err != nil {
						t.Fatalf("%s run from %s: %v", backend, restore, err)
					}
					if sum, _ := job.Checkpoints(); restore != "" && sum.Restored == 0 {
						t.Fatalf("%s run did not restore %s: %+v", backend, restore, sum)
					}
					return ""
				}
				spWait(t, fmt.Sprint(stopAfter, " records"), 10*time.Second, func() bool { return tap.Load() >= stopAfter })
				sp, err := job.StopWithSavepoint(ctx, t.TempDir())
				if err != nil {
					t.Fatalf("StopWithSavepoint on %s: %v", backend, err)
				}
				if err := spWaitJob(t, job, 10*time.Second); err != nil {
					t.Fatalf("%s job stopped with a savepoint: %v", backend, err)
				}
				return sp
			}
			sp := run(c.from, 2, "", 500)
			run(c.to, 3, sp, 0)
			spSameMultiset(t, "output of both runs", sink.Results(), kindsWant(n))
		})
	}
}
