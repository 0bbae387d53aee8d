package weir

import (
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
)

// entries renders list state name of ls as its entries joined by spaces.
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
