package datagen

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
)

func equalRuns[T comparable](got, want [][]T) bool {
	return slices.EqualFunc(got, want, slices.Equal[[]T, T])
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestSequence(t *testing.T) {
	tests := []struct {
		name        string
		from, to    int64
		parallelism int
		want        [][]int64
	}{
		{"one subtask", 1, 10, 1, [][]int64{seq(1, 10)}},
		{"uneven ranges", 1, 10, 3, [][]int64{seq(1, 4), seq(5, 7), seq(8, 10)}},
		{"more subtasks than numbers", 1, 3, 4, [][]int64{{1}, {2}, {3}, nil}},
		{"negative numbers", -2, 2, 2, [][]int64{seq(-2, 0), seq(1, 2)}},
		{"single number", 5, 5, 2, [][]int64{{5}, nil}},
		{"empty", 5, 4, 2, [][]int64{nil, nil}},
		{"top of int64", math.MaxInt64 - 2, math.MaxInt64, 2, [][]int64{{math.MaxInt64 - 2, math.MaxInt64 - 1}, {math.MaxInt64}}},
		{"bottom of int64", math.MinInt64, math.MinInt64 + 2, 1, [][]int64{{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Sequence(tt.from, tt.to)
			if got := src.Boundedness(); got != connector.Bounded {
				t.Errorf("Boundedness() = %v, want bounded", got)
			}
			if got := runSource(t, src, tt.parallelism); !equalRuns(got, tt.want) {
				t.Errorf("records per subtask = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSequenceTooLarge(t *testing.T) {
	for _, r := range [][2]int64{{math.MinInt64, math.MaxInt64}, {0, math.MaxInt64}, {-1, math.MaxInt64 - 1}} {
		src := Sequence(r[0], r[1])
		if _, err := src.Splits(t.Context(), 2); err == nil || !strings.Contains(err.Error(), "more than") {
			t.Errorf("Sequence(%d, %d).Splits: err = %v, want a range too large error", r[0], r[1], err)
		}
		if _, err := src.NewReader(readerContext(0, 1)); err == nil {
			t.Errorf("Sequence(%d, %d).NewReader: no error", r[0], r[1])
		}
	}
	// The largest accepted sequence: math.MaxInt64 numbers.
	splits, err := Sequence(1, math.MaxInt64).Splits(t.Context(), 2)
	if err != nil {
		t.Fatalf("Sequence(1, MaxInt64).Splits: %v", err)
	}
	r := newReader(t, Sequence(1, math.MaxInt64).WithOptions(Options{BatchSize: 2}), 1, 2, splits[1:])
	var e sliceEmitter[int64]
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	// MaxInt64 = 2^63-1 numbers: the first split takes the odd one out, so
	// the second starts at index 2^62, the number 2^62+1.
	if want := []int64{1<<62 + 1, 1<<62 + 2}; !slices.Equal(e.recs, want) {
		t.Errorf("second half starts with %v, want %v", e.recs, want)
	}
}

func TestGenerator(t *testing.T) {
	src := Generator(7, func(i int64) string { return fmt.Sprintf("r%d", i) })
	want := [][]string{{"r0", "r1", "r2"}, {"r3", "r4"}, {"r5", "r6"}}
	if got := runSource(t, src, 3); !equalRuns(got, want) {
		t.Errorf("records per subtask = %v, want %v", got, want)
	}
}

func TestGeneratorEmpty(t *testing.T) {
	src := Generator(0, func(i int64) int64 { return i })
	splits, err := src.Splits(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 0 {
		t.Fatalf("Splits = %v, want none", splits)
	}
	if got := runSource(t, src, 3); !equalRuns(got, [][]int64{nil, nil, nil}) {
		t.Errorf("records = %v, want none", got)
	}
}

func TestGeneratorNilFunc(t *testing.T) {
	if _, err := Generator[int](3, nil).Splits(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "non-nil function") {
		t.Errorf("Splits: err = %v, want a nil function error", err)
	}
}

func TestGeneratorUnbounded(t *testing.T) {
	src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{BatchSize: 4})
	if got := src.Boundedness(); got != connector.Unbounded {
		t.Errorf("Boundedness() = %v, want unbounded", got)
	}
	splits, err := src.Splits(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 3 {
		t.Fatalf("got %d splits, want one per subtask", len(splits))
	}
	for k, want := range [][]int64{{0, 3, 6, 9, 12, 15}, {1, 4, 7, 10, 13, 16}, {2, 5, 8, 11, 14, 17}} {
		r := newReader(t, src, k, 3, splits[k:k+1])
		var e sliceEmitter[int64]
		for range 10 {
			st, err := r.Poll(&e)
			if err != nil || st != connector.MoreAvailable {
				t.Fatalf("subtask %d: Poll = %v, %v; want MoreAvailable forever", k, st, err)
			}
		}
		if got := e.recs[:len(want)]; !slices.Equal(got, want) {
			t.Errorf("subtask %d starts with %v, want %v", k, got, want)
		}
		if len(e.recs) != 40 {
			t.Errorf("subtask %d emitted %d records in 10 polls of batch 4, want 40", k, len(e.recs))
		}
	}
}

func TestGeneratorUnboundedEndOfInt64(t *testing.T) {
	// A split positioned near the end of the index space ends there instead
	// of overflowing.
	src := Generator(-1, func(i int64) int64 { return i })
	st := span{start: 0, end: unboundedEnd, step: 2}.splitState("range-0")
	st.Position = encodePosition(math.MaxInt64 - 5)
	r := newReader(t, src, 0, 1, []connector.SplitState{st})
	got, err := drain(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{math.MaxInt64 - 5, math.MaxInt64 - 3, math.MaxInt64 - 1}; !slices.Equal(got, want) {
		t.Errorf("records = %v, want %v", got, want)
	}
}

func TestFromSlice(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		parallelism int
		want        [][]string
	}{
		{1, [][]string{{"a", "b", "c", "d", "e"}}},
		{2, [][]string{{"a", "b", "c"}, {"d", "e"}}},
		{5, [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}}},
		{7, [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, nil, nil}},
	}
	src := FromSlice(items)
	items[0] = "changed after FromSlice"
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.parallelism), func(t *testing.T) {
			splits, err := src.Splits(t.Context(), tt.parallelism)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(tt.parallelism, 5); len(splits) != want {
				t.Errorf("got %d splits, want %d", len(splits), want)
			}
			if got := runSplits(t, src, tt.parallelism, splits); !equalRuns(got, tt.want) {
				t.Errorf("records per subtask = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFromSliceEmpty(t *testing.T) {
	if got := runSource(t, FromSlice[int](nil), 2); !equalRuns(got, [][]int{nil, nil}) {
		t.Errorf("records = %v, want none", got)
	}
}

func TestBatchSize(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantCounts []int
	}{
		{"default", Options{}, []int{1024, 1024, 952}},
		{"seven", Options{BatchSize: 7}, append(slices.Repeat([]int{7}, 3000/7), 3000%7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Sequence(0, 2999).WithOptions(tt.opts)
			splits, err := src.Splits(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			r := newReader(t, src, 0, 1, splits)
			var e sliceEmitter[int64]
			var counts []int
			for {
				before := len(e.recs)
				st, err := r.Poll(&e)
				if err != nil {
					t.Fatal(err)
				}
				counts = append(counts, len(e.recs)-before)
				if st == connector.EndOfInput {
					break
				}
				if st != connector.MoreAvailable {
					t.Fatalf("Poll = %v, want MoreAvailable", st)
				}
			}
			if !slices.Equal(counts, tt.wantCounts) {
				t.Errorf("records per Poll = %v, want %v", counts, tt.wantCounts)
			}
			if !slices.Equal(e.recs, seq(0, 2999)) {
				t.Errorf("records are not 0..2999 in order")
			}
		})
	}
}

func TestInvalidContexts(t *testing.T) {
	src := Sequence(1, 3)
	if _, err := src.Splits(t.Context(), 0); err == nil || !strings.Contains(err.Error(), "parallelism") {
		t.Errorf("Splits(0): err = %v", err)
	}
	for _, c := range [][2]int{{0, 0}, {2, 2}, {-1, 2}} {
		if _, err := src.NewReader(readerContext(c[0], c[1])); err == nil || !strings.Contains(err.Error(), "subtask") {
			t.Errorf("NewReader(subtask %d of %d): err = %v", c[0], c[1], err)
		}
	}
}

func TestWaitForSplits(t *testing.T) {
	src := Sequence(1, 4)
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var e sliceEmitter[int64]
	if st, err := r.Poll(&e); st != connector.NothingAvailable || err != nil {
		t.Fatalf("Poll without splits = %v, %v; want NothingAvailable", st, err)
	}
	ch := r.Available()
	select {
	case <-ch:
		t.Fatal("Available is ready before any split")
	default:
	}
	if err := r.AddSplits(splits[:1]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("AddSplits did not fire Available")
	}
	if st, err := r.Poll(&e); st != connector.NothingAvailable || err != nil {
		t.Fatalf("Poll after the only split = %v, %v; want NothingAvailable (more splits may come)", st, err)
	}
	ch = r.Available()
	if err := r.AddSplits(splits[1:]); err != nil {
		t.Fatal(err)
	}
	<-ch
	r.NoMoreSplits()
	if st, err := r.Poll(&e); st != connector.EndOfInput || err != nil {
		t.Fatalf("Poll after NoMoreSplits = %v, %v; want EndOfInput", st, err)
	}
	if want := seq(1, 4); !slices.Equal(e.recs, want) {
		t.Errorf("records = %v, want %v", e.recs, want)
	}

	r2, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	ch = r2.Available()
	r2.NoMoreSplits()
	<-ch
	if st, err := r2.Poll(&e); st != connector.EndOfInput || err != nil {
		t.Fatalf("Poll with no splits after NoMoreSplits = %v, %v; want EndOfInput", st, err)
	}
}

func TestClose(t *testing.T) {
	src := Sequence(1, 4)
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	var e sliceEmitter[int64]
	if _, err := r.Poll(&e); err == nil {
		t.Error("Poll after Close: no error")
	}
}
