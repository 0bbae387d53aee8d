package weir

import (
	"errors"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runtime"
)

// ConnectedStreams are two streams, possibly of different types, feeding one
// two-input operator.
type ConnectedStreams[A, B any] struct {
	first  *Stream[A]
	second *Stream[B]
}

// Connect connects s with other for a two-input operator.
func (s *Stream[T]) Connect[U any](other *Stream[U]) *ConnectedStreams[T, U] {
	return &ConnectedStreams[T, U]{first: s, second: other}
}

func addTwoInput[A, B, OUT any](env *Environment, name string, keyed bool, mk func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B]) (*twoInputNode[A, B, OUT], *Stream[OUT]) {
	n := &twoInputNode[A, B, OUT]{make: mk}
	b := env.addNode(n, name, graph.Operator, 2)
	b.keyed = keyed
	n.out = &port[OUT]{node: b}
	return n, &Stream[OUT]{env: env, ports: []*port[OUT]{n.out}, node: b}
}

// Process applies a co-process function to the records of both inputs. Each
// subtask gets its own shallow copy of fn (when fn is a pointer to a struct).
func (c *ConnectedStreams[A, B]) Process[OUT any](name string, fn CoProcessFunction[A, B, OUT]) *Stream[OUT] {
	n, out := addTwoInput(c.first.env, name, false, func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B] {
		op := &coProcessOp[A, B, OUT]{fn: cloneFunc(fn), ctx: &Context{env: env}, cur: env.cursor, idx: env.index}
		op.coll = newCollector(out, &op.ctx.ts, env)
		op.in1.op, op.in2.op = op, op
		return op
	})
	connectTo(c.first, firstInput[A, B, OUT]{n}, 0)
	connectTo(c.second, secondInput[A, B, OUT]{n}, 1)
	return out
}

type coProcessOp[A, B, OUT any] struct {
	fn   CoProcessFunction[A, B, OUT]
	ctx  *Context
	coll collector[OUT]
	cur  *runtime.Cursor
	idx  int
	in1  coInput1[A, B, OUT]
	in2  coInput2[A, B, OUT]
}

func (o *coProcessOp[A, B, OUT]) Open() error               { return openClose[*Context]{o.fn, o.ctx}.open() }
func (o *coProcessOp[A, B, OUT]) Finish() error             { return nil }
func (o *coProcessOp[A, B, OUT]) Close() error              { return openClose[*Context]{o.fn, o.ctx}.close() }
func (o *coProcessOp[A, B, OUT]) input1() runtime.Output[A] { return &o.in1 }
func (o *coProcessOp[A, B, OUT]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.env.ops.snapshot(id, o.fn)
}
func (o *coProcessOp[A, B, OUT]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *coProcessOp[A, B, OUT]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}
func (o *coProcessOp[A, B, OUT]) input2() runtime.Output[B] { return &o.in2 }

type coInput1[A, B, OUT any] struct{ op *coProcessOp[A, B, OUT] }

func (i *coInput1[A, B, OUT]) Emit(rec A, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ctx.ts = ts
	if err := o.fn.ProcessElement1(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}

type coInput2[A, B, OUT any] struct{ op *coProcessOp[A, B, OUT] }

func (i *coInput2[A, B, OUT]) Emit(rec B, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ctx.ts = ts
	if err := o.fn.ProcessElement2(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}

// KeyedConnectedStreams are two keyed streams with the same key type feeding
// one keyed two-input operator: records of both inputs with equal keys meet
// in the same subtask and share its keyed state.
type KeyedConnectedStreams[K comparable, A, B any] struct {
	first  *KeyedStream[K, A]
	second *KeyedStream[K, B]
}

// Connect connects two keyed streams with the same key type.
func (s *KeyedStream[K, T]) Connect[U any](other *KeyedStream[K, U]) *KeyedConnectedStreams[K, T, U] {
	return &KeyedConnectedStreams[K, T, U]{first: s, second: other}
}

// Process applies a keyed co-process function to the records of both inputs.
func (c *KeyedConnectedStreams[K, A, B]) Process[OUT any](name string, fn KeyedCoProcessFunction[K, A, B, OUT]) *Stream[OUT] {
	n, out := addTwoInput(c.first.in.env, name, true, func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B] {
		op := &keyedCoProcessOp[K, A, B, OUT]{fn: cloneFunc(fn), key1: c.first.key, key2: c.second.key, cur: env.cursor, idx: env.index}
		op.ctx = &KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, c.first.codec)}
		op.coll = newCollector(out, &op.ctx.ts, env)
		op.keyedTimers = newKeyedTimers(op.ctx, op.fn, &op.coll)
		op.in1.op, op.in2.op = op, op
		return op
	})
	connectKeyed(c.first, firstInput[A, B, OUT]{n}, 0)
	connectKeyed(c.second, secondInput[A, B, OUT]{n}, 1)
	return out
}

type keyedCoProcessOp[K comparable, A, B, OUT any] struct {
	fn   KeyedCoProcessFunction[K, A, B, OUT]
	key1 func(A) K
	key2 func(B) K
	ctx  *KeyedContext[K]
	coll collector[OUT]
	cur  *runtime.Cursor
	idx  int
	in1  keyedCoInput1[K, A, B, OUT]
	in2  keyedCoInput2[K, A, B, OUT]

	// The timers give the operator TimerService, ProcessWatermark and
	// BindWatermarks.
	*keyedTimers[K, OUT]
}

func (o *keyedCoProcessOp[K, A, B, OUT]) Open() error {
	if err := o.ctx.keyed.open(); err != nil {
		return err
	}
	if err := o.keyedTimers.open(); err != nil {
		return err
	}
	return openClose[*KeyedContext[K]]{o.fn, o.ctx}.open()
}

// SnapshotState and the notifications are the function's (its hooks, its
// operator state); the task delivers the keyed state's (runtime.KeyedState).
func (o *keyedCoProcessOp[K, A, B, OUT]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.env.ops.snapshot(id, o.fn)
}
func (o *keyedCoProcessOp[K, A, B, OUT]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *keyedCoProcessOp[K, A, B, OUT]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}
func (o *keyedCoProcessOp[K, A, B, OUT]) Finish() error { return nil }
func (o *keyedCoProcessOp[K, A, B, OUT]) Close() error {
	err := openClose[*KeyedContext[K]]{o.fn, o.ctx}.close()
	return errors.Join(err, o.ctx.keyed.close())
}
func (o *keyedCoProcessOp[K, A, B, OUT]) input1() runtime.Output[A] { return &o.in1 }
func (o *keyedCoProcessOp[K, A, B, OUT]) input2() runtime.Output[B] { return &o.in2 }

type keyedCoInput1[K comparable, A, B, OUT any] struct {
	op *keyedCoProcessOp[K, A, B, OUT]
}

func (i *keyedCoInput1[K, A, B, OUT]) Emit(rec A, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ctx.keyed.setKey(o.key1(rec))
	o.ctx.ts = ts
	if err := o.fn.ProcessElement1(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}

type keyedCoInput2[K comparable, A, B, OUT any] struct {
	op *keyedCoProcessOp[K, A, B, OUT]
}

func (i *keyedCoInput2[K, A, B, OUT]) Emit(rec B, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ctx.keyed.setKey(o.key2(rec))
	o.ctx.ts = ts
	if err := o.fn.ProcessElement2(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}
