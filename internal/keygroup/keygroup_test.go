package keygroup

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		key            string
		maxParallelism int
		want           int
	}{
		{"", 128, 0},                                  // Hash = 0x00000000
		{"a", 1, 0},                                   // every key is in group 0
		{"a", 128, 0x3c2569b2 % 128},                  // Hash = 0x3c2569b2
		{"hello", 128, 0x248bfa47 % 128},              // Hash = 0x248bfa47
		{"0123456789", 32768, 0x70b9a121 % 32768},     // Hash = 0x70b9a121
		{"\xff\xff\xff\xff", 1000, 0x76293b50 % 1000}, // Hash = 0x76293b50, above MaxInt32
	}
	for _, tc := range tests {
		if got := Of([]byte(tc.key), tc.maxParallelism); got != tc.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tc.key, tc.maxParallelism, got, tc.want)
		}
	}
}

func TestRangeFor(t *testing.T) {
	tests := []struct {
		maxParallelism, parallelism, subtask int
		want                                 Range
	}{
		{1, 1, 0, Range{0, 1}},
		{128, 1, 0, Range{0, 128}},
		{128, 2, 0, Range{0, 64}},
		{128, 2, 1, Range{64, 128}},
		{128, 3, 0, Range{0, 43}},
		{128, 3, 1, Range{43, 86}},
		{128, 3, 2, Range{86, 128}},
		{10, 4, 0, Range{0, 3}},
		{10, 4, 1, Range{3, 5}},
		{10, 4, 2, Range{5, 8}},
		{10, 4, 3, Range{8, 10}},
		{5, 5, 4, Range{4, 5}},
		{32768, 7, 6, Range{28087, 32768}},
	}
	for _, tc := range tests {
		if got := RangeFor(tc.maxParallelism, tc.parallelism, tc.subtask); got != tc.want {
			t.Errorf("RangeFor(%d, %d, %d) = %v, want %v",
				tc.maxParallelism, tc.parallelism, tc.subtask, got, tc.want)
		}
	}
}

func TestSubtaskFor(t *testing.T) {
	tests := []struct {
		keyGroup, maxParallelism, parallelism int
		want                                  int
	}{
		{0, 128, 3, 0},
		{42, 128, 3, 0},
		{43, 128, 3, 1},
		{85, 128, 3, 1},
		{86, 128, 3, 2},
		{127, 128, 3, 2},
		{2, 10, 4, 0},
		{3, 10, 4, 1},
		{9, 10, 4, 3},
		{32767, 32768, 32768, 32767},
	}
	for _, tc := range tests {
		if got := SubtaskFor(tc.keyGroup, tc.maxParallelism, tc.parallelism); got != tc.want {
			t.Errorf("SubtaskFor(%d, %d, %d) = %d, want %d",
				tc.keyGroup, tc.maxParallelism, tc.parallelism, got, tc.want)
		}
	}
}

// TestRangesPartitionAndAgreeWithSubtaskFor proves, for every maxParallelism
// up to 300 and every valid parallelism, that the ranges of subtasks
// 0..parallelism-1 are non-empty, contiguous and cover [0, maxParallelism),
// and that SubtaskFor maps every key group to the subtask whose range holds
// it. The runtime routes records with SubtaskFor and restores state with
// RangeFor, so a disagreement would lose state.
func TestRangesPartitionAndAgreeWithSubtaskFor(t *testing.T) {
	for maxP := 1; maxP <= 300; maxP++ {
		for par := 1; par <= maxP; par++ {
			next := 0 // the first key group not yet covered
			for subtask := range par {
				r := RangeFor(maxP, par, subtask)
				if r.Start != next || r.Len() < 1 {
					t.Fatalf("maxP=%d par=%d: subtask %d has range %v, want a non-empty range starting at %d",
						maxP, par, subtask, r, next)
				}
				for kg := r.Start; kg < r.End; kg++ {
					if got := SubtaskFor(kg, maxP, par); got != subtask {
						t.Fatalf("maxP=%d par=%d: SubtaskFor(%d) = %d, but key group %d is in subtask %d's range %v",
							maxP, par, kg, got, kg, subtask, r)
					}
				}
				next = r.End
			}
			if next != maxP {
				t.Fatalf("maxP=%d par=%d: ranges cover [0, %d), want [0, %d)", maxP, par, next, maxP)
			}
		}
	}
}

func TestRange(t *testing.T) {
	tests := []struct {
		r        Range
		kg       int
		contains bool
		length   int
		str      string
	}{
		{Range{0, 4}, 0, true, 4, "[0, 4)"},
		{Range{0, 4}, 3, true, 4, "[0, 4)"},
		{Range{0, 4}, 4, false, 4, "[0, 4)"},
		{Range{3, 5}, 2, false, 2, "[3, 5)"},
		{Range{3, 5}, -1, false, 2, "[3, 5)"},
		{Range{7, 7}, 7, false, 0, "[7, 7)"},
	}
	for _, tc := range tests {
		if got := tc.r.Contains(tc.kg); got != tc.contains {
			t.Errorf("%v.Contains(%d) = %t, want %t", tc.r, tc.kg, got, tc.contains)
		}
		if got := tc.r.Len(); got != tc.length {
			t.Errorf("%v.Len() = %d, want %d", tc.r, got, tc.length)
		}
		if got := tc.r.String(); got != tc.str {
			t.Errorf("String() = %q, want %q", got, tc.str)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		maxParallelism, parallelism int
		wantErr                     string // a substring of the error, "" for no error
	}{
		{1, 1, ""},
		{128, 1, ""},
		{128, 128, ""},
		{32768, 32768, ""},
		{0, 1, "maxParallelism is 0; it must be in [1, 32768]"},
		{-5, 1, "maxParallelism is -5; it must be in [1, 32768]"},
		{32769, 1, "maxParallelism is 32769; it must be in [1, 32768]"},
		{128, 0, "parallelism is 0; it must be in [1, maxParallelism=128]"},
		{128, 129, "parallelism is 129; it must be in [1, maxParallelism=128]"},
	}
	for _, tc := range tests {
		err := Validate(tc.maxParallelism, tc.parallelism)
		if got := errString(err); !strings.Contains(got, tc.wantErr) || (tc.wantErr == "") != (err == nil) {
			t.Errorf("Validate(%d, %d) = %q, want an error containing %q",
				tc.maxParallelism, tc.parallelism, got, tc.wantErr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func BenchmarkOf(b *testing.B) {
	key := []byte("device-042") // 10 bytes
	b.SetBytes(int64(len(key)))
	var sink int
	for b.Loop() {
		sink += Of(key, 128)
	}
	_ = sink
}
