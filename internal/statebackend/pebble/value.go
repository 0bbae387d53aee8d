package pebble

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// ValueState is a keyed value state in the database: one entry per key,
// holding the value's codec bytes. Every Value decodes and every Update
// encodes, so a value may be mutated after Update without affecting the
// state (unlike on the heap backend); it also means that the value codec's
// Decode must not return values aliasing its input, whose memory the
// database reuses.
//
// Errors of the database or of decoding go to Options.OnError.
type ValueState[K comparable, V any] struct {
	b     *Backend[K]
	name  string
	id    uint64
	codec codec.Codec[V]
	kbuf  []byte // database key of the current key
	vbuf  []byte // encoded value of the last Update
}

// NewValueState registers a value state named name. The codec serializes
// values. If name was restored, the first entry of each key group is decoded
// now with the backend's key codec and c, so that a codec that does not
// match the state's bytes gives an error naming the state and the key group
// (the others are decoded when read); the restored bytes stay, and the state
// may be registered again with another codec.
func NewValueState[K comparable, V any](b *Backend[K], name string, c codec.Codec[V]) (*ValueState[K, V], error) {
	if err := b.checkNewName(name); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("state %q: nil value codec", name)
	}
	id, err := b.register(format.PlainInfo(name), func(kb, vb []byte) error {
		k, n, err := b.keyCodec.Decode(kb)
		if err != nil {
			return fmt.Errorf("decode key %x: %w", kb, err)
		}
		if n != len(kb) {
			return fmt.Errorf("decode key %x: %d bytes left over: the key codec differs from the one that wrote the state", kb, len(kb)-n)
		}
		return decodeExact(c, vb, k)
	})
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{b: b, name: name, id: id, codec: c}, nil
}

// decodeExact decodes all of vb, the value of key, with c.
func decodeExact[V any](c codec.Codec[V], vb []byte, key any) error {
	_, n, err := c.Decode(vb)
	if err != nil {
		return fmt.Errorf("decode value of key %v: %w", key, err)
	}
	if n != len(vb) {
		return fmt.Errorf("decode value of key %v: %d bytes left over: the value codec differs from the one that wrote the state", key, len(vb)-n)
	}
	return nil
}

// dbKey returns the database key of the current key in s.
func (s *ValueState[K, V]) dbKey() ([]byte, error) {
	if s.b.closed {
		return nil, fmt.Errorf("state %q: %w", s.name, ErrClosed)
	}
	kb, err := s.b.currentKeyBytes()
	if err != nil {
		return nil, fmt.Errorf("state %q: %w", s.name, err)
	}
	s.kbuf = appendEntryKey(s.kbuf[:0], s.b.group, s.id, kb)
	return s.kbuf, nil
}

func (s *ValueState[K, V]) errorf(op string, err error) error {
	return fmt.Errorf("state %q, key %v (key group %d): %s: %w", s.name, s.b.key, s.b.group, op, err)
}

// Value returns the current key's value.
func (s *ValueState[K, V]) Value() (V, bool) {
	var zero V
	k, err := s.dbKey()
	if err != nil {
		s.b.fail(err)
		return zero, false
	}
	raw, closer, err := s.b.db.Get(k)
	if err == pebble.ErrNotFound {
		return zero, false
	}
	if err != nil {
		s.b.fail(s.errorf("read", err))
		return zero, false
	}
	v, n, err := s.codec.Decode(raw)
	if err == nil && n != len(raw) {
		err = fmt.Errorf("%d bytes left over: the value codec differs from the one that wrote the state", len(raw)-n)
	}
	closer.Close()
	if err != nil {
		s.b.fail(s.errorf("decode value", err))
		return zero, false
	}
	return v, true
}

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) {
	k, err := s.dbKey()
	if err != nil {
		s.b.fail(err)
		return
	}
	s.vbuf = s.codec.Append(s.vbuf[:0], v)
	if err := s.b.db.Set(k, s.vbuf, pebble.NoSync); err != nil {
		s.b.fail(s.errorf("write", err))
	}
}

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() {
	k, err := s.dbKey()
	if err != nil {
		s.b.fail(err)
		return
	}
	if err := s.b.db.Delete(k, pebble.NoSync); err != nil {
		s.b.fail(s.errorf("delete", err))
	}
}
