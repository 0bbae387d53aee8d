package runtime

import (
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
)

// Output receives records. Operators emit into an Output; the next operator
// of a chain is an Output, and so is a RecordWriter. Emit is called on the
// task goroutine only.
type Output[T any] interface {
	Emit(rec T, ts int64)
}

// BatchOutput is an Output that also takes a batch of records in one call:
// the batch path through a chain, which saves an indirect call (and the
// caller's bookkeeping) per record and per operator.
//
// EmitBatch(recs, ts) must have the effect of Emit(recs[i], ts[i]) for each
// i in order (ts[i] read as NoTimestamp when ts is nil). ts is nil when no
// record of the batch has a timestamp; otherwise len(ts) == len(recs). The
// callee neither keeps nor modifies the slices: the caller reuses them as
// soon as EmitBatch returns. Called on the task goroutine only.
type BatchOutput[T any] interface {
	Output[T]
	EmitBatch(recs []T, ts []int64)
}

// Batched returns out as a BatchOutput: out itself when it implements one,
// else an adapter that emits record by record. Operators call it once, when
// they are built, so that the record path asserts no types.
func Batched[T any](out Output[T]) BatchOutput[T] {
	if b, ok := out.(BatchOutput[T]); ok {
		return b
	}
	return perRecord[T]{out}
}

// EmitBatch hands recs (and ts, nil or of the same length) to out: in one
// call when out is a BatchOutput, else record by record. For callers that
// emit a batch now and then; a hot path keeps Batched(out) instead.
// It allocates nothing.
func EmitBatch[T any](out Output[T], recs []T, ts []int64) {
	if b, ok := out.(BatchOutput[T]); ok {
		b.EmitBatch(recs, ts)
		return
	}
	emitEach(out, recs, ts)
}

// perRecord adapts an Output that has no batch path.
type perRecord[T any] struct{ out Output[T] }

func (p perRecord[T]) Emit(rec T, ts int64)           { p.out.Emit(rec, ts) }
func (p perRecord[T]) EmitBatch(recs []T, ts []int64) { emitEach(p.out, recs, ts) }

// emitEach emits recs to out one by one.
func emitEach[T any](out Output[T], recs []T, ts []int64) {
	if ts == nil {
		for _, r := range recs {
			out.Emit(r, NoTimestamp)
		}
		return
	}
	for i, r := range recs {
		out.Emit(r, ts[i])
	}
}

// Discard is an Output that drops every record.
type Discard[T any] struct{}

// Emit implements Output.
func (Discard[T]) Emit(T, int64) {}

// EmitBatch implements BatchOutput.
func (Discard[T]) EmitBatch([]T, []int64) {}

// FanOut emits every record to each of its outputs in turn.
type FanOut[T any] []Output[T]

// Emit implements Output.
func (f FanOut[T]) Emit(rec T, ts int64) {
	for _, o := range f {
		o.Emit(rec, ts)
	}
}

// EmitBatch implements BatchOutput: each output gets the whole batch in
// turn (the first one all of it before the second one any), which is the
// order a per-record FanOut gives each output, since outputs of a fan-out
// never feed one another.
func (f FanOut[T]) EmitBatch(recs []T, ts []int64) {
	for _, o := range f {
		EmitBatch(o, recs, ts)
	}
}

// Writer is the untyped face of a RecordWriter, used by its task.
type Writer interface {
	// Flush sends every non-empty buffered batch.
	Flush()
	// Broadcast flushes and then sends ev to every target channel.
	Broadcast(ev Event)
}

// RecordWriter partitions the records of one producing subtask over the
// channels of an edge, batching per target.
type RecordWriter[T any] struct {
	recFree   *recFree[T] // output state copies (channelstate.go); nil until SetChannelState
	targets   []*Channel[T]
	bufs      [][]T
	tss       [][]int64
	part      graph.Partitioner
	keyGroup  func(T) int // for Hash: the record's key group
	maxPar    int
	batchSize int
	next      int
	done      <-chan struct{}
	records   *atomic.Int64
	// backpressured adds up the time sends waited for queue space; nil
	// until the task binds its metrics.
	backpressured *atomic.Int64
	// codec and handles, when set (SetChannelState), make Overtake copy
	// the overtaken batches; recovered is the restored output state.
	codec       codec.Codec[T]
	handles     []checkpoint.ChannelStateHandle
	recovered   [][]T
	recoveredTS [][]int64
	// timed is the aligned barrier with a timeout being sent or queued
	// (SendTimed), nil when none; timedEv is that barrier, timedSent the
	// targets it was sent to, and timedConverted says it was converted
	// (channelstate.go).
	timed          *TimedBarrier
	timedEv        Event
	timedSent      int
	timedConverted bool
	// backlog[i] holds the envelopes for target i that did not fit in its
	// queue when a barrier overtook it (the drained envelopes go back
	// behind it without waiting), and, with deferBlocking (a source
	// task's writers), whatever did not fit: they go before anything
	// sent to i later. nil until first used.
	backlog       [][]envelope[T]
	deferBlocking bool
	// flushTicks counts the ticks of the task's buffer timeout (nil:
	// none); flushSeen is the tick of the last timed flush (flusher.go).
	flushTicks *atomic.Uint64
	flushSeen  uint64
}

