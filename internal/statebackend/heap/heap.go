package heap

import (
	"fmt"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
)

// Backend holds the keyed state of one subtask.
type Backend[K comparable] struct {
	groups keygroup.Range
	key    K
	slot   int // current key group minus groups.Start
	states map[string]bool
}

var _ statebackend.KeyedBackend[string] = (*Backend[string])(nil)

// New returns an empty backend for the key groups in r.
func New[K comparable](r keygroup.Range) *Backend[K] {
	return &Backend[K]{groups: r, states: make(map[string]bool)}
}

// Kind implements statebackend.KeyedBackend.
func (b *Backend[K]) Kind() string { return "heap" }

// KeyGroups implements statebackend.KeyedBackend.
func (b *Backend[K]) KeyGroups() keygroup.Range { return b.groups }

// SetCurrentKey implements statebackend.KeyedBackend.
func (b *Backend[K]) SetCurrentKey(key K, keyGroup int) {
	b.key = key
	b.slot = keyGroup - b.groups.Start
}

// CurrentKey implements statebackend.KeyedBackend.
func (b *Backend[K]) CurrentKey() K { return b.key }

func (b *Backend[K]) register(name string) error {
	if b.states[name] {
		return fmt.Errorf("state %q is registered twice: state names must be unique per operator", name)
	}
	b.states[name] = true
	return nil
}

// ValueState is a keyed value state on the heap.
type ValueState[K comparable, V any] struct {
	b      *Backend[K]
	tables []map[K]V // by key group slot, allocated on first write
	codec  codec.Codec[V]
}

// NewValueState registers a value state named name. The codec serializes
// values in snapshots.
func NewValueState[K comparable, V any](b *Backend[K], name string, c codec.Codec[V]) (*ValueState[K, V], error) {
	if err := b.register(name); err != nil {
		return nil, err
	}
	return &ValueState[K, V]{b: b, tables: make([]map[K]V, b.groups.Len()), codec: c}, nil
}

// Value returns the current key's value.
func (s *ValueState[K, V]) Value() (V, bool) {
	v, ok := s.tables[s.b.slot][s.b.key]
	return v, ok
}

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) {
	t := s.tables[s.b.slot]
	if t == nil {
		t = make(map[K]V)
		s.tables[s.b.slot] = t
	}
	t[s.b.key] = v
}

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() {
	delete(s.tables[s.b.slot], s.b.key)
}

// Len returns the number of keys with a value, across all key groups.
func (s *ValueState[K, V]) Len() int {
	n := 0
	for _, t := range s.tables {
		n += len(t)
	}
	return n
}
