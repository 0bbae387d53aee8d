package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// BarrierOptions travel with a barrier: what kind of snapshot it asks for and
// where its files go. In process they are shared by pointer; across processes
// (a later issue) they are serialized.
type BarrierOptions struct {
	Kind checkpoint.Kind
	// Store and Dir locate the checkpoint's (or savepoint's) directory.
	Store storage.Store
	Dir   string
}

// Snapshotter is implemented by operators with state. SnapshotState runs on
// the task goroutine when barrier id reaches the operator: it does the
// synchronous part (O(1) or O(changed)) and returns the rest.
type Snapshotter interface {
	SnapshotState(id int64, opts *BarrierOptions) (OperatorSnapshot, error)
}

// OperatorSnapshot is one operator's share of a task's snapshot.
type OperatorSnapshot struct {
	// State is what the synchronous part captured (split positions,
	// committables); Async may add to it.
	State checkpoint.SubtaskState
	// Async, when set, runs on another goroutine after the barrier has been
	// forwarded; it writes files and records their handles in st.
	Async func(ctx context.Context, st *checkpoint.SubtaskState) (written int64, err error)
	// Release, when set, runs on the task goroutine once Async ended (or
	// was abandoned): it lets the operator drop what it kept for Async.
	Release func()
	// Stateless leaves the operator out of the checkpoint: it ran a hook
	// but has no state (so that its uid may change freely).
	Stateless bool
}

// CheckpointListener is implemented by operators that act when a checkpoint
// completes (commit) or is aborted.
type CheckpointListener interface {
	NotifyCheckpointComplete(id int64) error
	NotifyCheckpointAborted(id int64) error
}

// KeyedState is the keyed state of one operator instance as the task sees
// it (Chained.Keyed). Every method runs on the task goroutine.
type KeyedState interface {
	// SnapshotKeyed takes the keyed state's part of snapshot id; it runs
	// after the operator's SnapshotState (which may write to the state).
	SnapshotKeyed(id int64, opts *BarrierOptions) (OperatorSnapshot, error)
	// NotifyKeyedComplete and NotifyKeyedAborted tell the keyed state that
	// checkpoint id completed (its files may be the base of the next
	// ones) or was aborted; they run before the operator's listener.
	NotifyKeyedComplete(id int64) error
	NotifyKeyedAborted(id int64) error
}

// mergeSnapshots joins an operator's own snapshot a and its keyed state's
// b into one share of the task's snapshot: b's handles follow a's, and
// b's asynchronous part runs after a's.
func mergeSnapshots(a, b OperatorSnapshot) OperatorSnapshot {
	out := a
	out.Stateless = a.Stateless && b.Stateless
	out.State.Keyed = append(out.State.Keyed, b.State.Keyed...)
	out.State.Lists = append(out.State.Lists, b.State.Lists...)
	out.State.Broadcast = append(out.State.Broadcast, b.State.Broadcast...)
	out.State.Splits = append(out.State.Splits, b.State.Splits...)
	out.State.Committables = append(out.State.Committables, b.State.Committables...)
	switch {
	case a.Async == nil:
		out.Async = b.Async
	case b.Async != nil:
		out.Async = func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			n, err := a.Async(ctx, st)
			if err != nil {
				return n, err
			}
			m, err := b.Async(ctx, st)
			return n + m, err
		}
	}
	switch {
	case a.Release == nil:
		out.Release = b.Release
	case b.Release != nil:
		out.Release = func() { a.Release(); b.Release() }
	}
	return out
}

// OperatorStateResult is the state of one operator instance in an ack.
type OperatorStateResult struct {
	UID         string
	Name        string
	Subtask     int
	Parallelism int
	State       checkpoint.SubtaskState
}

