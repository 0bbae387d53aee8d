package pebble

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// restoreBatchSize is the size at which Restore commits its batch, to bound
// the memory it holds.
const restoreBatchSize = 4 << 20

// Restore implements statebackend.KeyedBackend. It checks every block it
// loads completely (structure, order of states and keys) and writes its
// entries to the database in batches, as bytes: no key or value is decoded
// (NewValueState samples one entry per key group; Value decodes the rest).
// A restored state that is never registered stays in the database under its
// name and is written into every later snapshot.
//
// On error the backend is left empty.
func (b *Backend[K]) Restore(handles []checkpoint.KeyedStateHandle, open func(h checkpoint.KeyedStateHandle) ([]byte, error)) error {
	if b.closed {
		return fmt.Errorf("restore: %w", ErrClosed)
	}
	if b.restored || len(b.states) > 0 || b.snapshots > 0 {
		return errors.New("pebble backend: Restore must be called once, before any state is registered or snapshot taken")
	}
	b.restoringCache() // empty already (no state registered): restores start with an empty cache
	r := restorer[K]{b: b, from: make([]int, b.groups.Len()), batch: b.db.NewBatch()}
	for i, h := range handles {
		if err := r.handle(i, h, open); err != nil {
			r.batch.Close()
			return errors.Join(
				fmt.Errorf("pebble backend: restore key groups %v from handle %d (%s): %w", b.groups, i, describe(h), err),
				b.wipe())
		}
	}
	if err := r.commit(); err != nil {
		r.batch.Close()
		return errors.Join(fmt.Errorf("pebble backend: restore key groups %v: %w", b.groups, err), b.wipe())
	}
	r.batch.Close()
	b.restored = true
	for name := range b.states {
		b.unchecked[name] = true
	}
	return nil
}

type restorer[K comparable] struct {
	b     *Backend[K]
	from  []int // 1 + index of the handle a slot came from
	batch *pebble.Batch
	key   []byte
}

func (r *restorer[K]) handle(i int, h checkpoint.KeyedStateHandle, open func(checkpoint.KeyedStateHandle) ([]byte, error)) error {
	b := r.b
	if err := format.CheckHandle(h); err != nil {
		return err
	}
	lo, hi := max(h.StartGroup, b.groups.Start), min(h.EndGroup, b.groups.End)
	if lo >= hi {
		return nil // none of ours: not read
	}
	data, err := open(h)
	if err != nil {
		return err
	}
	f, err := format.Open(h, data)
	if err != nil {
		return err
	}
	for g := lo; g < hi; g++ {
		slot := g - b.groups.Start
		if r.from[slot] != 0 {
			return fmt.Errorf("key group %d is also in handle %d: handles overlap", g, r.from[slot]-1)
		}
		r.from[slot] = i + 1
		blk, err := f.Block(g)
		if err != nil {
			return err
		}
		for _, sb := range blk.States {
			st, ok := b.states[sb.Name]
			switch {
			case !ok:
				st.info = sb.Info
				if st.id, err = b.addName(sb.Info, r.batch); err != nil {
					return err
				}
			case st.info != sb.Info:
				return fmt.Errorf("key group %d: state %q is a %v, but a %v in another key group: %w", g, sb.Name, sb.Info, st.info, format.ErrCorrupt)
			}
			id := st.id
			err := sb.ForEach(func(k, v []byte) error {
				r.key = appendEntryKey(r.key[:0], g, id, k)
				if err := r.batch.Set(r.key, v, nil); err != nil {
					return err
				}
				if r.batch.Len() >= restoreBatchSize {
					return r.commit()
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("key group %d, state %q: %w", g, sb.Name, err)
			}
		}
	}
	return nil
}

func (r *restorer[K]) commit() error {
	if r.batch.Empty() {
		return nil
	}
	if err := r.b.commitBatch(r.batch); err != nil {
		return err
	}
	r.batch.Reset()
	return nil
}

// wipe deletes every entry and state name, after a failed Restore.
func (b *Backend[K]) wipe() error {
	b.states, b.names, b.nextID = make(map[string]stateMeta), nil, 1
	if err := b.dbDeleteRange([]byte{}, []byte{metaPrefix, 0xff}); err != nil {
		return fmt.Errorf("pebble backend: clear after a failed restore: %w", err)
	}
	return nil
}

func describe(h checkpoint.KeyedStateHandle) string {
	where := "inline"
	if h.Path != "" {
		where = fmt.Sprintf("%q", h.Path)
	}
	return fmt.Sprintf("%s, key groups [%d, %d)", where, h.StartGroup, h.EndGroup)
}
