package window

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTumbling(t *testing.T) {
	tests := []struct {
		ts, size, offset int64
		want             TimeWindow
	}{
		{0, 10, 0, TimeWindow{0, 10}},
		{9, 10, 0, TimeWindow{0, 10}},
		{10, 10, 0, TimeWindow{10, 20}},
		{-1, 10, 0, TimeWindow{-10, 0}},
		{-10, 10, 0, TimeWindow{-10, 0}},
		{4, 10, 5, TimeWindow{-5, 5}},
		{5, 10, 5, TimeWindow{5, 15}},
		{1_700_000_123_456, 60_000, 0, TimeWindow{1_700_000_100_000, 1_700_000_160_000}},
	}
	for _, tt := range tests {
		if got := Tumbling(tt.ts, tt.size, tt.offset); got != tt.want {
			t.Errorf("Tumbling(%d, %d, %d) = %v, want %v", tt.ts, tt.size, tt.offset, got, tt.want)
		}
	}
}

func TestSliding(t *testing.T) {
	tests := []struct {
		ts, size, slide, offset int64
		want                    string
	}{
		{0, 10, 2, 0, "[0, 10) [-2, 8) [-4, 6) [-6, 4) [-8, 2)"},
		{9, 10, 5, 0, "[5, 15) [0, 10)"},
		{10, 10, 5, 0, "[10, 20) [5, 15)"},
		{7, 10, 10, 0, "[0, 10)"},
		{3, 10, 4, 0, "[0, 10) [-4, 6)"},
		{-3, 6, 3, 1, "[-5, 1) [-8, -2)"},
	}
	for _, tt := range tests {
		var got []string
		for _, w := range Sliding(nil, tt.ts, tt.size, tt.slide, tt.offset) {
			got = append(got, w.String())
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("Sliding(%d, size %d, slide %d, offset %d) = %s, want %s", tt.ts, tt.size, tt.slide, tt.offset, s, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		size, slide, offset int64
		want                string // "" for valid
	}{
		{10, 10, 0, ""},
		{10, 2, 1, ""},
		{0, 1, 0, "size 0 ms, want > 0"},
		{-5, 1, 0, "size -5 ms, want > 0"},
		{10, 0, 0, "slide 0 ms, want > 0"},
		{10, -1, 0, "slide -1 ms, want > 0"},
		{10, 20, 0, "slide 20 ms is larger than the size 10 ms"},
		{10, 5, 5, "offset 5 ms"},
		{10, 5, -5, "offset -5 ms"},
	}
	for _, tt := range tests {
		err := Validate("sliding windows", tt.size, tt.slide, tt.offset)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%d, %d, %d) = %v, want %q", tt.size, tt.slide, tt.offset, err, tt.want)
		}
	}
	if err := ValidateGap("session windows", 0); err == nil || !strings.Contains(err.Error(), "gap 0 ms") {
		t.Errorf("ValidateGap(0) = %v", err)
	}
	if err := ValidateGap("session windows", 1); err != nil {
		t.Errorf("ValidateGap(1) = %v", err)
	}
}

func TestCleanupTime(t *testing.T) {
	tests := []struct{ max, lateness, want int64 }{
		{9, 0, 9},
		{9, 5, 14},
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MaxInt64 - 1, 5, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := CleanupTime(tt.max, tt.lateness); got != tt.want {
			t.Errorf("CleanupTime(%d, %d) = %d, want %d", tt.max, tt.lateness, got, tt.want)
		}
	}
}

