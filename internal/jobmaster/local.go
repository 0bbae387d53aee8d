package jobmaster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/jobstate"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/runtime"
)

// Deployment is one attempt's tasks, built by a BuildFunc.
type Deployment struct {
	Tasks []*runtime.Task
	// Stop is closed when the attempt stops (runtime.NewJob's stop).
	Stop chan struct{}
}

// BuildFunc builds the tasks of an attempt in this process. resp is to be
// given to every task's CheckpointConfig: it turns what the tasks say into
// the attempt's Reports.
type BuildFunc func(ctx context.Context, attempt int, restore *Restored, resp runtime.Responder) (*Deployment, error)

// LocalGateway runs the tasks of a job in this process (runtime.Job): the
// TaskGateway of a job run by `weir run` or Environment.Execute. Requests
// become task mails, the tasks' runtime.Responder calls become Reports.
type LocalGateway struct {
	build BuildFunc
	log   *slog.Logger

	mu      sync.Mutex
	attempt int
	tasks   []*runtime.Task // sorted by id
	sources []*runtime.Task
	cancel  context.CancelCauseFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

var _ TaskGateway = (*LocalGateway)(nil)

// NewLocalGateway returns a gateway whose attempts build builds; logger
// may be nil.
func NewLocalGateway(build BuildFunc, logger *slog.Logger) *LocalGateway {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &LocalGateway{build: build, log: logger, attempt: -1}
}

// Deploy implements TaskGateway: it builds the attempt's tasks and runs
// them on goroutines of their own until they end or ctx ends.
func (g *LocalGateway) Deploy(ctx context.Context, req DeployRequest, l Listener) ([]TaskInfo, error) {
	// Wait for the previous attempt's goroutine: its AttemptEnded was sent.
	g.wg.Wait()
	runCtx, cancel := context.WithCancelCause(ctx)
	dep, err := g.build(runCtx, req.Attempt, req.Restore, responder{l: l, attempt: req.Attempt})
	if err != nil {
		cancel(nil)
		return nil, err
	}
	tasks := slices.SortedFunc(slices.Values(dep.Tasks), func(a, b *runtime.Task) int { return strings.Compare(a.ID(), b.ID()) })
	var sources []*runtime.Task
	infos := make([]TaskInfo, len(tasks))
	for i, t := range tasks {
		infos[i] = TaskInfo{ID: t.ID(), Source: t.IsSource()}
		if t.IsSource() {
			sources = append(sources, t)
		}
	}
	g.mu.Lock()
	g.attempt, g.tasks, g.sources, g.cancel, g.ctx = req.Attempt, tasks, sources, cancel, runCtx
	g.mu.Unlock()
	for _, t := range tasks {
		l.Report(TaskRunning{Attempt: req.Attempt, Task: t.ID()})
	}
	g.wg.Go(func() {
		defer cancel(nil)
		err := runtime.NewJob(dep.Tasks, dep.Stop).Run(runCtx)
		if err != nil {
			var oe *runtime.OperatorError
			f := TaskFailed{Attempt: req.Attempt, Error: err.Error(), Err: err, Subtask: -1}
			if errors.As(err, &oe) {
				f.Operator, f.Subtask = oe.Operator, oe.Subtask
			}
			l.Report(f)
		}
		e := AttemptEnded{Attempt: req.Attempt, Err: err,
			Cancellation: errors.Is(err, jobstate.ErrStopped) || errors.Is(err, context.Canceled)}
		if err != nil {
			e.Error = err.Error()
		}
		l.Report(e)
	})
	return infos, nil
}

// current returns the tasks of attempt, nil when it is not the one running.
func (g *LocalGateway) current(attempt int, sourcesOnly bool) ([]*runtime.Task, context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if attempt != g.attempt {
		return nil, nil
	}
	if sourcesOnly {
		return g.sources, g.ctx
	}
	return g.tasks, g.ctx
}

// TaskMetrics returns the figures of attempt's tasks, sorted by task id;
// nil when attempt is not the one deployed last. They stay readable after
// the attempt ended, until the next Deploy.
func (g *LocalGateway) TaskMetrics(attempt int) []*metrics.Task {
	g.mu.Lock()
	defer g.mu.Unlock()
	if attempt != g.attempt {
		return nil
	}
	out := make([]*metrics.Task, len(g.tasks))
	for i, t := range g.tasks {
		out[i] = t.Metrics()
	}
	return out
}

func (g *LocalGateway) post(attempt int, sourcesOnly bool, mail func(t *runtime.Task) runtime.Mail) {
	tasks, ctx := g.current(attempt, sourcesOnly)
	for _, t := range tasks {
		if err := t.Post(ctx, mail(t)); err != nil && !errors.Is(err, runtime.ErrTaskEnded) && ctx.Err() == nil {
			g.log.Warn("could not post to task", "task", t.ID(), "err", err)
		}
	}
}

// TriggerCheckpoint implements TaskGateway.
func (g *LocalGateway) TriggerCheckpoint(req TriggerRequest) {
	opts := &runtime.BarrierOptions{Kind: req.Kind, Store: req.Store, Dir: req.Dir}
	g.post(req.Attempt, true, func(t *runtime.Task) runtime.Mail {
		return t.TriggerCheckpoint(req.Checkpoint, req.Timestamp, opts)
	})
}

// NotifyComplete implements TaskGateway.
func (g *LocalGateway) NotifyComplete(n Notification) {
	g.post(n.Attempt, false, func(t *runtime.Task) runtime.Mail { return t.NotifyComplete(n.Checkpoint) })
}

// NotifyAborted implements TaskGateway.
func (g *LocalGateway) NotifyAborted(n Notification) {
	g.post(n.Attempt, false, func(t *runtime.Task) runtime.Mail { return t.NotifyAborted(n.Checkpoint) })
}

// FinishSources implements TaskGateway.
func (g *LocalGateway) FinishSources(attempt int) {
	g.post(attempt, true, func(t *runtime.Task) runtime.Mail { return t.Finish() })
}

// StopTasks implements TaskGateway.
func (g *LocalGateway) StopTasks(attempt int) {
	g.post(attempt, false, func(t *runtime.Task) runtime.Mail { return t.Stop() })
}

// Cancel implements TaskGateway.
func (g *LocalGateway) Cancel(req CancelRequest) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if req.Attempt == g.attempt && g.cancel != nil {
		g.cancel(errorOf(req.Err, req.Reason))
	}
}

