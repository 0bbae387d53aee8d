package deploy

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
)

// Plan is what a scheduler needs to know of a job graph. Plain data
// (encoding/json).
type Plan struct {
	// Job is the name the job was built under.
	Job string
	// Vertices are the job graph's vertices (chains); Vertices[i].ID == i.
	Vertices []Vertex
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	// Fingerprint identifies the graph: every operator's uid, name and
	// record types, each edge's partitioner and codec, the chaining and
	// the parallelism of every vertex. Two builds of the same job with the
	// same flags give the same fingerprint; a worker refuses to deploy a
	// part of a plan whose fingerprint differs from its own build's.
	Fingerprint string
	// Prepare, when set, runs in the process of the JobManager once per
	// attempt, before any worker deploys its part (NewGateway's Deploy):
	// the sinks' commit of a restored checkpoint's transactions and the
	// clean-up of what a failed attempt left, which must happen before any
	// writer of the attempt exists. It is not data: it does not travel.
	Prepare func(ctx context.Context, restore *jobmaster.Restored) error `json:"-"`
}

// Matches returns nil when other is the same graph as p (the same
// fingerprint), else an error naming both: a worker refuses to deploy a
// part of a plan its own build does not match.
func (p Plan) Matches(other Plan) error {
	if p.Fingerprint == other.Fingerprint {
		return nil
	}
	return fmt.Errorf("deploy: job %q: this build's graph has fingerprint %s, the plan deployed %s: every process must run the same build of the job with the same flags", p.Job, p.Fingerprint, other.Fingerprint)
}

// Vertex is one vertex (chain of operators) of a Plan.
type Vertex struct {
	ID          int
	Name        string
	Parallelism int
	// MaxParallelism is the most subtasks the vertex may run when the job
	// is rescaled (Job.Rescaled, reactive mode): the parallelism the
	// program set on its operators, when it set one, else the job's
	// MaxParallelism. 0 means the job's MaxParallelism.
	MaxParallelism int
	// Source: the vertex's head is a source.
	Source bool
}

// Placement says where each subtask of one attempt runs. Plain data.
type Placement struct {
	// Workers maps each worker's id to the address its data plane
	// (network.Node) listens on, host:port.
	Workers map[string]string
	// Subtasks[v][s] is the id of the worker that runs subtask s of vertex v.
	Subtasks [][]string
	// Run names this submission of the job; empty in one process. The
	// network channels of its attempts carry it, so that a later
	// submission under the same job id never meets a channel that an
	// earlier one left registered on a worker (a finished channel stays
	// registered under its name).
	Run string `json:",omitempty"`
}

// Worker returns the worker that runs subtask s of vertex v, "" when the
// placement does not place it.
func (p Placement) Worker(v, s int) string {
	if v < 0 || v >= len(p.Subtasks) || s < 0 || s >= len(p.Subtasks[v]) {
		return ""
	}
	return p.Subtasks[v][s]
}

// Check reports whether p places every subtask of plan on a worker it
// names, and nothing else.
func (p Placement) Check(plan Plan) error {
	if len(p.Subtasks) != len(plan.Vertices) {
		return fmt.Errorf("deploy: the placement has %d vertices, the plan of job %q %d", len(p.Subtasks), plan.Job, len(plan.Vertices))
	}
	for _, v := range plan.Vertices {
		if len(p.Subtasks[v.ID]) != v.Parallelism {
			return fmt.Errorf("deploy: the placement has %d subtasks of vertex %d (%s), the plan %d", len(p.Subtasks[v.ID]), v.ID, v.Name, v.Parallelism)
		}
		for s, w := range p.Subtasks[v.ID] {
			if _, ok := p.Workers[w]; !ok {
				return fmt.Errorf("deploy: subtask %d of vertex %d (%s) is placed on worker %q, which the placement does not list", s, v.ID, v.Name, w)
			}
		}
	}
	return nil
}