// TaskAck reports the end of a task's part of a checkpoint: an
// acknowledgement with its state, or a decline (Err set).
type TaskAck struct {
	Task       string
	ID         int64
	Operators  []OperatorStateResult
	Sync       time.Duration
	Async      time.Duration
	Alignment  time.Duration
	StartDelay time.Duration
	// StateSize is the size of the full state the task's snapshot refers
	// to: every file its handles list (shared files an earlier checkpoint
	// uploaded included) and the state inline in the metadata (Flink's
	// "Full Checkpoint Data Size").
	StateSize int64
	// CheckpointedSize is what this checkpoint added: the bytes the
	// asynchronous parts uploaded and the inline state (Flink's
	// "Checkpointed Data Size"). It equals StateSize for full snapshots.
	CheckpointedSize int64
	// Unaligned: the task's snapshot was unaligned; PersistedData is the
	// bytes of channel state it wrote (Flink's "Persisted Data").
	Unaligned     bool
	PersistedData int64
	Err           error
}

// Responder is the job master as a task sees it. Its methods must not block
// for long: they are called from task goroutines and async snapshot
// goroutines.
type Responder interface {
	// Acknowledge delivers an ack or a decline.
	Acknowledge(ack TaskAck)
	// SourceRecords reports records emitted by a source task.
	SourceRecords(task string, n int64)
	// RequestCheckpoint reports a marker record asking for a checkpoint.
	RequestCheckpoint(task string)
	// SourceFinished reports that a source task read all its input; it then
	// waits for a Finish mail (sent after the final checkpoint completed).
	SourceFinished(task string)
}

// FaultHooks let tests fail a task at precise points of the checkpoint
// protocol. Production code leaves them nil.
type FaultHooks struct {
	// OnAlignment runs when an exactly-once task blocks an input channel
	// for checkpoint id (its barrier arrived there, not yet everywhere). An
	// error fails the task in the middle of the alignment.
	OnAlignment func(task string, id int64) error
	// OnAsyncSnapshot runs on the asynchronous goroutine of checkpoint id,
	// before the state is written. An error fails the task while the
	// write is in flight (the write itself goes on until cancelled).
	OnAsyncSnapshot func(task string, id int64) error
}

// CheckpointConfig switches a task's checkpointing on.
type CheckpointConfig struct {
	// Faults, when set, injects failures (tests only).
	Faults    *FaultHooks
	Mode      checkpoint.AlignmentMode
	Responder Responder
	// OperatorInfo describes the chain's operators (same order as Chain), so
	// that acks name them.
	Operators []OperatorInfo
	// Unaligned makes the checkpoints (not the savepoints) a source task
	// triggers unaligned; with AlignedTimeout > 0 they start aligned and
	// switch once that old (Options.Checkpointing.Unaligned and
	// AlignedTimeout). Downstream tasks follow the barriers they receive.
	Unaligned      bool
	AlignedTimeout time.Duration
}

// OperatorInfo identifies an operator of a chain in checkpoints.
type OperatorInfo struct {
	UID  string
	Name string
}

