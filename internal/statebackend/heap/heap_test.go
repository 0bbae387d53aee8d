package heap

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

func TestValueStateIsScopedToKeyAndGroup(t *testing.T) {
	b := New[string](keygroup.Range{Start: 10, End: 20}, codec.String())
	c, _ := codec.Of[int]()
	s, err := NewValueState[string, int](b, "n", c)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewValueState[string, int](b, "m", c)
	steps := []struct {
		key   string
		group int
		op    string // set, clear, get
		v     int
		want  int
		found bool
	}{
		{"a", 10, "get", 0, 0, false},
		{"a", 10, "set", 1, 0, false},
		{"a", 10, "get", 0, 1, true},
		{"b", 10, "get", 0, 0, false},
		{"b", 19, "set", 2, 0, false},
		{"b", 19, "get", 0, 2, true},
		{"a", 10, "get", 0, 1, true},
		{"a", 10, "clear", 0, 0, false},
		{"a", 10, "get", 0, 0, false},
		{"b", 19, "get", 0, 2, true},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key, st.group)
		switch st.op {
		case "set":
			s.Update(st.v)
		case "clear":
			s.Clear()
		case "get":
			v, ok := s.Value()
			if v != st.want || ok != st.found {
				t.Fatalf("step %d: Value() = %d, %v; want %d, %v", i, v, ok, st.want, st.found)
			}
		}
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d, want 1", s.Len())
	}
	b.SetCurrentKey("b", 19)
	if _, ok := other.Value(); ok {
		t.Error("a second state sees the first state's value")
	}
}

func TestDuplicateStateName(t *testing.T) {
	b := New[int](keygroup.Range{Start: 0, End: 1}, codec.Int())
	c, _ := codec.Of[int]()
	if _, err := NewValueState[int, int](b, "x", c); err != nil {
		t.Fatal(err)
	}
	_, err := NewValueState[int, string](b, "x", nil)
	if err == nil || !strings.Contains(err.Error(), `state "x" is registered twice`) {
		t.Fatalf("err = %v", err)
	}
}
