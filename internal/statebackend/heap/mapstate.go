package heap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.Map[string, int] = (*MapState[string, string, int])(nil)
	_ state.Map[string, int] = (*NamespacedMapState[string, string, string, int])(nil)
)

// MapState is a keyed map state on the heap. It implements
// state.Map[UK, UV].
//
// Each key's map is a Go map with a version, like a table's: a Put or
// Remove writes it in place unless a snapshot in flight holds it, and then
// copies it first (once per snapshot). User values are stored as they are:
// like values, they must not be mutated in place after Put.
type MapState[K comparable, UK comparable, UV any] struct {
	mapCore[K, noNamespace, UK, UV]
}

// NamespacedMapState is a map state scoped to the current key and the
// current namespace. It implements state.Map[UK, UV] and has the namespace
// methods (see NamespacedValueState).
type NamespacedMapState[K comparable, N comparable, UK comparable, UV any] struct {
	mapCore[K, N, UK, UV]
	namespaceOps[K, N, mapEntry[UK, UV]]
}

// mapEntry is the map of one key (and namespace). m is never empty in a
// table. ver is the backend's version when m was made: m is written in
// place only when no unreleased snapshot is newer (Backend.writable).
type mapEntry[UK comparable, UV any] struct {
	m   map[UK]UV
	ver uint64
}

// NewMapState registers a map state named name; ukc and uvc are the codecs
// of the user keys and values.
func NewMapState[K comparable, UK comparable, UV any](b *Backend[K], name string, ukc codec.Codec[UK], uvc codec.Codec[UV], opts ...Option) (*MapState[K, UK, UV], error) {
	s, err := newMapStore[K, noNamespace](b, name, nil, nil, ukc, uvc, opts)
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{mapCore[K, noNamespace, UK, UV]{s}}, nil
}

