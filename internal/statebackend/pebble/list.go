package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.List[int] = (*ListState[string, int])(nil)
	_ state.List[int] = (*NamespacedListState[string, string, int])(nil)
)

// ListState is a keyed list state in the database, in the grouped layout
// (layout.go): Add and AddAll append a chunk with a merge operand, without
// reading the list (with a TTL they read the small header, to drop an
// expired list first); Get reads and decodes the whole list. It implements
// state.List[T].
//
// Errors of the database or of decoding go to Options.OnError.
type ListState[K comparable, T any] struct {
	listCore[K, noNamespace, T]
}

// NamespacedListState is a list state scoped to the current key and the
// current namespace. It implements state.List[T] and has the namespace
// methods (see NamespacedValueState) and MergeNamespaces.
type NamespacedListState[K comparable, N comparable, T any] struct {
	listCore[K, N, T]
	namespaceOps[K, N]
}

// NewListState registers a list state named name; c is the codec of the
// elements.
func NewListState[K comparable, T any](b *Backend[K], name string, c codec.Codec[T], opts ...Option) (*ListState[K, T], error) {
	lc, err := newListCore[K, noNamespace](b, name, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &ListState[K, T]{lc}, nil
}

// NewNamespacedListState registers a namespaced list state named name.
func NewNamespacedListState[K comparable, N comparable, T any](b *Backend[K], name string, nsCodec codec.Codec[N], c codec.Codec[T], opts ...Option) (*NamespacedListState[K, N, T], error) {
	lc, err := newListCore(b, name, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedListState[K, N, T]{lc, namespaceOps[K, N]{lc.c}}, nil
}

func newListCore[K comparable, N comparable, T any](b *Backend[K], name string, nsCodec codec.Codec[N], argErr error, c codec.Codec[T], opts []Option) (listCore[K, N, T], error) {
	if c == nil {
		argErr = errors.New("nil element codec")
	}
	zeroSize := reflect.TypeFor[T]().Size() == 0
	check := func(payload []byte) error {
		_, err := decodeList(c, payload, zeroSize)
		return err
	}
	core, err := newCore(b, format.StateInfo{Name: name, Kind: format.KindList}, nsCodec, argErr, check,
		regSpec{grouped: true, explode: listExplode}, opts)
	return listCore[K, N, T]{c: core, codec: c, zeroSize: zeroSize}, err
}

// decodeList decodes a canonical list value: uvarint n, then n elements,
// n >= 1. (The heap backend's checks.)
func decodeList[T any](c codec.Codec[T], src []byte, zeroSize bool) ([]T, error) {
	n, k := binary.Uvarint(src)
	switch {
	case k <= 0:
		return nil, fmt.Errorf("list length: %w", format.ErrCorrupt)
	case n == 0:
		return nil, fmt.Errorf("empty list: lists are never stored empty: %w", format.ErrCorrupt)
	case n > uint64(len(src)-k) && !(zeroSize && n <= 1<<31):
		return nil, fmt.Errorf("list of %d elements in %d bytes: %w", n, len(src)-k, format.ErrCorrupt)
	}
	return decodeElements(c, make([]T, 0, n), n, src[k:])
}

// decodeElements appends the n elements whose bytes are src to l.
func decodeElements[T any](c codec.Codec[T], l []T, n uint64, src []byte) ([]T, error) {
	for i := range n {
		v, m, err := c.Decode(src)
		if err != nil {
			return nil, fmt.Errorf("element %d of %d: %w", i, n, err)
		}
		l, src = append(l, v), src[m:]
	}
	if len(src) > 0 {
		return nil, fmt.Errorf("%d bytes left over after %d elements: the element codec differs from the one that wrote the state", len(src), n)
	}
	return l, nil
}

// listCore implements a list state for any namespace type.
type listCore[K comparable, N comparable, T any] struct {
	c        *core[K, N]
	codec    codec.Codec[T]
	zeroSize bool
}

// Get returns the current key's list, nil when it has none: a new slice
// decoded from the database, which the caller may modify.
func (l listCore[K, N, T]) Get() []T {
	c := l.c
	gk, ok := c.group(c.ns, true)
	if !ok {
		return nil
	}
	payload, ok := c.getRaw(c.subKey(gk, nil))
	if !ok {
		return nil
	}
	var out []T
	err := forEachChunk(payload, func(n uint64, elems []byte) (err error) {
		if out == nil {
			out = make([]T, 0, n)
		}
		out, err = decodeElements(l.codec, out, n, elems)
		return err
	})
	if err != nil {
		c.fail("decode list", err)
		return nil
	}
	return out
}

// Add appends v to the current key's list, without reading it.
func (l listCore[K, N, T]) Add(v T) {
	c := l.c
	c.xbuf = l.codec.Append(c.xbuf[:0], v)
	l.append(c.ns, 1, c.xbuf)
}

// AddAll appends the elements of vs. vs is not retained.
func (l listCore[K, N, T]) AddAll(vs []T) {
	if len(vs) == 0 {
		return
	}
	c := l.c
	c.xbuf = c.xbuf[:0]
	for _, v := range vs {
		c.xbuf = l.codec.Append(c.xbuf, v)
	}
	l.append(c.ns, len(vs), c.xbuf)
}

// append appends n elements whose bytes are elems to the list in namespace
// ns, renewing its TTL.
func (l listCore[K, N, T]) append(ns N, n int, elems []byte) {
	c := l.c
	gk, ok := c.groupForWrite(ns) // with a TTL, drops an expired list
	if !ok {
		return
	}
	c.ybuf = appendChunk(c.ybuf[:0], n, elems)
	c.appendChunks(gk, c.ybuf)
}

// Update replaces the current key's list with the elements of vs; an empty
// vs clears it.
func (l listCore[K, N, T]) Update(vs []T) {
	c := l.c
	if len(vs) == 0 {
		l.Clear()
		return
	}
	gk, err := c.entryKey(c.ns)
	if err != nil {
		c.b.fail(err)
		return
	}
	c.xbuf = c.xbuf[:0]
	for _, v := range vs {
		c.xbuf = l.codec.Append(c.xbuf, v)
	}
	c.ybuf = appendChunk(c.ybuf[:0], len(vs), c.xbuf)
	c.setHeader(gk)
	c.stageSet(c.subKey(gk, nil), c.ybuf)
	c.commit()
}

// Clear removes the current key's list.
func (l listCore[K, N, T]) Clear() {
	c := l.c
	gk, err := c.entryKey(c.ns)
	if err != nil {
		c.b.fail(err)
		return
	}
	c.deleteGroup(gk)
}

// MergeNamespaces appends the current key's lists in the namespaces
// sources, in the order given, to its list in target, and removes them. If
// target is among sources, its list is taken in its place in that order.
// The current namespace does not change. No element is decoded.
func (s *NamespacedListState[K, N, T]) MergeNamespaces(target N, sources ...N) {
	c := s.listCore.c
	var merged []byte
	for _, src := range sources {
		gk, ok := c.group(src, false)
		if !ok {
			continue
		}
		payload, ok := c.getRaw(c.subKey(gk, nil))
		if !ok {
			continue
		}
		merged = append(merged, payload...)
		c.deleteGroup(gk)
	}
	if len(merged) == 0 {
		return
	}
	if gk, ok := c.groupForWrite(target); ok {
		c.appendChunks(gk, merged)
	}
}

// appendChunks writes the header of group gk and appends chunks to its
// list: in the write-back cache when it knows the list (cached, or
// certainly absent from the database), else with a merge operand in the
// database, without reading the list.
func (c *core[K, N]) appendChunks(gk, chunks []byte) {
	c.setHeader(gk)
	sub := c.subKey(gk, nil)
	if c.cache != nil {
		ok, err := c.cache.extend(c.id, sub, chunks)
		if err != nil {
			c.fail("write back", err)
		}
		if ok {
			c.commit()
			return
		}
	}
	_ = c.batch.Merge(sub, chunks, nil)
	c.commit()
}
