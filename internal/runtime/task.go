package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/watermark"
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

// RecordCounter is implemented by source drivers that count the records
// they emit (for checkpoints every N records).
type RecordCounter interface {
	// TakeRecordCount returns the records emitted since the last call.
	TakeRecordCount() int64
}

// TaskConfig describes one task.
type TaskConfig struct {
	// ID identifies the task to the job master: "<vertex>-<subtask>".
	ID          string
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
	// Checkpointing, when set, makes the task take part in checkpoints.
	Checkpointing *CheckpointConfig
	// Timers is the task's processing-time service, shared with the
	// chain's operators; nil gives the task one of its own.
	Timers *ProcessingTimers
	// CountRecords makes a source task report its records to the
	// Responder (for checkpoints every N records).
	CountRecords bool
	// Metrics receives the task's figures; nil gives the task metrics of
	// its own (see Task.Metrics).
	Metrics *metrics.Task
	// BufferTimeout is how long a record may wait in a partly filled
	// batch of the task's writers while the task is busy (flusher.go).
	// 0: no timed flush (batches go when full, when the task is idle, or
	// before an event).
	BufferTimeout time.Duration
}

// Task runs one subtask of a vertex.
type Task struct {
	cfg      TaskConfig
	mailbox  chan Mail
	log      *slog.Logger
	finished []bool
	gateOpen []int // per gate: inputs not yet ended
	opened   int   // operators opened so far, for Close
	done     chan struct{}
	async    *asyncSnapshots
	aligner  *checkpoint.Aligner
	// finishRequested is set by the Finish mail.
	finishRequested bool
	// drained is set once a source task sent the maximum watermark (by
	// the Drain mail or at the end of its input): it polls no more.
	// inputEnded is set when its reader reached the end of its input.
	drained, inputEnded bool
	// barriers remembers the first barrier of each alignment in progress.
	barriers map[int64]Event
	// pending is the unaligned snapshot whose input state is being
	// recorded, nil when none.
	pending *pendingChannels
	// merger combines the watermarks of the input channels.
	merger *watermark.Merger
	// timedWriters are the writers with an aligned barrier they may
	// still convert at its timeout (channelstate.go).
	timedWriters []TimedWriter
	// order is roundOrder's scratch.
	order []int
	// mailBell is rung after each mail is posted: a source task waiting
	// for room in its outputs wakes up for it.
	mailBell chan struct{}
	// flushTicks counts the buffer timeout's ticks; flushers are the
	// writers that watch them (flusher.go).
	flushTicks atomic.Uint64
	flushers   []timedFlusher
}

// NewTask creates a task; it starts nothing until Run.
func NewTask(cfg TaskConfig) *Task {
	if cfg.Cursor == nil {
		cfg.Cursor = new(Cursor)
	}
	cfg.Cursor.Watermark = watermark.MinWatermark
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Doorbell == nil {
		cfg.Doorbell = make(chan struct{}, 1)
	}
	if cfg.Timers == nil {
		cfg.Timers = NewProcessingTimers(nil)
	}
	MetricsOf(&cfg)
	t := &Task{cfg: cfg, mailbox: make(chan Mail, 64), done: make(chan struct{}), mailBell: make(chan struct{}, 1),
		log: taskLogger(cfg.Logger, cfg.Name, cfg.Subtask)}
	if ws, ok := cfg.Source.(WatermarkSource); ok {
		ws.BindWatermarks(t, cfg.Timers)
	}
	for i, c := range cfg.Chain {
		if we, ok := c.Op.(WatermarkEmitter); ok {
			we.BindWatermarks(chainWatermarks{t: t, start: i + 1}, cfg.Timers)
		}
	}
	t.bindMetrics()
	return t
}

// ID returns the task's id.
func (t *Task) ID() string { return t.cfg.ID }

// IsSource reports whether the task runs a source.
func (t *Task) IsSource() bool { return t.cfg.Source != nil }

