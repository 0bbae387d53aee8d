package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.Map[string, int] = (*MapState[string, string, int])(nil)
	_ state.Map[string, int] = (*NamespacedMapState[string, string, string, int])(nil)
)

// MapState is a keyed map state in the database, in the grouped layout
// (layout.go): one database entry per user key, so that Get, Put and
// Contains are point operations whatever the size of the map; Remove also
// looks whether the map has another entry, and Len, All and Keys iterate.
// A TTL applies to a key's whole map, as on the heap backend: every write
// renews it. It implements state.Map[UK, UV].
//
// Errors of the database or of decoding go to Options.OnError.
type MapState[K comparable, UK comparable, UV any] struct {
	mapCore[K, noNamespace, UK, UV]
}

// NamespacedMapState is a map state scoped to the current key and the
// current namespace. It implements state.Map[UK, UV] and has the namespace
// methods (see NamespacedValueState).
type NamespacedMapState[K comparable, N comparable, UK comparable, UV any] struct {
	mapCore[K, N, UK, UV]
	namespaceOps[K, N]
}

// NewMapState registers a map state named name; ukc and uvc are the codecs
// of the user keys and values. If name was restored, its entries are
// decoded and converted to the grouped layout now.
func NewMapState[K comparable, UK comparable, UV any](b *Backend[K], name string, ukc codec.Codec[UK], uvc codec.Codec[UV], opts ...Option) (*MapState[K, UK, UV], error) {
	mc, err := newMapCore[K, noNamespace](b, name, nil, nil, ukc, uvc, opts)
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{mc}, nil
}

// NewNamespacedMapState registers a namespaced map state named name.
func NewNamespacedMapState[K comparable, N comparable, UK comparable, UV any](b *Backend[K], name string, nsCodec codec.Codec[N], ukc codec.Codec[UK], uvc codec.Codec[UV], opts ...Option) (*NamespacedMapState[K, N, UK, UV], error) {
	mc, err := newMapCore(b, name, nsCodec, checkNamespaceCodec(nsCodec), ukc, uvc, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedMapState[K, N, UK, UV]{mc, namespaceOps[K, N]{mc.c}}, nil
}

func newMapCore[K comparable, N comparable, UK comparable, UV any](b *Backend[K], name string, nsCodec codec.Codec[N], argErr error, ukc codec.Codec[UK], uvc codec.Codec[UV], opts []Option) (mapCore[K, N, UK, UV], error) {
	if ukc == nil || uvc == nil {
		argErr = errors.New("nil user key or user value codec")
	}
	explode := func(rest []byte, emit func(sub, payload []byte) error) error {
		return explodeMap(ukc, uvc, rest, emit)
	}
	check := func(payload []byte) error {
		return explode(payload, func(_, _ []byte) error { return nil })
	}
	core, err := newCore(b, format.StateInfo{Name: name, Kind: format.KindMap}, nsCodec, argErr, check,
		regSpec{grouped: true, explode: explode}, opts)
	return mapCore[K, N, UK, UV]{c: core, ukc: ukc, uvc: uvc}, err
}

// explodeMap splits a canonical map value (uvarint n, then n entries, user
// keys sorted by their bytes) into its entries, decoding each with the
// codecs. (The heap backend's checks.)
func explodeMap[UK comparable, UV any](ukc codec.Codec[UK], uvc codec.Codec[UV], src []byte, emit func(uk, uv []byte) error) error {
	n, k := binary.Uvarint(src)
	switch {
	case k <= 0:
		return fmt.Errorf("map length: %w", format.ErrCorrupt)
	case n == 0:
		return fmt.Errorf("empty map: maps are never stored empty: %w", format.ErrCorrupt)
	case n > uint64(len(src)-k)+1:
		return fmt.Errorf("map of %d entries in %d bytes: %w", n, len(src)-k, format.ErrCorrupt)
	}
	src = src[k:]
	var prev []byte
	for i := range n {
		uk, kn, err := ukc.Decode(src)
		if err != nil {
			return fmt.Errorf("user key %d of %d: %w", i, n, err)
		}
		kb := src[:kn]
		if i > 0 && string(kb) <= string(prev) {
			return fmt.Errorf("user key %d (%x) after %x: user keys are not sorted or repeat: %w", i, kb, prev, format.ErrCorrupt)
		}
		prev = kb
		_, vn, err := uvc.Decode(src[kn:])
		if err != nil {
			return fmt.Errorf("value of user key %v: %w", uk, err)
		}
		if err := emit(kb, src[kn:kn+vn]); err != nil {
			return err
		}
		src = src[kn+vn:]
	}
	if len(src) > 0 {
		return fmt.Errorf("%d bytes left over after %d entries: the user key or value codec differs from the one that wrote the state", len(src), n)
	}
	return nil
}

// mapCore implements a map state for any namespace type.
type mapCore[K comparable, N comparable, UK comparable, UV any] struct {
	c   *core[K, N]
	ukc codec.Codec[UK]
	uvc codec.Codec[UV]
}

// Get returns the value of uk in the current key's map.
func (m mapCore[K, N, UK, UV]) Get(uk UK) (UV, bool) {
	var zero UV
	c := m.c
	gk, ok := c.group(c.ns, true)
	if !ok {
		return zero, false
	}
	c.xbuf = m.ukc.Append(c.xbuf[:0], uk)
	raw, ok := c.getRaw(c.subKey(gk, c.xbuf))
	if !ok {
		return zero, false
	}
	uv, err := decodeAll(m.uvc, raw)
	if err != nil {
		c.fail(fmt.Sprintf("decode value of user key %v", uk), err)
		return zero, false
	}
	return uv, true
}

// Contains reports whether uk has a value in the current key's map.
func (m mapCore[K, N, UK, UV]) Contains(uk UK) bool {
	_, ok := m.Get(uk)
	return ok
}

// Put sets the value of uk in the current key's map.
func (m mapCore[K, N, UK, UV]) Put(uk UK, uv UV) {
	c := m.c
	gk, ok := c.groupForWrite(c.ns)
	if !ok {
		return
	}
	c.setHeader(gk)
	m.put(gk, uk, uv)
	c.commit()
}

// put stages the entry (core.stageSet).
func (m mapCore[K, N, UK, UV]) put(gk []byte, uk UK, uv UV) {
	c := m.c
	c.xbuf = m.ukc.Append(c.xbuf[:0], uk)
	c.ybuf = m.uvc.Append(c.ybuf[:0], uv)
	c.stageSet(c.subKey(gk, c.xbuf), c.ybuf)
}

// PutAll sets every entry of um, in one batch. um is not retained.
func (m mapCore[K, N, UK, UV]) PutAll(um map[UK]UV) {
	if len(um) == 0 {
		return
	}
	c := m.c
	gk, ok := c.groupForWrite(c.ns)
	if !ok {
		return
	}
	c.setHeader(gk)
	for uk, uv := range um {
		m.put(gk, uk, uv)
	}
	c.commit()
}

// Remove removes uk from the current key's map; removing the last entry
// removes the map. Removing an entry renews the map's TTL.
func (m mapCore[K, N, UK, UV]) Remove(uk UK) {
	c := m.c
	gk, ok := c.group(c.ns, false)
	if !ok {
		return
	}
	c.xbuf = m.ukc.Append(c.xbuf[:0], uk)
	key := c.subKey(gk, c.xbuf)
	if _, ok := c.getRaw(key); !ok {
		return
	}
	key = append([]byte(nil), key...)
	other, err := m.hasOtherEntry(gk, key)
	if err != nil {
		c.fail("remove", err)
		return
	}
	if !other {
		c.deleteGroup(gk)
		return
	}
	c.stageDelete(key)
	if c.ttl > 0 {
		c.setHeader(gk)
	}
	c.commit()
}

// hasOtherEntry reports whether the group gk has an entry besides key.
func (m mapCore[K, N, UK, UV]) hasOtherEntry(gk, key []byte) (bool, error) {
	lo := append(append([]byte(nil), gk...), subMark)
	if m.c.cache != nil {
		if err := m.c.cache.flushState(m.c.id); err != nil {
			return false, err
		}
	}
	it, err := m.c.b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return false, err
	}
	valid := it.First()
	if valid && string(it.Key()) == string(key) {
		valid = it.Next()
	}
	return valid, errors.Join(it.Error(), it.Close())
}

