package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
)

// maxTrackedAlignments bounds the checkpoints an at-least-once aligner tracks
// at once (Flink's CheckpointBarrierTracker tracks 50); the oldest is dropped
// beyond it.
const maxTrackedAlignments = 64

// AlignmentMode selects how an Aligner treats barriers.
type AlignmentMode uint8

const (
	// ExactlyOnce aligns: once barrier n arrived on a channel, the channel is
	// blocked until n arrived on every channel still open, so that the
	// snapshot sees exactly the records before barrier n on every input.
	ExactlyOnce AlignmentMode = iota
	// AtLeastOnce never blocks: the snapshot is taken once barrier n arrived
	// on every open channel, and may include records after it.
	AtLeastOnce
)

func (m AlignmentMode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("AlignmentMode(%d)", uint8(m))
}

// AlignAbortReason says why an aligner gave up on a checkpoint.
type AlignAbortReason uint8

const (
	// AlignSubsumed: a newer barrier or cancel marker arrived first (or too
	// many checkpoints were in flight). The task declines the checkpoint.
	AlignSubsumed AlignAbortReason = iota + 1
	// AlignCanceled: an upstream task sent a cancel marker; it has already
	// declined the checkpoint to the coordinator.
	AlignCanceled
)

func (r AlignAbortReason) String() string {
	switch r {
	case AlignSubsumed:
		return "subsumed"
	case AlignCanceled:
		return "canceled"
	}
	return fmt.Sprintf("AlignAbortReason(%d)", uint8(r))
}

// Action is something an Aligner asks its task to do, a closed sum like
// Decision. Actions must be carried out in order.
type Action interface {
	fmt.Stringer
	action()
}

// Snapshot says barrier ID arrived on every open channel (or, with
// Unaligned, that the task must not wait for that): the task takes its
// snapshot for ID (the synchronous part), forwards barrier ID downstream, and
// reports AlignmentMs and the start delay (FirstBarrierAt minus the trigger
// timestamp the barrier carries) in its acknowledgement. In ExactlyOnce mode
// every channel is unblocked.
type Snapshot struct {
	ID             int64
	FirstBarrierAt int64 // `now` when the first barrier (or announcement) of ID arrived
	AlignmentMs    int64 // first to last barrier ID (not blocking time in AtLeastOnce)
	// Unaligned: the snapshot is taken before barrier ID arrived on every
	// open channel (an unaligned barrier, or the aligned timeout passed).
	// The task forwards an unaligned barrier ahead of its queued output,
	// persists that output, and persists what it reads from each channel
	// on which Recording reports true, until ChannelStateDone.
	Unaligned bool
}

// ChannelStateDone says barrier ID of an unaligned snapshot arrived on
// every open channel: the input channel state of ID is complete, and the
// task may write it and acknowledge.
type ChannelStateDone struct {
	ID int64
}

// AbortAlignment says the task gives up on checkpoint ID: it forwards a
// cancel marker for ID downstream and, unless Reason is AlignCanceled,
// declines ID to the coordinator. In ExactlyOnce mode every channel is
// unblocked.
type AbortAlignment struct {
	ID     int64
	Reason AlignAbortReason
}

func (Snapshot) action()         {}
func (AbortAlignment) action()   {}
func (ChannelStateDone) action() {}

func (a Snapshot) String() string {
	s := fmt.Sprintf("snapshot id=%d first-barrier=%d alignment=%d", a.ID, a.FirstBarrierAt, a.AlignmentMs)
	if a.Unaligned {
		s += " unaligned"
	}
	return s
}

func (a ChannelStateDone) String() string { return fmt.Sprintf("channel-state-done id=%d", a.ID) }

