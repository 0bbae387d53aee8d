package weir_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// A pipeline: a source, two transformations and a sink, run to the end of
// its bounded input.
func Example_pipeline() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	out := collect.New[string]()
	env.FromSource("numbers", datagen.Sequence(1, 6)).
		Filter("even", func(v int64) bool { return v%2 == 0 }).
		Map("format", func(v int64) string { return fmt.Sprint("n=", v) }).
		SinkTo("out", out)
	if err := env.Execute(context.Background(), "pipeline"); err != nil {
		fmt.Println(err)
		return
	}
	got := out.Results()
	slices.Sort(got) // two subtasks: the order across them is not fixed
	fmt.Println(strings.Join(got, " "))
	// Output: n=2 n=4 n=6
}

// exampleCounter counts the records of each key in keyed state: a
// state.Value scoped to the current key, checkpointed with the job.
type exampleCounter struct{ count state.Value[int64] }

func (c *exampleCounter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *exampleCounter) ProcessElement(ctx *weir.KeyedContext[string], w string, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	out.Collect(fmt.Sprintf("%s=%d", w, n+1))
	return nil
}

// State: KeyBy partitions a stream by key, and a keyed function keeps
// state per key.
func Example_state() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	out := collect.New[string]()
	env.FromSource("words", datagen.FromSlice([]string{"a", "b", "a", "a", "b"})).
		KeyBy(func(w string) string { return w }).
		Process("count", &exampleCounter{}).
		SinkTo("out", out)
	if err := env.Execute(context.Background(), "state"); err != nil {
		fmt.Println(err)
		return
	}
	got := out.Results()
	slices.Sort(got)
	fmt.Println(strings.Join(got, " "))
	// Output: a=1 a=2 a=3 b=1 b=2
}

// Time and windows: records carry event timestamps (here the record is its
// own timestamp, in milliseconds), watermarks tell how far event time has
// come, and a tumbling window sums each key's records of every 10 ms.
func Example_windows() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	out := collect.New[int64]()
	events := weir.ForMonotonousTimestamps[int64]().WithTimestampAssigner(func(v int64, _ int64) int64 { return v })
	env.FromSource("events", datagen.Sequence(0, 29), events).
		KeyBy(func(int64) string { return "all" }).
		Window(weir.TumblingEventTimeWindows(10*time.Millisecond)).
		Reduce("sum", func(acc, v int64) int64 { return acc + v }).
		SinkTo("out", out)
	if err := env.Execute(context.Background(), "windows"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Results()) // [0,10) [10,20) [20,30)
	// Output: [45 145 245]
}

// Checkpoints and recovery: with an interval, the job snapshots its state
// and source positions consistently (a bounded job also takes a final
// checkpoint at its end); after a failure it restarts from the latest
// completed checkpoint, and JobClient.Checkpoints reports what happened.
func Example_checkpoints() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1,
		Checkpointing: weir.CheckpointOptions{Interval: 50 * time.Millisecond}})
	out := collect.New[string]()
	env.FromSource("words", datagen.FromSlice([]string{"a", "b", "a"})).
		KeyBy(func(w string) string { return w }).
		Process("count", &exampleCounter{}).
		SinkTo("out", out)
	job, err := env.ExecuteAsync(context.Background(), "checkpoints")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	summary, history := job.Checkpoints()
	last := history[len(history)-1]
	fmt.Println(out.Results(), summary.Completed > 0, last.Status == weir.CheckpointCompleted)
	// Output: [a=1 b=1 a=2] true true
}
