// Package broadcastrules shows the broadcast state pattern (as in Flink): a
// low-volume stream of alerting rules is broadcast to every subtask of a
// keyed operator over transactions. Each subtask keeps the rules in
// broadcast state, written only by the rules side, and checks each
// transaction against them on the other side; a per-user alert count lives
// in keyed state. Both kinds of state are checkpointed, and the rules come
// back on every subtask when the job is restored, at any parallelism.
//
// Transactions that arrive before a rule are not checked against it: the
// two inputs are not ordered relative to each other.
package broadcastrules

import (
	"slices"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/state"
)

// Rule alerts on transactions of at least MinAmount. A rule with Delete set
// removes the rule of that name.
type Rule struct {
	Name      string
	MinAmount int64
	Delete    bool
}

// Txn is a user's transaction.
type Txn struct {
	User   string
	Amount int64
}

// Alert says that a transaction matched a rule; Nth counts the user's
// alerts so far.
type Alert struct {
	User   string
	Rule   string
	Amount int64
	Nth    int64
}

// RulesState is the broadcast state holding the rules by name.
var RulesState = weir.NewMapStateDescriptor[string, Rule]("rules")

// Checker is the keyed broadcast process function.
type Checker struct {
	alerts state.Value[int64]
}

// Open creates the keyed alert count.
func (c *Checker) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.alerts, err = weir.Value[int64](ctx, "alerts")
	return err
}

// ProcessBroadcastElement runs on every subtask for every rule: it updates
// that subtask's copy of the rules.
func (c *Checker) ProcessBroadcastElement(ctx *weir.KeyedBroadcastContext[string], r Rule, _ weir.Collector[Alert]) error {
	rules, err := ctx.BroadcastState(RulesState)
	if err != nil {
		return err
	}
	if r.Delete {
		rules.Remove(r.Name)
	} else {
		rules.Put(r.Name, r)
	}
	return nil
}

// ProcessElement checks a transaction against the rules (read-only here),
// in the order of their names.
func (c *Checker) ProcessElement(ctx *weir.KeyedReadOnlyBroadcastContext[string], t Txn, out weir.Collector[Alert]) error {
	rules, err := ctx.BroadcastState(RulesState)
	if err != nil {
		return err
	}
	var names []string
	for name := range rules.All() {
		names = append(names, name)
	}
	slices.Sort(names)
	n, _ := c.alerts.Value()
	for _, name := range names {
		if r, _ := rules.Get(name); t.Amount >= r.MinAmount {
			n++
			out.Collect(Alert{User: t.User, Rule: name, Amount: t.Amount, Nth: n})
		}
	}
	c.alerts.Update(n)
	return nil
}

// Build checks the transactions against the broadcast rules and returns the
// alerts.
func Build(txns *weir.Stream[Txn], rules *weir.Stream[Rule]) *weir.Stream[Alert] {
	return txns.KeyBy(func(t Txn) string { return t.User }).
		ConnectBroadcast(rules.BroadcastState(RulesState)).
		Process("check", &Checker{}).UID("check")
}
