// Package jobmaster runs a job and drives its checkpoints: it is the shell
// around two pure cores, the checkpoint coordinator (internal/checkpoint)
// and the job's lifecycle machine (internal/jobstate). It deploys the job's
// attempts, feeds the coordinator with clock ticks, acknowledgements and
// requests, and carries out its decisions — triggering checkpoints at the
// sources, writing _metadata (the commit point), notifying tasks,
// discarding subsumed checkpoints — and it restarts the job from the latest
// completed checkpoint when a task fails, as the restart strategy allows.
//
// The JobMaster reaches the tasks only through a TaskGateway and hears from
// them only through Listener.Report; every message carries the attempt
// number, and reports of another attempt than the current one are dropped
// (fencing). LocalGateway runs the tasks in this process; a cluster gateway
// carries the same messages between processes.
//
// Every time it reads and every timer it arms come from Options.Clock, and
// every storage call is bounded by Options.StorageTimeout, so that a hung
// store cannot hang the job's shutdown.
//
// Every coordinator and lifecycle call happens on the goroutine of Run; the
// handle methods (TriggerCheckpoint, TriggerSavepoint, Stats) talk to it
// through channels, and reports only queue.
package jobmaster
