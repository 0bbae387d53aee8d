// Package cluster is weir's cluster mode: a JobManager that registers
// TaskManagers and their task slots and runs the JobMaster of every job
// submitted to it, and the TaskManager's agent that registers with it and
// runs the tasks the JobManager deploys, over the gRPC control plane of
// proto/weir/cluster/v1 (generated code in pb).
//
// The pure cores are Liveness (heartbeat bookkeeping fed with events and
// their time), SlotPool (slots offered and allocated), Reactive (reactive
// mode's decisions), Figures (a job's subtask figures as the TaskManagers
// report them) and Backoff; the wire
// conversions (wire.go: reports and commands both ways, the fencing rule)
// are pure functions. The shells are JobManager (Start serves the control
// plane and watches heartbeats; Close cancels the jobs, stops and waits for
// every goroutine) and TaskManager (Run registers, answers heartbeats,
// keeps the task stream, reconnects with backoff, and returns once its
// goroutines and tasks ended).
//
// Jobs: Client.Submit names a job of the JobManager's registry
// (JobManagerOptions.Jobs) with its flags; the JobManager builds it, runs
// jobmaster.New(job.Master(), deploy.NewGateway(plan, scheduler, log)),
// and its scheduler places each attempt with deploy.Spread on the slots of
// the TaskManagers whose task stream is attached, waiting up to
// SlotRequestTimeout. A remoteWorker per TaskManager sends the attempt's
// commands down its task stream and passes the reports up; when the
// TaskManager is lost it reports the attempt failed and ended, and the
// JobMaster restarts the job from its latest checkpoint on the remaining
// slots. The TaskManager's executor builds the job from its own registry,
// refuses another graph fingerprint, checks that it shares the checkpoint
// storage, and runs its part with deploy.NewLocalWorker.
//
// Figures: the executor sends its subtasks' record counts and times,
// watermarks and network bytes up the task stream every
// TaskManagerOptions.MetricsInterval and once more before each
// AttemptEnded; the JobManager keeps them in the job's Figures (the latest
// attempt placed) for the REST vertices, subtasks and watermarks. The same
// tasks' figures are the TaskManager's own to export
// (TaskManager.Jobs, for its /metrics).
//
// Reactive mode (JobManagerOptions.SchedulerMode SchedulerReactive,
// Flink's scheduler-mode: reactive): the Reactive core chooses each
// attempt's parallelism from the slots the job may use, the job is built
// again at it (deploy.Job.Rescaled) here and, from the parallelism the
// deployment carries, on every TaskManager; a watcher cancels a running
// attempt when more slots allow a scale up, and the job's restart strategy
// is wrapped so that such an attempt restarts at once from the latest
// checkpoint without counting as a failure (it still counts in
// numRestarts, as in Flink). A lost TaskManager fails the attempt as in the
// default mode, and the next is placed at what the remaining slots allow.
//
// Fencing: every command and report carries the JobManager's session and
// the attempt; stale ones are dropped on both sides.
//
// Security: with a cluster token every call must carry it; a JobManager or
// TaskManager on an address other than a loopback one needs a token;
// mutual TLS with TLSFiles. Nothing on the control plane accepts code.
package cluster