// NewNamespacedMapState registers a namespaced map state named name.
func NewNamespacedMapState[K comparable, N comparable, UK comparable, UV any](b *Backend[K], name string, nsCodec codec.Codec[N], ukc codec.Codec[UK], uvc codec.Codec[UV], opts ...Option) (*NamespacedMapState[K, N, UK, UV], error) {
	s, err := newMapStore(b, name, nsCodec, checkNamespaceCodec(nsCodec), ukc, uvc, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedMapState[K, N, UK, UV]{mapCore[K, N, UK, UV]{s}, namespaceOps[K, N, mapEntry[UK, UV]]{s}}, nil
}

func newMapStore[K comparable, N comparable, UK comparable, UV any](b *Backend[K], name string, nsCodec codec.Codec[N], nsErr error, ukc codec.Codec[UK], uvc codec.Codec[UV], opts []Option) (*store[K, N, mapEntry[UK, UV]], error) {
	spec := kindSpec[N, mapEntry[UK, UV]]{
		kind:       format.KindMap,
		nsCodec:    nsCodec,
		newEncoder: func() func([]byte, mapEntry[UK, UV]) []byte { return newMapEncoder(ukc, uvc) },
		decode: func(src []byte) (mapEntry[UK, UV], error) {
			m, err := decodeMap(ukc, uvc, src)
			return mapEntry[UK, UV]{m: m, ver: b.version}, err
		},
		err: nsErr,
	}
	if ukc == nil || uvc == nil {
		spec.err = errors.New("nil user key or user value codec")
	}
	return newStore(b, name, spec, opts)
}

// newMapEncoder returns an encoder of map values with its own scratch
// space: uvarint n, then the n entries sorted by user-key bytes.
func newMapEncoder[UK comparable, UV any](ukc codec.Codec[UK], uvc codec.Codec[UV]) func([]byte, mapEntry[UK, UV]) []byte {
	var buf []byte
	var spans []span // k: user key start, v: value start, end
	return func(dst []byte, e mapEntry[UK, UV]) []byte {
		buf, spans = buf[:0], spans[:0]
		for uk, uv := range e.m {
			sp := span{k: len(buf)}
			buf = ukc.Append(buf, uk)
			sp.v = len(buf)
			buf = uvc.Append(buf, uv)
			sp.end = len(buf)
			spans = append(spans, sp)
		}
		slices.SortFunc(spans, func(a, b span) int { return bytes.Compare(buf[a.k:a.v], buf[b.k:b.v]) })
		dst = binary.AppendUvarint(dst, uint64(len(spans)))
		for i, sp := range spans {
			if i > 0 && bytes.Equal(buf[sp.k:sp.v], buf[spans[i-1].k:spans[i-1].v]) {
				// Caught by WriteState, which makes it the checkpoint's error.
				panic(fmt.Sprintf("two user keys encode to the same bytes %x: the user key codec is not injective", buf[sp.k:sp.v]))
			}
			dst = append(dst, buf[sp.k:sp.end]...)
		}
		return dst
	}
}

// decodeMap decodes the value bytes of a map: uvarint n >= 1, then n
// entries sorted by user-key bytes, strictly increasing.
func decodeMap[UK comparable, UV any](ukc codec.Codec[UK], uvc codec.Codec[UV], src []byte) (map[UK]UV, error) {
	n, k := binary.Uvarint(src)
	switch {
	case k <= 0:
		return nil, fmt.Errorf("map length: %w", format.ErrCorrupt)
	case n == 0:
		return nil, fmt.Errorf("empty map: maps are never stored empty: %w", format.ErrCorrupt)
	case n > uint64(len(src)-k)+1:
		// Keys strictly increase, so all but the first take a byte at least.
		return nil, fmt.Errorf("map of %d entries in %d bytes: %w", n, len(src)-k, format.ErrCorrupt)
	}
	src = src[k:]
	m := make(map[UK]UV, n)
	var prev []byte
	for i := range n {
		uk, kn, err := ukc.Decode(src)
		if err != nil {
			return nil, fmt.Errorf("user key %d of %d: %w", i, n, err)
		}
		kb := src[:kn]
		if i > 0 && bytes.Compare(kb, prev) <= 0 {
			return nil, fmt.Errorf("user key %d (%x) after %x: user keys are not sorted or repeat: %w", i, kb, prev, format.ErrCorrupt)
		}
		prev = kb
		uv, vn, err := uvc.Decode(src[kn:])
		if err != nil {
			return nil, fmt.Errorf("value of user key %v: %w", uk, err)
		}
		if _, dup := m[uk]; dup {
			return nil, fmt.Errorf("user key %v decoded twice from different bytes", uk)
		}
		m[uk] = uv
		src = src[kn+vn:]
	}
	if len(src) > 0 {
		return nil, fmt.Errorf("%d bytes left over after %d entries: the user key or value codec differs from the one that wrote the state", len(src), n)
	}
	return m, nil
}

// mapCore implements a map state for any namespace type.
type mapCore[K comparable, N comparable, UK comparable, UV any] struct {
	s *store[K, N, mapEntry[UK, UV]]
}

// Get returns the value of uk in the current key's map.
func (c mapCore[K, N, UK, UV]) Get(uk UK) (UV, bool) {
	e, _ := c.s.get(c.s.ns, true)
	uv, ok := e.m[uk]
	return uv, ok
}

// Contains reports whether uk has a value in the current key's map.
func (c mapCore[K, N, UK, UV]) Contains(uk UK) bool {
	_, ok := c.Get(uk)
	return ok
}

// Len returns the number of entries of the current key's map.
func (c mapCore[K, N, UK, UV]) Len() int {
	e, _ := c.s.get(c.s.ns, true)
	return len(e.m)
}

// IsEmpty reports whether the current key's map has no entries.
func (c mapCore[K, N, UK, UV]) IsEmpty() bool { return c.Len() == 0 }

// Put sets the value of uk in the current key's map.
func (c mapCore[K, N, UK, UV]) Put(uk UK, uv UV) {
	c.writable(1)[uk] = uv
}

// PutAll sets every entry of m. m is not retained.
func (c mapCore[K, N, UK, UV]) PutAll(m map[UK]UV) {
	if len(m) == 0 {
		return
	}
	maps.Copy(c.writable(len(m)), m)
}

// writable returns the current key's map for writing about n entries: in
// place when no snapshot holds it, a copy otherwise, a new map when there
// is none; it renews the entry's TTL. The caller writes at least one entry
// into it at once, so that no empty map stays stored.
func (c mapCore[K, N, UK, UV]) writable(n int) map[UK]UV {
	s := c.s
	e, ok := s.get(s.ns, false)
	switch {
	case !ok:
		e = mapEntry[UK, UV]{m: make(map[UK]UV, n), ver: s.b.version}
		s.set(s.ns, e)
	case !s.b.writable(e.ver):
		e = mapEntry[UK, UV]{m: maps.Clone(e.m), ver: s.b.version}
		s.set(s.ns, e)
	default:
		s.touched(s.ns)
	}
	return e.m
}

// Remove removes uk from the current key's map; removing the last entry
// removes the map.
func (c mapCore[K, N, UK, UV]) Remove(uk UK) {
	s := c.s
	e, ok := s.get(s.ns, false)
	if !ok {
		return
	}
	if _, ok := e.m[uk]; !ok {
		return
	}
	switch {
	case len(e.m) == 1:
		s.del(s.ns)
	case s.b.writable(e.ver):
		delete(e.m, uk)
		s.touched(s.ns)
	default:
		m := maps.Clone(e.m)
		delete(m, uk)
		s.set(s.ns, mapEntry[UK, UV]{m: m, ver: s.b.version})
	}
}

// Clear removes the current key's map.
func (c mapCore[K, N, UK, UV]) Clear() { c.s.del(c.s.ns) }

// All yields the entries of the current key's map in no particular order.
// The state may change during the iteration: an entry removed before it is
// reached is not yielded, an entry updated before it is reached is yielded
// with its new value, an entry added may or may not be yielded.
func (c mapCore[K, N, UK, UV]) All() iter.Seq2[UK, UV] {
	return func(yield func(UK, UV) bool) {
		s := c.s
		e, ok := s.get(s.ns, true)
		if !ok {
			return
		}
		slot, key, ns, mods := s.b.slot, s.b.key, s.ns, s.mods
		for uk, uv := range e.m {
			if s.mods != mods {
				// e.m may be a copy's original by now: read the live map.
				cur, ok := s.peek(slot, key, ns)
				if !ok {
					return
				}
				if uv, ok = cur.m[uk]; !ok {
					continue
				}
			}
			if !yield(uk, uv) {
				return
			}
		}
	}
}

// Keys yields the user keys of the current key's map, as All does.
func (c mapCore[K, N, UK, UV]) Keys() iter.Seq[UK] {
	return func(yield func(UK) bool) {
		for uk := range c.All() {
			if !yield(uk) {
				return
			}
		}
	}
}