// asyncSnapshots tracks a task's asynchronous snapshot goroutines.
type asyncSnapshots struct {
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// TriggerCheckpoint is the mail the job master sends to a source task.
func (t *Task) TriggerCheckpoint(id, timestamp int64, opts *BarrierOptions) Mail {
	return func() error {
		b := Event{Kind: Barrier, ID: id, Timestamp: timestamp, Options: opts}
		// A source whose input ended sends aligned barriers: its final
		// checkpoint must hold no channel state, because the sinks'
		// end-of-input flush commits everything that checkpoint's
		// overtaken output buffers would replay on a restore of it
		// (duplicates otherwise).
		if cc := t.cfg.Checkpointing; cc != nil && cc.Unaligned && !t.inputEnded && (opts == nil || opts.Kind == checkpoint.KindCheckpoint) {
			if cc.AlignedTimeout <= 0 {
				b.Unaligned = true
			} else {
				b.AlignedTimeoutMs = max(1, cc.AlignedTimeout.Milliseconds())
			}
		}
		return t.performCheckpoint(b, 0, 0, b.Unaligned)
	}
}

// pendingChannels is an unaligned snapshot of a task with inputs whose
// input channel state is still being recorded: its asynchronous part waits
// for it.
type pendingChannels struct {
	id     int64
	inputs chan []ChannelData // the input state, sent once
	abort  chan struct{}      // closed when the alignment is aborted
}

// channelStateDone hands the recorded input state of checkpoint id to its
// asynchronous part.
func (t *Task) channelStateDone(id int64) {
	p := t.pending
	if p == nil || p.id != id {
		return
	}
	var in []ChannelData
	for _, ic := range t.cfg.Inputs {
		if cs, ok := ic.(ChannelStateInput); ok {
			if d := cs.TakeRecording(id); d != nil {
				in = append(in, d)
			}
		}
	}
	p.inputs <- in
	t.pending = nil
}

// abortPending drops the input state recorded for checkpoint id, if any.
func (t *Task) abortPending(id int64) {
	p := t.pending
	if p == nil || p.id > id {
		return
	}
	for _, ic := range t.cfg.Inputs {
		if cs, ok := ic.(ChannelStateInput); ok {
			cs.TakeRecording(id)
		}
	}
	close(p.abort)
	t.pending = nil
}

// syncRecording makes each input record exactly while the aligner says
// its data is channel state.
func (t *Task) syncRecording() {
	if t.aligner == nil || t.pending == nil {
		return
	}
	for i, ic := range t.cfg.Inputs {
		if cs, ok := ic.(ChannelStateInput); ok {
			if t.aligner.Recording(i) {
				cs.StartRecording()
			} else {
				cs.StopRecording()
			}
		}
	}
}

// forward sends barrier b downstream: ahead of the queued data when
// unaligned (returning the output channel state), behind it otherwise,
// announced ahead of the data when it has an aligned timeout (returning
// the timed barriers, which the writers convert at the timeout).
func (t *Task) forward(b Event, unaligned bool) ([]ChannelData, []*TimedBarrier) {
	var out []ChannelData
	var timed []*TimedBarrier
	if unaligned {
		b.Unaligned, b.AlignedTimeoutMs = true, 0
	}
	for _, w := range t.cfg.Writers {
		cw, ok := w.(ChannelStateWriter)
		switch {
		case ok && unaligned:
			out = append(out, cw.Overtake(b)...)
		case ok && b.AlignedTimeoutMs > 0:
			cw.Announce(Event{Kind: BarrierAnnouncement, ID: b.ID, Timestamp: b.Timestamp, Options: b.Options, AlignedTimeoutMs: b.AlignedTimeoutMs})
			if tw, ok := w.(TimedWriter); ok {
				if tb := tw.SendTimed(b, time.UnixMilli(b.Timestamp+b.AlignedTimeoutMs)); tb != nil {
					timed = append(timed, tb)
					t.timedWriters = append(t.timedWriters, tw)
				}
				continue
			}
			w.Broadcast(b)
		default:
			w.Broadcast(b)
		}
	}
	return out, timed
}

// convertDue lets the writers convert the timed barriers whose deadline
// passed (channelstate.go).
func (t *Task) convertDue() {
	if len(t.timedWriters) == 0 {
		return
	}
	kept := t.timedWriters[:0]
	for _, w := range t.timedWriters {
		if w.ConvertDue() {
			kept = append(kept, w)
		}
	}
	clear(t.timedWriters[len(kept):])
	t.timedWriters = kept
}

// timedDue returns a channel closed when a timed barrier of the task's
// writers is due, nil when there is none.
func (t *Task) timedDue() <-chan struct{} {
	for _, w := range t.timedWriters {
		if c := w.Due(); c != nil {
			return c
		}
	}
	return nil
}

// channelStateName names a task's channel state file in a checkpoint
// directory.
func channelStateName(uid string, subtask int) string {
	safe := []byte(uid)
	for i, c := range safe {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			safe[i] = '_'
		}
	}
	return fmt.Sprintf("%s-%d.channels", safe, subtask)
}

