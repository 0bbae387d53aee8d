package pebble

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

// accCore is the part of reducing and aggregating states that reads and
// writes accumulators: one entry per key (and namespace) in the single
// layout, holding the accumulator's codec bytes. Every read decodes a fresh
// accumulator, so the functions may modify the one they get.
type accCore[K comparable, N comparable, A any] struct {
	c     *core[K, N]
	codec codec.Codec[A]
}

func newAccCore[K comparable, N comparable, A any](b *Backend[K], name string, kind format.Kind, nsCodec codec.Codec[N], argErr error, c codec.Codec[A], opts []Option) (accCore[K, N, A], error) {
	if c == nil {
		argErr = errors.New("nil accumulator codec")
	}
	check := func(payload []byte) error {
		_, err := decodeAll(c, payload)
		return err
	}
	core, err := newCore(b, format.StateInfo{Name: name, Kind: kind}, nsCodec, argErr, check, regSpec{}, opts)
	return accCore[K, N, A]{c: core, codec: c}, err
}

// get returns the accumulator of namespace n; read says whether the access
// is a read (which renews the TTL with OnReadAndWrite).
func (a accCore[K, N, A]) get(n N, read bool) (A, bool) {
	var zero A
	raw, ok := a.c.get(n, read)
	if !ok {
		return zero, false
	}
	acc, err := decodeAll(a.codec, raw)
	if err != nil {
		a.c.fail("decode accumulator", err)
		return zero, false
	}
	return acc, true
}

// store sets the accumulator of namespace n.
func (a accCore[K, N, A]) store(n N, acc A) {
	buf := a.codec.Append(a.c.startValue(), acc)
	a.c.wbuf = buf
	a.c.put(n, buf)
}

// mergeNamespaces merges the accumulators of sources, in order, into
// target's, as the heap backend does: merge(target, merge(s1, s2, ...)).
func (a accCore[K, N, A]) mergeNamespaces(target N, sources []N, merge func(a, b A) A) {
	var merged A
	var ok bool
	for _, src := range sources {
		acc, found := a.get(src, false)
		if !found {
			continue
		}
		a.c.del(src)
		if !ok {
			merged, ok = acc, true
		} else {
			merged = merge(merged, acc)
		}
	}
	if !ok {
		return
	}
	if acc, found := a.get(target, false); found {
		merged = merge(acc, merged)
	}
	a.store(target, merged)
}

// ReducingState is a keyed reducing state in the database. It implements
// state.Reducing[T]. reduce(acc, v) may modify acc in place and return it:
// acc is decoded for the call.
type ReducingState[K comparable, T any] struct {
	reducingCore[K, noNamespace, T]
}

// NamespacedReducingState is a reducing state scoped to the current key and
// the current namespace. It implements state.Reducing[T] and has the
// namespace methods (see NamespacedValueState) and MergeNamespaces.
type NamespacedReducingState[K comparable, N comparable, T any] struct {
	reducingCore[K, N, T]
	namespaceOps[K, N]
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
	return &NamespacedReducingState[K, N, T]{rc, namespaceOps[K, N]{rc.a.c}}, nil
}

func newReducingCore[K comparable, N comparable, T any](b *Backend[K], name string, reduce func(acc, v T) T, nsCodec codec.Codec[N], argErr error, c codec.Codec[T], opts []Option) (reducingCore[K, N, T], error) {
	if reduce == nil {
		argErr = errors.New("nil reduce function")
	}
	a, err := newAccCore(b, name, format.KindReducing, nsCodec, argErr, c, opts)
	return reducingCore[K, N, T]{a: a, reduce: reduce}, err
}

// reducingCore implements a reducing state for any namespace type.
type reducingCore[K comparable, N comparable, T any] struct {
	a      accCore[K, N, T]
	reduce func(acc, v T) T
}

// Get returns the current key's reduced value.
func (r reducingCore[K, N, T]) Get() (T, bool) { return r.a.get(r.a.c.ns, true) }

