package weir

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/internal/statebackend/incremental"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/state"
)

// KeyedStream is a stream partitioned by a key of type K: all records with the
// same key go to the same subtask, and keyed state is scoped to the key.
type KeyedStream[K comparable, T any] struct {
	in    *Stream[T]
	key   func(T) K
	codec codec.Codec[K]
}

// KeyBy partitions s by key. The key's bytes (from the built-in codec for K)
// decide its key group: hash(keyBytes) mod MaxParallelism.
func (s *Stream[T]) KeyBy[K comparable](key func(T) K) *KeyedStream[K, T] {
	c, err := codec.Of[K]()
	if err != nil {
		s.env.fail(fmt.Errorf("KeyBy: %w (use KeyByCodec with a codec of your own)", err))
	}
	return &KeyedStream[K, T]{in: s, key: key, codec: c}
}

// KeyByCodec is KeyBy with a codec of the caller's for the key. The codec
// must be deterministic: equal keys give equal bytes.
func (s *Stream[T]) KeyByCodec[K comparable](key func(T) K, c codec.Codec[K]) *KeyedStream[K, T] {
	if c == nil {
		s.env.fail(fmt.Errorf("KeyByCodec: nil codec"))
	}
	return &KeyedStream[K, T]{in: s, key: key, codec: c}
}

// keyGroupFunc returns a factory of per-writer key-group functions.
func keyGroupFunc[K comparable, T any](key func(T) K, c codec.Codec[K]) func(int) func(T) int {
	return func(maxPar int) func(T) int {
		var buf []byte
		return func(rec T) int {
			buf = c.Append(buf[:0], key(rec))
			return keygroup.Of(buf, maxPar)
		}
	}
}

func connectKeyed[K comparable, T any](s *KeyedStream[K, T], to consumer[T], input int) {
	kg := keyGroupFunc(s.key, s.codec)
	for _, p := range s.in.ports {
		connectPort(p, to, input, graph.Hash, true, kg)
	}
}

// keyedEnv holds the keyed state of one subtask of a keyed operator.
type keyedEnv[K comparable] struct {
	backend statebackend.KeyedBackend[K]
	codec   codec.Codec[K]
	groups  keygroup.Range
	maxPar  int
	buf     []byte
	env     *opEnv
	// lc takes incremental (or changelog-based) checkpoints
	// (Options.Checkpointing.Incremental, Changelog; pebble); nil
	// otherwise. restoreStats says how an incremental restore got its
	// files.
	lc           *incremental.Lifecycle
	restoreStats incremental.RestoreStats
}

// newKeyedEnv makes the keyed state of the operator instance of env and
// registers it there: the task then delivers its checkpoint lifecycle
// (runtime.Chained.Keyed, bc.addOperator), whatever the operator.
func newKeyedEnv[K comparable](env *opEnv, c codec.Codec[K]) *keyedEnv[K] {
	k := &keyedEnv[K]{codec: c, groups: env.keyGroups, maxPar: env.maxPar, env: env}
	if env.keyed != nil {
		panic(fmt.Sprintf("operator %q: two keyed states for one operator instance", env.name))
	}
	env.keyed = k
	return k
}

var _ runtime.KeyedState = (*keyedEnv[int])(nil)

// open creates the operator's state backend and restores its state; it
// runs in the operator's Open, before the user function's.
func (k *keyedEnv[K]) open() error {
	switch k.env.backend {
	case "pebble":
		dir := filepath.Join(k.env.stateDir, fmt.Sprintf("%s-%d-a%d", unsafeName.ReplaceAllString(k.env.uid, "_"), k.env.subtask, k.env.attempt))
		po := pebble.Options{Dir: dir, Logger: k.env.logger,
			OnError: func(err error) { runtime.Fail(fmt.Errorf("pebble state backend: %w", err)) }}
		if t := k.env.test; t != nil {
			po.DisableCompactions = t.noCompactions
			if t.pebbleEvents != nil {
				po.EventListener = t.pebbleEvents(k.env.uid, k.env.subtask)
			}
		}
		b, err := pebble.New[K](k.groups, k.codec, po)
		if err != nil {
			return fmt.Errorf("open pebble state backend: %w", err)
		}
		k.backend = b
		if k.env.incremental {
			if k.lc, err = k.newLifecycle(b, k.env.changelog.Enabled); err != nil {
				return fmt.Errorf("open pebble state backend: %w", err)
			}
		}
	default:
		k.backend = heap.New[K](k.groups, k.codec)
	}
	if t := k.env.test; t != nil && t.onKeyedOpen != nil {
		t.onKeyedOpen(k.env.uid, k.env.subtask, k.pendingCheckpoints)
	}
	return k.restore()
}

