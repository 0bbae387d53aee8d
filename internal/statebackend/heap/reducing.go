package heap

import (
	"errors"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.Reducing[int]         = (*ReducingState[string, int])(nil)
	_ state.Reducing[int]         = (*NamespacedReducingState[string, string, int])(nil)
	_ state.Aggregating[int, int] = (*AggregatingState[string, int, int, int])(nil)
	_ state.Aggregating[int, int] = (*NamespacedAggregatingState[string, string, int, int, int])(nil)
)

// accEntry is the accumulator of one key (and namespace), with the
// backend's version when it was stored: while an unreleased snapshot is
// newer, the accumulator may be being encoded, so it is copied before a user
// function, which may modify it in place, gets it.
type accEntry[A any] struct {
	acc A
	ver uint64
}

// accStore is the store of reducing and aggregating states, with the
// copying of accumulators that snapshots hold.
type accStore[K comparable, N comparable, A any] struct {
	s *store[K, N, accEntry[A]]
	// copy deep-copies an accumulator; nil when A shares no memory (ints,
	// strings, structs of those), so that assignment copies it.
	copy func(A) A
}

func newAccStore[K comparable, N comparable, A any](b *Backend[K], name string, kind format.Kind, nsCodec codec.Codec[N], argErr error, c codec.Codec[A], opts []Option) (accStore[K, N, A], error) {
	spec := kindSpec[N, accEntry[A]]{
		kind:    kind,
		nsCodec: nsCodec,
		newEncoder: func() func([]byte, accEntry[A]) []byte {
			return func(dst []byte, e accEntry[A]) []byte { return c.Append(dst, e.acc) }
		},
		decode: func(src []byte) (accEntry[A], error) {
			acc, err := decodeAll(c, src)
			return accEntry[A]{acc: acc, ver: b.version}, err
		},
		err: argErr,
	}
	if c == nil {
		spec.err = errors.New("nil accumulator codec")
	}
	s, err := newStore(b, name, spec, opts)
	if err != nil {
		return accStore[K, N, A]{}, err
	}
	return accStore[K, N, A]{s: s, copy: copier(name, c)}, nil
}

// own returns e's accumulator for a user function that may modify it.
func (a accStore[K, N, A]) own(e accEntry[A]) A {
	if a.copy != nil && !a.s.b.writable(e.ver) {
		return a.copy(e.acc)
	}
	return e.acc
}

// store sets the accumulator of namespace n.
func (a accStore[K, N, A]) store(n N, acc A) {
	a.s.set(n, accEntry[A]{acc: acc, ver: a.s.b.version})
}

// take removes the accumulators of the namespaces sources and merges them,
// in order, with merge; the first is owned, ok is false when none had one.
func (a accStore[K, N, A]) take(sources []N, merge func(a, b A) A) (acc A, ok bool) {
	for _, src := range sources {
		e, found := a.s.get(src, false)
		if !found {
			continue
		}
		a.s.del(src)
		if !ok {
			acc, ok = a.own(e), true
		} else {
			acc = merge(acc, e.acc)
		}
	}
	return acc, ok
}

// mergeNamespaces merges the accumulators of sources into target's.
func (a accStore[K, N, A]) mergeNamespaces(target N, sources []N, merge func(a, b A) A) {
	merged, ok := a.take(sources, merge)
	if !ok {
		return
	}
	if e, found := a.s.get(target, false); found {
		merged = merge(a.own(e), merged)
	}
	a.store(target, merged)
}

// ReducingState is a keyed reducing state on the heap. It implements
// state.Reducing[T].
//
// reduce(acc, v) may modify acc in place and return it (not v): while a
// snapshot in flight holds the stored value, the state gives reduce a copy
// made through the codec (only for types that can share memory: pointers,
// slices, maps; an int or a struct of scalars is copied by assignment).
type ReducingState[K comparable, T any] struct {
	reducingCore[K, noNamespace, T]
}

// NamespacedReducingState is a reducing state scoped to the current key and
// the current namespace. It implements state.Reducing[T] and has the
// namespace methods (see NamespacedValueState) and MergeNamespaces.
type NamespacedReducingState[K comparable, N comparable, T any] struct {
	reducingCore[K, N, T]
	namespaceOps[K, N, accEntry[T]]
}