// Add combines v into the current key's value: the first v is stored as it
// is, later ones as reduce(acc, v).
func (r reducingCore[K, N, T]) Add(v T) {
	ns := r.a.c.ns
	if acc, ok := r.a.get(ns, false); ok {
		v = r.reduce(acc, v)
	}
	r.a.store(ns, v)
}

// Clear removes the current key's value.
func (r reducingCore[K, N, T]) Clear() { r.a.c.del(r.a.c.ns) }

// MergeNamespaces reduces the current key's values in the namespaces
// sources, in the order given, into its value in target (as
// reduce(target, merged)), and removes them. If target is among sources,
// its value is taken in its place in that order. The current namespace
// does not change.
func (s *NamespacedReducingState[K, N, T]) MergeNamespaces(target N, sources ...N) {
	s.a.mergeNamespaces(target, sources, s.reduce)
}

// AggregatingState is a keyed aggregating state in the database. It
// implements state.Aggregating[IN, OUT]; its entries are accumulators of
// type ACC, decoded for every call of the function's Add and Merge (which
// may modify them).
type AggregatingState[K comparable, IN, ACC, OUT any] struct {
	aggregatingCore[K, noNamespace, IN, ACC, OUT]
}

// NamespacedAggregatingState is an aggregating state scoped to the current
// key and the current namespace. It implements state.Aggregating[IN, OUT]
// and has the namespace methods (see NamespacedValueState) and
// MergeNamespaces.
type NamespacedAggregatingState[K comparable, N comparable, IN, ACC, OUT any] struct {
	aggregatingCore[K, N, IN, ACC, OUT]
	namespaceOps[K, N]
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
	return &NamespacedAggregatingState[K, N, IN, ACC, OUT]{ac, namespaceOps[K, N]{ac.a.c}}, nil
}

func newAggregatingCore[K comparable, N comparable, IN, ACC, OUT any](b *Backend[K], name string, f state.AggregateFunction[IN, ACC, OUT], nsCodec codec.Codec[N], argErr error, c codec.Codec[ACC], opts []Option) (aggregatingCore[K, N, IN, ACC, OUT], error) {
	if f == nil {
		argErr = errors.New("nil aggregate function")
	}
	a, err := newAccCore(b, name, format.KindAggregating, nsCodec, argErr, c, opts)
	return aggregatingCore[K, N, IN, ACC, OUT]{a: a, f: f}, err
}

// aggregatingCore implements an aggregating state for any namespace type.
type aggregatingCore[K comparable, N comparable, IN, ACC, OUT any] struct {
	a accCore[K, N, ACC]
	f state.AggregateFunction[IN, ACC, OUT]
}

// Get returns the result of the current key's accumulator.
func (g aggregatingCore[K, N, IN, ACC, OUT]) Get() (OUT, bool) {
	acc, ok := g.a.get(g.a.c.ns, true)
	if !ok {
		var zero OUT
		return zero, false
	}
	return g.f.GetResult(acc), true
}

// Add adds v to the current key's accumulator, created with
// CreateAccumulator for the first value.
func (g aggregatingCore[K, N, IN, ACC, OUT]) Add(v IN) {
	ns := g.a.c.ns
	acc, ok := g.a.get(ns, false)
	if !ok {
		acc = g.f.CreateAccumulator()
	}
	g.a.store(ns, g.f.Add(v, acc))
}

// Clear removes the current key's accumulator.
func (g aggregatingCore[K, N, IN, ACC, OUT]) Clear() { g.a.c.del(g.a.c.ns) }

// MergeNamespaces merges the current key's accumulators in the namespaces
// sources, in the order given, into its accumulator in target with the
// function's Merge, and removes them. If target is among sources, its
// accumulator is taken in its place in that order. The current namespace
// does not change.
func (s *NamespacedAggregatingState[K, N, IN, ACC, OUT]) MergeNamespaces(target N, sources ...N) {
	s.a.mergeNamespaces(target, sources, s.f.Merge)
}
