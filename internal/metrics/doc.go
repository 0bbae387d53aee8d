// Package metrics is the registry of a job's runtime figures: per subtask
// records in and out, time spent backpressured, idle and busy, input and
// output watermarks, status and start and end times. The runtime fills it;
// the REST API (internal/rest through the root package's adapter) and the
// Prometheus exporter (internal/metrics/promexport) read it.
//
// It is deliberately small and has no dependency on Prometheus or on the
// runtime: counters are atomic integers a task's goroutine adds to (per
// batch of records, not per record), and readers on other goroutines load
// them. Rates (backpressured time per second and friends) are computed by
// readers from two samples, with the time as an argument (see Rate), so
// that the record path never reads a clock.
//
// # Scope of the figures
//
// Records are counted where they cross a task boundary: RecordsIn by the
// task's input channels, RecordsOut by its record writers. They are
// therefore the figures of the chain's head (in) and tail (out) operator,
// which is what Flink reports as the task's numRecordsIn/numRecordsOut.
// Records passed between chained operators are plain function calls and
// are not counted (a per-record counter there would cost more than the
// call). Bytes are not counted: records travel between local tasks as Go
// values, never serialized, so there are no bytes to count (Flink counts
// the serialized buffers of its local channels; weir will count bytes in
// its network channels).
//
// # Usage
//
//	job := metrics.NewJob("job-1", "word count")
//	tm := metrics.NewTask("2-0", "2", "count -> Sink: out", 0, 2, []string{"count", "Sink: out"})
//	job.SetTasks(attempt, []*metrics.Task{tm}) // at each deployment
//	// the task goroutine: tm.RecordsIn.Add(int64(len(batch)))
//	// a reader: tm.Snapshot(time.Now())
package metrics
