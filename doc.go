// Package weir is a stateful stream-processing engine with Flink's model of
// fault tolerance, written for Go programs. This page is the overview to
// read first; each section below has a runnable example.
//
// # A pipeline
//
// A program builds a dataflow with a typed, fluent API and runs it.
// Environment.FromSource starts a Stream[T]; Map, FlatMap, Filter and
// Process transform it; SinkTo ends it; Environment.Execute compiles the
// graph (chaining forward-connected operators of equal parallelism into one
// task), runs one goroutine per subtask, and returns when every bounded
// source has ended and every record was processed, when the context is
// cancelled, or when an operator fails, with an error naming the operator
// and its subtask. Streams are typed all the way: no interface{} values or
// type assertions on the record path. Every operator has a name and a
// stable uid (derived from the name) that matches its state across
// restarts. See Example (pipeline).
//
//	env := weir.NewEnvironment(weir.Options{Parallelism: 4})
//	env.FromSource("lines", file.Lines("in/")).
//		FlatMap("split", splitWords).
//		KeyBy(func(w string) string { return w }).
//		Process("count", &counter{}).
//		SinkTo("out", print.Sink(os.Stdout, print.Options[string]{}))
//	err := env.Execute(ctx, "wordcount")
//
// # State
//
// KeyBy partitions a stream by a key into a KeyedStream, whose functions
// (Process, Reduce, windows, joins) keep keyed state: Value, List, Map,
// Reducing and Aggregating states scoped to the current key, created in
// Open with Value, List, Map, Reducing and Aggregating, on the heap backend or on
// pebble (Options.StateBackend) for state larger than memory. Operator
// state (OperatorList, UnionList) and broadcast state belong to an operator
// instance instead of a key. All of it is checkpointed, and redistributed
// by key group when a job is restored with another parallelism. See
// Example (state).
//
// # Time and windows
//
// A WatermarkStrategy given to FromSource (or AssignTimestampsAndWatermarks)
// gives records event timestamps and sends watermarks, "no more records at
// or before t", through the dataflow. Event-time and processing-time timers
// (TimerService) fire on them and are part of keyed state. Window groups a
// keyed stream into tumbling, sliding or session windows, fired by a
// Trigger, with allowed lateness and a side output for late records;
// Reduce and Aggregate fold a window's records as they come. See Example
// (windows).
//
// # Checkpoints and recovery
//
// With CheckpointOptions.Interval set, the job takes asynchronous barrier
// snapshots: sources record their positions and send barriers in band,
// each task snapshots its state when the barrier passes, and a checkpoint
// counts once its metadata is written to CheckpointOptions.Storage
// (memory, a file system or S3). Exactly-once sinks commit on a completed
// checkpoint. After a failure the job restarts (Options.Restart) from the
// latest completed checkpoint: state is restored, sources rewind, nothing
// is lost and nothing counted twice. Savepoints (JobClient.TriggerSavepoint,
// StopWithSavepoint) are the user's own snapshots to restart from
// (Options.Restore). JobClient.Checkpoints reports every checkpoint
// (CheckpointStats), and RESTServer serves the same over Flink's REST API.
// See Example (checkpoints).
package weir