// Done is closed when Run has returned.
func (t *Task) Done() <-chan struct{} { return t.done }

// ErrTaskEnded is returned by Post when the task is no longer running.
var ErrTaskEnded = errors.New("task ended")

// Name returns "name (i/n)".
func (t *Task) Name() string {
	return fmt.Sprintf("%s (%d/%d)", t.cfg.Name, t.cfg.Subtask+1, t.cfg.Parallelism)
}

// Post queues m to run on the task goroutine; it waits while the mailbox is
// full and gives up when ctx ends.
func (t *Task) Post(ctx context.Context, m Mail) error {
	select {
	case t.mailbox <- m:
		t.ringMail()
		return nil
	case <-t.done:
		return ErrTaskEnded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs the task until its input ends, ctx is cancelled, or it fails.
func (t *Task) Run(ctx context.Context) (err error) {
	t.cfg.Metrics.Start(time.Now())
	defer func() {
		if r := recover(); r != nil {
			err = t.blame(r)
		}
		if errors.Is(err, errStop) {
			err = nil
		}
		t.cfg.Metrics.Publish()
		t.cfg.Metrics.SetStatus(endStatus(ctx, err), time.Now())
		close(t.done)
		t.cfg.Timers.stop()
		t.stopAsync()
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
	t.cfg.Metrics.SetStatus(metrics.Running, time.Now())
	t.startFlusher()
	// Restored output channel state goes out before anything new.
	for _, w := range t.cfg.Writers {
		if cw, ok := w.(ChannelStateWriter); ok {
			cw.ReplayRecovered()
		}
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

func (t *Task) ringMail() {
	select {
	case t.mailBell <- struct{}{}:
	default:
	}
}

// outputsPending waits until the source task's writers sent what their
// queues had no room for (they never wait in a send: SetDeferBlocking),
// and reports true when mail came first. So a backpressured source polls
// its reader only when its outputs have room (Flink's output
// availability), and a checkpoint's trigger never waits behind a send.
func (t *Task) outputsPending() bool {
	for _, w := range t.cfg.Writers {
		if pw, ok := w.(PendingWriter); ok && pw.Pending() {
			if pw.FlushPending(t.mailBell) {
				return true
			}
		}
	}
	return false
}

func (t *Task) runSource(ctx context.Context) error {
	src := t.cfg.Source
	for _, w := range t.cfg.Writers {
		if pw, ok := w.(PendingWriter); ok {
			pw.SetDeferBlocking(true)
		}
	}
	for {
		if err := t.drainMailbox(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if t.outputsPending() {
			continue // mail first
		}
		if t.drained {
			if err := t.waitDrained(ctx); err != nil {
				return err
			}
			continue
		}
		t.cfg.Cursor.Current = 0
		status, err := src.Poll()
		if err != nil {
			return t.opError(0, err)
		}
		t.flushIfTicked()
		t.cfg.Metrics.Publish()
		if t.cfg.CountRecords {
			if rc, ok := src.(RecordCounter); ok {
				if n := rc.TakeRecordCount(); n > 0 {
					t.cfg.Checkpointing.Responder.SourceRecords(t.cfg.ID, n)
				}
			}
		}
		if err := t.cfg.Timers.fireDue(); err != nil {
			return err
		}
		t.convertDue()
		switch status {
		case connector.MoreAvailable:
		case connector.NothingAvailable:
			t.flushAll()
			idle := time.Now()
			select {
			case <-src.Available():
				t.idleFrom(idle)
			case <-t.timedDue():
				t.idleFrom(idle)
				t.convertDue()
			case m := <-t.mailbox:
				t.idleFrom(idle)
				if err := m(); err != nil {
					return err
				}
			case <-t.cfg.Timers.wait():
				t.idleFrom(idle)
				if err := t.cfg.Timers.fireDue(); err != nil {
					return err
				}
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		case connector.EndOfInput:
			t.drained, t.inputEnded = true, true
			if ws, ok := src.(WatermarkSource); ok {
				t.cfg.Cursor.Current = 0
				if err := ws.EndOfInput(); err != nil {
					return err
				}
			}
			if err := t.awaitFinalCheckpoint(ctx); err != nil {
				return err
			}
			return t.endOfInput()
		default:
			return t.opError(0, fmt.Errorf("source reader returned unknown status %d", status))
		}
	}
}

// Drain is the mail of a stop with drain (Flink's stop --drain) for a
// source task: its reader is polled no more, and the maximum watermark
// goes through the chain and downstream (in band, after the records
// already sent), so that every event-time window and timer fires before
// the savepoint that follows. The task then waits for mail (the savepoint's
// trigger, Stop). It does nothing in a task that is not a source or
// already sent the maximum watermark.
func (t *Task) Drain() Mail {
	return func() error {
		if t.cfg.Source == nil || t.drained {
			return nil
		}
		t.drained = true
		t.flushAll()
		t.cfg.Cursor.Current = 0
		if ws, ok := t.cfg.Source.(WatermarkSource); ok {
			return ws.EndOfInput()
		}
		return t.EmitWatermarkOutput(watermark.Output{Advanced: true, Watermark: watermark.MaxWatermark})
	}
}

// Undrain is the mail that resumes the polling of a drained source task,
// when the savepoint of a stop with drain failed: the job goes on (its
// event-time operators saw the maximum watermark already, so later records
// are late for them, as in Flink). It does nothing once the input ended.
func (t *Task) Undrain() Mail {
	return func() error {
		if !t.inputEnded {
			t.drained = false
		}
		return nil
	}
}

// flushAllWaiting is flushAll that also sends what a source task's
// writers hold back, waiting for queue space.
func (t *Task) flushAllWaiting() {
	t.flushAll()
	for _, w := range t.cfg.Writers {
		if pw, ok := w.(PendingWriter); ok && pw.Pending() {
			pw.FlushPending(nil)
		}
	}
}

// waitDrained waits, in a drained source task, for mail or a timer.
func (t *Task) waitDrained(ctx context.Context) error {
	t.flushAllWaiting()
	idle := time.Now()
	select {
	case m := <-t.mailbox:
		t.idleFrom(idle)
		return m()
	case <-t.cfg.Timers.wait():
		t.idleFrom(idle)
		return t.cfg.Timers.fireDue()
	case <-t.timedDue():
		t.idleFrom(idle)
		t.convertDue()
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// awaitFinalCheckpoint keeps a source task that read all its input alive,
// answering checkpoint triggers, until the job master says the final
// checkpoint completed: only then may end of partition go downstream, so
// that every record is covered by a checkpoint its sinks commit.
func (t *Task) awaitFinalCheckpoint(ctx context.Context) error {
	if t.cfg.Checkpointing == nil {
		return nil
	}
	t.flushAllWaiting()
	t.cfg.Checkpointing.Responder.SourceFinished(t.cfg.ID)
	for !t.finishRequested {
		idle := time.Now()
		select {
		case m := <-t.mailbox:
			t.idleFrom(idle)
			if err := m(); err != nil {
				return err
			}
		case <-t.cfg.Timers.wait():
			t.idleFrom(idle)
			if err := t.cfg.Timers.fireDue(); err != nil {
				return err
			}
		case <-t.timedDue():
			t.idleFrom(idle)
			t.convertDue()
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
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
	merger, err := watermark.NewMerger(n)
	if err != nil {
		return err
	}
	t.merger = merger
	if cc := t.cfg.Checkpointing; cc != nil {
		a, err := checkpoint.NewAligner(cc.Mode, n)
		if err != nil {
			return err
		}
		t.aligner = a
	}
	// Restored input channel state is processed before any new record.
	for _, in := range t.cfg.Inputs {
		if cs, ok := in.(ChannelStateInput); ok {
			cs.ReplayRecovered()
		}
	}
	start := 0
	for {
		progressed := false
		order, first := t.roundOrder(start, n)
		for k := range n {
			i := (start + k) % n
			if order != nil {
				if k == first && progressed {
					break // the channels still recording come first
				}
				i = order[k]
			}
			if t.finished[i] || (t.aligner != nil && t.aligner.Blocked(i)) {
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
			case Barrier:
				if t.aligner == nil {
					return fmt.Errorf("task %s: barrier %d but checkpointing is off", t.Name(), ev.ID)
				}
				t.rememberBarrier(ev)
				if err := t.alignerActions(t.aligner.OnBarrierInfo(i, barrierInfo(ev), nowMs())); err != nil {
					return err
				}
				if f := t.cfg.Checkpointing.Faults; f != nil && f.OnAlignment != nil && t.aligner.Blocked(i) {
					if err := f.OnAlignment(t.cfg.ID, ev.ID); err != nil {
						return err
					}
				}
			case BarrierAnnouncement:
				if t.aligner != nil {
					b := ev
					b.Kind = Barrier
					t.rememberBarrier(b)
					if err := t.alignerActions(t.aligner.OnAnnounce(i, barrierInfo(ev), nowMs())); err != nil {
						return err
					}
				}
			case CancelBarrier:
				if t.aligner != nil {
					if err := t.alignerActions(t.aligner.OnCancel(i, ev.ID)); err != nil {
						return err
					}
				}
			case Watermark:
				if err := t.EmitWatermarkOutput(t.merger.OnWatermark(i, ev.Timestamp)); err != nil {
					return err
				}
			case WatermarkStatus:
				st := watermark.Active
				if ev.ID == 1 {
					st = watermark.Idle
				}
				if err := t.EmitWatermarkOutput(t.merger.OnStatus(i, st)); err != nil {
					return err
				}
			case EndOfPartition:
				if err := t.EmitWatermarkOutput(t.merger.OnEndOfPartition(i)); err != nil {
					return err
				}
				if t.aligner != nil {
					if err := t.alignerActions(t.aligner.OnEndOfPartition(i, nowMs())); err != nil {
						return err
					}
				}
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
		t.flushIfTicked()
		t.cfg.Metrics.Publish()
		if remaining == 0 {
			// Mail sent before the end of input reached us (the final
			// checkpoint's completion, which sinks commit on) runs first.
			if err := t.drainMailbox(); err != nil {
				return err
			}
			return t.endOfInput()
		}
		if err := t.drainMailbox(); err != nil {
			return err
		}
		// What an overtaking barrier pushed out of a full queue goes on
		// as room frees, without waiting.
		for _, w := range t.cfg.Writers {
			if pw, ok := w.(PendingWriter); ok && pw.Pending() {
				pw.FlushPending(closedChan)
			}
		}
		if err := t.cfg.Timers.fireDue(); err != nil {
			return err
		}
		if err := t.alignmentTimeout(); err != nil {
			return err
		}
		t.convertDue()
		if !progressed {
			// Idle: send what is buffered so that downstream is not kept
			// waiting, then sleep until an input, the mailbox, a timer or
			// the aligned timeout has work.
			t.flushAll()
			idle := time.Now()
			timeout, stopTimeout := t.alignmentTimer()
			select {
			case <-timeout:
				stopTimeout()
				t.idleFrom(idle)
			case <-t.timedDue():
				stopTimeout()
				t.idleFrom(idle)
			case <-t.cfg.Doorbell:
				stopTimeout()
				t.idleFrom(idle)
			case m := <-t.mailbox:
				stopTimeout()
				t.idleFrom(idle)
				if err := m(); err != nil {
					return err
				}
			case <-t.cfg.Timers.wait():
				stopTimeout()
				t.idleFrom(idle)
				if err := t.cfg.Timers.fireDue(); err != nil {
					return err
				}
			case <-ctx.Done():
				stopTimeout()
				return context.Cause(ctx)
			}
		}
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }

// roundOrder is the order of a round's polls while an unaligned snapshot
// records input state (nil otherwise: each input in turn from start):
// the inputs whose barrier has not arrived first, alone in the round
// when one of them has something. Their barrier may be at the head of
// their queue, and the checkpoint completes only once it is read; data
// behind the barriers already read can wait.
func (t *Task) roundOrder(start, n int) (order []int, first int) {
	if t.pending == nil || t.aligner == nil {
		return nil, 0
	}
	order = t.order[:0]
	for k := range n {
		if i := (start + k) % n; t.aligner.Recording(i) {
			order = append(order, i)
		}
	}
	first = len(order)
	for k := range n {
		if i := (start + k) % n; !t.aligner.Recording(i) {
			order = append(order, i)
		}
	}
	t.order = order
	return order, first
}

// closedChan is always ready: a wait on it gives up at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// barrierInfo is what the aligner needs of barrier (or announcement) ev.
func barrierInfo(ev Event) checkpoint.BarrierInfo {
	return checkpoint.BarrierInfo{ID: ev.ID, TriggeredAt: ev.Timestamp, Unaligned: ev.Unaligned, AlignedTimeoutMs: ev.AlignedTimeoutMs}
}

// alignmentTimeout switches an alignment whose aligned timeout passed to
// unaligned.
func (t *Task) alignmentTimeout() error {
	if t.aligner == nil {
		return nil
	}
	at, ok := t.aligner.NextTimeout()
	if !ok {
		return nil
	}
	if now := nowMs(); now >= at {
		return t.alignerActions(t.aligner.Tick(now))
	}
	return nil
}

// alignmentTimer returns a channel that fires at the aligned timeout of
// the alignment in progress (nil when there is none) and its stop.
func (t *Task) alignmentTimer() (<-chan time.Time, func()) {
	if t.aligner == nil {
		return nil, func() {}
	}
	at, ok := t.aligner.NextTimeout()
	if !ok {
		return nil, func() {}
	}
	tm := time.NewTimer(time.Duration(max(0, at-nowMs())) * time.Millisecond)
	return tm.C, func() { tm.Stop() }
}

// alignerActions carries out what the aligner decided, then makes the
// inputs record exactly what is input channel state.
func (t *Task) alignerActions(acts []checkpoint.Action) error {
	defer t.syncRecording()
	for _, a := range acts {
		switch a := a.(type) {
		case checkpoint.Snapshot:
			b := t.barrierOf(a.ID)
			if err := t.performCheckpoint(b, a.FirstBarrierAt, a.AlignmentMs, a.Unaligned); err != nil {
				return err
			}
		case checkpoint.ChannelStateDone:
			t.channelStateDone(a.ID)
		case checkpoint.AbortAlignment:
			t.abortPending(a.ID)
			t.barrierOf(a.ID)
			for _, w := range t.cfg.Writers {
				w.Broadcast(Event{Kind: CancelBarrier, ID: a.ID})
			}
			if a.Reason != checkpoint.AlignCanceled {
				t.cfg.Checkpointing.Responder.Acknowledge(TaskAck{Task: t.cfg.ID, ID: a.ID,
					Err: fmt.Errorf("task %s: alignment of checkpoint %d aborted: %s", t.Name(), a.ID, a.Reason)})
			}
		}
	}
	return nil
}

// rememberBarrier keeps the first barrier of each checkpoint id until the
// aligner decides about it: its options go with the snapshot.
func (t *Task) rememberBarrier(ev Event) {
	if t.barriers == nil {
		t.barriers = make(map[int64]Event)
	}
	if _, ok := t.barriers[ev.ID]; !ok {
		t.barriers[ev.ID] = ev
	}
}

// barrierOf returns the barrier remembered for id and forgets it and every
// older one (the aligner never revisits them).
func (t *Task) barrierOf(id int64) Event {
	b, ok := t.barriers[id]
	if !ok {
		b = Event{Kind: Barrier, ID: id}
	}
	for k := range t.barriers {
		if k <= id {
			delete(t.barriers, k)
		}
	}
	return b
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
