package weir

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
)

// The broadcast state pattern, as in Flink: a low-volume stream (rules,
// configuration) is broadcast to every subtask of an operator together with
// the state descriptors of the maps it maintains; the operator's broadcast
// side writes those maps, identically on every subtask, and its other side
// reads them.
//
//	rules := weir.NewMapStateDescriptor[string, Rule]("rules")
//	events.KeyBy(byUser).
//		ConnectBroadcast(ruleStream.BroadcastState(rules)).
//		Process("match", &matcher{})
//
// Broadcast state is checkpointed by every subtask (each writes its copy,
// inline in the _metadata, as Flink does) and restored at any parallelism:
// each new subtask gets one copy. It is kept in memory on every subtask, so
// it must stay small. The maps stay identical only if the broadcast side
// updates them deterministically from the broadcast records alone: it sees
// the same records in the same order on every subtask, but not at the same
// time relative to the other input.

// MapStateDescriptor names a broadcast state, a map from K to V, and gives
// the codecs its entries are checkpointed with (Flink's MapStateDescriptor).
type MapStateDescriptor[K comparable, V any] struct {
	name string
	kc   codec.Codec[K]
	vc   codec.Codec[V]
	err  error
}

// NewMapStateDescriptor returns the descriptor of the broadcast state named
// name, with the built-in codecs for K and V. A type without a built-in
// codec is reported when the job is built (use
// NewMapStateDescriptorWithCodecs).
func NewMapStateDescriptor[K comparable, V any](name string) MapStateDescriptor[K, V] {
	d := MapStateDescriptor[K, V]{name: name}
	var kerr, verr error
	d.kc, kerr = codec.Of[K]()
	d.vc, verr = codec.Of[V]()
	if err := errors.Join(kerr, verr); err != nil {
		d.err = fmt.Errorf("broadcast state %q: %w (use NewMapStateDescriptorWithCodecs)", name, err)
	}
	return d
}

// NewMapStateDescriptorWithCodecs is NewMapStateDescriptor with codecs of the
// caller's.
func NewMapStateDescriptorWithCodecs[K comparable, V any](name string, kc codec.Codec[K], vc codec.Codec[V]) MapStateDescriptor[K, V] {
	d := MapStateDescriptor[K, V]{name: name, kc: kc, vc: vc}
	if kc == nil || vc == nil {
		d.err = fmt.Errorf("broadcast state %q: nil codec", name)
	}
	return d
}

// Name returns the state's name.
func (d MapStateDescriptor[K, V]) Name() string { return d.name }

func (d MapStateDescriptor[K, V]) validate() error {
	if d.err != nil {
		return d.err
	}
	if d.name == "" {
		return errors.New("broadcast state: empty name (a MapStateDescriptor made with NewMapStateDescriptor has one)")
	}
	return nil
}

// register creates the state in an operator instance, from its restored
// copy if there is one.
func (d MapStateDescriptor[K, V]) register(ops *opStates) error {
	e := ops.bcast[d.name]
	if e != nil && e.handle != nil {
		return nil
	}
	m := &broadcastMap[K, V]{name: d.name, kc: d.kc, vc: d.vc, m: map[K]V{}}
	if e == nil {
		e = &bcastEntry{}
		ops.bcast[d.name] = e
	}
	for i, en := range e.raw {
		k, n, err := d.kc.Decode(en.Key)
		if err == nil && n != len(en.Key) {
			err = fmt.Errorf("%d trailing bytes", len(en.Key)-n)
		}
		if err != nil {
			return fmt.Errorf("broadcast state %q: restore the key of entry %d: %w (was it written with another type?)", d.name, i, err)
		}
		v, n, err := d.vc.Decode(en.Value)
		if err == nil && n != len(en.Value) {
			err = fmt.Errorf("%d trailing bytes", len(en.Value)-n)
		}
		if err != nil {
			return fmt.Errorf("broadcast state %q: restore the value of entry %d: %w (was it written with another type?)", d.name, i, err)
		}
		m.m[k] = v
	}
	e.raw, e.handle, e.encode = nil, m, m.encode
	return nil
}

// BroadcastStateDescriptor is a MapStateDescriptor of any types, so that one
// broadcast stream can carry several states.
type BroadcastStateDescriptor interface {
	Name() string
	validate() error
	register(ops *opStates) error
}

var _ BroadcastStateDescriptor = MapStateDescriptor[string, int]{}