// BarrierInfo is what the aligner needs of a barrier (or of its
// announcement): its checkpoint, its trigger time and how it asks to be
// aligned.
type BarrierInfo struct {
	ID int64
	// TriggeredAt is the checkpoint's trigger time (ms, same clock as now):
	// the aligned timeout counts from it, as in Flink.
	TriggeredAt int64
	// Unaligned: the barrier overtook the data (the sender snapshotted
	// unaligned); the receiver snapshots at once, unaligned too.
	Unaligned bool
	// AlignedTimeoutMs > 0: the barrier is aligned, and a task whose
	// alignment of it is still going on TriggeredAt+AlignedTimeoutMs
	// switches to unaligned. 0: aligned without a timeout (savepoints,
	// checkpoints without Unaligned).
	AlignedTimeoutMs int64
}

func (a AbortAlignment) String() string {
	return fmt.Sprintf("abort id=%d reason=%s", a.ID, a.Reason)
}

// Aligner is the barrier-alignment core of one task with N input channels,
// numbered 0..N-1. Like Coordinator it is a synchronous state machine that
// does no I/O and reads no clock; the task's mailbox loop owns it, feeds it
// the control events it reads from its inputs, carries out the returned
// actions, and does not read from a channel while Blocked reports true.
//
// A channel index outside 0..N-1 is a bug in the caller, and panics like an
// out-of-range slice index.
type Aligner struct {
	mode     AlignmentMode
	open     []bool // false once end-of-partition arrived
	numOpen  int
	lastDone int64        // highest id snapshotted or aborted
	inflight []*alignment // ascending id; at most one in ExactlyOnce mode
}

type alignment struct {
	id       int64
	firstAt  int64
	seen     []bool
	seenOpen int // channels still open on which the barrier arrived
	// info is the first barrier's (or announcement's).
	info BarrierInfo
	// snapshotted: an unaligned snapshot was taken; the alignment waits only
	// for the input channel state (ExactlyOnce).
	snapshotted bool
}

// NewAligner returns an aligner for a task with channels input channels, all
// open. channels must be at least 1.
func NewAligner(mode AlignmentMode, channels int) (*Aligner, error) {
	if mode != ExactlyOnce && mode != AtLeastOnce {
		return nil, fmt.Errorf("checkpoint: aligner mode %s unknown", mode)
	}
	if channels < 1 {
		return nil, fmt.Errorf("checkpoint: aligner has %d input channels, want >= 1", channels)
	}
	a := &Aligner{mode: mode, open: make([]bool, channels), numOpen: channels}
	for i := range a.open {
		a.open[i] = true
	}
	return a, nil
}

// Mode returns the aligner's mode.
func (a *Aligner) Mode() AlignmentMode { return a.mode }

// NumChannels returns the number of input channels, finished or not.
func (a *Aligner) NumChannels() int { return len(a.open) }

// Finished reports whether end-of-partition arrived on ch.
func (a *Aligner) Finished(ch int) bool { return !a.open[ch] }

// Blocked reports whether the task must not read ch: in ExactlyOnce mode, the
// barrier being aligned arrived on ch and not yet on every open channel,
// and the alignment did not switch to unaligned.
func (a *Aligner) Blocked(ch int) bool {
	return a.mode == ExactlyOnce && a.open[ch] && len(a.inflight) == 1 && a.inflight[0].seen[ch] && !a.inflight[0].snapshotted
}

// Recording reports whether what the task reads from ch is input channel
// state: an unaligned snapshot was taken and its barrier has not arrived
// on ch yet.
func (a *Aligner) Recording(ch int) bool {
	return a.mode == ExactlyOnce && a.open[ch] && len(a.inflight) == 1 && a.inflight[0].snapshotted && !a.inflight[0].seen[ch]
}

// NextTimeout returns when the alignment in progress switches to unaligned
// unless it completes first: the task calls Tick then. ok is false when no
// alignment has a timeout to wait for.
func (a *Aligner) NextTimeout() (at int64, ok bool) {
	if a.mode != ExactlyOnce || len(a.inflight) != 1 {
		return 0, false
	}
	al := a.inflight[0]
	if al.snapshotted || al.info.Unaligned || al.info.AlignedTimeoutMs <= 0 {
		return 0, false
	}
	return al.info.TriggeredAt + al.info.AlignedTimeoutMs, true
}