// close releases the backend (the pebble backend's files).
func (k *keyedEnv[K]) close() error {
	if k.lc != nil {
		k.lc.Close()
	}
	if c, ok := k.backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// restore loads the operator's keyed state, if the job was restored.
func (k *keyedEnv[K]) restore() error {
	r := k.env.restored
	if r == nil || len(r.keyed) == 0 {
		return nil
	}
	if k.hasIncremental() {
		return k.restoreIncremental()
	}
	if err := k.backend.Restore(r.keyed, r.open); err != nil {
		return fmt.Errorf("restore keyed state: %w", err)
	}
	return nil
}

// SnapshotKeyed implements runtime.KeyedState: the task calls it after
// the operator's SnapshotState (the function's hook, its operator state).
func (k *keyedEnv[K]) SnapshotKeyed(id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	if k.backend == nil {
		return runtime.OperatorSnapshot{}, fmt.Errorf("keyed state of operator %q is not open", k.env.name)
	}
	if k.lc != nil && opts.Kind == checkpoint.KindCheckpoint {
		return k.snapshotIncremental(id, opts) // savepoints stay canonical
	}
	return snapshotKeyed(k.backend, k.env, id, opts)
}

// setKey scopes the state to key.
func (k *keyedEnv[K]) setKey(key K) {
	k.buf = k.codec.Append(k.buf[:0], key)
	kg := keygroup.Of(k.buf, k.maxPar)
	if !k.groups.Contains(kg) {
		runtime.Fail(fmt.Errorf("key %v belongs to key group %d, outside this subtask's range %v: the key selector is not deterministic", key, kg, k.groups))
	}
	k.backend.SetCurrentKey(key, kg)
}

// StateOption configures a keyed state.
type StateOption struct{ ttl *state.TTLConfig }

// WithTTL makes a state's entries expire cfg.TTL after their last write (or
// access, with state.OnReadAndWrite), in processing time: an expired value is
// never returned, and expired entries are dropped on access and from
// snapshots. Both backends support it on every kind of state.
func WithTTL(cfg state.TTLConfig) StateOption { return StateOption{ttl: &cfg} }

// backendOptions are a state's options for each backend.
type backendOptions struct {
	heap   []heap.Option
	pebble []pebble.Option
}

func heapOptions(name string, opts []StateOption) (backendOptions, error) {
	var out backendOptions
	for _, o := range opts {
		if o.ttl != nil {
			if err := o.ttl.Validate(); err != nil {
				return out, fmt.Errorf("state %q: %w", name, err)
			}
			out.heap = append(out.heap, heap.WithTTL(*o.ttl))
			out.pebble = append(out.pebble, pebble.WithTTL(*o.ttl))
		}
	}
	return out, nil
}

func unsupported(kind, name, backend string) error {
	return fmt.Errorf("%s state %q: not supported by the %s backend", kind, name, backend)
}

// registered returns a state made by a backend's constructor as the
// interface I, or its error (a nil *S must not become a non-nil I).
func registered[I any, S any](s *S, err error) (I, error) {
	if err != nil {
		var zero I
		return zero, err
	}
	return any(s).(I), nil
}

// Value returns the keyed value state named name of the function whose
// context is ctx, with the built-in codec for T. Call it in Open.
func Value[T any, K comparable](ctx *KeyedContext[K], name string, opts ...StateOption) (state.Value[T], error) {
	c, err := codec.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("value state %q: %w (use ValueWithCodec)", name, err)
	}
	return ValueWithCodec(ctx, name, c, opts...)
}

