package weir

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/adapt"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/typeinfo"
	"github.com/weirstream/weir/internal/watermark"
)

// lifecycle gives operators without resources empty Open, Finish and Close.
type lifecycle struct{}

func (lifecycle) Open() error   { return nil }
func (lifecycle) Finish() error { return nil }
func (lifecycle) Close() error  { return nil }

// The batch path (EmitBatch) of the operators below calls the user
// function on every record of the batch before it emits anything
// downstream, so that a panic in the user function happens while the
// Cursor names the operator; what runs downstream sets the Cursor itself.
// Each keeps scratch slices for its output, reused from batch to batch
// (the callee of EmitBatch keeps nothing), and clears them after use so
// that they hold no references to records that are gone — unless the
// record type holds no pointers (typeinfo.HoldsPointers, decided when the
// operator is built), when there is nothing to release.

type mapOp[T, U any] struct {
	lifecycle
	inCount
	fn   func(T) U
	out  runtime.Output[U]
	bout runtime.BatchOutput[U]
	// filter is out itself when out is a chained filter that takes every
	// record of the map and nothing else takes any: the batch path then
	// runs the two as one pass (emitFiltered).
	filter       *filterOp[U]
	scratch      []U
	clearScratch bool // U holds pointers
	cur          *runtime.Cursor
	idx          int
}

func newMapOp[T, U any](fn func(T) U, out runtime.Output[U], env *opEnv) *mapOp[T, U] {
	o := &mapOp[T, U]{fn: fn, out: out, bout: runtime.Batched(out), clearScratch: typeinfo.HoldsPointers[U](),
		cur: env.cursor, idx: env.index}
	// The port hands a map the bare input of its consumer only when that
	// consumer is chained, is the only one and counts the records it
	// receives (wiring.go): a writer to a channel, a fan-out or a counting
	// wrapper is not a *filterOp, so a filter behind a shuffle, with
	// another parallelism or with chaining disabled is never fused.
	o.filter, _ = out.(*filterOp[U])
	return o
}

func (o *mapOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.in.N++
	o.out.Emit(o.fn(rec), ts)
}

// EmitBatch implements runtime.BatchOutput.
func (o *mapOp[T, U]) EmitBatch(recs []T, ts []int64) {
	if o.filter != nil {
		o.emitFiltered(recs, ts)
		return
	}
	o.cur.Current = o.idx
	o.in.N += int64(len(recs))
	out := slices.Grow(o.scratch[:0], len(recs))[:len(recs)]
	o.scratch = out
	recs = recs[:len(out)]
	fn := o.fn
	for i := range out {
		out[i] = fn(recs[i])
	}
	o.bout.EmitBatch(out, ts)
	if o.clearScratch {
		clear(out)
	}
}

