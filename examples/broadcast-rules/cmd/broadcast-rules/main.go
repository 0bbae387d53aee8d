// Command broadcast-rules checks 20 000 generated transactions of 50 users
// against three rules (one later removed) and prints each user's number of
// alerts per rule.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	broadcastrules "github.com/weirstream/weir/examples/broadcast-rules"
)

func main() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	rules := []broadcastrules.Rule{
		{Name: "large", MinAmount: 900},
		{Name: "huge", MinAmount: 990},
		{Name: "medium", MinAmount: 500},
		{Name: "medium", Delete: true},
	}
	ruleStream := env.FromSource("rules", datagen.Generator(int64(len(rules)), func(i int64) broadcastrules.Rule { return rules[i] })).
		Parallelism(1)
	// The transactions trickle in, so that the rules (and the removal of
	// "medium") arrive first, as in a job whose rules are set up before
	// traffic starts.
	txns := env.FromSource("txns", datagen.Generator(20_000, func(i int64) broadcastrules.Txn {
		return broadcastrules.Txn{User: fmt.Sprintf("user-%02d", i%50), Amount: (i * 7919) % 1009}
	}).WithOptions(datagen.Options{RecordsPerSecond: 100_000}))
	alerts := collect.New[broadcastrules.Alert]()
	broadcastrules.Build(txns, ruleStream).SinkTo("alerts", alerts)
	if err := env.Execute(context.Background(), "broadcast-rules"); err != nil {
		fmt.Fprintln(os.Stderr, "broadcast-rules:", err)
		os.Exit(1)
	}
	counts := map[string]int{}
	for _, a := range alerts.Results() {
		counts[a.User+" "+a.Rule]++
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Printf("%s %d\n", k, counts[k])
	}
}
