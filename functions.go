package weir

import (
	"fmt"
	"log/slog"

	"github.com/weirstream/weir/internal/runtime"
)

// Collector receives the records a function emits.
type Collector[T any] interface {
	// Collect emits v with the timestamp of the record being processed.
	Collect(v T)
}

// collector emits into a runtime output with the current record's
// timestamp. When the output returns, the collector names its own operator
// in the task's Cursor again: the chained operators downstream set the
// Cursor to themselves, and a panic of the user function after Collect
// returns is the user function's operator's, not theirs.
type collector[T any] struct {
	out runtime.Output[T]
	ts  *int64
	cur *runtime.Cursor
	idx int
}

// newCollector returns the collector of the operator env describes.
func newCollector[T any](out runtime.Output[T], ts *int64, env *opEnv) collector[T] {
	return collector[T]{out: out, ts: ts, cur: env.cursor, idx: env.index}
}

func (c *collector[T]) Collect(v T) {
	c.out.Emit(v, *c.ts)
	c.cur.Current = c.idx
}

// ProcessFunction processes the records of a non-keyed stream.
// Optional hooks: Open(*Context) error, Close() error.
type ProcessFunction[IN, OUT any] interface {
	ProcessElement(ctx *Context, in IN, out Collector[OUT]) error
}

// KeyedProcessFunction processes the records of a keyed stream, with keyed
// state scoped to each record's key. Optional hooks: Open(*KeyedContext[K])
// error, Close() error, OnTimer (OnTimerFunction). Keyed state is created in
// Open with Value; timers are registered with ctx.TimerService().
type KeyedProcessFunction[K comparable, IN, OUT any] interface {
	ProcessElement(ctx *KeyedContext[K], in IN, out Collector[OUT]) error
}

// CoProcessFunction processes the two inputs of connected streams. Optional
// hooks: Open(*Context) error, Close() error.
type CoProcessFunction[IN1, IN2, OUT any] interface {
	ProcessElement1(ctx *Context, in IN1, out Collector[OUT]) error
	ProcessElement2(ctx *Context, in IN2, out Collector[OUT]) error
}

// KeyedCoProcessFunction processes the two inputs of connected keyed streams,
// with keyed state shared by both inputs. Optional hooks:
// Open(*KeyedContext[K]) error, Close() error, OnTimer (OnTimerFunction).
type KeyedCoProcessFunction[K comparable, IN1, IN2, OUT any] interface {
	ProcessElement1(ctx *KeyedContext[K], in IN1, out Collector[OUT]) error
	ProcessElement2(ctx *KeyedContext[K], in IN2, out Collector[OUT]) error
}

type closer interface{ Close() error }

// Context is what a process function knows about where it runs and the
// record it processes.
type Context struct {
	env *opEnv
	ts  int64
}

// Timestamp returns the event-time timestamp of the current record, and
// false when it has none.
func (c *Context) Timestamp() (int64, bool) { return c.ts, c.ts != runtime.NoTimestamp }

// CurrentWatermark returns the task's event-time watermark (math.MinInt64
// before the first).
func (c *Context) CurrentWatermark() int64 { return c.env.cursor.Watermark }

// Subtask returns the index of the subtask, in [0, Parallelism()).
func (c *Context) Subtask() int { return c.env.subtask }

// Parallelism returns the number of subtasks of the operator.
func (c *Context) Parallelism() int { return c.env.parallelism }

// Operator returns the operator's name.
func (c *Context) Operator() string { return c.env.name }

// Logger returns a logger carrying the job, operator and subtask.
func (c *Context) Logger() *slog.Logger { return c.env.logger }

func (c *Context) context() *Context { return c }

// FunctionContext is the context that OperatorList, UnionList (and their
// WithCodec forms) and SideOutput take: the *Context or *KeyedContext a
// function's Open is given. No other type implements it (its method is
// unexported), so a call cannot be handed a context of its own making.
type FunctionContext interface{ context() *Context }

// KeyedContext is the Context of a keyed function: it also knows the current
// key and owns the keyed state.
type KeyedContext[K comparable] struct {
	Context
	keyed  *keyedEnv[K]
	timers TimerService // nil outside keyed (co-)process functions
}

// TimerService returns the service that registers timers for the current
// key; a function implementing OnTimerFunction receives them. It is
// available in keyed process and keyed co-process functions.
func (c *KeyedContext[K]) TimerService() TimerService {
	if c.timers == nil {
		runtime.Fail(fmt.Errorf("operator %q: timers are available in keyed process functions only", c.env.name))
	}
	return c.timers
}

// CurrentKey returns the key of the record being processed.
func (c *KeyedContext[K]) CurrentKey() K { return c.keyed.backend.CurrentKey() }
