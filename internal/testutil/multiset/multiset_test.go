package multiset

import (
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		want, got, missing, extra []string
	}{
		{nil, nil, nil, nil},
		{[]string{"a", "b"}, []string{"b", "a"}, nil, nil},
		{[]string{"a", "a", "b"}, []string{"a"}, []string{"a", "b"}, nil},
		{[]string{"a"}, []string{"a", "a", "c"}, nil, []string{"a", "c"}},
		{[]string{"b", "a"}, []string{"c", "a"}, []string{"b"}, []string{"c"}},
	} {
		missing, extra := Diff(c.want, c.got)
		if !slices.Equal(missing, c.missing) || !slices.Equal(extra, c.extra) {
			t.Errorf("Diff(%v, %v) = %v, %v; want %v, %v", c.want, c.got, missing, extra, c.missing, c.extra)
		}
	}
}
