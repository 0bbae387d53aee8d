package pebble

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// ErrSnapshotUsed is returned by WriteState when it was called before, or
// the snapshot was released.
var ErrSnapshotUsed = errors.New("pebble snapshot: WriteState called twice or after Release")

// Phases of a snapshot, guarded by the backend's mu.
const (
	phaseIdle = iota
	phaseWriting
	phaseWritten
	phaseReleased
)

// stateRef is a state of a snapshot.
type stateRef struct {
	id   uint64
	info format.StateInfo
	// Of a registered state (see stateMeta); zero for a restored state not
	// registered, whose canonical entries are copied as they are. grouped
	// is also set for a state restored from a native checkpoint in the
	// grouped layout, whose entries are grouped back (without dropping
	// expired ones: its TTL is known once it is registered).
	typed   bool
	ttl     int64
	grouped bool
}

type snapshot[K comparable] struct {
	b      *Backend[K]
	id     int64
	groups keygroup.Range
	states []stateRef       // sorted by name
	index  map[uint64]int   // state id → index in states
	ps     *pebble.Snapshot // nil once released
	phase  int
	now    int64 // when the snapshot was taken: entries expired then are left out
}

var _ statebackend.Snapshot = (*snapshot[string])(nil)

// Snapshot implements statebackend.KeyedBackend: it takes a pebble snapshot
// (a sequence number: O(1), nothing is copied or flushed, after the dirty
// entries of the write-back cache are written to the database) and the list of
// state names with their ids and descriptions (O(states)). Until it is released the database
// keeps every version of an entry the snapshot can see, so compactions
// cannot drop overwritten values.
func (b *Backend[K]) Snapshot(id int64) (statebackend.Snapshot, error) {
	if b.closed {
		return nil, fmt.Errorf("snapshot %d: %w", id, ErrClosed)
	}
	if err := b.flushCache(); err != nil {
		return nil, fmt.Errorf("snapshot %d: %w", id, err)
	}
	s := &snapshot[K]{
		b:      b,
		id:     id,
		groups: b.groups,
		states: make([]stateRef, len(b.names)),
		index:  make(map[uint64]int, len(b.names)),
		ps:     b.db.NewSnapshot(),
		now:    b.opts.Clock(),
	}
	for i, name := range b.names {
		st := b.states[name]
		s.states[i] = stateRef{id: st.id, info: st.info, typed: st.typed, ttl: st.ttl, grouped: st.grouped}
		s.index[st.id] = i
	}
	b.snapshots++
	b.mu.Lock()
	b.live[s] = struct{}{}
	b.mu.Unlock()
	return s, nil
}

// WriteState implements statebackend.Snapshot. It reads the key groups in
// order with one iterator over the pebble snapshot and writes each key group
// as its block is complete, so it holds one key group's entries in memory at
// a time (as format.Writer does anyway), not the state.
func (s *snapshot[K]) WriteState(w io.Writer) (checkpoint.KeyedStateHandle, error) {
	b := s.b
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return checkpoint.KeyedStateHandle{}, fmt.Errorf("checkpoint %d: %w", s.id, ErrClosed)
	case s.phase != phaseIdle:
		b.mu.Unlock()
		return checkpoint.KeyedStateHandle{}, fmt.Errorf("checkpoint %d: %w", s.id, ErrSnapshotUsed)
	}
	s.phase = phaseWriting
	b.writing.Add(1)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		s.phase = phaseWritten
		b.mu.Unlock()
		b.writing.Done()
	}()

	h, err := s.write(w)
	if err != nil {
		return checkpoint.KeyedStateHandle{}, fmt.Errorf("pebble snapshot of checkpoint %d: %w", s.id, err)
	}
	h.Backend = Kind
	return h, nil
}

// Release implements statebackend.Snapshot.
func (s *snapshot[K]) Release() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	switch s.phase {
	case phaseReleased:
		return
	case phaseWriting:
		panic(fmt.Sprintf("pebble snapshot of checkpoint %d: Release while WriteState runs; make its writer fail and wait for it to return first", s.id))
	}
	s.closeLocked()
}

// closeLocked releases the pebble snapshot; the backend's mu is held.
func (s *snapshot[K]) closeLocked() {
	s.phase = phaseReleased
	delete(s.b.live, s)
	_ = s.ps.Close() // errors only when closed twice, which phase prevents
	s.ps = nil
}

// groupEntries gathers the entries of one key group, by state.
type groupEntries struct {
	buf     []byte
	entries []span
	runs    []run // by index in snapshot.states
}

// add appends an entry of the state at index i.
func (ge *groupEntries) add(i int, key, value []byte) {
	r := &ge.runs[i]
	if r.n == 0 {
		r.start = len(ge.entries)
	}
	r.n++
	e := span{k: len(ge.buf)}
	ge.buf = append(ge.buf, key...)
	e.v = len(ge.buf)
	ge.buf = append(ge.buf, value...)
	e.end = len(ge.buf)
	ge.entries = append(ge.entries, e)
}

// span locates an entry in buf: key buf[k:v], value buf[v:end].
type span struct{ k, v, end int }

// run is the entries[start:start+n] of one state.
type run struct{ start, n int }