// ValueWithCodec is Value with a codec of the caller's for the values.
func ValueWithCodec[T any, K comparable](ctx *KeyedContext[K], name string, c codec.Codec[T], opts ...StateOption) (state.Value[T], error) {
	o, err := heapOptions(name, opts)
	if err != nil {
		return nil, err
	}
	switch b := ctx.keyed.backend.(type) {
	case *heap.Backend[K]:
		return registered[state.Value[T]](heap.NewValueState(b, name, c, o.heap...))
	case *pebble.Backend[K]:
		return registered[state.Value[T]](pebble.NewValueState(b, name, c, o.pebble...))
	}
	return nil, unsupported("value", name, ctx.keyed.backend.Kind())
}

// List returns the keyed list state named name. Call it in Open.
func List[T any, K comparable](ctx *KeyedContext[K], name string, opts ...StateOption) (state.List[T], error) {
	c, err := codec.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("list state %q: %w", name, err)
	}
	o, err := heapOptions(name, opts)
	if err != nil {
		return nil, err
	}
	switch b := ctx.keyed.backend.(type) {
	case *heap.Backend[K]:
		return registered[state.List[T]](heap.NewListState(b, name, c, o.heap...))
	case *pebble.Backend[K]:
		return registered[state.List[T]](pebble.NewListState(b, name, c, o.pebble...))
	}
	return nil, unsupported("list", name, ctx.keyed.backend.Kind())
}

// Map returns the keyed map state named name. Call it in Open.
func Map[UK comparable, UV any, K comparable](ctx *KeyedContext[K], name string, opts ...StateOption) (state.Map[UK, UV], error) {
	ukc, err := codec.Of[UK]()
	if err != nil {
		return nil, fmt.Errorf("map state %q: %w", name, err)
	}
	uvc, err := codec.Of[UV]()
	if err != nil {
		return nil, fmt.Errorf("map state %q: %w", name, err)
	}
	o, err := heapOptions(name, opts)
	if err != nil {
		return nil, err
	}
	switch b := ctx.keyed.backend.(type) {
	case *heap.Backend[K]:
		return registered[state.Map[UK, UV]](heap.NewMapState(b, name, ukc, uvc, o.heap...))
	case *pebble.Backend[K]:
		return registered[state.Map[UK, UV]](pebble.NewMapState(b, name, ukc, uvc, o.pebble...))
	}
	return nil, unsupported("map", name, ctx.keyed.backend.Kind())
}

// Reducing returns the keyed reducing state named name: Add combines each
// value into the current one with reduce. Call it in Open.
func Reducing[T any, K comparable](ctx *KeyedContext[K], name string, reduce func(acc, v T) T, opts ...StateOption) (state.Reducing[T], error) {
	c, err := codec.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("reducing state %q: %w", name, err)
	}
	o, err := heapOptions(name, opts)
	if err != nil {
		return nil, err
	}
	switch b := ctx.keyed.backend.(type) {
	case *heap.Backend[K]:
		return registered[state.Reducing[T]](heap.NewReducingState(b, name, reduce, c, o.heap...))
	case *pebble.Backend[K]:
		return registered[state.Reducing[T]](pebble.NewReducingState(b, name, reduce, c, o.pebble...))
	}
	return nil, unsupported("reducing", name, ctx.keyed.backend.Kind())
}

// Aggregating returns the keyed aggregating state named name: Add folds
// inputs into an accumulator with f, Get returns f's result. Call it in
// Open.
func Aggregating[IN, ACC, OUT any, K comparable](ctx *KeyedContext[K], name string, f state.AggregateFunction[IN, ACC, OUT], opts ...StateOption) (state.Aggregating[IN, OUT], error) {
	c, err := codec.Of[ACC]()
	if err != nil {
		return nil, fmt.Errorf("aggregating state %q: %w", name, err)
	}
	o, err := heapOptions(name, opts)
	if err != nil {
		return nil, err
	}
	switch b := ctx.keyed.backend.(type) {
	case *heap.Backend[K]:
		return registered[state.Aggregating[IN, OUT]](heap.NewAggregatingState(b, name, f, c, o.heap...))
	case *pebble.Backend[K]:
		return registered[state.Aggregating[IN, OUT]](pebble.NewAggregatingState(b, name, f, c, o.pebble...))
	}
	return nil, unsupported("aggregating", name, ctx.keyed.backend.Kind())
}

