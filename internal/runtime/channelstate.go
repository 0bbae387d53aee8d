package runtime

import (
	"encoding/binary"
	"fmt"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
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
}

func (d *channelData[T]) Handle() checkpoint.ChannelStateHandle { return d.handle }
func (d *channelData[T]) Len() int                              { return len(d.recs) }

func (d *channelData[T]) AppendTo(dst []byte) []byte {
	for i, r := range d.recs {
		dst = binary.AppendVarint(dst, d.ts[i])
		dst = d.codec.Append(dst, r)
	}
	return dst
}

// DecodeChannelRecords decodes the records of one channel's state.
func DecodeChannelRecords[T any](c codec.Codec[T], b []byte, n int64) (recs []T, ts []int64, err error) {
	for off := 0; off < len(b); {
		t, k := binary.Varint(b[off:])
		if k <= 0 {
			return nil, nil, fmt.Errorf("channel state: bad timestamp at byte %d", off)
		}
		off += k
		v, k, err := c.Decode(b[off:])
		if err != nil {
			return nil, nil, fmt.Errorf("channel state: record %d: %w", len(recs), err)
		}
		off += k
		recs, ts = append(recs, v), append(ts, t)
	}
	if int64(len(recs)) != n {
		return nil, nil, fmt.Errorf("channel state: %d records, the handle says %d", len(recs), n)
	}
	return recs, ts, nil
}

// appendCopy appends recs (and ts, nil meaning no timestamps) to the
// recorder.
func (r *channelRecorder[T]) appendCopy(recs []T, ts []int64) {
	r.recs = append(r.recs, recs...)
	if ts == nil {
		for range recs {
			r.ts = append(r.ts, NoTimestamp)
		}
		return
	}
	r.ts = append(r.ts, ts...)
}

// take returns what was recorded and forgets it.
func (r *channelRecorder[T]) take() ChannelData {
	if len(r.recs) == 0 {
		return nil
	}
	d := &channelData[T]{codec: r.codec, recs: r.recs, ts: r.ts, handle: r.handle}
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
	// TakeRecording returns what was recorded (nil for nothing) and
	// forgets it.
	TakeRecording() ChannelData
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
	in.rec = &channelRecorder[T]{codec: c, handle: h}
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

// TakeRecording implements ChannelStateInput.
func (in *Input[T]) TakeRecording() ChannelData {
	if in.rec == nil {
		return nil
	}
	in.rec.enabled = false
	return in.rec.take()
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
}

// drain takes every envelope queued for target i without waiting, in
// order. Only this writer sends to the channel, so once drained the queue
// stays empty until the writer sends again; the consumer may take some
// envelopes meanwhile, and those are simply delivered before ev.
func (w *RecordWriter[T]) drain(i int) []envelope[T] {
	var out []envelope[T]
	q := w.targets[i].queue
	for {
		select {
		case env := <-q:
			out = append(out, env)
		default:
			return out
		}
	}
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
		if b := w.bufs[i]; len(b) > 0 {
			queued = append(queued, envelope[T]{recs: b, ts: w.tss[i]})
			w.records.Add(int64(len(b)))
			w.bufs[i], w.tss[i] = nil, nil
		}
		rec := &channelRecorder[T]{codec: w.codec, handle: w.handles[i]}
		w.send(i, envelope[T]{ev: ev})
		for _, env := range queued {
			if env.recs != nil {
				rec.appendCopy(env.recs, env.ts)
			}
			w.send(i, env)
		}
		if d := rec.take(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// Announce implements ChannelStateWriter.
func (w *RecordWriter[T]) Announce(ev Event) {
	for i := range w.targets {
		queued := w.drain(i)
		w.send(i, envelope[T]{ev: ev})
		for _, env := range queued {
			w.send(i, env)
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
