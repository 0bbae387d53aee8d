package runtime

import (
	"sync/atomic"

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

// send sends env to target i, waiting for queue space; a timed barrier
// whose deadline passes meanwhile is converted (channelstate.go).
func (w *RecordWriter[T]) send(i int, env envelope[T]) {
	var wake <-chan struct{}
	if w.timed != nil && !w.timedConverted {
		wake = w.timed.due
	}
	waited, ok, woke := w.targets[i].sendOrWake(env, w.done, wake)
	if woke {
		w.convertAll()
		w.sent(waited, ok)
		waited, ok, _ = w.targets[i].sendOrWake(env, w.done, nil)
	}
	w.sent(waited, ok)
}

// sendPriority sends env to target i for an overtaking barrier, an
// announcement or a conversion: a plain send, which never converts (the
// caller holds the queue's drained envelopes in hand).
func (w *RecordWriter[T]) sendPriority(i int, env envelope[T]) {
	w.sent(w.targets[i].send(env, w.done))
}

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

// Flush implements Writer.
func (w *RecordWriter[T]) Flush() {
	for i := range w.targets {
		w.flush(i)
	}
}

// Broadcast implements Writer.
func (w *RecordWriter[T]) Broadcast(ev Event) {
	for i := range w.targets {
		w.flush(i)
		w.send(i, envelope[T]{ev: ev})
	}
}