// WriterOptions configure a RecordWriter.
type WriterOptions[T any] struct {
	// Partitioner picks the targets of a record. With Forward, targets holds
	// exactly one channel.
	Partitioner graph.Partitioner
	// KeyGroup returns the key group of a record; required for Hash.
	KeyGroup func(T) int
	// MaxParallelism is the number of key groups; required for Hash.
	MaxParallelism int
	// BatchSize is the number of records per batch (>= 1).
	BatchSize int
	// Done is closed when the task is cancelled; a blocked send then gives up.
	Done <-chan struct{}
	// Records counts the records written; may be nil.
	Records *atomic.Int64
	// Subtask is the producing subtask; Rebalance starts at its index so that
	// subtasks do not all start on the same target.
	Subtask int
}

// NewRecordWriter creates a writer over targets (one per consuming subtask).
func NewRecordWriter[T any](targets []*Channel[T], o WriterOptions[T]) *RecordWriter[T] {
	if o.Records == nil {
		o.Records = new(atomic.Int64)
	}
	w := &RecordWriter[T]{
		targets:   targets,
		bufs:      make([][]T, len(targets)),
		tss:       make([][]int64, len(targets)),
		part:      o.Partitioner,
		keyGroup:  o.KeyGroup,
		maxPar:    o.MaxParallelism,
		batchSize: o.BatchSize,
		done:      o.Done,
		records:   o.Records,
	}
	if len(targets) > 0 {
		w.next = o.Subtask % len(targets)
	}
	return w
}

// Emit implements Output.
func (w *RecordWriter[T]) Emit(rec T, ts int64) {
	switch w.part {
	case graph.Forward:
		w.append(0, rec, ts)
	case graph.Rebalance:
		w.append(w.next, rec, ts)
		w.next++
		if w.next == len(w.targets) {
			w.next = 0
		}
	case graph.Hash:
		kg := w.keyGroup(rec)
		w.append(kg*len(w.targets)/w.maxPar, rec, ts)
	case graph.Broadcast:
		for i := range w.targets {
			w.append(i, rec, ts)
		}
	}
}

// EmitBatch implements BatchOutput. It is emitEach written out, so that
// each record's Emit is a direct call rather than one through Output[T].
func (w *RecordWriter[T]) EmitBatch(recs []T, ts []int64) {
	if ts == nil {
		for _, r := range recs {
			w.Emit(r, NoTimestamp)
		}
		return
	}
	for i, r := range recs {
		w.Emit(r, ts[i])
	}
}

func (w *RecordWriter[T]) append(i int, rec T, ts int64) {
	b := w.bufs[i]
	if b == nil {
		b = w.targets[i].batch(w.batchSize)
	}
	if ts != NoTimestamp && w.tss[i] == nil {
		// First timestamped record of the batch: earlier ones had none.
		t := w.targets[i].timestamps(w.batchSize)
		for range b {
			t = append(t, NoTimestamp)
		}
		w.tss[i] = t
	}
	b = append(b, rec)
	if w.tss[i] != nil {
		w.tss[i] = append(w.tss[i], ts)
	}
	w.bufs[i] = b
	if len(b) >= w.batchSize {
		w.flush(i)
	} else if w.flushTicks != nil && w.flushTicks.Load() != w.flushSeen {
		w.flushIfTicked()
	}
}

func (w *RecordWriter[T]) flush(i int) {
	b := w.bufs[i]
	if len(b) == 0 {
		return
	}
	env := envelope[T]{recs: b, ts: w.tss[i]}
	w.bufs[i], w.tss[i] = nil, nil
	w.records.Add(int64(len(b)))
	w.send(i, env)
}

// send sends env to target i, waiting for queue space (behind target i's
// backlog); a timed barrier whose deadline passes meanwhile is converted
// (channelstate.go). With deferBlocking it never waits: what does not fit
// joins the backlog, which the task flushes between polls (FlushPending).
func (w *RecordWriter[T]) send(i int, env envelope[T]) {
	if w.backlog != nil && len(w.backlog[i]) > 0 {
		w.backlog[i] = append(w.backlog[i], env)
		if !w.deferBlocking {
			w.flushBacklog(i, nil)
		}
		return
	}
	if w.deferBlocking {
		if !w.targets[i].trySend(env) {
			w.toBacklog(i, env)
		}
		return
	}
	var wake <-chan struct{}
	if w.timed != nil && !w.timedConverted {
		wake = w.timed.due
	}
	waited, ok, woke := w.targets[i].sendOrWake(env, w.done, wake)
	w.sent(waited, ok)
	if woke {
		w.convertAll()
		w.toBacklog(i, env)
		w.flushBacklog(i, nil)
	}
}