// emitFiltered is the batch path of a map fused with the chained filter
// that takes its output: one pass over recs applies the map's function
// and then the filter's to each record, and writes each mapped record
// once, into the filter's scratch slice, where separate batch paths make
// a pass each and store the mapped batch in between. What reaches the
// filter's output, and when, is what the two batch paths give: the same
// records, timestamps and batch. Each operator counts the records it
// receives as before. The filter's Chooser picks the loop, as in
// filterOp.EmitBatch. Fusion cannot reorder records and control events:
// barriers and watermarks travel between batches, and this is one batch.
//
// Blame costs the pass nothing per record: the Cursor names the map for
// the whole pass, and if a function panics, blameFused, deferred, reads
// the panicking stack to see which of the two calls was in progress and
// names the filter when it was the filter's. (Storing the Cursor around
// each call, as before, cost the branching loop 10%.) The stores into the
// scratch slices go through unsafe pointers: n <= i < len(recs) ==
// len(kept), which the compiler cannot prove.
//
// It is kept out of line: profile-guided optimization turns the calls of
// fn and keep into guarded direct calls and inlines them (Scale and
// NotFifth in bench/default.pgo) in emitFiltered's own body, and a copy
// of emitFiltered inlined into EmitBatch would be the body from before
// that, with plain calls through function values.
//
//go:noinline
func (o *mapOp[T, U]) emitFiltered(recs []T, ts []int64) {
	f := o.filter
	o.in.N += int64(len(recs))
	f.in.N += int64(len(recs))
	fn, keep := o.fn, f.keep
	kept := f.scratchFor(len(recs))
	at := unsafe.Pointer(unsafe.SliceData(kept))
	var keptTS []int64
	var atTS unsafe.Pointer
	if ts != nil {
		keptTS = f.timestampsFor(len(recs))
		atTS = unsafe.Pointer(unsafe.SliceData(keptTS))
		ts = ts[:len(recs)]
	}
	flavor, start := f.loopFor(len(recs))
	o.cur.Current = o.idx
	passed := false
	defer func() {
		if !passed {
			o.blameFused()
		}
	}()
	n := 0
	switch {
	case ts == nil && flavor == branchFree:
		for _, r := range recs {
			u := fn(r)
			*(*U)(unsafe.Add(at, uintptr(n)*unsafe.Sizeof(u))) = u
			if keep(u) {
				n++
			}
		}
	case ts == nil:
		for _, r := range recs {
			u := fn(r)
			if keep(u) {
				*(*U)(unsafe.Add(at, uintptr(n)*unsafe.Sizeof(u))) = u
				n++
			}
		}
	case flavor == branchFree:
		for i, r := range recs {
			u := fn(r)
			*(*U)(unsafe.Add(at, uintptr(n)*unsafe.Sizeof(u))) = u
			*(*int64)(unsafe.Add(atTS, uintptr(n)*8)) = ts[i]
			if keep(u) {
				n++
			}
		}
	default:
		for i, r := range recs {
			u := fn(r)
			if keep(u) {
				*(*U)(unsafe.Add(at, uintptr(n)*unsafe.Sizeof(u))) = u
				*(*int64)(unsafe.Add(atTS, uintptr(n)*8)) = ts[i]
				n++
			}
		}
	}
	passed = true
	f.ranLoop(flavor, len(recs), start)
	f.emitKept(kept, keptTS, n)
}

// blameFused runs when a function panicked during emitFiltered's pass
// (the Cursor names the map): if the pass was in its call of the filter's
// function, the Cursor names the filter.
func (o *mapOp[T, U]) blameFused() {
	if inFusedFilterCall() {
		o.cur.Current = o.filter.idx
	}
}

type flatMapOp[T, U any] struct {
	lifecycle
	inCount
	fn    func(T, Collector[U])
	coll  collector[U]
	batch batchCollector[U]
	ts    int64
	cur   *runtime.Cursor
	idx   int
}

func newFlatMapOp[T, U any](fn func(T, Collector[U]), out runtime.Output[U], env *opEnv) *flatMapOp[T, U] {
	op := &flatMapOp[T, U]{fn: fn, cur: env.cursor, idx: env.index}
	op.coll = newCollector(out, &op.ts, env)
	op.batch = batchCollector[U]{out: runtime.Batched(out), clearRecs: typeinfo.HoldsPointers[U](), cur: env.cursor, idx: env.index}
	return op
}

func (o *flatMapOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.in.N++
	o.ts = ts
	o.fn(rec, &o.coll)
}

// EmitBatch implements runtime.BatchOutput: what fn collects over the
// batch goes downstream in batches of up to flatMapBatch records, and all
// of it before EmitBatch returns.
func (o *flatMapOp[T, U]) EmitBatch(recs []T, ts []int64) {
	o.cur.Current = o.idx
	o.in.N += int64(len(recs))
	c := &o.batch
	c.timed = ts != nil
	fn := o.fn
	if ts == nil {
		for _, r := range recs {
			fn(r, c)
		}
	} else {
		for i, r := range recs {
			c.ts = ts[i]
			fn(r, c)
		}
	}
	c.flush()
}

// flatMapBatch is the most records a flatMap's batch collector holds
// before it sends them downstream: a function that emits many records per
// input does not make it buffer many batches' worth.
const flatMapBatch = 1024