func (s *snapshot[K]) write(w io.Writer) (h checkpoint.KeyedStateHandle, err error) {
	it, err := s.ps.NewIter(&pebble.IterOptions{
		LowerBound: appendGroupPrefix(nil, s.groups.Start),
		UpperBound: appendGroupPrefix(nil, s.groups.End),
	})
	if err != nil {
		return h, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			h, err = checkpoint.KeyedStateHandle{}, cerr
		}
	}()
	fw := format.NewWriter(w, s.groups)
	infos, err := s.described(it)
	if err != nil {
		return h, err
	}
	if err := fw.Describe(infos...); err != nil {
		return h, err
	}
	ge := groupEntries{runs: make([]run, len(s.states))}
	groupers := make([]*grouper, len(s.states))
	var gr *grouper   // of the current state, when it is grouped
	var lastID uint64 // ids start at 1
	var i int         // index of lastID in s.states
	var ok bool
	// flush adds the pending grouped entry of the current state.
	flush := func() error {
		if gr != nil {
			k, v, done, err := gr.flush()
			if err != nil {
				return fmt.Errorf("state %q: %w", s.states[i].info.Name, err)
			}
			if done {
				ge.add(i, k, v)
			}
		}
		return nil
	}
	valid := it.First()
	for g := s.groups.Start; g < s.groups.End; g++ {
		ge.buf, ge.entries = ge.buf[:0], ge.entries[:0]
		clear(ge.runs)
		for ; valid; valid = it.Next() {
			kg, id, key, err := splitEntryKey(it.Key())
			if err != nil {
				return h, err
			}
			if kg != g {
				if kg < g {
					return h, fmt.Errorf("%w: key group %d after key group %d", errBadKey, kg, g)
				}
				break
			}
			if id != lastID { // entries come in runs of one state
				if err := flush(); err != nil {
					return h, err
				}
				i, ok = s.index[id]
				if !ok {
					return h, fmt.Errorf("%w: key group %d has entries of state id %d, which no state name has", errBadKey, g, id)
				}
				lastID = id
				gr = nil
				if st := s.states[i]; st.grouped { // registered, or restored natively (incremental)
					if groupers[i] == nil {
						groupers[i] = &grouper{kind: st.info.Kind, ttl: st.ttl, now: s.now}
					}
					gr = groupers[i]
				}
			}
			value, err := it.ValueAndErr()
			if err != nil {
				return h, err
			}
			st := &s.states[i]
			switch {
			case gr != nil:
				k, v, done, err := gr.add(key, value)
				if err != nil {
					return h, fmt.Errorf("state %q, key group %d: %w", st.info.Name, g, err)
				}
				if done {
					ge.add(i, k, v)
				}
				continue
			case st.typed && st.ttl > 0:
				last, _, err := format.SplitTTL(value)
				if err != nil {
					return h, fmt.Errorf("state %q, key group %d: %w", st.info.Name, g, err)
				}
				if s.now >= format.ExpiresAt(last, st.ttl) {
					continue
				}
			}
			ge.add(i, key, value)
		}
		if err := flush(); err != nil {
			return h, err
		}
		lastID = 0 // the next key group starts a new run
		if err := s.writeGroup(fw, g, &ge); err != nil {
			return h, err
		}
	}
	if err := it.Error(); err != nil {
		return h, err
	}
	return fw.Finish()
}

// described returns the infos of the states that the file's header must
// describe: those that are not plain and have live entries in the snapshot.
// It looks for a live entry of each such state in each key group until it
// finds one: without a TTL one seek per key group and state, and none for
// plain states (a state registered by NewValueState is plain; others come
// from restored files); with a TTL it reads expired entries (headers, in
// the grouped layout) until the first live one.
func (s *snapshot[K]) described(it *pebble.Iterator) ([]format.StateInfo, error) {
	var infos []format.StateInfo
	var prefix, seek []byte
	for _, st := range s.states {
		if st.info.Plain() {
			continue
		}
		found := false
		for g := s.groups.Start; g < s.groups.End && !found; g++ {
			prefix = appendStatePrefix(prefix[:0], g, st.id)
			for valid := it.SeekGE(prefix); valid && hasPrefix(it.Key(), prefix); {
				if !st.typed || st.ttl == 0 {
					found = true
					break
				}
				v, err := it.ValueAndErr()
				if err != nil {
					return nil, err
				}
				last, _, err := format.SplitTTL(v)
				if err != nil {
					return nil, fmt.Errorf("state %q, key group %d: %w", st.info.Name, g, err)
				}
				if s.now < format.ExpiresAt(last, st.ttl) {
					found = true
					break
				}
				if st.grouped { // skip the expired group's sub-entries
					k := it.Key()
					seek = append(append(seek[:0], k[:len(k)-1]...), subMark+1)
					valid = it.SeekGE(seek)
				} else {
					valid = it.Next()
				}
			}
			if err := it.Error(); err != nil {
				return nil, err
			}
		}
		if found {
			infos = append(infos, st.info)
		}
	}
	return infos, nil
}

// writeGroup writes the block of key group g: its states in name order.
func (s *snapshot[K]) writeGroup(fw *format.Writer, g int, ge *groupEntries) error {
	n := 0
	for _, r := range ge.runs {
		if r.n > 0 {
			n++
		}
	}
	if err := fw.StartGroup(g, n); err != nil {
		return err
	}
	for i, r := range ge.runs {
		if r.n == 0 {
			continue
		}
		if err := fw.StartState(s.states[i].info.Name, r.n); err != nil {
			return err
		}
		for _, e := range ge.entries[r.start : r.start+r.n] {
			if err := fw.Entry(ge.buf[e.k:e.v], ge.buf[e.v:e.end]); err != nil {
				return err
			}
		}
	}
	return fw.EndGroup()
}