func TestMergeSession(t *testing.T) {
	w := func(s, e int64) TimeWindow { return TimeWindow{s, e} }
	tests := []struct {
		name     string
		existing []TimeWindow
		nw       TimeWindow
		result   TimeWindow
		merged   []TimeWindow
	}{
		{"first", nil, w(0, 10), w(0, 10), nil},
		{"apart", []TimeWindow{w(0, 10)}, w(20, 30), w(20, 30), nil},
		{"inside", []TimeWindow{w(0, 10)}, w(2, 5), w(0, 10), []TimeWindow{w(0, 10)}},
		{"extends", []TimeWindow{w(0, 10)}, w(5, 15), w(0, 15), []TimeWindow{w(0, 10)}},
		{"touching merges", []TimeWindow{w(0, 10)}, w(10, 20), w(0, 20), []TimeWindow{w(0, 10)}},
		{"bridges two", []TimeWindow{w(0, 10), w(30, 40), w(100, 110)}, w(8, 32), w(0, 40), []TimeWindow{w(0, 10), w(30, 40)}},
		{"covers all", []TimeWindow{w(5, 6), w(7, 8)}, w(0, 100), w(0, 100), []TimeWindow{w(5, 6), w(7, 8)}},
	}
	for _, tt := range tests {
		result, merged := MergeSession(tt.existing, tt.nw)
		if result != tt.result || !slices.Equal(merged, tt.merged) {
			t.Errorf("%s: MergeSession(%v, %v) = %v, %v; want %v, %v", tt.name, tt.existing, tt.nw, result, merged, tt.result, tt.merged)
		}
	}
}

func TestPanes(t *testing.T) {
	tests := []struct {
		size, slide, offset, ts int64
		want                    string // pane, first and last end
	}{
		{10, 2, 0, 0, "pane [0, 2) ends 2..10"},
		{10, 2, 0, 9, "pane [8, 10) ends 10..18"},
		{10, 4, 0, 3, "pane [2, 4) ends 6..10"}, // windows start at multiples of 4: [-4, 6), [0, 10)
		{10, 4, 0, 5, "pane [4, 6) ends 6..14"},
		{10, 10, 0, 5, "pane [0, 10) ends 10..10"},
		{6, 3, 1, -3, "pane [-5, -2) ends -2..1"},
	}
	for _, tt := range tests {
		p := NewPanes(tt.size, tt.slide, tt.offset)
		pane := p.PaneOf(tt.ts)
		first, last := p.Ends(pane)
		if got := fmt.Sprintf("pane %v ends %d..%d", pane, first, last); got != tt.want {
			t.Errorf("size %d slide %d offset %d ts %d: %s, want %s", tt.size, tt.slide, tt.offset, tt.ts, got, tt.want)
		}
	}
}

// TestPanesAgreeWithSliding: the windows holding a pane (every slide from
// its first to its last end) are exactly the sliding windows of every
// timestamp in it.
func TestPanesAgreeWithSliding(t *testing.T) {
	for _, c := range [][3]int64{{10, 2, 0}, {10, 4, 0}, {10, 4, 3}, {9, 6, 0}, {7, 7, 0}, {12, 8, -5}} {
		p := NewPanes(c[0], c[1], c[2])
		for ts := int64(-40); ts < 40; ts++ {
			want := Sliding(nil, ts, c[0], c[1], c[2])
			slices.SortFunc(want, func(a, b TimeWindow) int { return int(a.End - b.End) })
			first, last := p.Ends(p.PaneOf(ts))
			var got []TimeWindow
			for e := first; e <= last; e += c[1] {
				got = append(got, p.WindowEnding(e))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("size %d slide %d offset %d ts %d: pane windows %v, sliding windows %v", c[0], c[1], c[2], ts, got, want)
			}
		}
	}
}

func TestFirstOpenEnd(t *testing.T) {
	p := NewPanes(10, 2, 0)
	tests := []struct {
		ts, wm int64
		want   string
	}{
		{5, math.MinInt64, "6"}, // pane [4, 6): windows end 6..14
		{5, 5, "8"},
		{5, 6, "8"},
		{5, 7, "10"},
		{5, 12, "14"},
		{5, 13, "late"},
		{5, 100, "late"},
	}
	for _, tt := range tests {
		e, ok := p.FirstOpenEnd(p.PaneOf(tt.ts), tt.wm)
		got := fmt.Sprint(e)
		if !ok {
			got = "late"
		}
		if got != tt.want {
			t.Errorf("ts %d wm %d: %s, want %s", tt.ts, tt.wm, got, tt.want)
		}
	}
}
