// Package weir is a stateful stream-processing engine with Flink's model of
// fault tolerance, written for Go programs.
//
// A program builds a dataflow with a typed, fluent API and runs it:
//
//	env := weir.NewEnvironment(weir.Options{Parallelism: 4})
//	lines := env.FromSource("lines", file.Lines("in/"))
//	words := lines.FlatMap("split", splitWords)
//	counts := words.KeyBy(func(w string) string { return w }).Process("count", &counter{})
//	counts.SinkTo("out", print.Sink(os.Stdout, print.Options[string]{}))
//	err := env.Execute(ctx, "wordcount")
//
// Streams are typed all the way: Stream[T] and KeyedStream[K, T] carry their
// record types through every operator, and the runtime moves records between
// operators without interface{} values or type assertions.
//
// # Operators
//
// Map, FlatMap, Filter and Process transform a Stream; KeyBy partitions it by a
// key into a KeyedStream, whose Process and Reduce functions have keyed state;
// Union merges streams of one type; Connect joins two streams of different
// types into a two-input operator. Rebalance, Broadcast and Forward choose how
// records travel to the next operator. Every operator has a name, a stable uid
// (by default derived from the name) that matches its state across restarts,
// and an optional parallelism of its own.
//
// # Execution
//
// Environment.Execute compiles the graph (chaining forward-connected operators
// of equal parallelism into one task), starts one goroutine per subtask, and
// returns when every source has ended and all records have been processed, or
// when the context is cancelled, or when an operator fails — with an error
// naming the operator and its subtask.
package weir
