package runtime

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
)

// Channel state is what an unaligned checkpoint stores besides operator
// state (Flink's FLIP-76): the records in flight in a task's channels at
// the moment its snapshot was taken.
//
//   - Output state: when a task forwards an unaligned barrier, the barrier
//     goes to the head of each of its output queues, ahead of the batches
//     queued there; copies of those batches (and of the partly filled ones)
//     are the output state of the channel. The batches themselves stay
//     queued behind the barrier and are delivered as usual.
//   - Input state: from its snapshot until the barrier arrives on an input
//     channel, the task keeps a copy of every batch it reads from that
//     channel.
//
// On restore a task first replays its output state into its output queues,
// then its input state into its head operator, before reading new data: a
// channel delivers input state, then the producer's output state, then new
// records, which is the order of the original stream.

// channelRecorder keeps copies of the batches of one channel.
type channelRecorder[T any] struct {
	codec   codec.Codec[T]
	recs    []T
	ts      []int64
	handle  checkpoint.ChannelStateHandle
	enabled bool
	free    *recFree[T] // where recs come from and go back; nil: none
}

// recFree is a free list of the record slices of channel state copies:
// once the asynchronous part of a checkpoint has encoded a channel's
// records (writeChannelState), their slice goes back here for the next
// checkpoint's copies. A job taking unaligned checkpoints every few
// milliseconds copies its full queues at that pace, and fresh slices were
// a large share of what it allocated. The owner (a RecordWriter or an
// Input) makes one; the task goroutine takes, the asynchronous goroutine
// puts back.
type recFree[T any] struct{ c chan []T }

// maxRecFree is the capacity, in records, past which a slice is dropped
// rather than kept; recFreeSlices is how many are kept.
const (
	maxRecFree    = 1 << 16
	recFreeSlices = 8
)

func newRecFree[T any]() *recFree[T] { return &recFree[T]{c: make(chan []T, recFreeSlices)} }

// get returns an empty slice with room for n records.
func (f *recFree[T]) get(n int) []T {
	if f != nil {
		select {
		case s := <-f.c:
			if cap(s) >= n {
				return s
			}
		default:
		}
	}
	return make([]T, 0, n)
}

// put takes s back; its records are cleared first, so that the list keeps
// nothing they point to alive.
func (f *recFree[T]) put(s []T) {
	if f == nil || cap(s) == 0 || cap(s) > maxRecFree {
		return
	}
	clear(s)
	select {
	case f.c <- s[:0]:
	default:
	}
}

// ChannelData is the channel state of one channel, as the task hands it to
// the asynchronous part of a checkpoint: a copy of the records, encoded
// there (off the task goroutine).
type ChannelData interface {
	// Handle is the channel's handle, without its place in the file.
	Handle() checkpoint.ChannelStateHandle
	// Len is the number of records.
	Len() int
	// AppendTo appends the encoded records to dst.
	AppendTo(dst []byte) []byte
}

type channelData[T any] struct {
	codec  codec.Codec[T]
	recs   []T
	ts     []int64
	handle checkpoint.ChannelStateHandle
	free   *recFree[T]
}

// release gives the records' slice back to the free list it came from;
// d holds no records afterwards.
func (d *channelData[T]) release() {
	d.free.put(d.recs)
	d.recs, d.ts = nil, nil
}

// releaser is implemented by channel data whose memory can be reused once
// it is encoded.
type releaser interface{ release() }

// Handle implements ChannelData: NoTimestamps is set when no record has
// one (their timestamps are then not written).
func (d *channelData[T]) Handle() checkpoint.ChannelStateHandle {
	h := d.handle
	h.NoTimestamps = d.ts == nil
	return h
}

func (d *channelData[T]) Len() int { return len(d.recs) }

func (d *channelData[T]) AppendTo(dst []byte) []byte {
	if d.ts == nil {
		for _, r := range d.recs {
			dst = d.codec.Append(dst, r)
		}
		return dst
	}
	for i, r := range d.recs {
		dst = binary.AppendVarint(dst, d.ts[i])
		dst = d.codec.Append(dst, r)
	}
	return dst
}

