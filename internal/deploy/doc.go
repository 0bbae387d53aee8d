// Package deploy is the contract between a job's graph and the processes
// that run it: the Plan a scheduler places, the Placement that says which
// worker (TaskManager) runs each subtask of an attempt, a Job that can build
// any part of itself in the process it is in, a Worker that runs the part of
// an attempt placed on it, and the Registry that builds jobs by name from
// their flags in every process of a cluster (code never travels).
//
// The JobManager's JobMaster reaches a cluster's tasks through the
// jobmaster.TaskGateway that NewGateway returns: it places each attempt
// with a Scheduler, deploys each worker's part, fans the checkpoint calls
// out to every worker and merges what they report into one attempt.
// A worker in this process is a LocalWorker over a Job and a network.Node;
// a TaskManager over gRPC is internal/cluster's remote worker, whose
// TaskManager side drives a LocalWorker too.
//
// A Job builds itself again at another parallelism (Rescaled) for
// reactive mode, whose scheduler is a PlanningScheduler: it chooses each
// attempt's plan as well as its placement.
//
// Spread is the pure placement: Flink's slot sharing (subtask s of every
// vertex in slot s, so a job needs as many slots as its highest
// parallelism), slots dealt round-robin over the workers sorted by id.
//
// Once per attempt, before any worker deploys, the gateway runs the plan's
// Prepare in the JobManager's process: the sinks' commit of a restored
// checkpoint's transactions and the clean-up of what a failed attempt
// left, which must happen before any writer of the attempt exists on any
// worker. The root package's Environment.Deployable builds the Job of a
// program; its Build refuses a placement on more than one worker with
// memory:// checkpoint storage.
package deploy