// batchCollector is the Collector of a flatMap on its batch path: it
// gathers the records, with the timestamp of the input record being
// processed when the batch has timestamps.
type batchCollector[T any] struct {
	out       runtime.BatchOutput[T]
	recs      []T
	tss       []int64
	clearRecs bool // T holds pointers
	timed     bool
	ts        int64
	cur       *runtime.Cursor
	idx       int
}

// Collect implements Collector.
func (c *batchCollector[T]) Collect(v T) {
	c.recs = append(c.recs, v)
	if c.timed {
		c.tss = append(c.tss, c.ts)
	}
	if len(c.recs) >= flatMapBatch {
		c.flush()
		// The user function goes on: a panic in it is its operator's.
		c.cur.Current = c.idx
	}
}

// flush sends what was collected downstream.
func (c *batchCollector[T]) flush() {
	if len(c.recs) == 0 {
		return
	}
	var ts []int64
	if c.timed {
		ts = c.tss
	}
	c.out.EmitBatch(c.recs, ts)
	if c.clearRecs {
		clear(c.recs)
	}
	c.recs, c.tss = c.recs[:0], c.tss[:0]
}

type filterOp[T any] struct {
	lifecycle
	inCount
	keep         func(T) bool
	out          runtime.Output[T]
	bout         runtime.BatchOutput[T]
	scratch      []T
	tss          []int64
	clearScratch bool // T holds pointers
	// adapt picks the batch loop (EmitBatch), for the fused map→filter
	// pass too.
	adapt *adapt.Chooser
	cur   *runtime.Cursor
	idx   int
}

// The flavors of the filter's batch loop (EmitBatch).
const (
	branchFree adapt.Flavor = iota
	branching
)

func newFilterOp[T any](keep func(T) bool, out runtime.Output[T], env *opEnv) *filterOp[T] {
	return &filterOp[T]{keep: keep, out: out, bout: runtime.Batched(out), clearScratch: typeinfo.HoldsPointers[T](),
		adapt: filterChooser(env.filterLoop), cur: env.cursor, idx: env.index}
}

// filterChooser returns the Chooser of a filter's loop named loop
// (adapt.ForcedFilterLoop; "" is adaptive too, for operators built
// without an Environment).
func filterChooser(loop string) *adapt.Chooser {
	switch loop {
	case "branch-free":
		return adapt.Fixed(branchFree)
	case "branching":
		return adapt.Fixed(branching)
	}
	return adapt.New(adapt.Options{})
}

func (o *filterOp[T]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.in.N++
	if o.keep(rec) {
		o.out.Emit(rec, ts)
	}
}

// EmitBatch implements runtime.BatchOutput: the kept records (and their
// timestamps) are compacted into scratch slices and sent on in one batch,
// by one of two loops that the filter's Chooser picks (package adapt):
//   - branchFree stores every record and advances the count past the kept
//     ones only: no branch on the user's answer, so nothing to mispredict;
//   - branching stores the kept records only, behind a branch on the
//     answer: faster when the answers follow a pattern the CPU predicts.
func (o *filterOp[T]) EmitBatch(recs []T, ts []int64) {
	o.cur.Current = o.idx
	o.in.N += int64(len(recs))
	keep := o.keep
	kept := o.scratchFor(len(recs))
	var keptTS []int64
	if ts != nil {
		keptTS = o.timestampsFor(len(recs))
		ts = ts[:len(recs)]
	}
	flavor, start := o.loopFor(len(recs))
	n := 0
	switch {
	case ts == nil && flavor == branchFree:
		for _, r := range recs {
			kept[n] = r
			if keep(r) {
				n++
			}
		}
	case ts == nil:
		for _, r := range recs {
			if keep(r) {
				kept[n] = r
				n++
			}
		}
	case flavor == branchFree:
		for i, r := range recs {
			kept[n], keptTS[n] = r, ts[i]
			if keep(r) {
				n++
			}
		}
	default:
		for i, r := range recs {
			if keep(r) {
				kept[n], keptTS[n] = r, ts[i]
				n++
			}
		}
	}
	o.ranLoop(flavor, len(recs), start)
	o.emitKept(kept, keptTS, n)
}