// ReadOnlyBroadcastState is the view of a broadcast state from the
// non-broadcast side of the operator. Values are the state's own: do not
// modify them.
type ReadOnlyBroadcastState[K comparable, V any] interface {
	// Get returns the value of k and whether it is present.
	Get(k K) (V, bool)
	// Contains reports whether k is present.
	Contains(k K) bool
	// All yields the entries in no particular order.
	All() iter.Seq2[K, V]
	// Len returns the number of entries.
	Len() int
}

// BroadcastState is a broadcast state as its broadcast side sees it
// (Flink's BroadcastState): read and write. The map may be modified during
// an iteration of All, as a Go map may.
type BroadcastState[K comparable, V any] interface {
	ReadOnlyBroadcastState[K, V]
	// Put sets the value of k.
	Put(k K, v V)
	// PutAll sets every entry of m. m is not retained.
	PutAll(m map[K]V)
	// Remove removes k.
	Remove(k K)
	// Clear removes every entry.
	Clear()
}

// broadcastMap is one subtask's copy of a broadcast state.
type broadcastMap[K comparable, V any] struct {
	name string
	kc   codec.Codec[K]
	vc   codec.Codec[V]
	m    map[K]V
}

var _ BroadcastState[string, int] = (*broadcastMap[string, int])(nil)

func (b *broadcastMap[K, V]) Get(k K) (V, bool)    { v, ok := b.m[k]; return v, ok }
func (b *broadcastMap[K, V]) Contains(k K) bool    { _, ok := b.m[k]; return ok }
func (b *broadcastMap[K, V]) Len() int             { return len(b.m) }
func (b *broadcastMap[K, V]) Put(k K, v V)         { b.m[k] = v }
func (b *broadcastMap[K, V]) Remove(k K)           { delete(b.m, k) }
func (b *broadcastMap[K, V]) Clear()               { clear(b.m) }
func (b *broadcastMap[K, V]) All() iter.Seq2[K, V] { return b.all }

func (b *broadcastMap[K, V]) PutAll(m map[K]V) {
	for k, v := range m {
		b.m[k] = v
	}
}

func (b *broadcastMap[K, V]) all(yield func(K, V) bool) {
	for k, v := range b.m {
		if !yield(k, v) {
			return
		}
	}
}

// encode returns the entries sorted by key bytes, so that equal maps give
// equal snapshots.
func (b *broadcastMap[K, V]) encode() []checkpoint.MapEntry {
	out := make([]checkpoint.MapEntry, 0, len(b.m))
	for k, v := range b.m {
		out = append(out, checkpoint.MapEntry{Key: b.kc.Append(nil, k), Value: b.vc.Append(nil, v)})
	}
	slices.SortFunc(out, func(x, y checkpoint.MapEntry) int { return bytes.Compare(x.Key, y.Key) })
	return out
}

// readOnlyMap hides the writing methods of a broadcastMap (a type assertion
// cannot get them back).
type readOnlyMap[K comparable, V any] struct{ b *broadcastMap[K, V] }

func (r readOnlyMap[K, V]) Get(k K) (V, bool)    { return r.b.Get(k) }
func (r readOnlyMap[K, V]) Contains(k K) bool    { return r.b.Contains(k) }
func (r readOnlyMap[K, V]) Len() int             { return r.b.Len() }
func (r readOnlyMap[K, V]) All() iter.Seq2[K, V] { return r.b.All() }

