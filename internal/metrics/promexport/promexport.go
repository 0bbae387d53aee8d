package promexport

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
)

// Job is what the exporter reads of one job.
type Job interface {
	ID() string
	Name() string
	// Checkpoints returns the checkpoint summary and history, oldest first.
	Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats)
	// Metrics are the runtime figures of the job's current attempt.
	Metrics() *metrics.Job
}

// TaskManagerJob is a Job as one TaskManager of a cluster holds it: the
// tasks of its attempt that run there. The exporter gives its tasks'
// metrics the TaskManager's id as tm_id (a local job's say "local") and
// none of the job's own (weir_jobmanager_job_*, the tasks'
// checkpointedStateSize), which are the JobManager's to export, as in
// Flink.
type TaskManagerJob interface {
	Job
	TaskManagerID() string
}

// Registry is a private Prometheus registry exporting the figures of the
// jobs a function lists.
type Registry struct {
	reg *prometheus.Registry
}

// New returns a registry reading jobs() at every scrape; now is the clock
// (nil: time.Now).
func New(jobs func() []Job) *Registry { return NewWithClock(jobs, time.Now) }

// NewWithClock is New with a clock.
func NewWithClock(jobs func() []Job, now func() time.Time) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{jobs: jobs, now: now},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: reg}
}

// Collector returns the exporter's collector alone, reading jobs() at every
// scrape with the clock now (nil: time.Now), to register beside other
// collectors in a registry of the caller's (a TaskManager's, which has the
// Go runtime's and the process's already).
func Collector(jobs func() []Job, now func() time.Time) prometheus.Collector {
	if now == nil {
		now = time.Now
	}
	return &collector{jobs: jobs, now: now}
}

// Gatherer is the registry, for tests and for mounting elsewhere.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

const (
	jobPrefix  = "weir_jobmanager_job_"
	taskPrefix = "weir_taskmanager_job_task_"
	opPrefix   = "weir_taskmanager_job_task_operator_"
)

var (
	jobLabels  = []string{"job_id", "job_name"}
	taskLabels = []string{"job_id", "job_name", "task_id", "task_name", "subtask_index", "task_attempt_num", "tm_id"}
	opLabels   = append(append([]string(nil), taskLabels...), "operator_id", "operator_name")
)

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// Every metric the exporter may produce, by name.
var (
	lastCheckpointDuration         = desc(jobPrefix+"lastCheckpointDuration", "End-to-end duration of the latest completed checkpoint, in milliseconds.", jobLabels)
	lastCheckpointSize             = desc(jobPrefix+"lastCheckpointSize", "Bytes written by the latest completed checkpoint (checkpointed size).", jobLabels)
	lastCheckpointFullSize         = desc(jobPrefix+"lastCheckpointFullSize", "Full state size of the latest completed checkpoint, in bytes.", jobLabels)
	lastCompletedCheckpointID      = desc(jobPrefix+"lastCompletedCheckpointId", "Id of the latest completed checkpoint.", jobLabels)
	lastCheckpointRestoreTimestamp = desc(jobPrefix+"lastCheckpointRestoreTimestamp", "When the job last restored from a checkpoint or savepoint, in milliseconds since the epoch; -1 when never.", jobLabels)
	completedCheckpoints           = desc(jobPrefix+"numberOfCompletedCheckpoints", "Completed checkpoints and savepoints.", jobLabels)
	failedCheckpoints              = desc(jobPrefix+"numberOfFailedCheckpoints", "Failed checkpoints and savepoints.", jobLabels)
	inProgressCheckpoints          = desc(jobPrefix+"numberOfInProgressCheckpoints", "Checkpoints in progress.", jobLabels)
	totalCheckpoints               = desc(jobPrefix+"totalNumberOfCheckpoints", "Checkpoints triggered: completed, failed and in progress.", jobLabels)
	numRestarts                    = desc(jobPrefix+"numRestarts", "Restarts after failures.", jobLabels)
	uptime                         = desc(jobPrefix+"uptime", "Time since the current attempt started, in milliseconds; 0 when not running.", jobLabels)

	taskRecordsIn       = desc(taskPrefix+"numRecordsIn", "Records the subtask received from its inputs.", taskLabels)
	taskRecordsOut      = desc(taskPrefix+"numRecordsOut", "Records the subtask sent to its outputs.", taskLabels)
	taskBytesIn         = desc(taskPrefix+"numBytesIn", "Payload bytes the subtask's network channels received from other TaskManagers (channels in process count none).", taskLabels)
	taskBytesOut        = desc(taskPrefix+"numBytesOut", "Payload bytes the subtask's network channels sent to other TaskManagers (channels in process count none).", taskLabels)
	taskBackPressured   = desc(taskPrefix+"backPressuredTimeMsPerSecond", "Milliseconds per second recently spent waiting for room downstream.", taskLabels)
	taskIdle            = desc(taskPrefix+"idleTimeMsPerSecond", "Milliseconds per second recently spent waiting for input.", taskLabels)
	taskBusy            = desc(taskPrefix+"busyTimeMsPerSecond", "Milliseconds per second recently spent working.", taskLabels)
	taskAccBackPressure = desc(taskPrefix+"accumulatedBackPressuredTimeMs", "Milliseconds spent backpressured since the subtask started.", taskLabels)
	taskAccIdle         = desc(taskPrefix+"accumulatedIdleTimeMs", "Milliseconds spent idle since the subtask started.", taskLabels)
	taskAccBusy         = desc(taskPrefix+"accumulatedBusyTimeMs", "Milliseconds spent busy since the subtask started.", taskLabels)
	taskInWatermark     = desc(taskPrefix+"currentInputWatermark", "The subtask's input watermark, in milliseconds since the epoch.", taskLabels)
	taskOutWatermark    = desc(taskPrefix+"currentOutputWatermark", "The last watermark the subtask sent, in milliseconds since the epoch.", taskLabels)
	taskWatermarkLag    = desc(taskPrefix+"watermarkLag", "How far the input watermark is behind the wall clock, in milliseconds.", taskLabels)
	taskStateSize       = desc(taskPrefix+"checkpointedStateSize", "Bytes of the subtask's state in the latest completed checkpoint.", taskLabels)

	opRecordsIn    = desc(opPrefix+"numRecordsIn", "Records into the operator (from the task's inputs for the chain's head, from the operator before it otherwise; 0 for sources).", opLabels)
	opRecordsOut   = desc(opPrefix+"numRecordsOut", "Records the operator emitted, on all its outputs (0 for sinks).", opLabels)
	opInWatermark  = desc(opPrefix+"currentInputWatermark", "The head operator's input watermark, in milliseconds since the epoch.", opLabels)
	opOutWatermark = desc(opPrefix+"currentOutputWatermark", "The tail operator's output watermark, in milliseconds since the epoch.", opLabels)
)

