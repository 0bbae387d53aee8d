// Package local keeps what the REST API and /metrics read about the jobs
// of this process besides their checkpoint statistics: each job's
// identity, graph, status, failures and current attempt's tasks (Job), the
// vertices with their summed task figures, and the one embedded
// TaskManager with the machine's cores and memory (TaskManager, probing
// /proc/meminfo on Linux).
//
// The root package owns one Job per JobClient, tells it what happens
// (Deployed, Failed, Ended, RequestCancel) from the job's goroutines, and
// adapts it to rest.Job; every method is safe for concurrent use.
//
// # Usage
//
//	j := local.NewJob(id, name, jobGraph)
//	j.Deployed(attempt, tasks)      // RUNNING
//	j.Failed(err, true)             // RESTARTING, the failure listed first
//	j.Ended(runErr)                 // FINISHED, CANCELED or FAILED
//	vertices := j.Vertices(maxParallelism)
//	tm := local.TaskManager([]*local.Job{j})
package local