// lookupBroadcast returns an instance's copy of the state of d.
func lookupBroadcast[K comparable, V any](env *opEnv, d MapStateDescriptor[K, V]) (*broadcastMap[K, V], error) {
	e := env.ops.bcast[d.name]
	if e == nil || e.handle == nil {
		var names []string
		for name, e := range env.ops.bcast {
			if e.handle != nil {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return nil, fmt.Errorf("broadcast state %q is not one of the descriptors given to BroadcastState (those are %q)", d.name, names)
	}
	m, ok := e.handle.(*broadcastMap[K, V])
	if !ok {
		return nil, fmt.Errorf("broadcast state %q has another key or value type than %v -> %v", d.name, reflect.TypeFor[K](), reflect.TypeFor[V]())
	}
	return m, nil
}

// BroadcastStream is a stream broadcast to every subtask of the operator it
// is connected to, together with the descriptors of the broadcast states that
// operator keeps (Flink's BroadcastStream).
type BroadcastStream[T any] struct {
	in    *Stream[T]
	descs []BroadcastStateDescriptor
}

// BroadcastState broadcasts s with the descriptors of the broadcast states
// that the operators it is connected to keep (Flink's
// DataStream.broadcast(descriptors...)). Connect it with
// Stream.ConnectBroadcast or KeyedStream.ConnectBroadcast. At least one
// descriptor is needed; names must be unique.
func (s *Stream[T]) BroadcastState(descs ...BroadcastStateDescriptor) *BroadcastStream[T] {
	if len(descs) == 0 {
		s.env.fail(errors.New("BroadcastState: give at least one MapStateDescriptor (use Broadcast to broadcast records without state)"))
	}
	seen := map[string]bool{}
	for _, d := range descs {
		if d == nil {
			s.env.fail(errors.New("BroadcastState: nil descriptor"))
			continue
		}
		if err := d.validate(); err != nil {
			s.env.fail(fmt.Errorf("BroadcastState: %w", err))
			continue
		}
		if seen[d.Name()] {
			s.env.fail(fmt.Errorf("BroadcastState: two descriptors are named %q", d.Name()))
		}
		seen[d.Name()] = true
	}
	return &BroadcastStream[T]{in: s, descs: slices.Clone(descs)}
}

// registerBroadcast creates an instance's broadcast states; it runs in the
// operator's Open, before the user function's.
func registerBroadcast(env *opEnv, descs []BroadcastStateDescriptor) error {
	for _, d := range descs {
		if d == nil || d.validate() != nil {
			continue // reported when the job was built
		}
		if err := d.register(env.ops); err != nil {
			return err
		}
	}
	return nil
}

// --- non-keyed --------------------------------------------------------------

// BroadcastProcessFunction processes a non-broadcast stream connected to a
// broadcast stream (Flink's BroadcastProcessFunction). ProcessBroadcastElement
// gets every broadcast record, on every subtask, and may write the broadcast
// state; ProcessElement gets the other stream's records and may only read
// it. Optional hooks: Open(*Context) error, Close() error.
type BroadcastProcessFunction[IN, BC, OUT any] interface {
	ProcessElement(ctx *ReadOnlyBroadcastContext, in IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *BroadcastContext, in BC, out Collector[OUT]) error
}

// ReadOnlyBroadcastContext is the Context of ProcessElement of a broadcast
// process function: broadcast state is read-only there.
type ReadOnlyBroadcastContext struct{ Context }

// BroadcastState returns the read-only view of the broadcast state of d,
// which must be one of the descriptors of the connected BroadcastStream.
func (c *ReadOnlyBroadcastContext) BroadcastState[K comparable, V any](d MapStateDescriptor[K, V]) (ReadOnlyBroadcastState[K, V], error) {
	m, err := lookupBroadcast(c.env, d)
	if err != nil {
		return nil, err
	}
	return readOnlyMap[K, V]{m}, nil
}

// BroadcastContext is the Context of ProcessBroadcastElement: broadcast
// state is writable there.
type BroadcastContext struct{ Context }

// BroadcastState returns the broadcast state of d, which must be one of the
// descriptors of the connected BroadcastStream.
func (c *BroadcastContext) BroadcastState[K comparable, V any](d MapStateDescriptor[K, V]) (BroadcastState[K, V], error) {
	m, err := lookupBroadcast(c.env, d)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// BroadcastConnectedStreams is a stream connected to a broadcast stream.
type BroadcastConnectedStreams[A, B any] struct {
	first *Stream[A]
	bs    *BroadcastStream[B]
}

// ConnectBroadcast connects s with the broadcast stream bs (Flink's
// DataStream.connect(BroadcastStream)).
func (s *Stream[T]) ConnectBroadcast[B any](bs *BroadcastStream[B]) *BroadcastConnectedStreams[T, B] {
	checkBroadcastEnv(s.env, bs)
	return &BroadcastConnectedStreams[T, B]{first: s, bs: bs}
}

func checkBroadcastEnv[B any](env *Environment, bs *BroadcastStream[B]) {
	if bs == nil {
		env.fail(errors.New("ConnectBroadcast: nil broadcast stream"))
	} else if bs.in.env != env {
		env.fail(errors.New("ConnectBroadcast: the streams belong to different environments"))
	}
}

// Process applies a broadcast process function. Each subtask gets its own
// shallow copy of fn (when fn is a pointer to a struct).
func (c *BroadcastConnectedStreams[A, B]) Process[OUT any](name string, fn BroadcastProcessFunction[A, B, OUT]) *Stream[OUT] {
	env := c.first.env
	if c.bs == nil || c.bs.in.env != env {
		return &Stream[OUT]{env: env}
	}
	descs := c.bs.descs
	n, out := addTwoInput(env, name, false, func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B] {
		op := &broadcastProcessOp[A, B, OUT]{fn: cloneFunc(fn), descs: descs, cur: env.cursor, idx: env.index,
			ro: &ReadOnlyBroadcastContext{Context{env: env}}, bc: &BroadcastContext{Context{env: env}}}
		op.coll1 = newCollector(out, &op.ro.ts, env)
		op.coll2 = newCollector(out, &op.bc.ts, env)
		op.in1.op, op.in2.op = op, op
		return op
	})
	connectTo(c.first, firstInput[A, B, OUT]{n}, 0)
	connectTo(c.bs.in.Broadcast(), secondInput[A, B, OUT]{n}, 1)
	return out
}

type broadcastProcessOp[A, B, OUT any] struct {
	fn           BroadcastProcessFunction[A, B, OUT]
	descs        []BroadcastStateDescriptor
	ro           *ReadOnlyBroadcastContext
	bc           *BroadcastContext
	coll1, coll2 collector[OUT]
	cur          *runtime.Cursor
	idx          int
	in1          bcInput1[A, B, OUT]
	in2          bcInput2[A, B, OUT]
}

func (o *broadcastProcessOp[A, B, OUT]) Open() error {
	if err := registerBroadcast(o.ro.env, o.descs); err != nil {
		return err
	}
	return openClose[*Context]{o.fn, &o.ro.Context}.open()
}
func (o *broadcastProcessOp[A, B, OUT]) Finish() error { return nil }
func (o *broadcastProcessOp[A, B, OUT]) Close() error {
	return openClose[*Context]{o.fn, &o.ro.Context}.close()
}
func (o *broadcastProcessOp[A, B, OUT]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ro.env.ops.snapshot(id, o.fn)
}
func (o *broadcastProcessOp[A, B, OUT]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *broadcastProcessOp[A, B, OUT]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}
func (o *broadcastProcessOp[A, B, OUT]) input1() runtime.Output[A] { return &o.in1 }
func (o *broadcastProcessOp[A, B, OUT]) input2() runtime.Output[B] { return &o.in2 }

type bcInput1[A, B, OUT any] struct {
	op *broadcastProcessOp[A, B, OUT]
}

func (i *bcInput1[A, B, OUT]) Emit(rec A, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ro.ts = ts
	if err := o.fn.ProcessElement(o.ro, rec, &o.coll1); err != nil {
		runtime.Fail(err)
	}
}

type bcInput2[A, B, OUT any] struct {
	op *broadcastProcessOp[A, B, OUT]
}

func (i *bcInput2[A, B, OUT]) Emit(rec B, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.bc.ts = ts
	if err := o.fn.ProcessBroadcastElement(o.bc, rec, &o.coll2); err != nil {
		runtime.Fail(err)
	}
}

// --- keyed ------------------------------------------------------------------

// KeyedBroadcastProcessFunction processes a keyed stream connected to a
// broadcast stream (Flink's KeyedBroadcastProcessFunction): ProcessElement
// has the keyed state of the record's key and reads the broadcast state;
// ProcessBroadcastElement, called on every subtask for every broadcast
// record, writes the broadcast state and has no current key. Optional
// hooks: Open(*KeyedContext[K]) error (create keyed state there), Close()
// error.
type KeyedBroadcastProcessFunction[K comparable, IN, BC, OUT any] interface {
	ProcessElement(ctx *KeyedReadOnlyBroadcastContext[K], in IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *KeyedBroadcastContext[K], in BC, out Collector[OUT]) error
}

// KeyedReadOnlyBroadcastContext is the context of ProcessElement of a keyed
// broadcast process function: the current key, and read-only broadcast
// state.
type KeyedReadOnlyBroadcastContext[K comparable] struct{ KeyedContext[K] }

// BroadcastState returns the read-only view of the broadcast state of d.
func (c *KeyedReadOnlyBroadcastContext[K]) BroadcastState[UK comparable, UV any](d MapStateDescriptor[UK, UV]) (ReadOnlyBroadcastState[UK, UV], error) {
	m, err := lookupBroadcast(c.env, d)
	if err != nil {
		return nil, err
	}
	return readOnlyMap[UK, UV]{m}, nil
}

// KeyedBroadcastContext is the context of ProcessBroadcastElement of a
// keyed broadcast process function: writable broadcast state, no current
// key.
type KeyedBroadcastContext[K comparable] struct{ Context }

// BroadcastState returns the broadcast state of d.
func (c *KeyedBroadcastContext[K]) BroadcastState[UK comparable, UV any](d MapStateDescriptor[UK, UV]) (BroadcastState[UK, UV], error) {
	m, err := lookupBroadcast(c.env, d)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// KeyedBroadcastConnectedStreams is a keyed stream connected to a broadcast
// stream.
type KeyedBroadcastConnectedStreams[K comparable, A, B any] struct {
	first *KeyedStream[K, A]
	bs    *BroadcastStream[B]
}

// ConnectBroadcast connects the keyed stream s with the broadcast stream bs
// (Flink's KeyedStream.connect(BroadcastStream)).
func (s *KeyedStream[K, T]) ConnectBroadcast[B any](bs *BroadcastStream[B]) *KeyedBroadcastConnectedStreams[K, T, B] {
	checkBroadcastEnv(s.in.env, bs)
	return &KeyedBroadcastConnectedStreams[K, T, B]{first: s, bs: bs}
}

// Process applies a keyed broadcast process function. Each subtask gets its
// own shallow copy of fn (when fn is a pointer to a struct).
func (c *KeyedBroadcastConnectedStreams[K, A, B]) Process[OUT any](name string, fn KeyedBroadcastProcessFunction[K, A, B, OUT]) *Stream[OUT] {
	env := c.first.in.env
	if c.bs == nil || c.bs.in.env != env {
		return &Stream[OUT]{env: env}
	}
	descs := c.bs.descs
	n, out := addTwoInput(env, name, true, func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B] {
		op := &keyedBroadcastProcessOp[K, A, B, OUT]{fn: cloneFunc(fn), key: c.first.key, descs: descs, cur: env.cursor, idx: env.index}
		op.ro = &KeyedReadOnlyBroadcastContext[K]{KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, c.first.codec)}}
		op.bc = &KeyedBroadcastContext[K]{Context{env: env}}
		op.coll1 = newCollector(out, &op.ro.ts, env)
		op.coll2 = newCollector(out, &op.bc.ts, env)
		op.in1.op, op.in2.op = op, op
		return op
	})
	connectKeyed(c.first, firstInput[A, B, OUT]{n}, 0)
	connectTo(c.bs.in.Broadcast(), secondInput[A, B, OUT]{n}, 1)
	return out
}

