package heap

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Snapshot implements statebackend.KeyedBackend. It takes a new version,
// captures the map of every state and key group (a slice of map references
// per state: O(states × key groups), no entry is copied) and marks them
// frozen until the snapshot is released. It reads the clock once: entries
// of TTL states that are expired at that time are left out of the
// snapshot.
func (b *Backend[K]) Snapshot(id int64) (statebackend.Snapshot, error) {
	if b.keyCodec == nil {
		return nil, fmt.Errorf("heap backend: snapshot %d: the backend has no key codec", id)
	}
	now := b.now()
	b.version++
	s := &snapshot[K]{
		b:       b,
		id:      id,
		version: b.version,
		groups:  b.groups,
		states:  make([]captured, len(b.names)),
	}
	for i, name := range b.names {
		st := b.states[name]
		if st.typed != nil {
			s.states[i] = st.typed.capture(now)
		} else {
			// Restored bytes are never modified, only dropped when the
			// state registers, so the snapshot can share them.
			s.states[i] = rawCapture{blocks: st.raw, info: st.info}
		}
	}
	b.live = append(b.live, s.version)
	b.frozenBelow = s.version
	return s, nil
}

// release forgets snapshot version v.
func (b *Backend[K]) release(v uint64) {
	b.live = slices.DeleteFunc(b.live, func(x uint64) bool { return x == v })
	b.frozenBelow = 0
	if len(b.live) > 0 {
		b.frozenBelow = slices.Max(b.live)
	}
}

// Phases of a snapshot. The phase is atomic because WriteState and Release
// run on different goroutines; a Release that observes phaseWritten also
// observes every read WriteState made of the frozen maps.
const (
	phaseIdle int32 = iota
	phaseWriting
	phaseWritten
	phaseReleased
)

// ErrSnapshotUsed is returned by WriteState when it was called before or the
// snapshot is released.
var ErrSnapshotUsed = errors.New("heap snapshot: WriteState called twice or after Release")

var _ statebackend.Snapshot = (*snapshot[string])(nil)

type snapshot[K comparable] struct {
	b       *Backend[K] // touched only by Release, on the task goroutine
	id      int64
	version uint64
	groups  keygroup.Range
	states  []captured // sorted by name
	phase   atomic.Int32
}

// WriteState implements statebackend.Snapshot.
func (s *snapshot[K]) WriteState(w io.Writer) (h checkpoint.KeyedStateHandle, err error) {
	if !s.phase.CompareAndSwap(phaseIdle, phaseWriting) {
		return h, fmt.Errorf("checkpoint %d: %w", s.id, ErrSnapshotUsed)
	}
	defer s.phase.Store(phaseWritten)
	defer func() {
		// A codec's Append may panic (codec.Of's binary-method codecs do when
		// AppendBinary fails). On this goroutine nothing would catch it, and
		// it would take the process down, so it becomes this checkpoint's
		// error.
		if r := recover(); r != nil {
			h, err = checkpoint.KeyedStateHandle{}, fmt.Errorf("heap snapshot of checkpoint %d: encoding panicked: %v", s.id, r)
		}
	}()
	// Count first: the header describes the states that have entries, and
	// each block starts with its number of states.
	slots := s.groups.Len()
	counts := make([]int, len(s.states)*slots) // [state*slots+slot]
	var infos []format.StateInfo
	for i, c := range s.states {
		some := false
		for slot := range slots {
			n := c.entries(slot)
			counts[i*slots+slot] = n
			some = some || n > 0
		}
		if some {
			infos = append(infos, c.stateInfo())
		}
	}
	fw := format.NewWriter(w, s.groups)
	if err := fw.Describe(infos...); err != nil {
		return h, fmt.Errorf("heap snapshot of checkpoint %d: %w", s.id, err)
	}
	var sc scratch
	for slot := range slots {
		n := 0
		for i := range s.states {
			if counts[i*slots+slot] > 0 {
				n++
			}
		}
		if err := fw.StartGroup(s.groups.Start+slot, n); err != nil {
			return h, fmt.Errorf("heap snapshot of checkpoint %d: %w", s.id, err)
		}
		for i, c := range s.states {
			if n := counts[i*slots+slot]; n > 0 {
				if err := c.write(fw, slot, n, &sc); err != nil {
					return h, fmt.Errorf("heap snapshot of checkpoint %d: %w", s.id, err)
				}
			}
		}
		if err := fw.EndGroup(); err != nil {
			return h, fmt.Errorf("heap snapshot of checkpoint %d: %w", s.id, err)
		}
	}
	h, err = fw.Finish()
	if err != nil {
		return checkpoint.KeyedStateHandle{}, fmt.Errorf("heap snapshot of checkpoint %d: %w", s.id, err)
	}
	h.Backend = "heap"
	return h, nil
}

// Release implements statebackend.Snapshot.
func (s *snapshot[K]) Release() {
	for {
		switch p := s.phase.Load(); p {
		case phaseReleased:
			return
		case phaseWriting:
			panic(fmt.Sprintf("heap snapshot of checkpoint %d: Release while WriteState runs; make its writer fail and wait for it to return first", s.id))
		default:
			if s.phase.CompareAndSwap(p, phaseReleased) {
				s.b.release(s.version)
				s.states = nil // let the frozen maps go even if the snapshot is kept
				return
			}
		}
	}
}

// scratch is WriteState's reusable buffer for sorting one table's entries.
type scratch struct {
	buf     []byte
	entries []span
	key     []byte  // the current key's bytes, for namespaced states
	at      []int32 // the slot of each entry of a flat table
	keys    keySorter
	// For writeInOrder: ranks of the used slots, the entries of slots
	// used since the order was cached, and their slots.
	prefix     []int32
	fresh      []span
	freshSlots []int32
}

// span locates one encoded entry in scratch.buf: key buf[k:v], value
// buf[v:end].
type span struct{ k, v, end int }

// rawCapture is a restored, unregistered state: written back as it was read.
type rawCapture struct {
	blocks []format.StateBlock // by slot
	info   format.StateInfo
}

func (c rawCapture) stateInfo() format.StateInfo { return c.info }

func (c rawCapture) entries(slot int) int { return c.blocks[slot].Entries }

func (c rawCapture) write(w *format.Writer, slot, _ int, _ *scratch) error {
	return w.CopyState(c.blocks[slot])
}
