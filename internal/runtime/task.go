package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/weirstream/weir/connector"
)

// SourceDriver is the untyped face of a source reader bound to its chain.
type SourceDriver interface {
	// Open creates the reader and hands it its splits.
	Open() error
	// Poll lets the reader emit records into the chain.
	Poll() (connector.Status, error)
	// Available is ready when a Poll may make progress again.
	Available() <-chan struct{}
	// Close closes the reader.
	Close() error
}

// Mail is a control message delivered through a task's mailbox and run on the
// task goroutine.
type Mail func() error

// TaskConfig describes one task.
type TaskConfig struct {
	Name        string // the vertex name, "a -> b"
	Subtask     int
	Parallelism int
	// Source drives the chain when the task is a source task; nil otherwise.
	Source SourceDriver
	// Inputs are the task's input channels; InputGate[i] is the logical input
	// (0 or 1) of the head operator that Inputs[i] feeds.
	Inputs    []InputChannel
	InputGate []int
	// Chain holds the operators in topological order, head first.
	Chain []Chained
	// Writers are the task's outgoing record writers.
	Writers []Writer
	// Cursor is shared with the chain's operators; may be nil.
	Cursor   *Cursor
	Doorbell chan struct{}
	Logger   *slog.Logger
}

// Task runs one subtask of a vertex.
type Task struct {
	cfg      TaskConfig
	mailbox  chan Mail
	log      *slog.Logger
	finished []bool
	gateOpen []int // per gate: inputs not yet ended
	opened   int   // operators opened so far, for Close
}

