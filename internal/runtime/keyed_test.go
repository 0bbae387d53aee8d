package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestMergeSnapshots checks the join of an operator's own snapshot and its
// keyed state's: handles of both, both asynchronous parts in order (the
// second skipped after an error of the first), both releases.
func TestMergeSnapshots(t *testing.T) {
	var order []string
	async := func(name string, n int64, err error) func(context.Context, *checkpoint.SubtaskState) (int64, error) {
		return func(_ context.Context, st *checkpoint.SubtaskState) (int64, error) {
			order = append(order, name)
			st.Keyed = append(st.Keyed, checkpoint.KeyedStateHandle{Path: name})
			return n, err
		}
	}
	release := func(name string) func() { return func() { order = append(order, "release "+name) } }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		a, b      OperatorSnapshot
		stateless bool
		written   int64
		err       error
		order     []string
	}{
		{name: "stateless operator, keyed state",
			a: OperatorSnapshot{Stateless: true}, b: OperatorSnapshot{Async: async("keyed", 7, nil), Release: release("keyed")},
			written: 7, order: []string{"keyed", "release keyed"}},
		{name: "both",
			a: OperatorSnapshot{Async: async("op", 1, nil), Release: release("op")}, b: OperatorSnapshot{Async: async("keyed", 7, nil), Release: release("keyed")},
			written: 8, order: []string{"op", "keyed", "release op", "release keyed"}},
		{name: "operator fails",
			a: OperatorSnapshot{Async: async("op", 1, boom)}, b: OperatorSnapshot{Async: async("keyed", 7, nil)},
			written: 1, err: boom, order: []string{"op"}},
		{name: "both stateless", a: OperatorSnapshot{Stateless: true}, b: OperatorSnapshot{Stateless: true}, stateless: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order = nil
			m := mergeSnapshots(tc.a, tc.b)
			if m.Stateless != tc.stateless {
				t.Errorf("Stateless %v, want %v", m.Stateless, tc.stateless)
			}
			var st checkpoint.SubtaskState
			if m.Async != nil {
				n, err := m.Async(context.Background(), &st)
				if n != tc.written || !errors.Is(err, tc.err) {
					t.Errorf("Async: %d, %v; want %d, %v", n, err, tc.written, tc.err)
				}
			}
			if m.Release != nil && tc.err == nil {
				m.Release()
			}
			if !slices.Equal(order, tc.order) {
				t.Errorf("calls %q, want %q", order, tc.order)
			}
		})
	}
}