// responder is the JobMaster as the tasks of one attempt see it: it turns
// their calls into Reports of the attempt.
type responder struct {
	l       Listener
	attempt int
}

// Acknowledge implements runtime.Responder.
func (r responder) Acknowledge(ack runtime.TaskAck) {
	if ack.Err != nil {
		r.l.Report(Decline{Attempt: r.attempt, Task: ack.Task, Checkpoint: ack.ID, Reason: ack.Err.Error()})
		return
	}
	r.l.Report(Acknowledge{Attempt: r.attempt, Task: ack.Task, Checkpoint: ack.ID, Operators: ack.Operators,
		Sync: ack.Sync, Async: ack.Async, Alignment: ack.Alignment, StartDelay: ack.StartDelay,
		StateSize: ack.StateSize, CheckpointedSize: ack.CheckpointedSize,
		Unaligned: ack.Unaligned, PersistedData: ack.PersistedData})
}

// SourceRecords implements runtime.Responder.
func (r responder) SourceRecords(task string, n int64) {
	r.l.Report(SourceRecords{Attempt: r.attempt, Task: task, N: n})
}

// RequestCheckpoint implements runtime.Responder.
func (r responder) RequestCheckpoint(task string) {
	r.l.Report(CheckpointMarker{Attempt: r.attempt, Task: task})
}

// SourceFinished implements runtime.Responder.
func (r responder) SourceFinished(task string) {
	r.l.Report(SourceFinished{Attempt: r.attempt, Task: task})
}