type keyedBroadcastProcessOp[K comparable, A, B, OUT any] struct {
	fn           KeyedBroadcastProcessFunction[K, A, B, OUT]
	key          func(A) K
	descs        []BroadcastStateDescriptor
	ro           *KeyedReadOnlyBroadcastContext[K]
	bc           *KeyedBroadcastContext[K]
	coll1, coll2 collector[OUT]
	cur          *runtime.Cursor
	idx          int
	in1          keyedBcInput1[K, A, B, OUT]
	in2          keyedBcInput2[K, A, B, OUT]
}

func (o *keyedBroadcastProcessOp[K, A, B, OUT]) Open() error {
	if err := o.ro.keyed.open(); err != nil {
		return err
	}
	if err := registerBroadcast(o.ro.env, o.descs); err != nil {
		return err
	}
	return openClose[*KeyedContext[K]]{o.fn, &o.ro.KeyedContext}.open()
}
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) Finish() error { return nil }
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) Close() error {
	err := openClose[*KeyedContext[K]]{o.fn, &o.ro.KeyedContext}.close()
	return errors.Join(err, o.ro.keyed.close())
}

// SnapshotState and the notifications are the function's (its hooks, its
// operator state); the task delivers the keyed state's (runtime.KeyedState).
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ro.env.ops.snapshot(id, o.fn)
}
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) input1() runtime.Output[A] { return &o.in1 }
func (o *keyedBroadcastProcessOp[K, A, B, OUT]) input2() runtime.Output[B] { return &o.in2 }

type keyedBcInput1[K comparable, A, B, OUT any] struct {
	op *keyedBroadcastProcessOp[K, A, B, OUT]
}

func (i *keyedBcInput1[K, A, B, OUT]) Emit(rec A, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.ro.keyed.setKey(o.key(rec))
	o.ro.ts = ts
	if err := o.fn.ProcessElement(o.ro, rec, &o.coll1); err != nil {
		runtime.Fail(err)
	}
}

type keyedBcInput2[K comparable, A, B, OUT any] struct {
	op *keyedBroadcastProcessOp[K, A, B, OUT]
}

func (i *keyedBcInput2[K, A, B, OUT]) Emit(rec B, ts int64) {
	o := i.op
	o.cur.Current = o.idx
	o.bc.ts = ts
	if err := o.fn.ProcessBroadcastElement(o.bc, rec, &o.coll2); err != nil {
		runtime.Fail(err)
	}
}
