package weir

import (
	"fmt"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/runtime"
)

// lifecycle gives operators without resources empty Open, Finish and Close.
type lifecycle struct{}

func (lifecycle) Open() error   { return nil }
func (lifecycle) Finish() error { return nil }
func (lifecycle) Close() error  { return nil }

type mapOp[T, U any] struct {
	lifecycle
	fn  func(T) U
	out runtime.Output[U]
	cur *runtime.Cursor
	idx int
}

func (o *mapOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.out.Emit(o.fn(rec), ts)
}

type flatMapOp[T, U any] struct {
	lifecycle
	fn   func(T, Collector[U])
	coll collector[U]
	ts   int64
	cur  *runtime.Cursor
	idx  int
}

func (o *flatMapOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.ts = ts
	o.fn(rec, &o.coll)
}

type filterOp[T any] struct {
	lifecycle
	keep func(T) bool
	out  runtime.Output[T]
	cur  *runtime.Cursor
	idx  int
}

func (o *filterOp[T]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	if o.keep(rec) {
		o.out.Emit(rec, ts)
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
	fn   ProcessFunction[T, U]
	ctx  *Context
	coll collector[U]
	cur  *runtime.Cursor
	idx  int
}

func (o *processOp[T, U]) Open() error   { return openClose[*Context]{o.fn, o.ctx}.open() }
func (o *processOp[T, U]) Finish() error { return nil }
func (o *processOp[T, U]) Close() error  { return openClose[*Context]{o.fn, o.ctx}.close() }

func (o *processOp[T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.ctx.ts = ts
	if err := o.fn.ProcessElement(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}

type sinkOp[T any] struct {
	sink connector.Sink[T]
	env  *opEnv
	w    connector.Writer[T]
}

func (o *sinkOp[T]) Open() error {
	w, err := o.sink.NewWriter(connector.WriterContext{
		JobID: o.env.jobID, Subtask: o.env.subtask, Parallelism: o.env.parallelism, Logger: o.env.logger,
	})
	if err != nil {
		return fmt.Errorf("open sink writer: %w", err)
	}
	o.w = w
	return nil
}

func (o *sinkOp[T]) Emit(rec T, _ int64) {
	o.env.cursor.Current = o.env.index
	if err := o.w.Write(rec); err != nil {
		runtime.Fail(err)
	}
}

func (o *sinkOp[T]) Finish() error { return o.w.Flush(true) }

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
	src    connector.Source[T]
	out    *port[T]
	splits []connector.SplitState // enumerated once per deployment
	listed bool
}

func (n *sourceNode[T]) reset(int) { n.splits, n.listed = nil, false }

func (n *sourceNode[T]) buildHead(bc *buildCtx, s int) {
	par := bc.parallelism(&n.nodeBase)
	if !n.listed {
		n.listed = true
		splits, err := n.src.Splits(bc.ctx, par)
		if err != nil {
			bc.fail(fmt.Errorf("source %q: %w", n.name, err))
			return
		}
		n.splits = splits
	}
	var mine []connector.SplitState
	for i, sp := range n.splits {
		if i%par == s {
			mine = append(mine, sp)
		}
	}
	env := bc.opEnv(&n.nodeBase, s)
	d := &sourceDriver[T]{src: n.src, env: env, splits: mine}
	d.emit.out = n.out.output(bc, s)
	bc.task(&n.nodeBase, s).Source = d
	bc.addOperator(&n.nodeBase, s, lifecycle{})
}

type sourceDriver[T any] struct {
	src    connector.Source[T]
	env    *opEnv
	splits []connector.SplitState
	reader connector.Reader[T]
	emit   emitter[T]
}

type emitter[T any] struct {
	out runtime.Output[T]
}

func (e *emitter[T]) Emit(rec T)                      { e.out.Emit(rec, runtime.NoTimestamp) }
func (e *emitter[T]) EmitAt(rec T, ts int64)          { e.out.Emit(rec, ts) }
func (d *sourceDriver[T]) Available() <-chan struct{} { return d.reader.Available() }

func (d *sourceDriver[T]) Open() error {
	r, err := d.src.NewReader(connector.ReaderContext{Subtask: d.env.subtask, Parallelism: d.env.parallelism, Logger: d.env.logger})
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