// NewTask creates a task; it starts nothing until Run.
func NewTask(cfg TaskConfig) *Task {
	if cfg.Cursor == nil {
		cfg.Cursor = new(Cursor)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Doorbell == nil {
		cfg.Doorbell = make(chan struct{}, 1)
	}
	return &Task{cfg: cfg, mailbox: make(chan Mail, 16), log: taskLogger(cfg.Logger, cfg.Name, cfg.Subtask)}
}

// Name returns "name (i/n)".
func (t *Task) Name() string {
	return fmt.Sprintf("%s (%d/%d)", t.cfg.Name, t.cfg.Subtask+1, t.cfg.Parallelism)
}

// Post queues m to run on the task goroutine; it waits while the mailbox is
// full and gives up when ctx ends.
func (t *Task) Post(ctx context.Context, m Mail) error {
	select {
	case t.mailbox <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs the task until its input ends, ctx is cancelled, or it fails.
func (t *Task) Run(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = t.blame(r)
		}
		if cerr := t.closeAll(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil && ctx.Err() != nil && !isOperatorError(err) {
			err = context.Cause(ctx)
		}
	}()
	if err := t.open(); err != nil {
		return err
	}
	if t.cfg.Source != nil {
		return t.runSource(ctx)
	}
	return t.runInputs(ctx)
}

func isOperatorError(err error) bool {
	var oe *OperatorError
	return errors.As(err, &oe)
}

func (t *Task) opError(idx int, err error) error {
	name := t.cfg.Name
	if idx >= 0 && idx < len(t.cfg.Chain) {
		name = t.cfg.Chain[idx].Name
	}
	return &OperatorError{Operator: name, Subtask: t.cfg.Subtask, Parallelism: t.cfg.Parallelism, Err: err}
}

// blame turns a recovered panic value into the task's error.
func (t *Task) blame(r any) error {
	if f, ok := r.(failure); ok {
		return t.opError(t.cfg.Cursor.Current, f.err)
	}
	if e, ok := r.(error); ok && errors.Is(e, errSendCancelled) {
		return context.Canceled
	}
	return t.opError(t.cfg.Cursor.Current, &PanicError{Value: r, Stack: string(debug.Stack())})
}

func (t *Task) open() error {
	if t.cfg.Source != nil {
		t.cfg.Cursor.Current = 0
		if err := t.cfg.Source.Open(); err != nil {
			return t.opError(0, err)
		}
	}
	// Open tail first, so that an operator's downstream is ready before it
	// can emit (as Flink does).
	for i := len(t.cfg.Chain) - 1; i >= 0; i-- {
		t.cfg.Cursor.Current = i
		t.opened++
		if err := t.cfg.Chain[i].Op.Open(); err != nil {
			return t.opError(i, err)
		}
	}
	return nil
}

func (t *Task) closeAll() error {
	var errs []error
	n := len(t.cfg.Chain)
	for i := n - t.opened; i < n; i++ {
		if err := t.cfg.Chain[i].Op.Close(); err != nil {
			errs = append(errs, t.opError(i, err))
		}
	}
	t.opened = 0
	if t.cfg.Source != nil {
		if err := t.cfg.Source.Close(); err != nil {
			errs = append(errs, t.opError(0, err))
		}
		t.cfg.Source = nil
	}
	return errors.Join(errs...)
}

func (t *Task) flushAll() {
	for _, w := range t.cfg.Writers {
		w.Flush()
	}
}

// drainMailbox runs every queued mail without waiting.
func (t *Task) drainMailbox() error {
	for {
		select {
		case m := <-t.mailbox:
			if err := m(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (t *Task) runSource(ctx context.Context) error {
	src := t.cfg.Source
	for {
		if err := t.drainMailbox(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		t.cfg.Cursor.Current = 0
		status, err := src.Poll()
		if err != nil {
			return t.opError(0, err)
		}
		switch status {
		case connector.MoreAvailable:
		case connector.NothingAvailable:
			t.flushAll()
			select {
			case <-src.Available():
			case m := <-t.mailbox:
				if err := m(); err != nil {
					return err
				}
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		case connector.EndOfInput:
			return t.endOfInput()
		default:
			return t.opError(0, fmt.Errorf("source reader returned unknown status %d", status))
		}
	}
}

func (t *Task) runInputs(ctx context.Context) error {
	n := len(t.cfg.Inputs)
	t.finished = make([]bool, n)
	gates := 0
	for _, g := range t.cfg.InputGate {
		gates = max(gates, g+1)
	}
	t.gateOpen = make([]int, gates)
	for _, g := range t.cfg.InputGate {
		t.gateOpen[g]++
	}
	remaining := n
	if n == 0 {
		return t.endOfInput()
	}
	start := 0
	for {
		progressed := false
		for k := range n {
			i := (start + k) % n
			if t.finished[i] {
				continue
			}
			ev, isEvent, ok := t.cfg.Inputs[i].Poll()
			if !ok {
				continue
			}
			progressed = true
			if !isEvent {
				continue
			}
			switch ev.Kind {
			case EndOfPartition:
				t.finished[i] = true
				remaining--
				g := t.cfg.InputGate[i]
				t.gateOpen[g]--
				if t.gateOpen[g] == 0 && len(t.cfg.Chain) > 0 {
					if ie, ok := t.cfg.Chain[0].Op.(InputEnder); ok {
						t.cfg.Cursor.Current = 0
						if err := ie.EndInput(g); err != nil {
							return t.opError(0, err)
						}
					}
				}
			default:
				return fmt.Errorf("task %s: unexpected %s event on input %d", t.Name(), ev.Kind, i)
			}
		}
		start++
		if remaining == 0 {
			return t.endOfInput()
		}
		if err := t.drainMailbox(); err != nil {
			return err
		}
		if !progressed {
			// Idle: send what is buffered so that downstream is not kept
			// waiting, then sleep until an input or the mailbox has work.
			t.flushAll()
			select {
			case <-t.cfg.Doorbell:
			case m := <-t.mailbox:
				if err := m(); err != nil {
					return err
				}
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}
}

// endOfInput finishes the chain in order and tells downstream tasks that this
// subtask's partitions ended.
func (t *Task) endOfInput() error {
	for i, c := range t.cfg.Chain {
		t.cfg.Cursor.Current = i
		if err := c.Op.Finish(); err != nil {
			return t.opError(i, err)
		}
	}
	for _, w := range t.cfg.Writers {
		w.Broadcast(Event{Kind: EndOfPartition})
	}
	t.log.Debug("task finished")
	return nil
}