var allDescs = []*prometheus.Desc{
	lastCheckpointDuration, lastCheckpointSize, lastCheckpointFullSize, lastCompletedCheckpointID,
	lastCheckpointRestoreTimestamp, completedCheckpoints, failedCheckpoints, inProgressCheckpoints,
	totalCheckpoints, numRestarts, uptime,
	taskRecordsIn, taskRecordsOut, taskBytesIn, taskBytesOut, taskBackPressured, taskIdle, taskBusy, taskAccBackPressure,
	taskAccIdle, taskAccBusy, taskInWatermark, taskOutWatermark, taskWatermarkLag, taskStateSize,
	opRecordsIn, opRecordsOut, opInWatermark, opOutWatermark,
}

// collector reads the jobs at each scrape.
type collector struct {
	jobs func() []Job
	now  func() time.Time
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, j := range c.jobs() {
		collectJob(ch, j, now)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func collectJob(ch chan<- prometheus.Metric, j Job, now time.Time) {
	if tj, ok := j.(TaskManagerJob); ok {
		attempt, tasks := j.Metrics().Tasks()
		collectTasks(ch, j, tj.TaskManagerID(), attempt, tasks, nil, now)
		return
	}
	jl := []string{j.ID(), j.Name()}
	sum, history := j.Checkpoints()
	var last *jobmaster.CheckpointStats
	for i := range history {
		if h := &history[i]; h.Status == jobmaster.Completed && (last == nil || h.ID > last.ID) {
			last = h
		}
	}
	if last != nil {
		gauge(ch, lastCheckpointDuration, float64(last.Duration.Milliseconds()), jl...)
		gauge(ch, lastCheckpointSize, float64(last.CheckpointedSize), jl...)
		gauge(ch, lastCheckpointFullSize, float64(last.StateSize), jl...)
		gauge(ch, lastCompletedCheckpointID, float64(last.ID), jl...)
	} else {
		gauge(ch, lastCheckpointDuration, -1, jl...)
		gauge(ch, lastCheckpointSize, -1, jl...)
		gauge(ch, lastCheckpointFullSize, -1, jl...)
		gauge(ch, lastCompletedCheckpointID, -1, jl...)
	}
	restored := -1.0
	if !sum.RestoreTime.IsZero() {
		restored = float64(sum.RestoreTime.UnixMilli())
	}
	gauge(ch, lastCheckpointRestoreTimestamp, restored, jl...)
	gauge(ch, completedCheckpoints, float64(sum.Completed), jl...)
	gauge(ch, failedCheckpoints, float64(sum.Failed), jl...)
	gauge(ch, inProgressCheckpoints, float64(sum.InProgress), jl...)
	gauge(ch, totalCheckpoints, float64(sum.Completed+sum.Failed+sum.InProgress), jl...)
	gauge(ch, numRestarts, float64(sum.Restarts), jl...)

	stateSize := map[string]int64{}
	if last != nil {
		for _, st := range last.Subtasks {
			stateSize[st.Task] = st.StateSize
		}
	}
	attempt, tasks := j.Metrics().Tasks()
	up := collectTasks(ch, j, "local", attempt, tasks, stateSize, now)
	gauge(ch, uptime, float64(up.Milliseconds()), jl...)
}

// collectTasks sends the metrics of the tasks of j's attempt, on the
// TaskManager tm, and returns the time since the earliest start of those
// running. stateSize is each task's state in the latest completed
// checkpoint (nil: unknown here).
func collectTasks(ch chan<- prometheus.Metric, j Job, tm string, attempt int, tasks []*metrics.Task, stateSize map[string]int64, now time.Time) time.Duration {
	var up time.Duration
	for _, t := range tasks {
		s := t.Snapshot(now)
		if s.Status == metrics.Running && !s.Start.IsZero() {
			up = max(up, now.Sub(s.Start))
		}
		tl := []string{j.ID(), j.Name(), t.Vertex, t.Name, strconv.Itoa(t.Subtask), strconv.Itoa(attempt), tm}
		counter(ch, taskRecordsIn, float64(s.RecordsIn), tl...)
		counter(ch, taskRecordsOut, float64(s.RecordsOut), tl...)
		counter(ch, taskBytesIn, float64(s.BytesIn), tl...)
		counter(ch, taskBytesOut, float64(s.BytesOut), tl...)
		gauge(ch, taskBackPressured, 1000*s.BackPressuredRatio, tl...)
		gauge(ch, taskIdle, 1000*s.IdleRatio, tl...)
		gauge(ch, taskBusy, 1000*s.BusyRatio, tl...)
		counter(ch, taskAccBackPressure, float64(s.BackPressured.Milliseconds()), tl...)
		counter(ch, taskAccIdle, float64(s.Idle.Milliseconds()), tl...)
		counter(ch, taskAccBusy, float64(s.Busy.Milliseconds()), tl...)
		if s.InputWatermark != metrics.MinWatermark {
			gauge(ch, taskInWatermark, watermark(s.InputWatermark), tl...)
			if s.InputWatermark != math.MaxInt64 { // not at the end of input
				gauge(ch, taskWatermarkLag, float64(now.UnixMilli()-s.InputWatermark), tl...)
			}
		}
		if s.OutputWatermark != metrics.MinWatermark {
			gauge(ch, taskOutWatermark, watermark(s.OutputWatermark), tl...)
		}
		if size, ok := stateSize[t.ID]; ok {
			gauge(ch, taskStateSize, float64(size), tl...)
		}
		if len(t.Operators) == 0 {
			continue
		}
		ol := func(k int) []string {
			return append(tl[:len(tl):len(tl)], t.Vertex+"."+strconv.Itoa(k), t.Operators[k])
		}
		for k := range t.Operators {
			if k < len(s.OperatorRecordsIn) {
				counter(ch, opRecordsIn, float64(s.OperatorRecordsIn[k]), ol(k)...)
				counter(ch, opRecordsOut, float64(s.OperatorRecordsOut[k]), ol(k)...)
			}
		}
		head, tail := ol(0), ol(len(t.Operators)-1)
		if s.InputWatermark != metrics.MinWatermark {
			gauge(ch, opInWatermark, watermark(s.InputWatermark), head...)
		}
		if s.OutputWatermark != metrics.MinWatermark {
			gauge(ch, opOutWatermark, watermark(s.OutputWatermark), tail...)
		}
	}
	return up
}

// watermark is a watermark as a float; the maximum watermark (end of
// input) stays the largest int64 rather than rounding beyond it.
func watermark(wm int64) float64 {
	if wm == math.MaxInt64 {
		return math.MaxInt64
	}
	return float64(wm)
}