func (w *RecordWriter[T]) toBacklog(i int, env envelope[T]) {
	if w.backlog == nil {
		w.backlog = make([][]envelope[T], len(w.targets))
	}
	w.backlog[i] = append(w.backlog[i], env)
}

// flushBacklog sends target i's backlog, waiting for queue space, and
// converting a timed barrier whose deadline passes meanwhile. It gives up
// when wake is ready (reporting true), the rest still in the backlog.
func (w *RecordWriter[T]) flushBacklog(i int, wake <-chan struct{}) (woke bool) {
	for w.backlog != nil && len(w.backlog[i]) > 0 {
		var due <-chan struct{}
		if w.timed != nil && !w.timedConverted {
			due = w.timed.due
		}
		c := w.targets[i]
		env := w.backlog[i][0]
		if !c.trySend(env) {
			start := time.Now()
			select {
			case c.queue <- env:
				c.sent(env)
			case <-w.done:
				panic(errSendCancelled)
			case <-due:
				w.waitedFor(c, start)
				w.convertAll() // it may rearrange the backlog
				continue
			case <-wake:
				w.waitedFor(c, start)
				return true
			}
			w.waitedFor(c, start)
		}
		w.backlog[i][0] = envelope[T]{}
		w.backlog[i] = w.backlog[i][1:]
	}
	return false
}

func (w *RecordWriter[T]) waitedFor(c *Channel[T], start time.Time) {
	d := int64(time.Since(start))
	c.stats.BackpressuredNanos.Add(d)
	w.sent(d, true)
}

// sendPriority puts env back into target i's queue behind an overtaking
// barrier, an announcement or a conversion, without waiting: what does
// not fit goes into the backlog (the barrier took a place of the queue).
// It never converts (the caller holds the queue's drained envelopes in
// hand).
func (w *RecordWriter[T]) sendPriority(i int, env envelope[T]) {
	if (w.backlog != nil && len(w.backlog[i]) > 0) || !w.targets[i].trySend(env) {
		w.toBacklog(i, env)
	}
}

// SetDeferBlocking makes the writer never wait in a send: what does not
// fit in a target's queue waits in the writer until FlushPending (a
// source task: it polls its reader only when its outputs have room, so
// that a checkpoint's trigger never waits behind a blocked send, as
// Flink's sources check their output's availability).
func (w *RecordWriter[T]) SetDeferBlocking(on bool) { w.deferBlocking = on }

// Pending reports whether envelopes wait in the writer's backlog.
func (w *RecordWriter[T]) Pending() bool {
	for _, b := range w.backlog {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

// FlushPending sends the backlog, waiting for queue space, until it is
// empty (false) or wake is ready (true).
func (w *RecordWriter[T]) FlushPending(wake <-chan struct{}) (woke bool) {
	for i := range w.backlog {
		if w.flushBacklog(i, wake) {
			return true
		}
	}
	return false
}

// PendingWriter is implemented by writers that can defer their blocking
// sends (RecordWriter). Every method runs on the task goroutine.
type PendingWriter interface {
	SetDeferBlocking(on bool)
	Pending() bool
	FlushPending(wake <-chan struct{}) (woke bool)
}

var _ PendingWriter = (*RecordWriter[int])(nil)

// sent accounts for a send that waited waited ns; !ok: the task is
// cancelled.
func (w *RecordWriter[T]) sent(waited int64, ok bool) {
	if !ok {
		panic(errSendCancelled)
	}
	if waited > 0 && w.backpressured != nil {
		w.backpressured.Add(waited)
	}
}

// bindMetrics makes the writer count its records and backpressured time in
// m (see Task).
func (w *RecordWriter[T]) bindMetrics(m *metrics.Task) {
	w.records, w.backpressured = &m.RecordsOut, &m.BackPressuredNanos
}

// Flush implements Writer: it sends the backlog too, waiting for queue
// space; with deferBlocking the partly filled batches join the backlog,
// which FlushPending sends.
func (w *RecordWriter[T]) Flush() {
	for i := range w.targets {
		w.flush(i)
		if !w.deferBlocking {
			w.flushBacklog(i, nil)
		}
	}
}

// Broadcast implements Writer: the event goes behind everything sent
// before (the backlog too), waiting for queue space even with
// deferBlocking.
func (w *RecordWriter[T]) Broadcast(ev Event) {
	for i := range w.targets {
		w.flush(i)
		w.send(i, envelope[T]{ev: ev})
		w.flushBacklog(i, nil)
	}
}