// writeChannelState writes a task's channel state through checkpoint
// storage (inline when the barrier has no store: tests) and returns its
// handle.
func writeChannelState(ctx context.Context, opts *BarrierOptions, name string, data []ChannelData) (*checkpoint.ChannelState, error) {
	cs := &checkpoint.ChannelState{}
	if opts == nil || opts.Store == nil {
		var buf []byte
		for _, d := range data {
			buf = appendChannel(cs, buf, 0, d)
		}
		cs.Inline, cs.Size, cs.CRC = buf, int64(len(buf)), storage.Checksum(buf)
		return cs, nil
	}
	// One channel at a time through a buffer reused from checkpoint to
	// checkpoint: an unaligned checkpoint of a busy job persists its full
	// queues every interval, and a buffer grown afresh each time (by
	// doubling) was most of what such a job allocated.
	buf := getChannelStateBuf()
	size, crc, err := storage.CheckpointStorage{Store: opts.Store}.WriteStateFile(ctx, opts.Dir, name, func(w io.Writer) error {
		var off int64
		for _, d := range data {
			buf = appendChannel(cs, buf[:0], off, d)
			if _, err := w.Write(buf); err != nil {
				return err
			}
			off += int64(len(buf))
		}
		return nil
	})
	putChannelStateBuf(buf)
	if err != nil {
		return nil, fmt.Errorf("channel state: %w", err)
	}
	cs.Path, cs.Size, cs.CRC = name, size, crc
	return cs, nil
}

// appendChannel appends d's encoded records to buf and their handle to cs;
// base is the file offset of buf[0].
// The records of d are not needed once encoded: their memory goes back
// for the next checkpoint's copies.
func appendChannel(cs *checkpoint.ChannelState, buf []byte, base int64, d ChannelData) []byte {
	h := d.Handle()
	start := len(buf)
	h.Offset = base + int64(start)
	buf = d.AppendTo(buf)
	h.Length = int64(len(buf) - start)
	h.Records = int64(d.Len())
	cs.Channels = append(cs.Channels, h)
	if r, ok := d.(releaser); ok {
		r.release()
	}
	return buf
}

// channelStateBufs are writeChannelState's encoding buffers between
// checkpoints: a free list rather than a sync.Pool, which the garbage
// collector empties, and a job that persists its queues every few
// milliseconds collects as often. A buffer grown past maxChannelStateBuf
// (a channel of large records) is dropped rather than kept.
var channelStateBufs = make(chan []byte, 4)

const maxChannelStateBuf = 4 << 20

func getChannelStateBuf() []byte {
	select {
	case b := <-channelStateBufs:
		return b
	default:
		return nil
	}
}

func putChannelStateBuf(b []byte) {
	if cap(b) == 0 || cap(b) > maxChannelStateBuf {
		return
	}
	select {
	case channelStateBufs <- b[:0]:
	default:
	}
}

// NotifyComplete is the mail telling a task that checkpoint id completed.
func (t *Task) NotifyComplete(id int64) Mail {
	return func() error {
		for i, c := range t.cfg.Chain {
			if c.Keyed != nil {
				t.cfg.Cursor.Current = i
				if err := c.Keyed.NotifyKeyedComplete(id); err != nil {
					return t.opError(i, fmt.Errorf("checkpoint %d complete: keyed state: %w", id, err))
				}
			}
			if l, ok := c.Op.(CheckpointListener); ok {
				t.cfg.Cursor.Current = i
				if err := l.NotifyCheckpointComplete(id); err != nil {
					return t.opError(i, fmt.Errorf("checkpoint %d complete: %w", id, err))
				}
			}
		}
		return nil
	}
}

// NotifyAborted is the mail telling a task that checkpoint id was aborted.
func (t *Task) NotifyAborted(id int64) Mail {
	return func() error {
		for i, c := range t.cfg.Chain {
			if c.Keyed != nil {
				t.cfg.Cursor.Current = i
				if err := c.Keyed.NotifyKeyedAborted(id); err != nil {
					return t.opError(i, fmt.Errorf("checkpoint %d aborted: keyed state: %w", id, err))
				}
			}
			if l, ok := c.Op.(CheckpointListener); ok {
				t.cfg.Cursor.Current = i
				if err := l.NotifyCheckpointAborted(id); err != nil {
					return t.opError(i, fmt.Errorf("checkpoint %d aborted: %w", id, err))
				}
			}
		}
		return nil
	}
}

// Finish is the mail that lets a source task waiting after the end of its
// input (see Responder.SourceFinished) end.
func (t *Task) Finish() Mail {
	return func() error {
		t.finishRequested = true
		return nil
	}
}

// errStop ends a task cleanly (stop with savepoint).
var errStop = errors.New("task stopped")