// Tick lets the aligner act on the clock: an aligned alignment whose
// timeout passed switches to unaligned (Snapshot with Unaligned).
func (a *Aligner) Tick(now int64) []Action {
	at, ok := a.NextTimeout()
	if !ok || now < at {
		return nil
	}
	return a.switchUnaligned(a.inflight[0], now, nil)
}

// switchUnaligned snapshots al unaligned now; when its barrier already
// arrived on every open channel the channel state is complete at once.
func (a *Aligner) switchUnaligned(al *alignment, now int64, acts []Action) []Action {
	al.snapshotted = true
	acts = append(acts, Snapshot{ID: al.id, FirstBarrierAt: al.firstAt, AlignmentMs: now - al.firstAt, Unaligned: true})
	return a.completeReady(now, acts)
}

// timedOut reports whether al should be unaligned at now.
func (al *alignment) timedOut(now int64) bool {
	return al.info.Unaligned || (al.info.AlignedTimeoutMs > 0 && now >= al.info.TriggeredAt+al.info.AlignedTimeoutMs)
}

// OnAnnounce handles the announcement of barrier b read from ch at now: the
// sender queued b behind data and announced it ahead of the data, so that
// this task knows of the checkpoint (and of its aligned timeout) before the
// barrier reaches the head of the queue. It starts tracking b without
// blocking ch, and switches to unaligned at once if b's timeout passed.
// Announcements of checkpoints already known, done or older are ignored; it
// does nothing outside ExactlyOnce mode.
func (a *Aligner) OnAnnounce(ch int, b BarrierInfo, now int64) []Action {
	if a.mode != ExactlyOnce || !a.open[ch] || b.ID <= a.lastDone {
		return nil
	}
	var acts []Action
	if len(a.inflight) == 1 {
		switch cur := a.inflight[0]; {
		case b.ID <= cur.id:
			return nil
		default:
			acts = append(acts, AbortAlignment{ID: cur.id, Reason: AlignSubsumed})
			a.lastDone = cur.id
			a.inflight = nil
		}
	}
	al := &alignment{id: b.ID, firstAt: now, seen: make([]bool, len(a.open)), info: b}
	a.inflight = []*alignment{al}
	if al.timedOut(now) {
		return a.switchUnaligned(al, now, acts)
	}
	return acts
}

// Aligning returns the newest checkpoint whose barriers are arriving.
func (a *Aligner) Aligning() (id int64, ok bool) {
	if len(a.inflight) == 0 {
		return 0, false
	}
	return a.inflight[len(a.inflight)-1].id, true
}

// OnBarrier handles barrier id read from ch at now. Barriers for ids already
// snapshotted or aborted, for ids older than the one being aligned
// (ExactlyOnce), and repeated barriers on a channel are ignored. In
// ExactlyOnce mode a barrier newer than the one being aligned aborts that
// alignment (AlignSubsumed) and starts a new one, as in Flink.
func (a *Aligner) OnBarrier(ch int, id int64, now int64) []Action {
	return a.OnBarrierInfo(ch, BarrierInfo{ID: id}, now)
}

