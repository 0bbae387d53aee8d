package runtime

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/metrics"
)

// A task's figures (metrics.Task) are counted where they cost least: record
// writers and input channels add a batch's length once per batch, a send
// reads the clock only when the queue is full, and the task reads the
// clock only around the waits of an idle loop. Per record, only the
// operators' outputs add 1 to a plain integer of the task
// (CountingOutput); the task publishes those once per turn of its loop.

// metricsBinder is implemented by the task's writers and inputs that count
// into its metrics.Task.
type metricsBinder interface {
	bindMetrics(m *metrics.Task)
}

// bindMetrics points the counters of the task's writers and inputs at its
// metrics.
func (t *Task) bindMetrics() {
	m := t.cfg.Metrics
	for _, w := range t.cfg.Writers {
		if b, ok := w.(metricsBinder); ok {
			b.bindMetrics(m)
		}
	}
	for _, in := range t.cfg.Inputs {
		if b, ok := in.(metricsBinder); ok {
			b.bindMetrics(m)
		}
	}
}

// MetricsOf returns cfg.Metrics, creating it first when it is nil (from
// the task's id, "<vertex>-<subtask>", and its chain's names), so that the
// builder of a task can wire counters into it before NewTask.
func MetricsOf(cfg *TaskConfig) *metrics.Task {
	if cfg.Metrics == nil {
		ops := make([]string, len(cfg.Chain))
		for i, c := range cfg.Chain {
			ops[i] = c.Name
		}
		vertex, _, _ := strings.Cut(cfg.ID, "-")
		cfg.Metrics = metrics.NewTask(cfg.ID, vertex, cfg.Name, cfg.Subtask, cfg.Parallelism, ops)
	}
	return cfg.Metrics
}

// CountingOutput counts the records an operator emits on one output
// (Flink's CountingOutput) and passes them on. The count is a plain
// integer of the task goroutine (see metrics.Counter).
type CountingOutput[T any] struct {
	Out     Output[T]
	Counter *metrics.Counter
}

// Emit implements Output.
func (c *CountingOutput[T]) Emit(rec T, ts int64) {
	c.Counter.N++
	c.Out.Emit(rec, ts)
}

// EmitBatch implements BatchOutput.
func (c *CountingOutput[T]) EmitBatch(recs []T, ts []int64) {
	c.Counter.N += int64(len(recs))
	EmitBatch(c.Out, recs, ts)
}

// Metrics returns the task's figures.
func (t *Task) Metrics() *metrics.Task { return t.cfg.Metrics }

// idleFrom adds the time since start to the task's idle time.
func (t *Task) idleFrom(start time.Time) {
	t.cfg.Metrics.IdleNanos.Add(int64(time.Since(start)))
}

// endStatus is the status a task ends in when Run returns err (before it
// is replaced by the cause of ctx): a task stopped because the job was
// cancelled, or because another task failed, is CANCELED, as in Flink.
func endStatus(ctx context.Context, err error) metrics.Status {
	switch {
	case err == nil:
		return metrics.Finished
	case isOperatorError(err):
		return metrics.Failed
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return metrics.Canceled
	default:
		return metrics.Failed
	}
}
