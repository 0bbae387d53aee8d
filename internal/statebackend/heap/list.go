package heap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.List[int] = (*ListState[string, int])(nil)
	_ state.List[int] = (*NamespacedListState[string, string, int])(nil)
)

// ListState is a keyed list state on the heap. It implements state.List[T].
//
// A list is kept as a slice. Add appends to it in place — amortized O(1),
// even while a snapshot is in flight — because a snapshot reads only the
// elements the list had when the snapshot was taken, below the length it
// captured, and a list never shrinks in place: Update stores a new slice,
// Clear drops it. Get returns the slice clipped to its length, so that the
// caller's appends copy rather than write where the state appends next.
// Elements are stored as they are: like values, they must not be mutated in
// place once added.
type ListState[K comparable, T any] struct {
	listCore[K, noNamespace, T]
}

// NamespacedListState is a list state scoped to the current key and the
// current namespace. It implements state.List[T] and has the namespace
// methods (see NamespacedValueState) and MergeNamespaces.
type NamespacedListState[K comparable, N comparable, T any] struct {
	listCore[K, N, T]
	namespaceOps[K, N, []T]
}

// NewListState registers a list state named name; c is the codec of the
// elements.
func NewListState[K comparable, T any](b *Backend[K], name string, c codec.Codec[T], opts ...Option) (*ListState[K, T], error) {
	s, err := newListStore[K, noNamespace](b, name, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &ListState[K, T]{listCore[K, noNamespace, T]{s}}, nil
}

// NewNamespacedListState registers a namespaced list state named name.
func NewNamespacedListState[K comparable, N comparable, T any](b *Backend[K], name string, nsCodec codec.Codec[N], c codec.Codec[T], opts ...Option) (*NamespacedListState[K, N, T], error) {
	s, err := newListStore(b, name, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedListState[K, N, T]{listCore[K, N, T]{s}, namespaceOps[K, N, []T]{s}}, nil
}

func newListStore[K comparable, N comparable, T any](b *Backend[K], name string, nsCodec codec.Codec[N], nsErr error, c codec.Codec[T], opts []Option) (*store[K, N, []T], error) {
	zeroSize := reflect.TypeFor[T]().Size() == 0
	spec := kindSpec[N, []T]{
		kind:    format.KindList,
		nsCodec: nsCodec,
		newEncoder: func() func([]byte, []T) []byte {
			return func(dst []byte, l []T) []byte {
				dst = binary.AppendUvarint(dst, uint64(len(l)))
				for _, v := range l {
					dst = c.Append(dst, v)
				}
				return dst
			}
		},
		decode: func(src []byte) ([]T, error) { return decodeList(c, src, zeroSize) },
		err:    nsErr,
	}
	if c == nil {
		spec.err = errors.New("nil element codec")
	}
	return newStore(b, name, spec, opts)
}

// decodeList decodes the value bytes of a list: uvarint n, then n
// elements, n >= 1.
func decodeList[T any](c codec.Codec[T], src []byte, zeroSize bool) ([]T, error) {
	n, k := binary.Uvarint(src)
	switch {
	case k <= 0:
		return nil, fmt.Errorf("list length: %w", format.ErrCorrupt)
	case n == 0:
		return nil, fmt.Errorf("empty list: lists are never stored empty: %w", format.ErrCorrupt)
	case n > uint64(len(src)-k) && !(zeroSize && n <= 1<<31):
		// Only elements of a size-0 type can take no bytes, and only they
		// can be more than the bytes left (and they take no memory).
		return nil, fmt.Errorf("list of %d elements in %d bytes: %w", n, len(src)-k, format.ErrCorrupt)
	}
	src = src[k:]
	l := make([]T, n)
	for i := range l {
		v, m, err := c.Decode(src)
		if err != nil {
			return nil, fmt.Errorf("element %d of %d: %w", i, n, err)
		}
		l[i], src = v, src[m:]
	}
	if len(src) > 0 {
		return nil, fmt.Errorf("%d bytes left over after %d elements: the element codec differs from the one that wrote the state", len(src), n)
	}
	return l, nil
}

// listCore implements a list state for any namespace type.
type listCore[K comparable, N comparable, T any] struct {
	s *store[K, N, []T]
}

// Get returns the current key's list, nil when it has none. The slice is
// the state's own, clipped to its length: do not modify its elements.
func (c listCore[K, N, T]) Get() []T {
	l, _ := c.s.get(c.s.ns, true)
	return slices.Clip(l)
}

// Add appends v to the current key's list, in amortized constant time.
func (c listCore[K, N, T]) Add(v T) {
	l, _ := c.s.get(c.s.ns, false)
	c.s.set(c.s.ns, append(l, v))
}

// AddAll appends the elements of vs. vs is not retained.
func (c listCore[K, N, T]) AddAll(vs []T) {
	if len(vs) == 0 {
		return
	}
	l, _ := c.s.get(c.s.ns, false)
	c.s.set(c.s.ns, append(l, vs...))
}

// Update replaces the current key's list with a copy of vs; an empty vs
// clears it.
func (c listCore[K, N, T]) Update(vs []T) {
	if len(vs) == 0 {
		c.s.del(c.s.ns)
		return
	}
	c.s.set(c.s.ns, slices.Clone(vs))
}

// Clear removes the current key's list.
func (c listCore[K, N, T]) Clear() { c.s.del(c.s.ns) }

// MergeNamespaces appends the current key's lists in the namespaces
// sources, in the order given, to its list in target, and removes them. If
// target is among sources, its list is taken in its place in that order.
// The current namespace does not change.
func (s *NamespacedListState[K, N, T]) MergeNamespaces(target N, sources ...N) {
	st := s.listCore.s
	var merged []T
	for _, src := range sources {
		l, ok := st.get(src, false)
		if !ok {
			continue
		}
		st.del(src)
		merged = append(merged, l...)
	}
	if len(merged) == 0 {
		return
	}
	l, _ := st.get(target, false)
	st.set(target, append(l, merged...))
}