// DecodeChannelRecords decodes the records of one channel's state;
// timestamps says they were written with theirs (a handle without
// NoTimestamps). ts is nil when they were not.
func DecodeChannelRecords[T any](c codec.Codec[T], b []byte, n int64, timestamps bool) (recs []T, ts []int64, err error) {
	for off := 0; off < len(b); {
		if timestamps {
			t, k := binary.Varint(b[off:])
			if k <= 0 {
				return nil, nil, fmt.Errorf("channel state: bad timestamp at byte %d", off)
			}
			off += k
			ts = append(ts, t)
		}
		v, k, err := c.Decode(b[off:])
		if err != nil {
			return nil, nil, fmt.Errorf("channel state: record %d: %w", len(recs), err)
		}
		off += k
		recs = append(recs, v)
	}
	if int64(len(recs)) != n {
		return nil, nil, fmt.Errorf("channel state: %d records, the handle says %d", len(recs), n)
	}
	return recs, ts, nil
}

// grow makes room for n more records.
func (r *channelRecorder[T]) grow(n int) {
	if r.recs == nil {
		r.recs = r.free.get(n)
		return
	}
	r.recs = slices.Grow(r.recs, n)
}

// appendCopy appends recs (and ts, nil meaning no timestamps) to the
// recorder. Its timestamps stay nil until a record has one.
func (r *channelRecorder[T]) appendCopy(recs []T, ts []int64) {
	if ts != nil && r.ts == nil {
		r.ts = make([]int64, len(r.recs), len(r.recs)+len(ts))
		for i := range r.ts {
			r.ts[i] = NoTimestamp
		}
	}
	if r.recs == nil {
		r.recs = r.free.get(len(recs))
	}
	r.recs = append(r.recs, recs...)
	switch {
	case r.ts == nil:
	case ts == nil:
		for range recs {
			r.ts = append(r.ts, NoTimestamp)
		}
	default:
		r.ts = append(r.ts, ts...)
	}
}

// take returns what was recorded and forgets it.
func (r *channelRecorder[T]) take() ChannelData {
	if len(r.recs) == 0 {
		return nil
	}
	d := &channelData[T]{codec: r.codec, recs: r.recs, ts: r.ts, handle: r.handle, free: r.free}
	r.recs, r.ts = nil, nil
	return d
}

// ChannelStateInput is implemented by inputs that take part in unaligned
// checkpoints (Input with SetChannelState). Every method runs on the task
// goroutine.
type ChannelStateInput interface {
	// StartRecording makes Poll keep a copy of every batch it delivers.
	StartRecording()
	// StopRecording stops it, keeping what was recorded.
	StopRecording()
	// TakeRecording returns what was recorded for checkpoint id (nil for
	// nothing) and forgets it.
	TakeRecording(id int64) ChannelData
	// ReplayRecovered delivers the restored input state to the operator.
	ReplayRecovered()
}

// ChannelStateWriter is implemented by writers that take part in
// unaligned checkpoints (RecordWriter with SetChannelState). Every method
// runs on the task goroutine.
type ChannelStateWriter interface {
	// Overtake puts ev at the head of every target's queue, ahead of the
	// batches queued there (which stay queued behind it), and returns
	// copies of those batches and of the partly filled ones: the output
	// channel state.
	Overtake(ev Event) []ChannelData
	// Announce puts ev at the head of every target's queue, like
	// Overtake, without taking copies: the announcement of a barrier
	// that follows behind the data.
	Announce(ev Event)
	// ReplayRecovered sends the restored output state to the targets.
	ReplayRecovered()
}

// ChannelStateHandleFor returns the handle of the channel from subtask
// producer of producers to subtask consumer of consumers of an edge.
func ChannelStateHandleFor(edge string, producer, producers, consumer, consumers int, output bool) checkpoint.ChannelStateHandle {
	return checkpoint.ChannelStateHandle{Output: output, Edge: edge, Producer: producer, Consumer: consumer,
		Producers: producers, Consumers: consumers}
}

// SetChannelState lets the input take part in unaligned checkpoints: c
// encodes its records, h names its channel. recs and ts (ts nil or of the
// same length) are the input state restored for it, delivered by
// ReplayRecovered.
func (in *Input[T]) SetChannelState(c codec.Codec[T], h checkpoint.ChannelStateHandle, recs []T, ts []int64) {
	in.rec = &channelRecorder[T]{codec: c, handle: h, free: newRecFree[T]()}
	in.recovered, in.recoveredTS = recs, ts
}