// loopFor returns the loop to run a batch of n records with, and, if the
// Chooser wants the batch timed, the time it starts (else the zero Time).
func (o *filterOp[T]) loopFor(n int) (adapt.Flavor, time.Time) {
	flavor, timed := o.adapt.Next(n)
	if !timed {
		return flavor, time.Time{}
	}
	return flavor, time.Now()
}

// ranLoop reports a batch of n records that loopFor started at start to
// the Chooser, if it was timed.
func (o *filterOp[T]) ranLoop(flavor adapt.Flavor, n int, start time.Time) {
	if !start.IsZero() {
		o.adapt.Observe(flavor, n, time.Since(start).Nanoseconds())
	}
}

// scratchFor returns the filter's scratch slice of records, n long, reused
// from batch to batch.
func (o *filterOp[T]) scratchFor(n int) []T {
	o.scratch = slices.Grow(o.scratch[:0], n)[:n]
	return o.scratch
}

// timestampsFor returns the filter's scratch slice of timestamps, n long.
func (o *filterOp[T]) timestampsFor(n int) []int64 {
	o.tss = slices.Grow(o.tss[:0], n)[:n]
	return o.tss
}

// emitKept sends the first n records of kept (and of keptTS, unless nil)
// on in one batch, and then releases what kept refers to.
func (o *filterOp[T]) emitKept(kept []T, keptTS []int64, n int) {
	if n > 0 {
		if keptTS != nil {
			keptTS = keptTS[:n]
		}
		o.bout.EmitBatch(kept[:n], keptTS)
	}
	if o.clearScratch {
		clear(kept)
	}
}

// openClose calls the optional Open and Close hooks of a user function.
type openClose[C any] struct {
	fn  any
	ctx C
}

func (o openClose[C]) open() error {
	if f, ok := o.fn.(interface{ Open(C) error }); ok {
		return f.Open(o.ctx)
	}
	return nil
}

func (o openClose[C]) close() error {
	if f, ok := o.fn.(closer); ok {
		return f.Close()
	}
	return nil
}

type processOp[T, U any] struct {
	inCount
	fn   ProcessFunction[T, U]
	ctx  *Context
	coll collector[U]
	cur  *runtime.Cursor
	idx  int
}

func (o *processOp[T, U]) Open() error   { return openClose[*Context]{o.fn, o.ctx}.open() }
func (o *processOp[T, U]) Finish() error { return nil }
func (o *processOp[T, U]) Close() error  { return openClose[*Context]{o.fn, o.ctx}.close() }

func (o *processOp[T, U]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.env.ops.snapshot(id, o.fn)
}
func (o *processOp[T, U]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *processOp[T, U]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}

func (o *processOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.in.N++
	o.ctx.ts = ts
	if err := o.fn.ProcessElement(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}

type sinkOp[T any] struct {
	inCount
	sink connector.Sink[T]
	env  *opEnv
	w    connector.Writer[T]
	bw   connector.BatchWriter[T] // w, when it takes batches
	// pending are pre-committed transactions not yet known to be
	// committed: they go into every snapshot until a completed checkpoint
	// commits them.
	pending   []connector.Committable
	committer connector.Committer
}

func (o *sinkOp[T]) Open() error {
	w, err := o.sink.NewWriter(connector.WriterContext{
		JobID: o.env.jobID, Subtask: o.env.subtask, Parallelism: o.env.parallelism,
		Attempt: o.env.attempt, Logger: o.env.logger,
	})
	if err != nil {
		return fmt.Errorf("open sink writer: %w", err)
	}
	o.w = w
	o.bw, _ = w.(connector.BatchWriter[T])
	if _, ok := w.(connector.PreCommitter); ok {
		c, ok := o.sink.(connector.Committer)
		if !ok {
			return fmt.Errorf("sink writer pre-commits but the sink is not a connector.Committer")
		}
		o.committer = c
	}
	// Transactions of the restored checkpoint were committed by
	// prepareSink, before any writer opened.
	return nil
}

func (o *sinkOp[T]) Emit(rec T, _ int64) {
	o.env.cursor.Current = o.env.index
	o.in.N++
	if err := o.w.Write(rec); err != nil {
		runtime.Fail(err)
	}
}

// EmitBatch implements runtime.BatchOutput: one WriteBatch when the writer
// is a connector.BatchWriter, else Write per record.
func (o *sinkOp[T]) EmitBatch(recs []T, _ []int64) {
	o.env.cursor.Current = o.env.index
	o.in.N += int64(len(recs))
	if o.bw != nil {
		if err := o.bw.WriteBatch(recs); err != nil {
			runtime.Fail(err)
		}
		return
	}
	w := o.w
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			runtime.Fail(err)
		}
	}
}