// Job is a job built in this process that can run any part of itself.
type Job interface {
	// Plan is the job's graph as a scheduler sees it.
	Plan() Plan
	// Master returns the options of the job's JobMaster: checkpoint storage
	// and checkpointing, restart strategy, restore point. The JobManager
	// runs it; the tasks run where the Placement says.
	Master() (jobmaster.Options, error)
	// Build returns the BuildFunc of the subtasks p places on worker self.
	// An edge whose both ends run on self stays in process; the others
	// cross through node, the data plane of self (listening on
	// p.Workers[self]), to and from the other workers' nodes.
	Build(self string, p Placement, node *network.Node) jobmaster.BuildFunc
	// Rescaled returns the job built again at parallelism n (reactive
	// mode): n is its default parallelism, and each vertex runs
	// min(n, its MaxParallelism) subtasks. Like the first build it has no
	// side effect, and the same n gives the same graph fingerprint in
	// every process. The job returned supersedes the receiver in this
	// process: build parts (Build, Plan's Prepare) of the latest only.
	// An n outside 1..MaxParallelism is an error.
	Rescaled(n int) (Job, error)
}

// Preparer is a Job with one-time side effects before its first attempt,
// which building it must not have since every process of a cluster builds
// it (clearing an earlier result from an output directory, checking that
// a second run does not own its checkpoint directory). The JobManager calls
// Prepare once per submission, once it accepted it (no job of the same id
// runs: Prepare may remove what that job wrote) and before the first
// attempt, and fails the submission with its error; a restart never calls
// it again, nor does a TaskManager.
type Preparer interface {
	Job
	Prepare(ctx context.Context) error
}

// Registry builds jobs by name from their flags. Every process of a
// cluster holds the same registry (the same binary, or a user's program
// calling the same main), so a job is submitted by name and code never
// travels.
type Registry interface {
	// Job builds job name from args, its flags without the name. An
	// unknown name is an error listing the known ones; bad flags are an
	// error naming the flag.
	Job(name string, args []string) (Job, error)
	// Names lists the jobs the registry can build, sorted.
	Names() []string
}

// Worker is one process that runs tasks of a job, seen from the
// JobManager: a TaskManager over gRPC, or a LocalWorker in this process.
// The methods are those of jobmaster.TaskGateway, for the subtasks the
// attempt's Placement puts on this worker; the same rules hold (requests
// for another attempt are ignored, only Deploy may block).
type Worker interface {
	// ID is the worker's id, as Placement uses it.
	ID() string
	// Deploy starts the subtasks p places on this worker for req's attempt.
	// They report to l, and l gets the worker's AttemptEnded once they all
	// ended (or the worker was lost: then a TaskFailed and an AttemptEnded
	// on its behalf).
	Deploy(ctx context.Context, req jobmaster.DeployRequest, plan Plan, p Placement, l jobmaster.Listener) ([]jobmaster.TaskInfo, error)
	TriggerCheckpoint(req jobmaster.TriggerRequest)
	NotifyComplete(n jobmaster.Notification)
	NotifyAborted(n jobmaster.Notification)
	FinishSources(attempt int)
	StopTasks(attempt int)
	Cancel(req jobmaster.CancelRequest)
}

// MetricsWorker is a Worker whose tasks run in this process
// (NewLocalWorker): it hands out their figures, which a TaskManager sends
// to the JobManager.
type MetricsWorker interface {
	Worker
	// TaskMetrics returns the figures of attempt's tasks on this worker,
	// sorted by task id; nil when attempt is not the one deployed last.
	// They stay readable after the attempt ended, until the next one is
	// deployed. Safe to call from any goroutine.
	TaskMetrics(attempt int) []*metrics.Task
}

// Scheduler places an attempt of a job: which workers take part and which
// runs each subtask. It may wait for slots (bounded by ctx and its own
// timeout, failing with a message such as "waiting for 4 slots, 2
// registered").
type Scheduler interface {
	Place(ctx context.Context, plan Plan, attempt int) (Placement, []Worker, error)
}

// PlanningScheduler is a Scheduler that also chooses the plan of each
// attempt: in reactive mode, the job built again (Job.Rescaled) at the
// parallelism the free slots allow. NewGateway's Deploy calls PlaceAttempt
// instead of Place and deploys the attempt with the plan it returns: the
// placement is checked against it, its Prepare runs, the workers get it.
type PlanningScheduler interface {
	Scheduler
	// PlaceAttempt returns the plan of req's attempt and its placement.
	// It may wait for slots, as Place.
	PlaceAttempt(ctx context.Context, req jobmaster.DeployRequest) (Plan, Placement, []Worker, error)
}
