package weir_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// windowJoinReference joins the events of joinSide by key and sliding
// windows of size and slide (tumbling when equal), by brute force: a pair
// is emitted once per window holding both.
func windowJoinReference(n, size, slide int64) []string {
	var out []string
	for i := range n {
		l := joinSide(i, 0)
		for j := range n {
			r := joinSide(j, 5)
			if l.Key != r.Key {
				continue
			}
			lo, hi := min(l.TS, r.TS), max(l.TS, r.TS)
			for start := hi - hi%slide; start > hi-size; start -= slide {
				if start <= lo && lo < start+size {
					out = append(out, fmt.Sprintf("%d:%d:%d", l.Key, l.ID, r.ID))
				}
			}
		}
	}
	return out
}

func joinPairString(l, r joinEvent) string { return fmt.Sprintf("%d:%d:%d", l.Key, l.ID, r.ID) }

func TestWindowJoinMatchesReference(t *testing.T) {
	const n = 500
	for _, par := range []int{1, 2} {
		for _, w := range []struct{ size, slide int64 }{{100, 100}, {100, 50}, {60, 20}} {
			t.Run(fmt.Sprintf("p%d/size%d/slide%d", par, w.size, w.slide), func(t *testing.T) {
				env := weir.NewEnvironment(weir.Options{Parallelism: par})
				left := env.FromSource("left", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 0) }), joinStrategy())
				right := env.FromSource("right", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 5) }), joinStrategy())
				key := func(e joinEvent) int { return e.Key }
				sink := collect.New[string]()
				assigner := weir.SlidingEventTimeWindows(time.Duration(w.size)*time.Millisecond, time.Duration(w.slide)*time.Millisecond)
				if w.size == w.slide {
					assigner = weir.TumblingEventTimeWindows(time.Duration(w.size) * time.Millisecond)
				}
				weir.Join(left, right).Where(key).EqualTo(key).Window(assigner).
					Apply("join", joinPairString).SinkTo("out", sink)
				if err := env.Execute(context.Background(), "window-join"); err != nil {
					t.Fatal(err)
				}
				want := windowJoinReference(n, w.size, w.slide)
				if len(want) == 0 {
					t.Fatal("the reference joins nothing")
				}
				if lost, dup := multiset.Diff(want, sink.Results()); len(lost)+len(dup) > 0 {
					t.Fatalf("%d pairs expected, %d got: %d missing (e.g. %v), %d extra (e.g. %v)",
						len(want), len(sink.Results()), len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))])
				}
			})
		}
	}
}

// TestCoGroupWindows checks that a co-group sees each key's records of both
// sides per window, including windows where one side has none.
func TestCoGroupWindows(t *testing.T) {
	const n, size = 400, 70
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	left := env.FromSource("left", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 0) }), joinStrategy())
	// The right side has only even ids: some windows of some keys get no
	// right record.
	right := env.FromSource("right", datagen.Generator(n/2, func(i int64) joinEvent { return joinSide(2*i, 5) }), joinStrategy())
	key := func(e joinEvent) int { return e.Key }
	sink := collect.New[string]()
	weir.CoGroup(left, right).Where(key).EqualTo(key).Window(weir.TumblingEventTimeWindows(size*time.Millisecond)).
		Apply("cogroup", weir.CoGroupFunction[joinEvent, joinEvent, string](func(ls, rs []joinEvent, out weir.Collector[string]) error {
			var k, w int64 = -1, -1
			for _, e := range append(append([]joinEvent(nil), ls...), rs...) {
				if k >= 0 && (int64(e.Key) != k || e.TS-e.TS%size != w) {
					return fmt.Errorf("records of different keys or windows in one group: %v %v", ls, rs)
				}
				k, w = int64(e.Key), e.TS-e.TS%size
			}
			out.Collect(fmt.Sprintf("%d@%d:%d/%d", k, w, len(ls), len(rs)))
			return nil
		})).SinkTo("out", sink)
	if err := env.Execute(context.Background(), "cogroup"); err != nil {
		t.Fatal(err)
	}
	type group struct{ l, r int }
	groups := map[string]*group{}
	add := func(e joinEvent, left bool) {
		id := fmt.Sprintf("%d@%d", e.Key, e.TS-e.TS%size)
		if groups[id] == nil {
			groups[id] = &group{}
		}
		if left {
			groups[id].l++
		} else {
			groups[id].r++
		}
	}
	for i := range int64(n) {
		add(joinSide(i, 0), true)
	}
	for i := range int64(n / 2) {
		add(joinSide(2*i, 5), false)
	}
	var want []string
	oneSided := 0
	for id, g := range groups {
		want = append(want, fmt.Sprintf("%s:%d/%d", id, g.l, g.r))
		if g.l == 0 || g.r == 0 {
			oneSided++
		}
	}
	if lost, dup := multiset.Diff(want, sink.Results()); len(lost)+len(dup) > 0 {
		t.Fatalf("%d missing (e.g. %v), %d extra (e.g. %v)", len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))])
	}
	if oneSided == 0 {
		t.Fatal("no group with one side empty: the test proves less than it says")
	}
}

func TestWindowJoinBadInput(t *testing.T) {
	key := func(e joinEvent) int { return e.Key }
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	l := env.FromSource("l", datagen.FromSlice([]joinEvent{{}}), joinStrategy())
	r := env.FromSource("r", datagen.FromSlice([]joinEvent{{}}), joinStrategy())
	weir.Join(l, r).Where(key).EqualTo(key).Window(weir.TumblingEventTimeWindows(0)).
		Apply("zero-join", joinPairString).SinkTo("out", collect.New[string]())
	err := env.Execute(context.Background(), "bad")
	if err == nil || !strings.Contains(err.Error(), "zero-join") {
		t.Fatalf("Execute = %v, want an error naming the operator and the window size", err)
	}
}

// TestWindowJoinExactlyOnce runs a tumbling window join under injected
// failures with exactly-once checkpoints every few milliseconds.
func TestWindowJoinExactlyOnce(t *testing.T) {
	const n = 1500
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	want := windowJoinReference(n, 100, 100)
	for _, backend := range []string{"heap", "pebble"} {
		for seed := range seeds {
			t.Run(fmt.Sprint(backend, "/seed", seed), func(t *testing.T) {
				runJoinHarness(t, backend, fmt.Sprint("wjoin-", seed), seed, newFaultPlan(uint64(100+seed)), want,
					func(left, right *weir.Stream[joinEvent], key func(joinEvent) int) *weir.Stream[string] {
						return weir.Join(left, right).Where(key).EqualTo(key).Window(weir.TumblingEventTimeWindows(100*time.Millisecond)).
							Apply("join", joinPairString)
					})
			})
		}
	}
}