// Clear removes the current key's map.
func (m mapCore[K, N, UK, UV]) Clear() {
	c := m.c
	gk, err := c.entryKey(c.ns)
	if err != nil {
		c.b.fail(err)
		return
	}
	c.deleteGroup(gk)
}

// All yields the entries of the current key's map in the order of their
// user keys' bytes. The state may change during the iteration: an entry
// removed before it is reached is not yielded, an entry updated before it
// is reached is yielded with its new value, an entry added may or may not
// be yielded (as on the heap backend).
func (m mapCore[K, N, UK, UV]) All() iter.Seq2[UK, UV] {
	return func(yield func(UK, UV) bool) {
		c := m.c
		gk, ok := c.group(c.ns, true)
		if !ok {
			return
		}
		lo := append(append([]byte(nil), gk...), subMark)
		if !c.flushCached("read map") {
			return
		}
		it, err := c.b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			c.fail("read map", err)
			return
		}
		defer func() {
			if err := it.Close(); err != nil {
				c.fail("read map", err)
			}
		}()
		mods := c.mods
		for valid := it.First(); valid; valid = it.Next() {
			k := it.Key()
			uk, err := decodeAll(m.ukc, k[len(lo):])
			if err != nil {
				c.fail("decode user key", err)
				return
			}
			raw, err := it.ValueAndErr()
			if err != nil {
				c.fail("read map", err)
				return
			}
			if c.mods != mods { // the iterator's view may be stale
				if raw, ok = c.getRaw(k); !ok {
					continue
				}
			}
			uv, err := decodeAll(m.uvc, raw)
			if err != nil {
				c.fail(fmt.Sprintf("decode value of user key %v", uk), err)
				return
			}
			if !yield(uk, uv) {
				return
			}
		}
		if err := it.Error(); err != nil {
			c.fail("read map", err)
		}
	}
}

// Keys yields the user keys of the current key's map, as All does.
func (m mapCore[K, N, UK, UV]) Keys() iter.Seq[UK] {
	return func(yield func(UK) bool) {
		for uk := range m.All() {
			if !yield(uk) {
				return
			}
		}
	}
}

// Len returns the number of entries of the current key's map; it iterates
// over them.
func (m mapCore[K, N, UK, UV]) Len() int {
	c := m.c
	gk, ok := c.group(c.ns, true)
	if !ok {
		return 0
	}
	lo := append(append([]byte(nil), gk...), subMark)
	if !c.flushCached("read map") {
		return 0
	}
	it, err := c.b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		c.fail("read map", err)
		return 0
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		c.fail("read map", err)
		return 0
	}
	return n
}

// IsEmpty reports whether the current key's map has no entries: one point
// read of its header.
func (m mapCore[K, N, UK, UV]) IsEmpty() bool {
	c := m.c
	if c.ttl > 0 {
		_, ok := c.groupLive(c.ns, true)
		return !ok
	}
	gk, err := c.entryKey(c.ns)
	if err != nil {
		c.b.fail(err)
		return true
	}
	return !c.existsAt(gk)
}
