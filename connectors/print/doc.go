// Package print is a sink that writes every record as a line of text, to
// standard output by default: the weir counterpart of Flink's print sink,
// meant for examples and debugging.
//
// A line is the record formatted with fmt's %v verb (or by
// Options.Format), after a prefix like Flink's: "3> " for the third subtask
// when the sink runs with parallelism above one, "name:3> " (or "name> " with
// parallelism one) when Options.Identifier is "name". Options.NoPrefix drops
// the prefix.
//
// Subtasks run on separate goroutines but may share one io.Writer, so every
// print sink in the process writes under one lock, one whole line per Write
// call: lines never interleave, even between two sinks writing to the same
// terminal. The sink never closes its writer. A record holding '\n' spans
// several lines.
//
// The sink is not transactional: a record is printed when it is written, so
// records printed after the last completed checkpoint are printed again
// after a restore.
//
// # Usage
//
//	counts.SinkTo("print", print.Sink[WordCount](nil, print.Options[WordCount]{}))
//
//	var buf bytes.Buffer
//	events.SinkTo("debug", print.Sink(&buf, print.Options[Event]{
//		Identifier: "events",
//		Format:     func(e Event) string { return e.ID + " " + e.Kind },
//	}))
package print
