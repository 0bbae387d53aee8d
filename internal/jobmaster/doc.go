// Package jobmaster runs a job in this process and drives its checkpoints:
// it is the shell around the pure checkpoint coordinator
// (internal/checkpoint). It deploys the job's tasks, feeds the coordinator
// with clock ticks, acknowledgements and requests, and carries out its
// decisions — posting trigger and notification mails to tasks, writing
// _metadata (the commit point), discarding subsumed checkpoints — and it
// restarts the job from the latest completed checkpoint when a task fails,
// as the restart strategy allows.
//
// Every coordinator call happens on the goroutine of Run; the handle methods
// (TriggerCheckpoint, TriggerSavepoint, Stats) talk to it through channels,
// and tasks report through the Responder methods, which only queue.
package jobmaster
