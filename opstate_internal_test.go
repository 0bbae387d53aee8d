package weir

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
)

// subtasks builds old subtask snapshots: lists[i] is the even-split list
// "l" of old subtask i, written as "x.y" strings ("" for no list at all).
func subtasks(lists ...string) []checkpoint.SubtaskState {
	out := make([]checkpoint.SubtaskState, len(lists))
	for i, l := range lists {
		out[i].Subtask = i
		if l == "-" {
			continue // a subtask without the state (stateless at the time)
		}
		ls := checkpoint.ListState{Name: "l"}
		for _, e := range strings.Fields(l) {
			ls.Entries = append(ls.Entries, []byte(e))
		}
		out[i].Lists = []checkpoint.ListState{ls}
	}
	return out
}

func entries(ls []checkpoint.ListState, name string) string {
	for _, l := range ls {
		if l.Name == name {
			var s []string
			for _, e := range l.Entries {
				s = append(s, string(e))
			}
			return strings.Join(s, " ")
		}
	}
	return "<none>"
}

func TestRedistributeEvenSplit(t *testing.T) {
	tests := []struct {
		name string
		old  []checkpoint.SubtaskState
		par  int
		want []string // by new subtask
	}{
		{"same parallelism keeps each subtask's own", subtasks("a b c", "d", "", "e f"), 4, []string{"a b c", "d", "", "e f"}},
		{"4 to 2: halves in subtask order", subtasks("a b c", "d", "", "e f"), 2, []string{"a b c", "d e f"}},
		{"4 to 3: first len%3 chunks one longer", subtasks("a b", "c d", "e f", "g"), 3, []string{"a b c", "d e", "f g"}},
		{"2 to 4: fewer elements than subtasks", subtasks("a", "b c"), 4, []string{"a", "b", "c", ""}},
		{"2 to 3: 20 elements", subtasks("0 1 2 3 4 5 6 7 8 9", "10 11 12 13 14 15 16 17 18 19"), 3,
			[]string{"0 1 2 3 4 5 6", "7 8 9 10 11 12 13", "14 15 16 17 18 19"}},
		{"a subtask without the state", subtasks("a b", "-", "c"), 2, []string{"a b", "c"}},
		{"all empty", subtasks("", ""), 3, []string{"", "", ""}},
		{"1 to 1", subtasks("a b"), 1, []string{"a b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for s := range tt.par {
				ls, _ := redistributeOperatorState(tt.old, tt.par, s)
				got = append(got, entries(ls, "l"))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedistributeUnionAndBroadcast(t *testing.T) {
	old := make([]checkpoint.SubtaskState, 3)
	for i := range old {
		old[i].Lists = []checkpoint.ListState{
			{Name: "u", Union: true, Entries: [][]byte{[]byte(fmt.Sprint("u", i))}},
			{Name: "e", Entries: [][]byte{[]byte(fmt.Sprint("e", i))}},
		}
		if i != 1 { // old subtask 1 has no copy of the broadcast state
			old[i].Broadcast = []checkpoint.BroadcastState{{Name: "b", Entries: []checkpoint.MapEntry{{Key: []byte("k"), Value: []byte(fmt.Sprint("from", i))}}}}
		}
	}
	tests := []struct {
		par       int
		union     []string
		even      []string
		broadcast []string // the value of key k in each new subtask's copy
	}{
		{3, []string{"u0 u1 u2", "u0 u1 u2", "u0 u1 u2"}, []string{"e0", "e1", "e2"}, []string{"from0", "from0", "from2"}},
		{2, []string{"u0 u1 u2", "u0 u1 u2"}, []string{"e0 e1", "e2"}, []string{"from0", "from0"}},
		{5, slices.Repeat([]string{"u0 u1 u2"}, 5), []string{"e0", "e1", "e2", "", ""}, []string{"from0", "from0", "from2", "from0", "from0"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("to ", tt.par), func(t *testing.T) {
			var union, even, bc []string
			for s := range tt.par {
				ls, bs := redistributeOperatorState(old, tt.par, s)
				union = append(union, entries(ls, "u"))
				even = append(even, entries(ls, "e"))
				if len(bs) != 1 || bs[0].Name != "b" || len(bs[0].Entries) != 1 {
					t.Fatalf("subtask %d: broadcast %+v, want one copy of b with one entry", s, bs)
				}
				bc = append(bc, string(bs[0].Entries[0].Value))
				for _, l := range ls {
					if l.Union != (l.Name == "u") {
						t.Errorf("subtask %d: state %q has Union %v", s, l.Name, l.Union)
					}
				}
			}
			if !slices.Equal(union, tt.union) || !slices.Equal(even, tt.even) || !slices.Equal(bc, tt.broadcast) {
				t.Fatalf("union %q (want %q), even %q (want %q), broadcast %q (want %q)", union, tt.union, even, tt.even, bc, tt.broadcast)
			}
		})
	}
}

// TestOperatorListHandle checks the list handle's contract (state.List) and
// what it puts into a snapshot.
func TestOperatorListHandle(t *testing.T) {
	env := &opEnv{ops: newOpStates(0, false, nil)}
	ctx := &Context{env: env}
	l, err := OperatorList[string](ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	if l.Get() != nil {
		t.Fatalf("new list: Get = %q, want nil", l.Get())
	}
	l.Add("a")
	l.AddAll([]string{"b", "c"})
	before := l.Get()
	l.Add("d")
	l.Update([]string{"x"})
	if !slices.Equal(before, []string{"a", "b", "c"}) || !slices.Equal(l.Get(), []string{"x"}) {
		t.Fatalf("earlier Get %q changed or Update gave %q", before, l.Get())
	}
	if again, err := OperatorList[string](ctx, "l"); err != nil || again != l {
		t.Fatalf("registering again: %v, same handle %v", err, again == l)
	}
	if _, err := UnionList[string](ctx, "l"); err == nil || !strings.Contains(err.Error(), "operator list state") {
		t.Fatalf("union list under an operator list's name: err = %v", err)
	}
	if _, err := OperatorList[int](ctx, "l"); err == nil || !strings.Contains(err.Error(), "element type string") {
		t.Fatalf("another element type: err = %v", err)
	}
	if _, err := OperatorList[int](ctx, ""); err == nil {
		t.Fatal("empty name accepted")
	}
	snap := runtime.OperatorSnapshot{Stateless: true}
	env.ops.addTo(&snap)
	if snap.Stateless || len(snap.State.Lists) != 1 || entries(snap.State.Lists, "l") != "\x01x" {
		t.Fatalf("snapshot %+v", snap)
	}
	l.Clear()
	snap = runtime.OperatorSnapshot{}
	env.ops.addTo(&snap)
	if entries(snap.State.Lists, "l") != "" {
		t.Fatalf("cleared list snapshot %q", entries(snap.State.Lists, "l"))
	}
}

// TestOperatorListRestore: registered states decode their restored share;
// states restored but never registered are snapshotted again unchanged
// (a union state by subtask 0 only, so that it does not multiply); a wrong
// mode or undecodable bytes are errors.
func TestOperatorListRestore(t *testing.T) {
	restored := &restoredState{lists: []checkpoint.ListState{
		{Name: "mine", Entries: [][]byte{[]byte("\x01a"), []byte("\x01b")}},
		{Name: "kept", Entries: [][]byte{[]byte("k")}},
		{Name: "shared", Union: true, Entries: [][]byte{[]byte("s")}},
		{Name: "bad", Entries: [][]byte{[]byte("\x05")}},
	}}
	for _, subtask := range []int{0, 1} {
		env := &opEnv{ops: newOpStates(subtask, true, restored)}
		ctx := &Context{env: env}
		if !ctx.IsRestored() {
			t.Fatal("IsRestored false")
		}
		l, err := OperatorList[string](ctx, "mine")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.Get(), []string{"a", "b"}) {
			t.Fatalf("restored %q", l.Get())
		}
		if _, err := OperatorList[string](ctx, "shared"); err == nil || !strings.Contains(err.Error(), "union list") {
			t.Fatalf("operator list over a union state: err = %v", err)
		}
		if _, err := OperatorList[string](ctx, "bad"); err == nil || !strings.Contains(err.Error(), `"bad": restore element 0`) {
			t.Fatalf("undecodable element: err = %v", err)
		}
		var snap runtime.OperatorSnapshot
		env.ops.addTo(&snap)
		wantShared := "s"
		if subtask != 0 {
			wantShared = ""
		}
		if got := entries(snap.State.Lists, "kept"); got != "k" {
			t.Errorf("subtask %d: unregistered state kept %q", subtask, got)
		}
		if got := entries(snap.State.Lists, "shared"); got != wantShared {
			t.Errorf("subtask %d: unregistered union state %q, want %q", subtask, got, wantShared)
		}
	}
	if (&Context{env: &opEnv{ops: newOpStates(0, false, nil)}}).IsRestored() {
		t.Fatal("IsRestored true without a restore")
	}
}