// StartRecording implements ChannelStateInput.
func (in *Input[T]) StartRecording() {
	if in.rec != nil {
		in.rec.enabled = true
	}
}

// StopRecording implements ChannelStateInput.
func (in *Input[T]) StopRecording() {
	if in.rec != nil {
		in.rec.enabled = false
	}
}

// TakeRecording implements ChannelStateInput: the batches recorded, then
// the records a network pump overtook with the barrier of id (received
// before it, consumed after it).
func (in *Input[T]) TakeRecording(id int64) ChannelData {
	if in.rec == nil {
		return nil
	}
	in.rec.enabled = false
	if f := in.inflight; f != nil && in.inflightID <= id {
		if in.inflightID == id {
			in.rec.appendCopy(f.recs, f.ts)
		}
		// A newer checkpoint's (its barrier aborted the alignment of id)
		// stays for that one.
		in.inflight = nil
	}
	return in.rec.take()
}

// inflightRecords are copies of records received from the network and not
// yet consumed when an unaligned barrier overtook them at the receiver.
type inflightRecords[T any] struct {
	recs []T
	ts   []int64
}

// ReplayRecovered implements ChannelStateInput.
func (in *Input[T]) ReplayRecovered() {
	if len(in.recovered) == 0 {
		return
	}
	in.dst.EmitBatch(in.recovered, in.recoveredTS)
	in.records.Add(int64(len(in.recovered)))
	in.recovered, in.recoveredTS = nil, nil
}

// SetChannelState lets the writer take part in unaligned checkpoints: c
// encodes its records, handles[i] names the channel to target i.
// recovered[i] (nil or of len(targets)) is the output state restored for
// target i, sent by ReplayRecovered.
func (w *RecordWriter[T]) SetChannelState(c codec.Codec[T], handles []checkpoint.ChannelStateHandle, recovered [][]T, recoveredTS [][]int64) {
	w.codec, w.handles = c, handles
	w.recovered, w.recoveredTS = recovered, recoveredTS
	w.recFree = newRecFree[T]()
}

// drain takes every envelope queued for target i without waiting, in
// order. Only this writer sends to the channel, so once drained the queue
// stays empty until the writer sends again; what the consumer took before
// is delivered before what the writer puts back (Channel.drainQueue).
func (w *RecordWriter[T]) drain(i int) []envelope[T] {
	out := w.targets[i].drainQueue(nil)
	// The backlog follows what is queued.
	if w.backlog != nil && len(w.backlog[i]) > 0 {
		out = append(out, w.backlog[i]...)
		clear(w.backlog[i])
		w.backlog[i] = w.backlog[i][:0]
	}
	return out
}