// Stop is the mail that ends a task at once, without error and without
// sending end of partition (stop-with-savepoint).
func (t *Task) Stop() Mail {
	return func() error { return errStop }
}

// performCheckpoint takes the task's snapshot for barrier b: the synchronous
// part of every operator in chain order, then the barrier goes downstream,
// then the asynchronous part runs on its own goroutine. An unaligned
// snapshot's barrier overtakes the queued output, and its asynchronous
// part writes the channel state too, once the input state is complete.
func (t *Task) performCheckpoint(b Event, firstBarrierAt int64, alignmentMs int64, unaligned bool) error {
	cc := t.cfg.Checkpointing
	if cc == nil {
		return fmt.Errorf("task %s: barrier %d but checkpointing is off", t.Name(), b.ID)
	}
	start := time.Now()
	var snaps []OperatorSnapshot
	var idx []int
	decline := func(i int, err error) error {
		for _, s := range snaps {
			if s.Release != nil {
				s.Release()
			}
		}
		name := t.cfg.Name
		if i >= 0 && i < len(t.cfg.Chain) {
			name = t.cfg.Chain[i].Name
		}
		cc.Responder.Acknowledge(TaskAck{Task: t.cfg.ID, ID: b.ID, Err: fmt.Errorf("operator %q (subtask %d/%d): snapshot: %w", name, t.cfg.Subtask+1, t.cfg.Parallelism, err)})
		// The barrier still goes downstream as a cancel marker so that
		// downstream tasks stop aligning.
		for _, w := range t.cfg.Writers {
			w.Broadcast(Event{Kind: CancelBarrier, ID: b.ID})
		}
		return nil
	}
	if s, ok := t.cfg.Source.(Snapshotter); ok {
		t.cfg.Cursor.Current = 0
		snap, err := s.SnapshotState(b.ID, b.Options)
		if err != nil {
			return decline(0, err)
		}
		snaps, idx = append(snaps, snap), append(idx, 0)
	}
	for i, c := range t.cfg.Chain {
		s, ok := c.Op.(Snapshotter)
		if !ok && c.Keyed == nil {
			continue
		}
		t.cfg.Cursor.Current = i
		snap := OperatorSnapshot{Stateless: true}
		if ok {
			var err error
			if snap, err = s.SnapshotState(b.ID, b.Options); err != nil {
				return decline(i, err)
			}
		}
		if c.Keyed != nil {
			ks, err := c.Keyed.SnapshotKeyed(b.ID, b.Options)
			if err != nil {
				if snap.Release != nil {
					snap.Release()
				}
				return decline(i, err)
			}
			snap = mergeSnapshots(snap, ks)
		}
		snaps, idx = append(snaps, snap), append(idx, i)
	}
	// The synchronous part is the operators' snapshots; forwarding the
	// barrier (which may wait for queue space under backpressure) is not.
	syncDur := time.Since(start)
	outState, timed := t.forward(b, unaligned)
	var pending *pendingChannels
	if unaligned && len(t.cfg.Inputs) > 0 {
		pending = &pendingChannels{id: b.ID, inputs: make(chan []ChannelData, 1), abort: make(chan struct{})}
		t.pending = pending
	}
	ack := TaskAck{Task: t.cfg.ID, ID: b.ID, Sync: syncDur, Alignment: time.Duration(alignmentMs) * time.Millisecond, Unaligned: unaligned}
	if firstBarrierAt > 0 && b.Timestamp > 0 {
		ack.StartDelay = time.Duration(max(0, firstBarrierAt-b.Timestamp)) * time.Millisecond
	}
	var kept []OperatorSnapshot
	for k, s := range snaps {
		if s.Stateless {
			continue
		}
		info := cc.Operators[idx[k]]
		ack.Operators = append(ack.Operators, OperatorStateResult{
			UID: info.UID, Name: info.Name, Subtask: t.cfg.Subtask, Parallelism: t.cfg.Parallelism, State: s.State,
		})
		kept = append(kept, s)
		idx[len(kept)-1] = idx[k]
	}
	releasesAll := snaps
	snaps = kept
	if t.async == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t.async = &asyncSnapshots{ctx: ctx, cancel: cancel}
	}
	a := t.async
	// release lets the operators drop what they kept for the asynchronous
	// part, on the task goroutine; it runs however that part ends (an
	// abandoned unaligned snapshot too, so that nothing it kept stays).
	release := func() {
		var releases []func()
		for _, s := range releasesAll {
			if s.Release != nil {
				releases = append(releases, s.Release)
			}
		}
		if len(releases) > 0 {
			t.postQuietly(func() error {
				for _, r := range releases {
					r()
				}
				return nil
			})
		}
	}
	a.wg.Go(func() {
		asyncStart := time.Now()
		if f := cc.Faults; f != nil && f.OnAsyncSnapshot != nil {
			if ferr := f.OnAsyncSnapshot(t.cfg.ID, b.ID); ferr != nil {
				t.postQuietly(func() error { return ferr })
			}
		}
		var err error
		for k, s := range snaps {
			if s.Async == nil || err != nil {
				continue
			}
			var n int64
			n, err = s.Async(a.ctx, &ack.Operators[k].State)
			ack.CheckpointedSize += n
			if err != nil {
				info := cc.Operators[idx[k]]
				err = fmt.Errorf("operator %q (subtask %d/%d): asynchronous snapshot: %w", info.Name, t.cfg.Subtask+1, t.cfg.Parallelism, err)
			}
		}
		if err == nil && len(timed) > 0 {
			// Wait until each timed barrier was taken or converted: a
			// converted one makes the snapshot unaligned, its overtaken
			// batches output state.
			for _, tb := range timed {
				select {
				case <-tb.Done():
				case <-a.ctx.Done():
					release()
					return
				}
				data, converted := tb.Converted()
				outState = append(outState, data...)
				if converted {
					ack.Unaligned = true
				}
			}
		}
		if (unaligned || ack.Unaligned) && err == nil {
			data := outState
			if pending != nil {
				select {
				case in := <-pending.inputs:
					data = append(data, in...)
				case <-pending.abort:
					// The task declined already (or upstream did).
					release()
					return
				case <-a.ctx.Done():
					release()
					return
				}
			}
			if data, err = resolveChannelData(a.ctx, data); err != nil && a.ctx.Err() != nil {
				release()
				return
			}
			if err == nil && len(data) > 0 {
				err = t.addChannelState(a.ctx, b.Options, &ack, data)
			}
		}
		ack.Async = time.Since(asyncStart)
		ack.Err = err
		if ack.Err != nil {
			ack.Operators = nil
		}
		for _, op := range ack.Operators {
			full, inline := op.State.Sizes()
			ack.StateSize += full
			ack.CheckpointedSize += inline
		}
		release()
		cc.Responder.Acknowledge(ack)
	})
	return nil
}