// NewReducingState registers a reducing state named name that combines the
// values added with reduce; c is the codec of the values.
func NewReducingState[K comparable, T any](b *Backend[K], name string, reduce func(acc, v T) T, c codec.Codec[T], opts ...Option) (*ReducingState[K, T], error) {
	rc, err := newReducingCore[K, noNamespace](b, name, reduce, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &ReducingState[K, T]{rc}, nil
}

// NewNamespacedReducingState registers a namespaced reducing state named
// name.
func NewNamespacedReducingState[K comparable, N comparable, T any](b *Backend[K], name string, reduce func(acc, v T) T, nsCodec codec.Codec[N], c codec.Codec[T], opts ...Option) (*NamespacedReducingState[K, N, T], error) {
	rc, err := newReducingCore(b, name, reduce, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedReducingState[K, N, T]{rc, namespaceOps[K, N, accEntry[T]]{rc.a.s}}, nil
}

func newReducingCore[K comparable, N comparable, T any](b *Backend[K], name string, reduce func(acc, v T) T, nsCodec codec.Codec[N], argErr error, c codec.Codec[T], opts []Option) (reducingCore[K, N, T], error) {
	if reduce == nil {
		argErr = errors.New("nil reduce function")
	}
	a, err := newAccStore(b, name, format.KindReducing, nsCodec, argErr, c, opts)
	return reducingCore[K, N, T]{a: a, reduce: reduce}, err
}

// reducingCore implements a reducing state for any namespace type.
type reducingCore[K comparable, N comparable, T any] struct {
	a      accStore[K, N, T]
	reduce func(acc, v T) T
}

// Get returns the current key's reduced value.
func (c reducingCore[K, N, T]) Get() (T, bool) {
	e, ok := c.a.s.get(c.a.s.ns, true)
	return e.acc, ok
}

// Add combines v into the current key's value: the first v is stored as it
// is, later ones as reduce(acc, v).
func (c reducingCore[K, N, T]) Add(v T) {
	s := c.a.s
	if e, ok := s.get(s.ns, false); ok {
		v = c.reduce(c.a.own(e), v)
	}
	c.a.store(s.ns, v)
}

// Clear removes the current key's value.
func (c reducingCore[K, N, T]) Clear() { c.a.s.del(c.a.s.ns) }

// MergeNamespaces reduces the current key's values in the namespaces
// sources, in the order given, into its value in target (as
// reduce(target, merged)), and removes them. If target is among sources,
// its value is taken in its place in that order. The current namespace
// does not change.
func (s *NamespacedReducingState[K, N, T]) MergeNamespaces(target N, sources ...N) {
	s.a.mergeNamespaces(target, sources, s.reduce)
}

// AggregatingState is a keyed aggregating state on the heap. It implements
// state.Aggregating[IN, OUT]; its entries are accumulators of type ACC.
//
// The AggregateFunction's Add and Merge may modify the accumulator they get
// and return it: while a snapshot in flight holds the stored accumulator,
// the state gives them a copy made through the codec (only for types that
// can share memory, as for ReducingState).
type AggregatingState[K comparable, IN, ACC, OUT any] struct {
	aggregatingCore[K, noNamespace, IN, ACC, OUT]
}

// NamespacedAggregatingState is an aggregating state scoped to the current
// key and the current namespace. It implements state.Aggregating[IN, OUT]
// and has the namespace methods (see NamespacedValueState) and
// MergeNamespaces.
type NamespacedAggregatingState[K comparable, N comparable, IN, ACC, OUT any] struct {
	aggregatingCore[K, N, IN, ACC, OUT]
	namespaceOps[K, N, accEntry[ACC]]
}

// NewAggregatingState registers an aggregating state named name that folds
// the values added with f; c is the codec of the accumulators.
func NewAggregatingState[K comparable, IN, ACC, OUT any](b *Backend[K], name string, f state.AggregateFunction[IN, ACC, OUT], c codec.Codec[ACC], opts ...Option) (*AggregatingState[K, IN, ACC, OUT], error) {
	ac, err := newAggregatingCore[K, noNamespace](b, name, f, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[K, IN, ACC, OUT]{ac}, nil
}

// NewNamespacedAggregatingState registers a namespaced aggregating state
// named name.
func NewNamespacedAggregatingState[K comparable, N comparable, IN, ACC, OUT any](b *Backend[K], name string, f state.AggregateFunction[IN, ACC, OUT], nsCodec codec.Codec[N], c codec.Codec[ACC], opts ...Option) (*NamespacedAggregatingState[K, N, IN, ACC, OUT], error) {
	ac, err := newAggregatingCore(b, name, f, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedAggregatingState[K, N, IN, ACC, OUT]{ac, namespaceOps[K, N, accEntry[ACC]]{ac.a.s}}, nil
}

func newAggregatingCore[K comparable, N comparable, IN, ACC, OUT any](b *Backend[K], name string, f state.AggregateFunction[IN, ACC, OUT], nsCodec codec.Codec[N], argErr error, c codec.Codec[ACC], opts []Option) (aggregatingCore[K, N, IN, ACC, OUT], error) {
	if f == nil {
		argErr = errors.New("nil aggregate function")
	}
	a, err := newAccStore(b, name, format.KindAggregating, nsCodec, argErr, c, opts)
	return aggregatingCore[K, N, IN, ACC, OUT]{a: a, f: f}, err
}

// aggregatingCore implements an aggregating state for any namespace type.
type aggregatingCore[K comparable, N comparable, IN, ACC, OUT any] struct {
	a accStore[K, N, ACC]
	f state.AggregateFunction[IN, ACC, OUT]
}

// Get returns the result of the current key's accumulator.
func (c aggregatingCore[K, N, IN, ACC, OUT]) Get() (OUT, bool) {
	e, ok := c.a.s.get(c.a.s.ns, true)
	if !ok {
		var zero OUT
		return zero, false
	}
	return c.f.GetResult(e.acc), true
}

// Add adds v to the current key's accumulator, created with
// CreateAccumulator for the first value.
func (c aggregatingCore[K, N, IN, ACC, OUT]) Add(v IN) {
	s := c.a.s
	var acc ACC
	if e, ok := s.get(s.ns, false); ok {
		acc = c.a.own(e)
	} else {
		acc = c.f.CreateAccumulator()
	}
	c.a.store(s.ns, c.f.Add(v, acc))
}

// Clear removes the current key's accumulator.
func (c aggregatingCore[K, N, IN, ACC, OUT]) Clear() { c.a.s.del(c.a.s.ns) }

// MergeNamespaces merges the current key's accumulators in the namespaces
// sources, in the order given, into its accumulator in target with the
// function's Merge, and removes them. If target is among sources, its
// accumulator is taken in its place in that order. The current namespace
// does not change.
func (s *NamespacedAggregatingState[K, N, IN, ACC, OUT]) MergeNamespaces(target N, sources ...N) {
	s.a.mergeNamespaces(target, sources, s.f.Merge)
}
