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
package deploy
