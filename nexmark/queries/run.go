package queries

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/nexmark"
)

// RunOptions configure Run.
type RunOptions struct {
	// Query is the query to run. Required.
	Query Query
	// Source is the event table. Required.
	Source connector.Source[nexmark.Event]
	// Events is the number of events Source holds, for the rates of the
	// result. Default 0: unknown (no rates).
	Events int64
	// OutputDir receives the rows as CSV part files; with ExactlyOnce, the
	// exactly-once part-file sink writes them (visible at each completed
	// checkpoint). Default "": a counting blackhole.
	OutputDir   string
	ExactlyOnce bool
	// Env configures the job (parallelism, checkpoints, state backend,
	// restart strategy). JobID defaults to "nexmark-<query>".
	Env weir.Options
	// Started, when set, is called with the job once it runs (to wire
	// signals to checkpoints, for instance).
	Started func(*weir.JobClient)
}

// Result is what a run measured.
type Result struct {
	Query  string
	Events int64
	// Rows is the number of rows the blackhole received (-1 when the rows
	// went to OutputDir). Rows replayed after a restore count again.
	Rows int64
	// Wall is the time from the start of the job to its end; CPU is the
	// user and system CPU time the process used meanwhile (getrusage), over
	// all its threads.
	Wall, CPU time.Duration
	// Checkpoints summarize the job's checkpoints; Completed holds the
	// statistics of those that completed, in order.
	Checkpoints weir.CheckpointSummary
	Completed   []weir.CheckpointStats
}

// EventsPerSecond is Events over the wall time.
func (r Result) EventsPerSecond() float64 { return float64(r.Events) / r.Wall.Seconds() }

// EventsPerCore is Events over the CPU seconds: the throughput per core
// that the Nexmark suite reports.
func (r Result) EventsPerCore() float64 { return float64(r.Events) / r.CPU.Seconds() }

// CheckpointDurations returns the median and the largest duration of the
// completed checkpoints (zero when there were none).
func (r Result) CheckpointDurations() (p50, max time.Duration) {
	if len(r.Completed) == 0 {
		return 0, 0
	}
	d := make([]time.Duration, len(r.Completed))
	for i, c := range r.Completed {
		d[i] = c.Duration
	}
	slices.Sort(d)
	return d[(len(d)-1)/2], d[len(d)-1]
}

// CheckpointSizes returns the full state size (shared files included) of
// the last and of the largest completed checkpoint, in bytes.
func (r Result) CheckpointSizes() (last, max int64) {
	for _, c := range r.Completed {
		last = c.StateSize
		max = maxInt(max, c.StateSize)
	}
	return last, max
}

// CheckpointedSizes returns the mean and the largest checkpointed size
// (the bytes a checkpoint uploaded: less than its state size when
// incremental) of the completed checkpoints, in bytes.
func (r Result) CheckpointedSizes() (mean, max int64) {
	if len(r.Completed) == 0 {
		return 0, 0
	}
	var sum int64
	for _, c := range r.Completed {
		sum += c.CheckpointedSize
		max = maxInt(max, c.CheckpointedSize)
	}
	return sum / int64(len(r.Completed)), max
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// cpuTime is the CPU time the process used, user and system.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// Run runs one query as a job and measures it.
func Run(ctx context.Context, o RunOptions) (Result, error) {
	if o.Source == nil {
		return Result{}, errors.New("nexmark run: no source")
	}
	if o.Query.build == nil {
		return Result{}, errors.New("nexmark run: no query")
	}
	if o.Events < 0 {
		return Result{}, fmt.Errorf("nexmark run: Events is %d, want >= 0", o.Events)
	}
	name := "nexmark-" + o.Query.Name
	if o.Env.JobID == "" {
		o.Env.JobID = name
	}
	env := weir.NewEnvironment(o.Env)
	var rows atomic.Int64
	out := Output{Rows: &rows}
	switch {
	case o.OutputDir != "" && o.ExactlyOnce:
		out.Sink = file.ExactlyOnce(o.OutputDir, file.ExactlyOnceOptions{})
	case o.OutputDir != "":
		out.Sink = file.PartFiles(o.OutputDir, file.Options{})
	}
	o.Query.Build(Events(env, o.Source), out)

	// Garbage of an earlier run in this process is not this run's CPU.
	runtime.GC()
	cpu0, err := cpuTime()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	job, err := env.ExecuteAsync(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if o.Started != nil {
		o.Started(job)
	}
	err = job.Wait()
	wall := time.Since(start)
	cpu1, cerr := cpuTime()
	if err != nil {
		return Result{}, err
	}
	if cerr != nil {
		return Result{}, cerr
	}
	res := Result{Query: o.Query.Name, Events: o.Events, Rows: -1, Wall: wall, CPU: cpu1 - cpu0}
	if out.Sink == nil {
		res.Rows = rows.Load()
	}
	var all []weir.CheckpointStats
	res.Checkpoints, all = job.Checkpoints()
	for _, c := range all {
		if c.Status == "COMPLETED" && !c.Savepoint {
			res.Completed = append(res.Completed, c)
		}
	}
	return res, nil
}
