package broadcastrules_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	broadcastrules "github.com/weirstream/weir/examples/broadcast-rules"
)

// gated wraps a source: its readers emit nothing until open is closed. When
// done is set, it is closed once a reader has read all its splits.
type gated[T any] struct {
	connector.Source[T]
	open <-chan struct{}
	done *sync.Once
	ch   chan struct{}
}

func (g gated[T]) NewReader(ctx connector.ReaderContext) (connector.Reader[T], error) {
	r, err := g.Source.NewReader(ctx)
	return gatedReader[T]{Reader: r, g: g}, err
}

type gatedReader[T any] struct {
	connector.Reader[T]
	g gated[T]
}

func (r gatedReader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	select {
	case <-r.g.open:
	default:
		return connector.NothingAvailable, nil
	}
	st, err := r.Reader.Poll(out)
	if st == connector.EndOfInput && r.g.done != nil {
		r.g.done.Do(func() { close(r.g.ch) })
	}
	return st, err
}

func (r gatedReader[T]) Available() <-chan struct{} {
	select {
	case <-r.g.open:
		return r.Reader.Available()
	default:
		return r.g.open
	}
}

var rules = []broadcastrules.Rule{
	{Name: "large", MinAmount: 900},
	{Name: "huge", MinAmount: 990},
	{Name: "medium", MinAmount: 500},
	{Name: "medium", Delete: true},
}

const txns = 5000

func txn(i int64) broadcastrules.Txn {
	return broadcastrules.Txn{User: fmt.Sprintf("user-%02d", i%20), Amount: (i * 7919) % 1009}
}

// match is an alert without its count, which depends on the order in
// which a user's transactions arrive (the source is parallel).
type match struct {
	User, Rule string
	Amount     int64
}

// want is the matches of the transactions against "huge" and "large" (the
// rules left once "medium" is removed).
func want() map[match]int {
	out := map[match]int{}
	for i := range int64(txns) {
		t := txn(i)
		for _, r := range rules[:2] {
			if t.Amount >= r.MinAmount {
				out[match{t.User, r.Name, t.Amount}]++
			}
		}
	}
	return out
}

// TestRulesSurviveRestoreAtOtherParallelism runs the example in two parts:
// at parallelism 2 the rules are read while the transactions wait, and the
// job stops with a savepoint; restored at parallelism 3, the transactions
// flow, and every subtask checks them against the rules it got back from
// the savepoint (the rules are not read again).
func TestRulesSurviveRestoreAtOtherParallelism(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rulesRead := make(chan struct{})
	closed, opened := make(chan struct{}), make(chan struct{})
	close(opened)
	ruleSrc := datagen.Generator(int64(len(rules)), func(i int64) broadcastrules.Rule { return rules[i] })
	txnSrc := datagen.Generator(txns, txn).WithOptions(datagen.Options{BatchSize: 64})
	// One sink for both runs: the restored run commits what the savepoint
	// pre-committed.
	sink := collect.Transactional[broadcastrules.Alert]()
	build := func(par int, restore string, txnGate <-chan struct{}) *weir.JobClient {
		env := weir.NewEnvironment(weir.Options{Parallelism: par, Restore: restore})
		rg := gated[broadcastrules.Rule]{Source: ruleSrc, open: opened}
		if restore == "" {
			rg.done, rg.ch = new(sync.Once), rulesRead
		}
		rs := env.FromSource("rules", connector.Source[broadcastrules.Rule](rg)).
			Parallelism(1).UID("rules")
		ts := env.FromSource("txns", connector.Source[broadcastrules.Txn](gated[broadcastrules.Txn]{Source: txnSrc, open: txnGate})).UID("txns")
		broadcastrules.Build(ts, rs).SinkTo("alerts", sink).UID("alerts")
		c, err := env.ExecuteAsync(ctx, "broadcast-rules")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	c := build(2, "", closed)
	select {
	case <-rulesRead:
	case <-ctx.Done():
		t.Fatal("the rules were not read")
	}
	// The savepoint's barrier follows the rules on every channel: every
	// subtask has all of them in its snapshot.
	sp, err := c.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := sink.Len(); n != 0 {
		t.Fatalf("%d alerts before any transaction", n)
	}

	c = build(3, sp, opened)
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	got := map[match]int{}
	nth := map[string][]int64{}
	for _, a := range sink.Results() {
		got[match{a.User, a.Rule, a.Amount}]++
		nth[a.User] = append(nth[a.User], a.Nth)
	}
	w := want()
	if len(w) == 0 {
		t.Fatal("no alert expected: the test proves nothing")
	}
	for m, n := range w {
		if got[m] != n {
			t.Errorf("alert %+v: got %d, want %d", m, got[m], n)
		}
	}
	for m, n := range got {
		if w[m] == 0 {
			t.Errorf("unexpected alert %+v (x%d)", m, n)
		}
	}
	// The keyed alert count numbers each user's alerts 1, 2, 3, ...
	for user, ns := range nth {
		slices.Sort(ns)
		for i, n := range ns {
			if n != int64(i+1) {
				t.Fatalf("%s: alert counts %v, want 1..%d", user, ns, len(ns))
			}
		}
	}
}
