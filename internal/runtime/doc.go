// Package runtime runs tasks: one goroutine per task, a mailbox loop that reads
// batches from bounded input channels and control messages from a mailbox, and
// a chain of operators called directly, record by record.
//
// # Data plane
//
// Records cross task boundaries in batches over a Channel: a bounded queue of
// envelopes, each either a batch of records (with their timestamps) or one
// control event — end of partition now; barriers, cancel markers and
// watermarks in later issues. Control events travel in band, so they never
// overtake or fall behind the data sent before them. A RecordWriter buffers one
// batch per target channel and sends it when it is full, when a control event
// must follow it, or when its task goes idle. A full queue blocks the sender:
// backpressure, with memory bounded by QueueSize batches per channel.
//
// Channels recycle their batches: the receiver hands a processed batch back
// to the sender, so a steady stream allocates no batches.
//
// # Types
//
// Channel[T], RecordWriter[T] and Output[T] are typed; the Task that drives
// them is not. A task sees its inputs through the InputChannel interface, whose
// typed implementation delivers records straight to the typed head operator, so
// the record path holds no interface{} values and no type assertions.
//
// # Errors
//
// An operator error or panic ends its task with an error naming the operator
// and the subtask; the Job then cancels every other task and returns that
// error. Cancelling the context passed to Job.Run stops every task.
package runtime
