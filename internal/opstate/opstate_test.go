package opstate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
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
				ls, _ := Redistribute(tt.old, tt.par, s)
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
				ls, bs := Redistribute(old, tt.par, s)
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
