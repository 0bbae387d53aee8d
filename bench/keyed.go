package bench

import (
	"context"
	"fmt"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// keyStride spreads consecutive records over the key space. It is prime, so
// record i's key (i*keyStride mod keys) runs through every key once in each
// run of keys records: every key gets n/keys records.
const keyStride = 7919

// IntKey returns the key of record i among keys distinct keys.
func IntKey(i, keys int64) int64 { return i * keyStride % keys }

// StringKeys returns the table of keys distinct string keys ("key-0000042")
// that the string variant draws from, so that neither side pays for
// formatting keys per record.
func StringKeys(keys int64) []string {
	t := make([]string, keys)
	for i := range t {
		t[i] = fmt.Sprintf("key-%07d", i)
	}
	return t
}

// StringKey returns the key of record i: the string of IntKey(i).
func StringKey(i int64, table []string) string {
	return table[IntKey(i, int64(len(table)))]
}

// KeyedBaseline is the loop that the keyed running count is measured
// against: one goroutine counting records per key in a Go map and adding up
// the running counts, as SumSink does with the counts the job emits.
func KeyedBaseline[K comparable](n int64, key func(int64) K) int64 {
	m := make(map[K]int64)
	var sum int64
	for i := range n {
		k := key(i)
		m[k]++
		sum += m[k]
	}
	return sum
}

// KeyedBaselineInt is KeyedBaseline for IntKey, written out so that the key
// computation is inlined as in a hand-written loop.
func KeyedBaselineInt(n, keys int64) int64 {
	m := make(map[int64]int64)
	var sum int64
	for i := range n {
		k := IntKey(i, keys)
		m[k]++
		sum += m[k]
	}
	return sum
}

// KeyedBaselineString is KeyedBaseline for StringKey, written out.
func KeyedBaselineString(n int64, table []string) int64 {
	m := make(map[string]int64)
	var sum int64
	for i := range n {
		k := StringKey(i, table)
		m[k]++
		sum += m[k]
	}
	return sum
}

// runningCount keeps a count per key in value state and emits it for every
// record.
type runningCount[K comparable] struct {
	count state.Value[int64]
}

func (c *runningCount[K]) Open(ctx *weir.KeyedContext[K]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *runningCount[K]) ProcessElement(_ *weir.KeyedContext[K], _ K, out weir.Collector[int64]) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	out.Collect(n)
	return nil
}

// RunKeyed runs source → KeyBy → keyed running count → sink over n records
// whose keys are key(0), key(1), ... and returns the sum of the emitted
// counts, which equals KeyedBaseline(n, key). The parallelism comes from
// opts (the benchmarks use 2): the source's subtasks hash-partition the keys
// over the counter's subtasks, each chained with its sink.
func RunKeyed[K comparable](ctx context.Context, n int64, key func(int64) K, opts weir.Options) (int64, error) {
	env := weir.NewEnvironment(opts)
	sink := new(SumSink)
	env.FromSource("keys", datagen.Generator(n, key)).
		KeyBy(func(k K) K { return k }).
		Process("count", &runningCount[K]{}).
		SinkTo("sum", sink)
	if err := env.Execute(ctx, "bench-keyed"); err != nil {
		return 0, err
	}
	return sink.Sum(), nil
}