// OnBarrierInfo is OnBarrier for a barrier that may be unaligned or have an
// aligned timeout (ExactlyOnce mode; AtLeastOnce ignores both). The first
// barrier (or announcement) of a checkpoint decides: an unaligned one, or
// one whose timeout already passed, makes the task snapshot at once
// (Snapshot with Unaligned), and ChannelStateDone follows once the barrier
// arrived on every open channel.
func (a *Aligner) OnBarrierInfo(ch int, b BarrierInfo, now int64) []Action {
	id := b.ID
	if !a.open[ch] || id <= a.lastDone {
		return nil
	}
	var acts []Action
	if a.mode == ExactlyOnce && len(a.inflight) == 1 {
		switch cur := a.inflight[0]; {
		case id < cur.id:
			return nil
		case id > cur.id:
			acts = append(acts, AbortAlignment{ID: cur.id, Reason: AlignSubsumed})
			a.lastDone = cur.id
			a.inflight = nil
		}
	}
	al := a.find(id)
	if al == nil {
		al = &alignment{id: id, firstAt: now, seen: make([]bool, len(a.open)), info: b}
		i, _ := slices.BinarySearchFunc(a.inflight, id, func(x *alignment, id int64) int { return cmp.Compare(x.id, id) })
		a.inflight = slices.Insert(a.inflight, i, al)
		if len(a.inflight) > maxTrackedAlignments {
			oldest := a.inflight[0]
			acts = append(acts, AbortAlignment{ID: oldest.id, Reason: AlignSubsumed})
			a.lastDone = oldest.id
			a.inflight = a.inflight[1:]
			if oldest == al {
				return acts
			}
		}
	}
	if al.seen[ch] {
		return acts
	}
	al.seen[ch] = true
	al.seenOpen++
	if a.mode == ExactlyOnce && !al.snapshotted && (al.timedOut(now) || b.Unaligned) {
		return a.switchUnaligned(al, now, acts)
	}
	return a.completeReady(now, acts)
}

// OnCancel handles a cancel marker for id read from ch: the alignment of id
// is abandoned (AlignCanceled) and older ones with it (AlignSubsumed). Its
// barriers arriving later are ignored. Markers for ids already finished, or
// (ExactlyOnce) older than the one being aligned, are ignored, so that the
// marker arriving on every channel acts once.
func (a *Aligner) OnCancel(ch int, id int64) []Action {
	if !a.open[ch] || id <= a.lastDone {
		return nil
	}
	if a.mode == ExactlyOnce && len(a.inflight) == 1 && id < a.inflight[0].id {
		return nil
	}
	var acts []Action
	n := 0
	for _, al := range a.inflight {
		if al.id >= id {
			break
		}
		acts = append(acts, AbortAlignment{ID: al.id, Reason: AlignSubsumed})
		n++
	}
	if n < len(a.inflight) && a.inflight[n].id == id {
		n++
	}
	a.inflight = a.inflight[n:]
	a.lastDone = id
	return append(acts, AbortAlignment{ID: id, Reason: AlignCanceled})
}

// OnEndOfPartition handles the end of ch at now: ch no longer counts toward
// any alignment, which may complete alignments that only waited for it.
func (a *Aligner) OnEndOfPartition(ch int, now int64) []Action {
	if !a.open[ch] {
		return nil
	}
	a.open[ch] = false
	a.numOpen--
	for _, al := range a.inflight {
		if al.seen[ch] {
			al.seenOpen--
		}
	}
	return a.completeReady(now, nil)
}

// completeReady snapshots every in-flight checkpoint whose barrier arrived on
// all open channels, ascending, and aborts the incomplete ones older than
// the newest snapshotted (a newer snapshot subsumes them).
func (a *Aligner) completeReady(now int64, acts []Action) []Action {
	last := -1
	for i, al := range a.inflight {
		if al.seenOpen == a.numOpen {
			last = i
		}
	}
	if last < 0 {
		return acts
	}
	for _, al := range a.inflight[:last+1] {
		switch {
		case al.seenOpen == a.numOpen && al.snapshotted:
			acts = append(acts, ChannelStateDone{ID: al.id})
		case al.seenOpen == a.numOpen:
			acts = append(acts, Snapshot{ID: al.id, FirstBarrierAt: al.firstAt, AlignmentMs: now - al.firstAt})
		default:
			acts = append(acts, AbortAlignment{ID: al.id, Reason: AlignSubsumed})
		}
	}
	a.lastDone = a.inflight[last].id
	a.inflight = a.inflight[last+1:]
	return acts
}

func (a *Aligner) find(id int64) *alignment {
	for _, al := range a.inflight {
		if al.id == id {
			return al
		}
	}
	return nil
}
