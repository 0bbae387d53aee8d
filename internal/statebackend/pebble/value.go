package pebble

import (
	"errors"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

var (
	_ state.Value[int] = (*ValueState[string, int])(nil)
	_ state.Value[int] = (*NamespacedValueState[string, string, int])(nil)
)

// ValueState is a keyed value state in the database: one entry per key,
// holding the value's codec bytes (after an 8-byte timestamp with a TTL).
// Every Value decodes and every Update encodes, so a value may be mutated
// after Update without affecting the state (unlike on the heap backend); it
// also means that the value codec's Decode must not return values aliasing
// its input, whose memory the backend reuses.
//
// Errors of the database or of decoding go to Options.OnError.
type ValueState[K comparable, V any] struct {
	valueCore[K, noNamespace, V]
}

// NamespacedValueState is a value state scoped to the current key and the
// current namespace (SetCurrentNamespace): one entry per key and
// namespace, under key‖namespace. It implements state.Value[V] and has the
// namespace methods SetCurrentNamespace, CurrentNamespace, Namespaces,
// ClearAllNamespaces and Entries, as the heap backend's (every namespaced
// kind has them).
type NamespacedValueState[K comparable, N comparable, V any] struct {
	valueCore[K, N, V]
	namespaceOps[K, N]
}

// NewValueState registers a value state named name. The codec serializes
// values. If name was restored, the first entry of each key group is decoded
// now with the backend's key codec and c, so that a codec that does not
// match the state's bytes gives an error naming the state and the key group
// (the others are decoded when read); the restored bytes stay, and the state
// may be registered again with another codec.
func NewValueState[K comparable, V any](b *Backend[K], name string, c codec.Codec[V], opts ...Option) (*ValueState[K, V], error) {
	vc, err := newValueCore[K, noNamespace](b, name, nil, nil, c, opts)
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{vc}, nil
}

// NewNamespacedValueState registers a value state named name whose entries
// are scoped to a namespace as well as a key; nsCodec encodes namespaces
// (after the key's bytes).
func NewNamespacedValueState[K comparable, N comparable, V any](b *Backend[K], name string, nsCodec codec.Codec[N], c codec.Codec[V], opts ...Option) (*NamespacedValueState[K, N, V], error) {
	vc, err := newValueCore(b, name, nsCodec, checkNamespaceCodec(nsCodec), c, opts)
	if err != nil {
		return nil, err
	}
	return &NamespacedValueState[K, N, V]{vc, namespaceOps[K, N]{vc.c}}, nil
}

func newValueCore[K comparable, N comparable, V any](b *Backend[K], name string, nsCodec codec.Codec[N], argErr error, c codec.Codec[V], opts []Option) (valueCore[K, N, V], error) {
	if c == nil {
		argErr = errors.New("nil value codec")
	}
	check := func(payload []byte) error {
		_, err := decodeAll(c, payload)
		return err
	}
	core, err := newCore(b, format.StateInfo{Name: name, Kind: format.KindValue}, nsCodec, argErr, check, regSpec{}, opts)
	return valueCore[K, N, V]{c: core, codec: c}, err
}

// valueCore implements a value state for any namespace type.
type valueCore[K comparable, N comparable, V any] struct {
	c     *core[K, N]
	codec codec.Codec[V]
}

// Value returns the current key's value. With a TTL it removes an expired
// value and, with OnReadAndWrite, renews the value (a write).
func (v valueCore[K, N, V]) Value() (V, bool) {
	raw, ok := v.c.get(v.c.ns, true)
	if !ok {
		var zero V
		return zero, false
	}
	val, err := decodeAll(v.codec, raw)
	if err != nil {
		v.c.fail("decode value", err)
		var zero V
		return zero, false
	}
	return val, true
}

// Update sets the current key's value.
func (v valueCore[K, N, V]) Update(val V) {
	buf := v.codec.Append(v.c.startValue(), val)
	v.c.wbuf = buf
	v.c.put(v.c.ns, buf)
}

// Clear removes the current key's value.
func (v valueCore[K, N, V]) Clear() { v.c.del(v.c.ns) }
