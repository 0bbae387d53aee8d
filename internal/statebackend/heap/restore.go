package heap

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Restore implements statebackend.KeyedBackend. It checks every block it
// loads completely (structure, order of states and keys) but decodes no key
// or value: the state's constructor does, with the state's codecs, after
// checking that the state is registered as it was written (same kind,
// namespaces and TTL, from the file's state descriptions). The entries of each
// state and key group are copied out of the bytes open returns, so neither a
// handle's bytes nor the entries of a state once registered stay in memory.
//
// On error the backend is left empty.
func (b *Backend[K]) Restore(handles []checkpoint.KeyedStateHandle, open func(h checkpoint.KeyedStateHandle) ([]byte, error)) error {
	if b.restored || len(b.states) > 0 || b.version > 0 {
		return errors.New("heap backend: Restore must be called once, before any state is registered or snapshot taken")
	}
	states := make(map[string]*namedState)
	from := make([]int, b.groups.Len()) // 1 + index of the handle a slot came from
	for i, h := range handles {
		if err := b.restoreHandle(i, h, open, states, from); err != nil {
			return fmt.Errorf("heap backend: restore key groups %v from handle %d (%s): %w", b.groups, i, describe(h), err)
		}
	}
	b.restored = true
	b.states = states
	b.names = slices.Sorted(func(yield func(string) bool) {
		for name := range states {
			if !yield(name) {
				return
			}
		}
	})
	return nil
}

func (b *Backend[K]) restoreHandle(i int, h checkpoint.KeyedStateHandle, open func(checkpoint.KeyedStateHandle) ([]byte, error), states map[string]*namedState, from []int) error {
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
		if from[slot] != 0 {
			return fmt.Errorf("key group %d is also in handle %d: handles overlap", g, from[slot]-1)
		}
		from[slot] = i + 1
		blk, err := f.Block(g)
		if err != nil {
			return err
		}
		for _, sb := range blk.States {
			st := states[sb.Name]
			switch {
			case st == nil:
				st = &namedState{raw: make([]format.StateBlock, b.groups.Len()), info: sb.Info}
				states[sb.Name] = st
			case st.info != sb.Info:
				return fmt.Errorf("key group %d: state %q is described as %v, but as %v in another key group: %w", g, sb.Name, sb.Info, st.info, format.ErrCorrupt)
			}
			st.raw[slot] = sb.Clone()
		}
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
