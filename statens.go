package weir

import (
	"iter"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/state"
)

// Namespaced keyed states for the operators that scope state to more than a
// key: timers (namespace: timestamp and the user's namespace) and windows
// (namespace: the window). The functions here pick the backend's
// implementation; the interfaces are the method sets both backends give.

// nsOps are the namespace methods every namespaced state has.
type nsOps[K comparable, N comparable] interface {
	// SetCurrentNamespace scopes the state to namespace n of the current
	// key.
	SetCurrentNamespace(n N)
	// Namespaces yields the namespaces in which the current key has an
	// entry.
	Namespaces() iter.Seq[N]
	// ClearAllNamespaces removes the current key's entries in every
	// namespace.
	ClearAllNamespaces()
	// Entries yields every (key, namespace) with an entry, across the key
	// groups of the backend.
	Entries() iter.Seq2[K, N]
}

// nsValue is a namespaced value state.
type nsValue[K comparable, N comparable, V any] interface {
	state.Value[V]
	nsOps[K, N]
}

// nsList is a namespaced list state.
type nsList[K comparable, N comparable, T any] interface {
	state.List[T]
	nsOps[K, N]
	MergeNamespaces(target N, sources ...N)
}

// nsReducing is a namespaced reducing state.
type nsReducing[K comparable, N comparable, T any] interface {
	state.Reducing[T]
	nsOps[K, N]
	MergeNamespaces(target N, sources ...N)
}

// nsAggregating is a namespaced aggregating state.
type nsAggregating[K comparable, N comparable, IN, OUT any] interface {
	state.Aggregating[IN, OUT]
	nsOps[K, N]
	MergeNamespaces(target N, sources ...N)
}

func newNSValue[K comparable, N comparable, V any](b statebackend.KeyedBackend[K], name string, nc codec.Codec[N], vc codec.Codec[V]) (nsValue[K, N, V], error) {
	switch b := b.(type) {
	case *heap.Backend[K]:
		return heap.NewNamespacedValueState(b, name, nc, vc)
	case *pebble.Backend[K]:
		return pebble.NewNamespacedValueState(b, name, nc, vc)
	}
	return nil, unsupported("namespaced value", name, b.Kind())
}

func newNSList[K comparable, N comparable, T any](b statebackend.KeyedBackend[K], name string, nc codec.Codec[N], c codec.Codec[T]) (nsList[K, N, T], error) {
	switch b := b.(type) {
	case *heap.Backend[K]:
		return heap.NewNamespacedListState(b, name, nc, c)
	case *pebble.Backend[K]:
		return pebble.NewNamespacedListState(b, name, nc, c)
	}
	return nil, unsupported("namespaced list", name, b.Kind())
}

func newNSReducing[K comparable, N comparable, T any](b statebackend.KeyedBackend[K], name string, reduce func(acc, v T) T, nc codec.Codec[N], c codec.Codec[T]) (nsReducing[K, N, T], error) {
	switch b := b.(type) {
	case *heap.Backend[K]:
		return heap.NewNamespacedReducingState(b, name, reduce, nc, c)
	case *pebble.Backend[K]:
		return pebble.NewNamespacedReducingState(b, name, reduce, nc, c)
	}
	return nil, unsupported("namespaced reducing", name, b.Kind())
}

func newNSAggregating[K comparable, N comparable, IN, ACC, OUT any](b statebackend.KeyedBackend[K], name string, f state.AggregateFunction[IN, ACC, OUT], nc codec.Codec[N], c codec.Codec[ACC]) (nsAggregating[K, N, IN, OUT], error) {
	switch b := b.(type) {
	case *heap.Backend[K]:
		return heap.NewNamespacedAggregatingState(b, name, f, nc, c)
	case *pebble.Backend[K]:
		return pebble.NewNamespacedAggregatingState(b, name, f, nc, c)
	}
	return nil, unsupported("namespaced aggregating", name, b.Kind())
}
