// Package metrics is the registry of a job's runtime figures: per subtask
// (and per chained operator) records in and out, time spent backpressured,
// idle and busy, input and output watermarks, status and start and end
// times. The runtime fills it;
// the REST API (internal/rest through the root package's adapter) and the
// Prometheus exporter (internal/metrics/promexport) read it.
//
// It is deliberately small and has no dependency on Prometheus or on the
// runtime: counters are atomic integers a task's goroutine adds to (per
// batch of records, not per record) or publishes (the per-operator
// Counters), and readers on other goroutines load them. Rates
// (backpressured time per second and friends) are computed by readers
// from two samples, with the time as an argument (see Rate), so
// that the record path never reads a clock.
//
// # Scope of the figures
//
// Records are counted where they cross a task boundary: RecordsIn by the
// task's input channels, RecordsOut by its record writers, per batch:
// Flink's task-scope numRecordsIn/numRecordsOut. Per operator of a chain
// (Flink's operator-scope figures), each operator output adds 1 per record
// to a Counter: a plain integer of the task goroutine, which publishes
// them all (atomic stores) once per turn of its loop, so readers lag by at
// most a batch. An operator's records out are the sum of its outputs'
// counters; a chained operator's records in are its upstream output's
// counter (it has no other input); the head's are RecordsIn.
//
// Bytes (BytesIn, BytesOut: Flink's numBytesIn/numBytesOut) are those of
// the task's channels to and from other processes of a cluster, which
// internal/network counts per channel (the payload of the buffers it
// sends and receives); the builder hands a task the counters of its
// network channels (Task.AddNetworkBytes) and a snapshot sums them.
// Records between tasks of one process travel as Go values, never
// serialized, so such a channel counts no bytes: a job in local mode, and
// the subtasks a cluster puts on the same TaskManager, read and write 0
// bytes where Flink, which serializes its local channels too, counts them
// (local mode's Exchange "tcp", which bridges every channel over loopback
// to test the transport, is not counted either).
//
// # Usage
//
//	job := metrics.NewJob("job-1", "word count")
//	tm := metrics.NewTask("2-0", "2", "count -> Sink: out", 0, 2, []string{"count", "Sink: out"})
//	job.SetTasks(attempt, []*metrics.Task{tm}) // at each deployment
//	c := tm.NewCounter(0, []int{1}) // at build: count's output, into the sink
//	// the task goroutine: tm.RecordsIn.Add(int64(len(batch))); c.N++ per record; tm.Publish() per turn
//	// a reader: tm.Snapshot(time.Now())
package metrics