// addChannelState writes data as the task's channel state and puts its
// handle in the ack, on the head operator's state.
func (t *Task) addChannelState(ctx context.Context, opts *BarrierOptions, ack *TaskAck, data []ChannelData) error {
	head := t.cfg.Checkpointing.Operators[0]
	cs, err := writeChannelState(ctx, opts, channelStateName(head.UID, t.cfg.Subtask), data)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.Name(), err)
	}
	ack.PersistedData = cs.Size
	ack.CheckpointedSize += cs.Size - int64(len(cs.Inline)) // inline bytes are counted with the metadata
	for k := range ack.Operators {
		if ack.Operators[k].UID == head.UID {
			ack.Operators[k].State.Channels = cs
			return nil
		}
	}
	ack.Operators = append(ack.Operators, OperatorStateResult{UID: head.UID, Name: head.Name, Subtask: t.cfg.Subtask,
		Parallelism: t.cfg.Parallelism, State: checkpoint.SubtaskState{Channels: cs}})
	return nil
}

// postQuietly queues m unless the task has ended.
func (t *Task) postQuietly(m Mail) {
	select {
	case t.mailbox <- m:
		t.ringMail()
	case <-t.done:
	}
}

// stopAsync cancels and waits for the task's asynchronous snapshots.
func (t *Task) stopAsync() {
	if t.async != nil {
		t.async.cancel()
		t.async.wg.Wait()
	}
}
