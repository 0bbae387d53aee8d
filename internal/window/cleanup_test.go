package window

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestCleanup(t *testing.T) {
	ev := Cleanup{EventTime: true, Lateness: 5}
	proc := Cleanup{Lateness: 5}
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"event time: gone once the watermark reaches max+lateness", ev.Gone(9, 14), true},
		{"event time: kept before", ev.Gone(9, 13), false},
		{"processing time: never gone", proc.Gone(9, 1000), false},
		{"global window: never gone", ev.Gone(math.MaxInt64, math.MaxInt64-1), false},
		{"dropped at ts <= wm - lateness", ev.Dropped(5, 10), true},
		{"within the lateness", ev.Dropped(6, 10), false},
		{"processing time drops nothing", proc.Dropped(5, 10), false},
		{"the cleanup timer, own domain", ev.IsCleanupTimer(true, 14, 9), true},
		{"the trigger's timer at the window's end", ev.IsCleanupTimer(true, 9, 9), false},
		{"a timer of the other domain", ev.IsCleanupTimer(false, 14, 9), false},
		{"processing time cleanup timer", proc.IsCleanupTimer(false, 14, 9), true},
		{"a time window needs a timer", ev.NeedsTimer(9), true},
		{"the global window does not", ev.NeedsTimer(math.MaxInt64), false},
		{"saturating lateness does not", Cleanup{EventTime: true, Lateness: math.MaxInt64}.NeedsTimer(1), false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got := ev.Time(9); got != 14 {
		t.Errorf("Time(9) = %d, want 14", got)
	}
}

func TestMergeSet(t *testing.T) {
	w := func(s, e int64) TimeWindow { return TimeWindow{Start: s, End: e} }
	tests := []struct {
		name     string
		cur      []TimeWindow
		nw       TimeWindow
		set      string
		gone     string
		resultIs string
	}{
		{"first window of the key", nil, w(0, 10), "[[0, 10)]", "[]", "[0, 10)"},
		{"disjoint: added", []TimeWindow{w(0, 10)}, w(20, 30), "[[0, 10) [20, 30)]", "[]", "[20, 30)"},
		{"inside an existing window: nothing goes", []TimeWindow{w(0, 10), w(20, 30)}, w(2, 5), "[[20, 30) [0, 10)]", "[]", "[0, 10)"},
		{"bridges two windows: both go", []TimeWindow{w(0, 10), w(20, 30), w(40, 50)}, w(8, 22), "[[40, 50) [0, 30)]", "[[0, 10) [20, 30)]", "[0, 30)"},
		{"extends one window", []TimeWindow{w(0, 10)}, w(5, 15), "[[0, 15)]", "[[0, 10)]", "[0, 15)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			result, merged := MergeSession(slices.Clone(tt.cur), tt.nw)
			set, gone := MergeSet(slices.Clone(tt.cur), result, merged)
			if fmt.Sprint(result) != tt.resultIs || fmt.Sprint(set) != tt.set || fmt.Sprint(gone) != tt.gone {
				t.Fatalf("result %v set %v gone %v; want result %s set %s gone %s", result, set, gone, tt.resultIs, tt.set, tt.gone)
			}
		})
	}
}
