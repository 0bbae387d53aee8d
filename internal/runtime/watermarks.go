package runtime

import (
	"github.com/weirstream/weir/internal/watermark"
)

// WatermarkHandler is implemented by operators that act on event-time
// progress (event-time timers, windows). ProcessWatermark runs on the task
// goroutine when the task's watermark advances, before the watermark goes
// downstream; records it emits precede the watermark.
type WatermarkHandler interface {
	ProcessWatermark(wm int64) error
}

// WatermarkOutput receives the event-time progress a source (or a
// timestamp-assigning operator) produces.
type WatermarkOutput interface {
	// EmitWatermarkOutput carries out what a watermark generator decided:
	// status changes and advances, in the order of watermark.Output.
	EmitWatermarkOutput(out watermark.Output) error
}

// WatermarkSource is implemented by source drivers that generate
// watermarks.
type WatermarkSource interface {
	// BindWatermarks gives the driver the task's watermark output and its
	// processing-time service (for periodic emission), before Open.
	BindWatermarks(out WatermarkOutput, timers *ProcessingTimers)
	// EndOfInput emits the maximum watermark: all input was read.
	EndOfInput() error
}

// WatermarkInterceptor is implemented by operators that generate their own
// watermarks from the records they see (timestamp assigners): watermarks
// from upstream stop at them, except the final maximum watermark.
type WatermarkInterceptor interface {
	InterceptsWatermarks()
}

// WatermarkEmitter is implemented by chained operators that generate
// watermarks; the task binds them before Open to an output that reaches the
// operators after them and the task's writers.
type WatermarkEmitter interface {
	BindWatermarks(out WatermarkOutput, timers *ProcessingTimers)
}

// EmitWatermarkOutput implements WatermarkOutput for the whole chain.
func (t *Task) EmitWatermarkOutput(out watermark.Output) error {
	return t.emitWatermarkFrom(0, out)
}

// chainWatermarks is the WatermarkOutput of the operators from start on.
type chainWatermarks struct {
	t     *Task
	start int
}

func (c chainWatermarks) EmitWatermarkOutput(out watermark.Output) error {
	return c.t.emitWatermarkFrom(c.start, out)
}

func (t *Task) emitWatermarkFrom(start int, out watermark.Output) error {
	if out.BecameActive {
		t.broadcast(Event{Kind: WatermarkStatus, ID: 0})
	}
	if out.Advanced {
		if start == 0 {
			t.cfg.Metrics.InputWatermark.Store(out.Watermark)
		}
		if err := t.advanceWatermark(start, out.Watermark); err != nil {
			return err
		}
	}
	if out.BecameIdle {
		t.broadcast(Event{Kind: WatermarkStatus, ID: 1})
	}
	return nil
}

// advanceWatermark runs wm through the chain from operator start on (every
// ProcessWatermark in order) and then downstream; an interceptor stops it
// unless it is the maximum watermark.
func (t *Task) advanceWatermark(start int, wm int64) error {
	for i := start; i < len(t.cfg.Chain); i++ {
		op := t.cfg.Chain[i].Op
		if _, ok := op.(WatermarkInterceptor); ok && wm != watermark.MaxWatermark {
			return nil
		}
		if h, ok := op.(WatermarkHandler); ok {
			t.cfg.Cursor.Current = i
			t.cfg.Cursor.Watermark = wm
			if err := h.ProcessWatermark(wm); err != nil {
				return t.opError(i, err)
			}
		}
	}
	t.cfg.Cursor.Watermark = wm
	t.cfg.Metrics.OutputWatermark.Store(wm)
	t.broadcast(Event{Kind: Watermark, Timestamp: wm})
	return nil
}

func (t *Task) broadcast(ev Event) {
	for _, w := range t.cfg.Writers {
		w.Broadcast(ev)
	}
}

// Watermark returns the task's current watermark (watermark.MinWatermark
// before the first).
func (t *Task) Watermark() int64 { return t.cfg.Cursor.Watermark }