// Overtake implements ChannelStateWriter. Without SetChannelState it is
// Broadcast: the barrier follows the data, which then is no channel state.
func (w *RecordWriter[T]) Overtake(ev Event) []ChannelData {
	if w.codec == nil {
		w.Broadcast(ev)
		return nil
	}
	var out []ChannelData
	for i := range w.targets {
		queued := w.drain(i)
		rec := &channelRecorder[T]{codec: w.codec, handle: w.handles[i], free: w.recFree}
		rec.grow(queuedRecords(queued) + len(w.bufs[i]))
		e := ev
		if w.targets[i].bridged {
			e.net = newNetSlot()
		}
		w.sent(w.targets[i].putPriority(envelope[T]{ev: e}, w.done))
		for _, env := range queued {
			if env.recs != nil {
				rec.appendCopy(env.recs, env.ts)
			}
			w.sendPriority(i, env)
		}
		// The partly filled batch stays where it is: it goes behind the
		// barrier when it is full or flushed; its records so far are
		// output state too.
		if b := w.bufs[i]; len(b) > 0 {
			rec.appendCopy(b, w.tss[i])
		}
		if e.net != nil {
			out = append(out, &pendingOutput[T]{slot: e.net, rec: rec})
		} else if d := rec.take(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// netSlot receives, from a bridged channel's pump, the records an
// unaligned barrier overtook in the network's queues (netexchange.go).
type netSlot struct {
	done chan struct{}
	recs any // []T
	ts   []int64
	err  error
}

func newNetSlot() *netSlot { return &netSlot{done: make(chan struct{})} }

func (s *netSlot) resolve(recs any, ts []int64, err error) {
	s.recs, s.ts, s.err = recs, ts, err
	close(s.done)
}

// pendingOutput is the output state of a bridged channel: the records the
// barrier overtook in the network (known once the pump sent it) before
// those it overtook in the channel's queue and the writer (rec).
type pendingOutput[T any] struct {
	slot *netSlot
	rec  *channelRecorder[T]
	data ChannelData
}

// wait waits for the pump and builds the channel's data (nil when the
// barrier overtook nothing).
func (p *pendingOutput[T]) wait(ctx context.Context) error {
	select {
	case <-p.slot.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.slot.err != nil {
		return fmt.Errorf("channel state of %s: %w", p.rec.handle.Edge, p.slot.err)
	}
	all := &channelRecorder[T]{codec: p.rec.codec, handle: p.rec.handle, free: p.rec.free}
	if recs, _ := p.slot.recs.([]T); len(recs) > 0 {
		all.appendCopy(recs, p.slot.ts)
	}
	all.appendCopy(p.rec.recs, p.rec.ts)
	p.rec.free.put(p.rec.recs)
	p.rec.recs, p.rec.ts = nil, nil
	p.data = all.take()
	return nil
}

func (p *pendingOutput[T]) Handle() checkpoint.ChannelStateHandle { return p.data.Handle() }
func (p *pendingOutput[T]) Len() int                              { return p.data.Len() }
func (p *pendingOutput[T]) AppendTo(dst []byte) []byte            { return p.data.AppendTo(dst) }
func (p *pendingOutput[T]) release() {
	if r, ok := p.data.(releaser); ok {
		r.release()
	}
}

// resolveChannelData waits for the parts of data that bridged channels'
// pumps complete and drops what turned out empty.
func resolveChannelData(ctx context.Context, data []ChannelData) ([]ChannelData, error) {
	out := data[:0:0]
	for _, d := range data {
		if w, ok := d.(interface {
			wait(context.Context) error
			isEmpty() bool
		}); ok {
			if err := w.wait(ctx); err != nil {
				return nil, err
			}
			if w.isEmpty() {
				continue
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func (p *pendingOutput[T]) isEmpty() bool { return p.data == nil }

// queuedRecords counts the records of envs.
func queuedRecords[T any](envs []envelope[T]) int {
	n := 0
	for _, env := range envs {
		n += len(env.recs)
	}
	return n
}

// Announce implements ChannelStateWriter.
func (w *RecordWriter[T]) Announce(ev Event) {
	for i := range w.targets {
		queued := w.drain(i)
		w.sent(w.targets[i].putPriority(envelope[T]{ev: ev}, w.done))
		for _, env := range queued {
			w.sendPriority(i, env)
		}
	}
}

// ReplayRecovered implements ChannelStateWriter.
func (w *RecordWriter[T]) ReplayRecovered() {
	for i, recs := range w.recovered {
		var ts []int64
		if w.recoveredTS != nil {
			ts = w.recoveredTS[i]
		}
		for len(recs) > 0 {
			n := min(len(recs), w.batchSize)
			b := append(w.targets[i].batch(n), recs[:n]...)
			env := envelope[T]{recs: b}
			if ts != nil {
				env.ts = append(w.targets[i].timestamps(n), ts[:n]...)
				ts = ts[n:]
			}
			recs = recs[n:]
			w.records.Add(int64(n))
			w.send(i, env)
		}
	}
	w.recovered, w.recoveredTS = nil, nil
}

var (
	_ ChannelStateInput  = (*Input[int])(nil)
	_ ChannelStateWriter = (*RecordWriter[int])(nil)
)

// RestoredChannel is the restored state of one channel of an edge, decoded:
// the input or output state of the channel from producer Handle.Producer
// to consumer Handle.Consumer, at the parallelisms Handle.Producers and
// Handle.Consumers of the checkpoint.
type RestoredChannel[T any] struct {
	Handle checkpoint.ChannelStateHandle
	Recs   []T
	TS     []int64 // nil, or one per record
}

// RescaleRule says how the records in flight on an edge go to the
// consumers of a job restored at another parallelism.
type RescaleRule[T any] struct {
	// Edge names the edge in errors.
	Edge string
	// Partitioner is the edge's partitioner in the new job.
	Partitioner graph.Partitioner
	// Consumers is the new parallelism of the consumer (>= 1).
	Consumers int
	// KeyGroup and MaxParallelism place a record of a Hash edge: it goes
	// to the subtask that owns its key group at the new parallelism, as
	// the writer would send it (and as the keyed state is restored).
	KeyGroup       func(T) int
	MaxParallelism int
}

// RedistributeChannelState deals the channel state of one edge, taken at
// other parallelisms, to the consumers of the new job: recs[c] and ts[c]
// (one timestamp per record) are what consumer c replays as its input
// state before it reads anything new. Nothing is lost and, but for
// Broadcast, nothing is repeated:
//
//   - Hash: each record goes to the owner of its key group;
//   - Broadcast: new consumer c gets the records of old consumer
//     c % old consumers, whose copy of the broadcast state it restores
//     (internal/opstate); the channels of old consumers no new one maps
//     to are dropped with their copies of the state;
//   - Rebalance and Forward: round-robin, record by record.
//
// The channels are taken in the order producer, consumer, input state
// before output state: within a channel the records keep the order of the
// original stream (a channel delivered its input state, then the
// producer's output state).
func RedistributeChannelState[T any](chans []RestoredChannel[T], r RescaleRule[T]) (recs [][]T, ts [][]int64, err error) {
	if r.Consumers < 1 {
		return nil, nil, fmt.Errorf("channel state of edge %s: %d consumers, want >= 1", r.Edge, r.Consumers)
	}
	if r.Partitioner == graph.Hash && (r.KeyGroup == nil || r.MaxParallelism < r.Consumers) {
		return nil, nil, fmt.Errorf("channel state of edge %s: a hash edge needs a key group function and a max parallelism >= %d (got %d)", r.Edge, r.Consumers, r.MaxParallelism)
	}
	sorted := slices.Clone(chans)
	slices.SortStableFunc(sorted, func(a, b RestoredChannel[T]) int {
		return cmp.Or(cmp.Compare(a.Handle.Producer, b.Handle.Producer), cmp.Compare(a.Handle.Consumer, b.Handle.Consumer),
			cmp.Compare(b2i(a.Handle.Output), b2i(b.Handle.Output)))
	})
	recs, ts = make([][]T, r.Consumers), make([][]int64, r.Consumers)
	next := 0
	for _, ch := range sorted {
		if ch.TS != nil && len(ch.TS) != len(ch.Recs) {
			return nil, nil, fmt.Errorf("channel state of edge %s: channel %d->%d has %d records and %d timestamps", r.Edge, ch.Handle.Producer, ch.Handle.Consumer, len(ch.Recs), len(ch.TS))
		}
		if r.Partitioner == graph.Broadcast && ch.Handle.Consumers < 1 {
			return nil, nil, fmt.Errorf("channel state of edge %s: channel %d->%d was taken at %d consumers, want >= 1", r.Edge, ch.Handle.Producer, ch.Handle.Consumer, ch.Handle.Consumers)
		}
		for i, rec := range ch.Recs {
			t := NoTimestamp
			if ch.TS != nil {
				t = ch.TS[i]
			}
			switch r.Partitioner {
			case graph.Hash:
				kg := r.KeyGroup(rec)
				if kg < 0 || kg >= r.MaxParallelism {
					return nil, nil, fmt.Errorf("channel state of edge %s: a record's key group is %d, want 0..%d", r.Edge, kg, r.MaxParallelism-1)
				}
				c := keygroup.SubtaskFor(kg, r.MaxParallelism, r.Consumers)
				recs[c], ts[c] = append(recs[c], rec), append(ts[c], t)
			case graph.Broadcast:
				for c := ch.Handle.Consumer; c < r.Consumers; c += ch.Handle.Consumers {
					recs[c], ts[c] = append(recs[c], rec), append(ts[c], t)
				}
			default:
				c := next
				next = (next + 1) % r.Consumers
				recs[c], ts[c] = append(recs[c], rec), append(ts[c], t)
			}
		}
	}
	return recs, ts, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Producer-side timeout conversion (Flink's aligned-checkpoint-timeout at
// the output): a task forwarding an aligned barrier that has a timeout
// announces it ahead of the data and queues it behind the data for each
// target (SendTimed). Until the consumer takes it from the queue, the
// barrier may still be converted: once the checkpoint is AlignedTimeout
// old (counted from its trigger time), the writer moves it to the head of
// the queue as an unaligned barrier, and the batches it overtook become
// output channel state of the producer's checkpoint, whose asynchronous
// part waits (TimedBarrier.Done) until every target's barrier was either
// taken or converted. The conversion runs on the producer's task
// goroutine: in its loop (ConvertDue) and while a send waits for queue
// space, which is where a backpressured producer spends its time.

// TimedBarrier is an aligned barrier with a timeout queued by one writer
// for each of its targets.
type TimedBarrier struct {
	due   chan struct{} // closed at the deadline (by a timer)
	timer *time.Timer
	slots []barrierSlot
	left  atomic.Int32  // slots not resolved yet
	done  chan struct{} // closed once every slot is resolved
}

// barrierSlot is the barrier of one target.
type barrierSlot struct {
	tb    *TimedBarrier
	state atomic.Int32 // slotQueued, slotTaken or slotConverted
	data  ChannelData  // the output state of a conversion; nil for none
	// wrap makes the output state of records ([]T) a network pump's
	// conversion overtook (netexchange.go).
	wrap func(recs any, ts []int64) ChannelData
}

const (
	slotQueued int32 = iota
	slotTaken
	slotConverted
)

func newTimedBarrier(deadline time.Time, targets int) *TimedBarrier {
	tb := &TimedBarrier{due: make(chan struct{}), slots: make([]barrierSlot, targets), done: make(chan struct{})}
	for i := range tb.slots {
		tb.slots[i].tb = tb
	}
	tb.left.Store(int32(targets))
	if targets == 0 {
		close(tb.done)
	}
	tb.timer = time.AfterFunc(time.Until(deadline), func() { close(tb.due) })
	return tb
}

// resolve moves the slot out of slotQueued; only the first call counts.
func (s *barrierSlot) resolve(to int32, data ChannelData) {
	if !s.state.CompareAndSwap(slotQueued, to) {
		return
	}
	s.data = data
	if s.tb.left.Add(-1) == 0 {
		s.tb.timer.Stop()
		close(s.tb.done)
	}
}

// taken is called by the consumer when it takes the barrier from the
// queue: it can no longer be converted.
func (s *barrierSlot) taken() { s.resolve(slotTaken, nil) }

// Done is closed once the barrier of every target was taken by its
// consumer or converted.
func (tb *TimedBarrier) Done() <-chan struct{} { return tb.done }

// Due is closed at the barrier's deadline.
func (tb *TimedBarrier) Due() <-chan struct{} { return tb.due }

// Converted returns, once Done is closed, the output channel state of the
// conversions and whether any target's barrier was converted.
func (tb *TimedBarrier) Converted() (out []ChannelData, converted bool) {
	for i := range tb.slots {
		s := &tb.slots[i]
		if s.state.Load() == slotConverted {
			converted = true
			if s.data != nil {
				out = append(out, s.data)
			}
		}
	}
	return out, converted
}

// TimedWriter is implemented by writers that can convert an aligned
// barrier at its timeout (RecordWriter with SetChannelState). Every
// method runs on the task goroutine.
type TimedWriter interface {
	// SendTimed flushes and sends ev, an aligned barrier whose timeout
	// passes at deadline, to every target behind the queued data.
	SendTimed(ev Event, deadline time.Time) *TimedBarrier
	// ConvertDue converts the barriers still queued if their deadline
	// passed, and reports whether the writer still waits for one.
	ConvertDue() (pending bool)
	// Due is closed when the barrier is due for conversion; nil when the
	// writer has none to convert.
	Due() <-chan struct{}
}

// SendTimed implements TimedWriter. Without SetChannelState it is
// Broadcast and returns nil: the barrier stays aligned.
func (w *RecordWriter[T]) SendTimed(ev Event, deadline time.Time) *TimedBarrier {
	if w.codec == nil {
		w.Broadcast(ev)
		return nil
	}
	tb := newTimedBarrier(deadline, len(w.targets))
	for i := range tb.slots {
		if w.targets[i].bridged {
			h := w.handles[i]
			tb.slots[i].wrap = func(recs any, ts []int64) ChannelData {
				r := &channelRecorder[T]{codec: w.codec, handle: h, free: w.recFree}
				if rs, _ := recs.([]T); len(rs) > 0 {
					r.appendCopy(rs, ts)
				}
				return r.take()
			}
		}
	}
	w.timed, w.timedEv, w.timedSent, w.timedConverted = tb, ev, 0, false
	for i := range w.targets {
		w.flush(i) // may convert, when the deadline passes while it waits
		w.flushBacklog(i, nil)
		if w.timedConverted {
			w.convertUnsent(i)
			w.timedSent++
			continue
		}
		e := ev
		e.slot = &tb.slots[i]
		waited, ok, woke := w.targets[i].sendOrWake(envelope[T]{ev: e}, w.done, tb.due)
		w.sent(waited, ok)
		if woke { // the deadline passed with the barrier in hand
			w.convertAll()
			w.convertUnsent(i)
		}
		w.timedSent++
	}
	if w.timedConverted {
		w.timed = nil
	}
	return tb
}

// ConvertDue implements TimedWriter.
func (w *RecordWriter[T]) ConvertDue() bool {
	tb := w.timed
	if tb == nil {
		return false
	}
	if !w.timedConverted {
		select {
		case <-tb.done:
		case <-tb.due:
			w.convertAll()
		default:
			return true
		}
	}
	w.timed = nil
	return false
}

// convertAll converts the barriers sent and still queued: each goes to
// the head of its queue as an unaligned barrier, and the batches before it
// are its target's output state. A barrier not found in its queue was
// taken by the consumer.
func (w *RecordWriter[T]) convertAll() {
	tb := w.timed
	if tb == nil || w.timedConverted {
		return
	}
	w.timedConverted = true // the sends below wait without converting
	for i := range w.timedSent {
		s := &tb.slots[i]
		if s.state.Load() != slotQueued {
			continue
		}
		queued := w.drain(i)
		at := slices.IndexFunc(queued, func(env envelope[T]) bool { return env.recs == nil && env.ev.slot == s })
		if at < 0 {
			// Taken by the consumer; on a bridged channel by its pump,
			// which converts it in the network's queue or tells when it
			// went on the wire.
			if !w.targets[i].bridged {
				s.resolve(slotTaken, nil)
			}
			for _, env := range queued {
				w.sendPriority(i, env)
			}
			continue
		}
		ev := queued[at].ev
		w.sendConverted(i, ev, queued[:at], queued[at+1:])
	}
}

// convertUnsent sends target i's barrier, not sent yet, converted: ahead of
// everything queued for i, which is its output state.
func (w *RecordWriter[T]) convertUnsent(i int) {
	w.sendConverted(i, w.timedEv, w.drain(i), nil)
}

// sendConverted sends ev as the unaligned barrier of target i, then before
// (the batches it overtook: their copies are i's output state) and after.
func (w *RecordWriter[T]) sendConverted(i int, ev Event, before, after []envelope[T]) {
	rec := &channelRecorder[T]{codec: w.codec, handle: w.handles[i], free: w.recFree}
	rec.grow(queuedRecords(before))
	for _, env := range before {
		if env.recs != nil {
			rec.appendCopy(env.recs, env.ts)
		}
	}
	ev.slot, ev.Unaligned, ev.AlignedTimeoutMs = nil, true, 0
	if w.targets[i].bridged {
		ev.net = newNetSlot()
		w.timed.slots[i].resolve(slotConverted, &pendingOutput[T]{slot: ev.net, rec: rec})
	} else {
		w.timed.slots[i].resolve(slotConverted, rec.take())
	}
	w.sent(w.targets[i].putPriority(envelope[T]{ev: ev}, w.done))
	for _, env := range before {
		w.sendPriority(i, env)
	}
	for _, env := range after {
		w.sendPriority(i, env)
	}
}

// Due implements TimedWriter.
func (w *RecordWriter[T]) Due() <-chan struct{} {
	if w.timed == nil || w.timedConverted {
		return nil
	}
	return w.timed.due
}

var _ TimedWriter = (*RecordWriter[int])(nil)

// appendRecordsCopy appends recs (with ts, nil for none) to dst and dts,
// which stays nil until a record has a timestamp.
func appendRecordsCopy[T any](dst []T, dts []int64, recs []T, ts []int64) ([]T, []int64) {
	r := channelRecorder[T]{recs: dst, ts: dts}
	r.appendCopy(recs, ts)
	return r.recs, r.ts
}