func addKeyed[K comparable, IN, OUT any](s *KeyedStream[K, IN], name string, mk func(env *opEnv, out runtime.Output[OUT]) oneInputOp[IN]) *Stream[OUT] {
	n, out := addOneInput(s.in, name, true, mk)
	connectKeyed(s, n, 0)
	return out
}

// Process applies a keyed process function to every record. Each subtask
// gets its own shallow copy of fn (when fn is a pointer to a struct).
func (s *KeyedStream[K, T]) Process[U any](name string, fn KeyedProcessFunction[K, T, U]) *Stream[U] {
	return addKeyed(s, name, func(env *opEnv, out runtime.Output[U]) oneInputOp[T] {
		op := &keyedProcessOp[K, T, U]{fn: cloneFunc(fn), key: s.key, cur: env.cursor, idx: env.index}
		op.ctx = &KeyedContext[K]{Context: Context{env: env}, keyed: newKeyedEnv(env, s.codec)}
		op.coll = newCollector(out, &op.ctx.ts, env)
		op.keyedTimers = newKeyedTimers(op.ctx, op.fn, &op.coll)
		return op
	})
}

// Reduce combines the records of each key with fn and emits the running
// result for every record, as Flink's keyed reduce does.
func (s *KeyedStream[K, T]) Reduce(name string, fn func(acc, in T) T) *Stream[T] {
	return s.Process(name, &reduceFunction[K, T]{fn: fn})
}

type reduceFunction[K comparable, T any] struct {
	fn  func(T, T) T
	acc state.Value[T]
}

func (r *reduceFunction[K, T]) Open(ctx *KeyedContext[K]) (err error) {
	r.acc, err = Value[T](ctx, "reduce")
	return err
}

func (r *reduceFunction[K, T]) ProcessElement(_ *KeyedContext[K], in T, out Collector[T]) error {
	if acc, ok := r.acc.Value(); ok {
		in = r.fn(acc, in)
	}
	r.acc.Update(in)
	out.Collect(in)
	return nil
}

type keyedProcessOp[K comparable, T, U any] struct {
	fn   KeyedProcessFunction[K, T, U]
	key  func(T) K
	ctx  *KeyedContext[K]
	coll collector[U]
	cur  *runtime.Cursor
	idx  int

	// The timers give the operator TimerService, ProcessWatermark and
	// BindWatermarks.
	*keyedTimers[K, U]
}

func (o *keyedProcessOp[K, T, U]) Open() error {
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
func (o *keyedProcessOp[K, T, U]) SnapshotState(id int64, _ *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	return o.ctx.env.ops.snapshot(id, o.fn)
}
func (o *keyedProcessOp[K, T, U]) NotifyCheckpointComplete(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointComplete(id)
}
func (o *keyedProcessOp[K, T, U]) NotifyCheckpointAborted(id int64) error {
	return userHooks{o.fn}.NotifyCheckpointAborted(id)
}
func (o *keyedProcessOp[K, T, U]) Finish() error { return nil }
func (o *keyedProcessOp[K, T, U]) Close() error {
	err := openClose[*KeyedContext[K]]{o.fn, o.ctx}.close()
	return errors.Join(err, o.ctx.keyed.close())
}

func (o *keyedProcessOp[K, T, U]) Emit(rec T, ts int64) {
	o.cur.Current = o.idx
	o.ctx.keyed.setKey(o.key(rec))
	o.ctx.ts = ts
	if err := o.fn.ProcessElement(o.ctx, rec, &o.coll); err != nil {
		runtime.Fail(err)
	}
}