func (o *sinkOp[T]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	if err := o.w.Flush(false); err != nil {
		return runtime.OperatorSnapshot{}, err
	}
	snap := runtime.OperatorSnapshot{Stateless: true}
	if pc, ok := o.w.(connector.PreCommitter); ok {
		snap.Stateless = false
		data, err := pc.PreCommit(id)
		if err != nil {
			return snap, fmt.Errorf("pre-commit: %w", err)
		}
		if data != nil {
			o.pending = append(o.pending, connector.Committable{CheckpointID: id, Subtask: o.env.subtask, Data: data})
		}
		for _, c := range o.pending {
			snap.State.Committables = append(snap.State.Committables, checkpoint.Committable{CheckpointID: c.CheckpointID, Subtask: c.Subtask, Data: c.Data})
		}
	}
	return snap, nil
}

func (o *sinkOp[T]) NotifyCheckpointComplete(id int64) error {
	if o.committer == nil {
		return nil
	}
	var ready, rest []connector.Committable
	for _, c := range o.pending {
		if c.CheckpointID <= id {
			ready = append(ready, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	if err := o.committer.Commit(o.env.ctx, ready); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	o.pending = rest
	return nil
}

func (o *sinkOp[T]) NotifyCheckpointAborted(int64) error { return nil }

func (o *sinkOp[T]) Finish() error {
	if len(o.pending) > 0 {
		// The final checkpoint commits everything before the end of input
		// reaches a sink; a transaction left over here would be lost.
		return fmt.Errorf("%d pre-committed transactions (first: checkpoint %d) are not committed at the end of input", len(o.pending), o.pending[0].CheckpointID)
	}
	return o.w.Flush(true)
}

func (o *sinkOp[T]) Close() error {
	if o.w == nil {
		return nil
	}
	w := o.w
	o.w = nil
	return w.Close()
}

// sourceNode reads a connector.Source.
type sourceNode[T any] struct {
	nodeBase
	strategy *WatermarkStrategy[T]
	src      connector.Source[T]
	out      *port[T]
	splits   []connector.SplitState // enumerated once per deployment
	listed   bool
	dealt    [][]connector.SplitState // by subtask, for a connector.SplitDiscoverer
}

func (n *sourceNode[T]) reset(int) { n.splits, n.listed, n.dealt = nil, false, nil }

func (n *sourceNode[T]) buildHead(bc *buildCtx, s int) {
	par := bc.parallelism(&n.nodeBase)
	if !n.listed && !bc.restoreHas(n.uid) {
		n.listed = true
		splits, err := n.src.Splits(bc.ctx, par)
		if err != nil {
			bc.fail(fmt.Errorf("source %q: %w", n.name, err))
			return
		}
		n.splits = splits
	}
	env := bc.opEnv(&n.nodeBase, s)
	var mine []connector.SplitState
	if d, ok := n.src.(connector.SplitDiscoverer); ok && d.DiscoversSplits() {
		if mine, ok = n.dealByOwner(bc, d, par, s); !ok {
			return
		}
	} else if bc.restoreHas(n.uid) {
		// A restored job reads the splits of its checkpoint, from their
		// positions; splits finished before the checkpoint are not there.
		if env.restored != nil {
			mine = env.restored.splits
		}
	} else {
		for i, sp := range n.splits {
			if i%par == s {
				mine = append(mine, sp)
			}
		}
	}
	d := &sourceDriver[T]{src: n.src, env: env, splits: mine, strategy: n.strategy}
	d.emit.setOutput(n.out.output(bc, s), env)
	bc.task(&n.nodeBase, s).Source = d
	bc.addOperator(&n.nodeBase, s, sourceOp[T]{d: d}, env)
}

// dealByOwner returns subtask s's splits of a source that discovers splits
// at run time: those of the first start, or of every subtask of the
// restored checkpoint, dealt by the source's owner rule, so that no split
// is held by a subtask other than the one whose discovery owns it
// (connector.SplitDiscoverer). It reports false after failing the build.
func (n *sourceNode[T]) dealByOwner(bc *buildCtx, d connector.SplitDiscoverer, par, s int) ([]connector.SplitState, bool) {
	if n.dealt == nil {
		splits := n.splits
		if bc.restoreHas(n.uid) {
			for _, op := range bc.restore.Metadata.Operators {
				if op.UID != n.uid {
					continue
				}
				for _, st := range op.Subtasks {
					for _, sp := range st.Splits {
						splits = append(splits, connector.SplitState{ID: sp.ID, Data: sp.Data, Position: sp.Position})
					}
				}
			}
		}
		dealt, err := connector.AssignSplits(splits, par, d.SplitOwner)
		if err != nil {
			bc.fail(fmt.Errorf("source %q: %w", n.name, err))
			return nil, false
		}
		n.dealt = dealt
	}
	return n.dealt[s], true
}

// sourceOp is a source's place in its chain: it passes the notice of a
// completed checkpoint on to a reader that is a
// connector.CheckpointListener.
type sourceOp[T any] struct {
	lifecycle
	d *sourceDriver[T]
}

func (o sourceOp[T]) NotifyCheckpointComplete(id int64) error {
	if l, ok := o.d.reader.(connector.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (o sourceOp[T]) NotifyCheckpointAborted(int64) error { return nil }

type sourceDriver[T any] struct {
	src      connector.Source[T]
	env      *opEnv
	splits   []connector.SplitState
	reader   connector.Reader[T]
	emit     emitter[T]
	strategy *WatermarkStrategy[T]
	wmOut    runtime.WatermarkOutput
	timers   *runtime.ProcessingTimers
}

// emitter is the connector.Emitter of a source driver; with a watermark
// strategy it tracks watermarks per split.
type emitter[T any] struct {
	out   runtime.Output[T]
	bout  runtime.BatchOutput[T]
	count int64
	wm    *watermarking[T]
	// cur and idx are the task's Cursor and the source's index in the
	// chain: after the chain returns, the Cursor names the source again,
	// so that a panic in the reader (or its generator) is the source's.
	cur *runtime.Cursor
	idx int
}

func (e *emitter[T]) setOutput(out runtime.Output[T], env *opEnv) {
	e.out, e.bout = out, runtime.Batched(out)
	e.cur, e.idx = env.cursor, env.index
}

func (e *emitter[T]) Emit(rec T)             { e.emit("", rec, runtime.NoTimestamp) }
func (e *emitter[T]) EmitAt(rec T, ts int64) { e.emit("", rec, ts) }

// EmitBatch implements connector.BatchEmitter. With a watermark strategy
// every record goes through the per-split watermark tracking one by one.
func (e *emitter[T]) EmitBatch(recs []T) { e.emitBatch("", recs) }

func (e *emitter[T]) emitBatch(split string, recs []T) {
	if e.wm != nil {
		for _, r := range recs {
			e.emit(split, r, runtime.NoTimestamp)
		}
		return
	}
	e.count += int64(len(recs))
	e.bout.EmitBatch(recs, nil)
	e.cur.Current = e.idx
}

// ForSplit implements connector.SplitOutputs.
func (e *emitter[T]) ForSplit(id string) connector.Emitter[T] { return splitEmitter[T]{e, id} }

// ReleaseSplit implements connector.SplitOutputs.
func (e *emitter[T]) ReleaseSplit(id string) {
	if e.wm != nil {
		e.wm.release(id)
	}
}

func (e *emitter[T]) emit(split string, rec T, ts int64) {
	e.count++
	if e.wm == nil {
		e.out.Emit(rec, ts)
		e.cur.Current = e.idx
		return
	}
	ts = e.wm.timestamp(rec, ts)
	after, out := e.wm.before(split, ts)
	e.out.Emit(rec, ts)
	e.cur.Current = e.idx
	if after != nil && !out.Empty() {
		if err := after.EmitWatermarkOutput(out); err != nil {
			runtime.Fail(err)
		}
	}
}

type splitEmitter[T any] struct {
	e  *emitter[T]
	id string
}

func (s splitEmitter[T]) Emit(rec T)             { s.e.emit(s.id, rec, runtime.NoTimestamp) }
func (s splitEmitter[T]) EmitAt(rec T, ts int64) { s.e.emit(s.id, rec, ts) }
func (s splitEmitter[T]) EmitBatch(recs []T)     { s.e.emitBatch(s.id, recs) }

var (
	_ connector.SplitOutputs[int] = (*emitter[int])(nil)
	_ connector.BatchEmitter[int] = (*emitter[int])(nil)
	_ connector.BatchEmitter[int] = splitEmitter[int]{}
	_ runtime.BatchOutput[int]    = (*mapOp[int, int])(nil)
	_ runtime.BatchOutput[int]    = (*flatMapOp[int, int])(nil)
	_ runtime.BatchOutput[int]    = (*filterOp[int])(nil)
	_ runtime.BatchOutput[int]    = (*sinkOp[int])(nil)
)

func (d *sourceDriver[T]) Available() <-chan struct{} { return d.reader.Available() }

// BindWatermarks implements runtime.WatermarkSource.
func (d *sourceDriver[T]) BindWatermarks(out runtime.WatermarkOutput, timers *runtime.ProcessingTimers) {
	d.wmOut, d.timers = out, timers
}

// EndOfInput implements runtime.WatermarkSource: the maximum watermark
// follows the last record, so that event-time timers and windows fire.
func (d *sourceDriver[T]) EndOfInput() error {
	if d.emit.wm != nil {
		return d.wmOut.EmitWatermarkOutput(d.emit.wm.splits.EndOfInput())
	}
	return d.wmOut.EmitWatermarkOutput(watermark.Output{Advanced: true, Watermark: watermark.MaxWatermark})
}

func (d *sourceDriver[T]) TakeRecordCount() int64 {
	n := d.emit.count
	d.emit.count = 0
	return n
}

func (d *sourceDriver[T]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	splits, err := d.reader.Snapshot(id)
	if err != nil {
		return runtime.OperatorSnapshot{}, fmt.Errorf("source reader snapshot: %w", err)
	}
	var snap runtime.OperatorSnapshot
	snap.State.Splits = make([]checkpoint.SplitState, 0, len(splits))
	for _, sp := range splits {
		snap.State.Splits = append(snap.State.Splits, checkpoint.SplitState{ID: sp.ID, Data: sp.Data, Position: sp.Position})
	}
	return snap, nil
}

func (d *sourceDriver[T]) Open() error {
	request := func() {}
	if resp := d.env.responder; resp != nil {
		task := d.env.taskID
		request = func() { resp.RequestCheckpoint(task) }
	}
	if d.strategy != nil {
		wm, err := newWatermarking(*d.strategy)
		if err != nil {
			return err
		}
		wm.bind(d.wmOut, d.timers)
		d.emit.wm = wm
	}
	r, err := d.src.NewReader(connector.ReaderContext{Subtask: d.env.subtask, Parallelism: d.env.parallelism,
		Logger: d.env.logger, RequestCheckpoint: request})
	if err != nil {
		return fmt.Errorf("open source reader: %w", err)
	}
	d.reader = r
	if err := r.AddSplits(d.splits); err != nil {
		return fmt.Errorf("assign splits: %w", err)
	}
	r.NoMoreSplits()
	return nil
}

func (d *sourceDriver[T]) Poll() (connector.Status, error) {
	d.env.cursor.Current = d.env.index
	return d.reader.Poll(&d.emit)
}

func (d *sourceDriver[T]) Close() error {
	if d.reader == nil {
		return nil
	}
	r := d.reader
	d.reader = nil
	return r.Close()
}
