package weir

import (
	"fmt"
	"sort"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// Unaligned checkpoints (Options.Checkpointing.Unaligned): every
// non-chained edge's writers and inputs keep channel state, encoded with
// the edge's codec, and a deployment restoring a checkpoint that holds
// channel state gives each writer its output state and each input its
// input state (internal/runtime/channelstate.go).

// edgeName names an edge in channel state: stable across runs as long as
// the uids of its ends are.
func (c *edgeCommon) edgeName() string {
	port := ""
	if c.port != "" {
		port = ":" + c.port
	}
	return fmt.Sprintf("%s%s->%s/%d", c.from.uid, port, c.to.uid, c.input)
}

// describe names an edge for people.
func (c *edgeCommon) describe() string {
	return fmt.Sprintf("%q -> %q (uids %s)", c.from.name, c.to.name, c.edgeName())
}

// channelKey locates one channel's state in a restored checkpoint.
type channelKey struct {
	edge               string
	output             bool
	producer, consumer int
}

type channelLoc struct {
	state  *checkpoint.ChannelState
	handle checkpoint.ChannelStateHandle
}

// restoredChannels is the channel state of the checkpoint a deployment
// restores, indexed on first use.
type restoredChannels struct {
	byKey map[channelKey]channelLoc
	files map[*checkpoint.ChannelState][]byte
	used  map[string]bool // edges found in the job
}

func (bc *buildCtx) channels() *restoredChannels {
	if bc.chans != nil {
		return bc.chans
	}
	rc := &restoredChannels{byKey: map[channelKey]channelLoc{}, files: map[*checkpoint.ChannelState][]byte{}, used: map[string]bool{}}
	bc.chans = rc
	if bc.restore == nil {
		return rc
	}
	for i := range bc.restore.Metadata.Operators {
		op := &bc.restore.Metadata.Operators[i]
		for j := range op.Subtasks {
			cs := op.Subtasks[j].Channels
			if cs == nil {
				continue
			}
			for _, h := range cs.Channels {
				rc.byKey[channelKey{h.Edge, h.Output, h.Producer, h.Consumer}] = channelLoc{cs, h}
			}
		}
	}
	return rc
}

// hasEdge reports whether the restored checkpoint holds channel state of
// the edge, and the parallelisms of its ends then.
func (rc *restoredChannels) hasEdge(edge string) (producers, consumers int, ok bool) {
	for k, l := range rc.byKey {
		if k.edge == edge {
			return l.handle.Producers, l.handle.Consumers, true
		}
	}
	return 0, 0, false
}

// read returns the records of one channel's state, nil when it has none.
func restoredRecords[T any](bc *buildCtx, cd codec.Codec[T], k channelKey) ([]T, []int64, error) {
	rc := bc.channels()
	l, ok := rc.byKey[k]
	if !ok {
		return nil, nil, nil
	}
	b, ok := rc.files[l.state]
	if !ok {
		b = l.state.Inline
		if l.state.Path != "" {
			var err error
			b, err = storage.CheckpointStorage{Store: bc.restore.Store}.ReadStateFile(bc.ctx, bc.restore.Dir, l.state.Path, l.state.Size, l.state.CRC)
			if err != nil {
				return nil, nil, fmt.Errorf("channel state of edge %s: %w", k.edge, err)
			}
		}
		rc.files[l.state] = b
	}
	h := l.handle
	if h.Offset < 0 || h.Length < 0 || h.Offset+h.Length > int64(len(b)) {
		return nil, nil, fmt.Errorf("channel state of edge %s: %w: records at %d+%d of a %d-byte file", k.edge, storage.ErrCorruptState, h.Offset, h.Length, len(b))
	}
	return runtime.DecodeChannelRecords(cd, b[h.Offset:h.Offset+h.Length], h.Records, !h.NoTimestamps)
}

// setupChannelState decides whether e keeps channel state and checks that a
// restored one fits the job. It runs in createChannels, before any writer
// or input of e is built. A restored state taken at other parallelisms of
// the edge's ends is redistributed (rescaleChannelState).
func (e *typedEdge[T]) setupChannelState(bc *buildCtx, prod, cons int) {
	rc := bc.channels()
	name := e.edgeName()
	p0, c0, restored := rc.hasEdge(name)
	e.rescaled, e.rescaledRecs, e.rescaledTS = false, nil, nil
	if restored {
		rc.used[name] = true
	}
	if !bc.opts.Checkpointing.Unaligned && !restored {
		return
	}
	cd, err := codec.Of[T]()
	if err != nil {
		bc.fail(fmt.Errorf("Options.Checkpointing.Unaligned: edge %s must store the records in flight, and %w", e.describe(), err))
		return
	}
	e.stateCodec = cd
	if restored && (p0 != prod || c0 != cons) {
		e.rescaleChannelState(bc, p0, c0, prod, cons)
	}
}

// rescaleChannelState deals the restored channel state of e, taken at
// parallelism p0 -> c0, to the consumers at prod -> cons: every record of
// it (input and output state alike) is replayed by the consumer it goes
// to, as input state, before that consumer reads anything new; producers
// replay nothing.
func (e *typedEdge[T]) rescaleChannelState(bc *buildCtx, p0, c0, prod, cons int) {
	rc := bc.channels()
	name := e.edgeName()
	var keys []channelKey
	for k := range rc.byKey {
		if k.edge == name {
			keys = append(keys, k)
		}
	}
	var chans []runtime.RestoredChannel[T]
	for _, k := range keys {
		recs, ts, err := restoredRecords(bc, e.stateCodec, k)
		if err != nil {
			bc.fail(err)
			return
		}
		chans = append(chans, runtime.RestoredChannel[T]{Handle: rc.byKey[k].handle, Recs: recs, TS: ts})
	}
	rule := runtime.RescaleRule[T]{Edge: e.describe(), Partitioner: e.part, Consumers: cons, MaxParallelism: bc.opts.MaxParallelism}
	if e.part == graph.Hash {
		rule.KeyGroup = e.keyGroup(bc.opts.MaxParallelism)
	}
	recs, ts, err := runtime.RedistributeChannelState(chans, rule)
	if err != nil {
		bc.fail(fmt.Errorf("checkpoint %s: %w", bc.restore.Dir, err))
		return
	}
	e.rescaled, e.rescaledRecs, e.rescaledTS = true, recs, ts
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	bc.logger.Info("unaligned checkpoint restored at another parallelism: records in flight redistributed",
		"edge", name, "from", fmt.Sprintf("%d->%d", p0, c0), "to", fmt.Sprintf("%d->%d", prod, cons), "partitioner", e.part.String(), "records", n)
}

// writerChannelState gives producer s's writer its channel state.
func (e *typedEdge[T]) writerChannelState(bc *buildCtx, w *runtime.RecordWriter[T], s int, consumers []int) {
	if e.stateCodec == nil {
		return
	}
	prod, cons := bc.parallelism(e.from), bc.parallelism(e.to.target())
	name := e.edgeName()
	handles := make([]checkpoint.ChannelStateHandle, len(consumers))
	var recs [][]T
	var tss [][]int64
	for i, c := range consumers {
		handles[i] = runtime.ChannelStateHandleFor(name, s, prod, c, cons, true)
		if e.rescaled {
			continue // its consumers replay it (rescaleChannelState)
		}
		r, ts, err := restoredRecords(bc, e.stateCodec, channelKey{name, true, s, c})
		if err != nil {
			bc.fail(err)
			return
		}
		if r != nil {
			if recs == nil {
				recs, tss = make([][]T, len(consumers)), make([][]int64, len(consumers))
			}
			recs[i], tss[i] = r, ts
		}
	}
	w.SetChannelState(e.stateCodec, handles, recs, tss)
}

// inputChannelState gives consumer c's input from producer p its channel
// state. When the edge was rescaled, the first input of each consumer
// replays all that was dealt to it.
func (e *typedEdge[T]) inputChannelState(bc *buildCtx, in *runtime.Input[T], p, c int) {
	if e.stateCodec == nil {
		return
	}
	prod, cons := bc.parallelism(e.from), bc.parallelism(e.to.target())
	name := e.edgeName()
	h := runtime.ChannelStateHandleFor(name, p, prod, c, cons, false)
	if e.rescaled {
		recs, ts := e.rescaledRecs[c], e.rescaledTS[c]
		e.rescaledRecs[c], e.rescaledTS[c] = nil, nil
		in.SetChannelState(e.stateCodec, h, recs, ts)
		return
	}
	recs, ts, err := restoredRecords(bc, e.stateCodec, channelKey{name, false, p, c})
	if err != nil {
		bc.fail(err)
		return
	}
	in.SetChannelState(e.stateCodec, h, recs, ts)
}

// checkChannelCoverage fails a restore whose channel state belongs to edges
// the job no longer has (unless Options.AllowNonRestoredState): those
// records would be lost. An edge the job still has but now chains (its
// ends in one task, where no channel is left to replay the records into)
// is refused whatever AllowNonRestoredState says: its operators' state
// is restored, and dropping the records in between would lose them.
func (bc *buildCtx) checkChannelCoverage(edges []edge) error {
	if bc.restore == nil {
		return nil
	}
	rc := bc.channels()
	var lost []string
	for k := range rc.byKey {
		if !rc.used[k.edge] {
			lost = append(lost, k.edge)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	for _, name := range lost {
		for _, ed := range edges {
			c := ed.common()
			if c.edgeName() != name {
				continue
			}
			p0, c0, _ := rc.hasEdge(name)
			return fmt.Errorf("checkpoint %s is unaligned and holds records in flight on edge %s, taken at parallelism %d -> %d; in this job the edge is chained (both ends at parallelism %d, forward), so there is no channel to replay them into: give the two operators different parallelisms, call DisableChaining on the consumer, or restore at the old parallelism",
				bc.restore.Dir, c.describe(), p0, c0, bc.parallelism(c.from))
		}
	}
	if bc.opts.AllowNonRestoredState {
		return nil
	}
	return fmt.Errorf("checkpoint %s is unaligned and holds records in flight on edge %s, which this job does not have: give the operators their old uids, or set Options.AllowNonRestoredState to drop those records",
		bc.restore.Dir, lost[0])
}
