package heap

import (
	"fmt"
	"maps"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Backend holds the keyed state of one subtask. It is not safe for
// concurrent use: every method, and every method of its states, runs on the
// task goroutine, except Snapshot.WriteState of the snapshots it returns.
type Backend[K comparable] struct {
	groups   keygroup.Range
	keyCodec codec.Codec[K]
	key      K
	slot     int // current key group minus groups.Start

	states map[string]*namedState
	names  []string // keys of states, sorted: the order of states in a snapshot

	restored bool // Restore was called

	// Copy-on-write bookkeeping (see the package documentation).
	version     uint64   // version of the latest snapshot; 0 before the first
	live        []uint64 // versions of the snapshots not yet released
	frozenBelow uint64   // max(live), 0 when none: tables made before it are frozen
}

// namedState is a state name's entry: a registered state, or bytes restored
// for a name no state has registered (yet).
type namedState struct {
	typed registered          // nil until registered
	raw   []format.StateBlock // by slot, when restored and not registered; Entries == 0 where absent
}

// registered is what a snapshot needs of a typed state.
type registered interface {
	capture() captured
}

// captured is one state's part of a snapshot: immutable once captured, read
// by WriteState on its own goroutine.
type captured interface {
	// entries returns the number of entries in the key group at slot.
	entries(slot int) int
	// write writes the state's entries in the key group at slot, which has
	// at least one.
	write(w *format.Writer, name string, slot int, sc *scratch) error
}

var _ statebackend.KeyedBackend[string] = (*Backend[string])(nil)

// New returns an empty backend for the key groups in r. keyCodec encodes
// keys in snapshots and decodes restored ones; it must be the codec whose
// bytes pick each key's key group.
func New[K comparable](r keygroup.Range, keyCodec codec.Codec[K]) *Backend[K] {
	return &Backend[K]{groups: r, keyCodec: keyCodec, states: make(map[string]*namedState)}
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

// lookupForRegister returns the entry of name for a new typed state, or an
// error if a state of that name is registered already.
func (b *Backend[K]) lookupForRegister(name string) (*namedState, error) {
	st := b.states[name]
	if st != nil && st.typed != nil {
		return nil, fmt.Errorf("state %q is registered twice: state names must be unique per operator", name)
	}
	return st, nil
}

// register records s as the state named name, replacing restored bytes.
func (b *Backend[K]) register(name string, s registered) {
	if st := b.states[name]; st != nil {
		st.typed, st.raw = s, nil
		return
	}
	b.states[name] = &namedState{typed: s}
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
}

// writable reports whether a table whose map was made when the backend was at
// version ver may be written in place: no unreleased snapshot froze it.
//
// A map made at version ver (that is, after snapshot ver and before snapshot
// ver+1) is captured by every snapshot taken while it is the live map, and
// only by those, whose versions are all above ver. So it is frozen exactly
// when some unreleased snapshot has a version above ver, that is when ver <
// max(live). Releasing a snapshot lowers the maximum only past versions no
// other unreleased snapshot needs.
func (b *Backend[K]) writable(ver uint64) bool { return ver >= b.frozenBelow }

// ValueState is a keyed value state on the heap.
//
// Values are stored as they are, not serialized: a value must not be mutated
// in place after Update (through a pointer, slice or map it holds), because
// a snapshot may be writing it out on another goroutine. Build a new value
// and Update with it. (Flink's heap backend has the same rule for mutable
// objects.)
type ValueState[K comparable, V any] struct {
	b      *Backend[K]
	tables []table[K, V] // by key group slot
	codec  codec.Codec[V]
}

// table is the map of one state and key group. m is nil until the first
// write. A map that a snapshot captured is never written again: the first
// write after the snapshot clones it and writes the clone.
type table[K comparable, V any] struct {
	m   map[K]V
	ver uint64 // the backend's version when m was made
}

// NewValueState registers a value state named name. The codec serializes
// values in snapshots and decodes restored ones: if name was restored, its
// values are decoded now, and an error names the key group that failed.
func NewValueState[K comparable, V any](b *Backend[K], name string, c codec.Codec[V]) (*ValueState[K, V], error) {
	st, err := b.lookupForRegister(name)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("state %q: nil value codec", name)
	}
	s := &ValueState[K, V]{b: b, tables: make([]table[K, V], b.groups.Len()), codec: c}
	if st != nil && st.raw != nil {
		if err := s.load(name, st.raw); err != nil {
			return nil, err // the bytes stay, so the state is not lost
		}
	}
	b.register(name, s)
	return s, nil
}

// load decodes restored entries into s's tables.
func (s *ValueState[K, V]) load(name string, raw []format.StateBlock) error {
	kc := s.b.keyCodec
	for slot, blk := range raw {
		if blk.Entries == 0 {
			continue
		}
		group := s.b.groups.Start + slot
		if kc == nil {
			return fmt.Errorf("restore state %q, key group %d: the backend has no key codec", name, group)
		}
		m := make(map[K]V, blk.Entries)
		err := blk.ForEach(func(kb, vb []byte) error {
			k, n, err := kc.Decode(kb)
			if err != nil {
				return fmt.Errorf("decode key %x: %w", kb, err)
			}
			if n != len(kb) {
				return fmt.Errorf("decode key %x: %d bytes left over: the key codec differs from the one that wrote the state", kb, len(kb)-n)
			}
			v, n, err := s.codec.Decode(vb)
			if err != nil {
				return fmt.Errorf("decode value of key %v: %w", k, err)
			}
			if n != len(vb) {
				return fmt.Errorf("decode value of key %v: %d bytes left over: the value codec differs from the one that wrote the state", k, len(vb)-n)
			}
			if _, dup := m[k]; dup {
				return fmt.Errorf("key %v decoded twice from different bytes", k)
			}
			m[k] = v
			return nil
		})
		if err != nil {
			return fmt.Errorf("restore state %q, key group %d: %w", name, group, err)
		}
		s.tables[slot] = table[K, V]{m: m, ver: s.b.version}
	}
	return nil
}

// Value returns the current key's value. It never copies a table.
func (s *ValueState[K, V]) Value() (V, bool) {
	v, ok := s.tables[s.b.slot].m[s.b.key]
	return v, ok
}

// Update sets the current key's value. The first write to a key group after a
// snapshot copies that key group's map of this state.
func (s *ValueState[K, V]) Update(v V) {
	s.writableMap()[s.b.key] = v
}

// Clear removes the current key's value. Clearing a key without a value
// copies nothing.
func (s *ValueState[K, V]) Clear() {
	t := &s.tables[s.b.slot]
	if _, ok := t.m[s.b.key]; !ok {
		return
	}
	delete(s.writableMap(), s.b.key)
}

// writableMap returns the current key group's map, made or cloned so that no
// snapshot holds it. ValueState keeps no map but those in tables, so after a
// clone nothing can reach the frozen map for writing.
func (s *ValueState[K, V]) writableMap() map[K]V {
	t := &s.tables[s.b.slot]
	switch {
	case t.m == nil:
		t.m, t.ver = make(map[K]V), s.b.version
	case !s.b.writable(t.ver):
		t.m, t.ver = maps.Clone(t.m), s.b.version
	}
	return t.m
}

// Len returns the number of keys with a value, across all key groups.
func (s *ValueState[K, V]) Len() int {
	n := 0
	for _, t := range s.tables {
		n += len(t.m)
	}
	return n
}

func (s *ValueState[K, V]) capture() captured {
	c := &valueCapture[K, V]{maps: make([]map[K]V, len(s.tables)), keyCodec: s.b.keyCodec, valueCodec: s.codec}
	for i, t := range s.tables {
		c.maps[i] = t.m
	}
	return c
}
