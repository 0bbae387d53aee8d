package heap

import (
	"errors"
	"fmt"
	"iter"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.Value[int] = (*ValueState[string, int])(nil)
	_ state.Value[int] = (*NamespacedValueState[string, string, int])(nil)
)

// ValueState is a keyed value state on the heap. It implements
// state.Value[V].
//
// Values are stored as they are, not serialized: a value must not be mutated
// in place after Update (through a pointer, slice or map it holds), because
// a snapshot may be writing it out on another goroutine. Build a new value
// and Update with it. (Flink's heap backend has the same rule for mutable
// objects.)
type ValueState[K comparable, V any] struct {
	valueCore[K, noNamespace, V]
}

// NamespacedValueState is a value state scoped to the current key and the
// current namespace (SetCurrentNamespace). It implements state.Value[V] and
// has the namespace methods SetCurrentNamespace, CurrentNamespace,
// Namespaces and ClearAllNamespaces (see the package documentation).
type NamespacedValueState[K comparable, N comparable, V any] struct {
	valueCore[K, N, V]
	namespaceOps[K, N, V]
}

// NewValueState registers a value state named name. The codec serializes
// values in snapshots and decodes restored ones: if name was restored, its
// values are decoded now, and an error names the key group that failed.
func NewValueState[K comparable, V any](b *Backend[K], name string, c codec.Codec[V], opts ...Option) (*ValueState[K, V], error) {
	s, err := newValueStore[K, noNamespace](b, name, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{valueCore[K, noNamespace, V]{s}}, nil
}

// NewNamespacedValueState registers a value state named name whose entries
// are scoped to a namespace as well as a key; nsCodec encodes namespaces in
// snapshots (after the key's bytes).
func NewNamespacedValueState[K comparable, N comparable, V any](b *Backend[K], name string, nsCodec codec.Codec[N], c codec.Codec[V], opts ...Option) (*NamespacedValueState[K, N, V], error) {
	s, err := newValueStore(b, name, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedValueState[K, N, V]{valueCore[K, N, V]{s}, namespaceOps[K, N, V]{s}}, nil
}

func newValueStore[K comparable, N comparable, V any](b *Backend[K], name string, nsCodec codec.Codec[N], nsErr error, c codec.Codec[V], opts []Option) (*store[K, N, V], error) {
	spec := kindSpec[N, V]{
		kind:       format.KindValue,
		nsCodec:    nsCodec,
		newEncoder: func() func([]byte, V) []byte { return c.Append },
		decode:     func(src []byte) (V, error) { return decodeAll(c, src) },
		err:        nsErr,
	}
	if c == nil {
		spec.err = errors.New("nil value codec")
	}
	return newStore(b, name, spec, opts)
}

// checkNamespaceCodec returns the error of a namespaced state's constructor
// given no namespace codec.
func checkNamespaceCodec[N any](c codec.Codec[N]) error {
	if c == nil {
		return errors.New("nil namespace codec")
	}
	return nil
}

// decodeAll decodes a T that must take all of src.
func decodeAll[T any](c codec.Codec[T], src []byte) (T, error) {
	v, n, err := c.Decode(src)
	if err == nil && n != len(src) {
		err = fmt.Errorf("%d bytes left over: the codec differs from the one that wrote the state", len(src)-n)
	}
	return v, err
}

// valueCore implements a value state for any namespace type.
type valueCore[K comparable, N comparable, V any] struct {
	s *store[K, N, V]
}

// Value returns the current key's value. It copies no table, except that
// with a TTL it removes an expired value and, with OnReadAndWrite, renews
// the value.
func (c valueCore[K, N, V]) Value() (V, bool) { return c.s.get(c.s.ns, true) }

// Update sets the current key's value. The first write to a key group after
// a snapshot copies that key group's map of this state.
func (c valueCore[K, N, V]) Update(v V) { c.s.set(c.s.ns, v) }

// Clear removes the current key's value. Clearing a key without a value
// copies nothing.
func (c valueCore[K, N, V]) Clear() { c.s.del(c.s.ns) }

// Len returns the number of entries, across all key groups (and
// namespaces), including expired entries not removed yet.
func (c valueCore[K, N, V]) Len() int { return c.s.len() }

// namespaceOps are the methods of every namespaced state.
type namespaceOps[K comparable, N comparable, E any] struct {
	st *store[K, N, E]
}

// SetCurrentNamespace scopes the state to namespace n of the current key,
// until the next call. It is as cheap as an assignment. A new state's
// namespace is the zero N.
func (o namespaceOps[K, N, E]) SetCurrentNamespace(n N) { o.st.ns = n }

// CurrentNamespace returns the namespace set last.
func (o namespaceOps[K, N, E]) CurrentNamespace() N { return o.st.ns }

// Namespaces yields the namespaces in which the current key has an entry,
// in no particular order; it removes expired entries first. It yields the
// namespaces present when the iteration starts, less those removed during
// it, so the loop may clear or merge namespaces. It does not change the
// current namespace.
func (o namespaceOps[K, N, E]) Namespaces() iter.Seq[N] { return o.st.namespaces() }

// ClearAllNamespaces removes the current key's entries in every namespace.
func (o namespaceOps[K, N, E]) ClearAllNamespaces() { o.st.clearNamespaces() }
