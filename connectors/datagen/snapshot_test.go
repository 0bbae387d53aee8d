package datagen

import (
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
)

func splitIDs(states []connector.SplitState) []string {
	var ids []string
	for _, s := range states {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestSnapshotRestore cuts every subtask's output at every record: a reader
// restored from a snapshot taken at the cut must emit exactly what the
// original reader emits after the cut.
func TestSnapshotRestore(t *testing.T) {
	sources := []struct {
		name string
		src  *Source[int64]
	}{
		{"sequence", Sequence(100, 110)},
		{"generator", Generator(11, func(i int64) int64 { return i * i })},
		{"slice", FromSlice([]int64{5, 3, 9, 1, 4, 1, 5, 9, 2, 6, 5})},
	}
	const parallelism = 3
	for _, tc := range sources {
		for _, batch := range []int{1, 2} {
			src := tc.src.WithOptions(Options{BatchSize: batch})
			splits, err := src.Splits(t.Context(), parallelism)
			if err != nil {
				t.Fatal(err)
			}
			full := runSplits(t, src, parallelism, splits)
			assigned := assignSplits(splits, parallelism)
			for k := range parallelism {
				for cut := 0; cut <= len(full[k]); cut++ {
					r := newReader(t, src, k, parallelism, assigned[k])
					var e sliceEmitter[int64]
					if _, err := pollUntil(r, &e, cut); err != nil {
						t.Fatal(err)
					}
					head := e.recs
					snap, err := r.Snapshot(1)
					if err != nil {
						t.Fatal(err)
					}
					tail, err := drain(r)
					if err != nil {
						t.Fatal(err)
					}
					restored, err := drain(newReader(t, src, k, parallelism, snap))
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(slices.Concat(head, tail), full[k]) {
						t.Errorf("%s batch %d subtask %d cut %d: head %v + tail %v != %v", tc.name, batch, k, cut, head, tail, full[k])
					}
					if !slices.Equal(restored, tail) {
						t.Errorf("%s batch %d subtask %d: restored from a snapshot after %v, got %v, want %v", tc.name, batch, k, head, restored, tail)
					}
					if len(tail) == 0 && len(snap) != 0 {
						t.Errorf("%s batch %d subtask %d: snapshot at the end = %v, want no splits", tc.name, batch, k, snap)
					}
				}
			}
		}
	}
}

// TestSnapshotOmitsFinishedSplits restores a checkpoint of four subtasks
// into one.
func TestSnapshotOmitsFinishedSplits(t *testing.T) {
	src := Sequence(1, 12).WithOptions(Options{BatchSize: 4})
	splits, err := src.Splits(t.Context(), 4)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e sliceEmitter[int64]
	if _, err := pollUntil(r, &e, 5); err != nil {
		t.Fatal(err)
	}
	if want := seq(1, 8); !slices.Equal(e.recs, want) {
		t.Fatalf("first two polls = %v, want %v", e.recs, want)
	}
	snap, err := r.Snapshot(7)
	if err != nil {
		t.Fatal(err)
	}
	// range-0 and range-1 are finished, range-2 is read up to 8.
	if got, want := splitIDs(snap), []string{"range-2", "range-3"}; !slices.Equal(got, want) {
		t.Errorf("snapshot splits = %v, want %v", got, want)
	}
	restored, err := drain(newReader(t, src, 0, 1, snap))
	if err != nil {
		t.Fatal(err)
	}
	if want := seq(9, 12); !slices.Equal(restored, want) {
		t.Errorf("restored = %v, want %v", restored, want)
	}

}

func TestSnapshotRestoreUnbounded(t *testing.T) {
	src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{BatchSize: 5})
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 2, splits[:1])
	var e sliceEmitter[int64]
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	var next sliceEmitter[int64]
	if _, err := r.Poll(&next); err != nil {
		t.Fatal(err)
	}
	var restored sliceEmitter[int64]
	if _, err := newReader(t, src, 0, 2, snap).Poll(&restored); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 2, 4, 6, 8}; !slices.Equal(e.recs, want) {
		t.Errorf("first poll = %v, want %v", e.recs, want)
	}
	if want := []int64{10, 12, 14, 16, 18}; !slices.Equal(next.recs, want) || !slices.Equal(restored.recs, want) {
		t.Errorf("after the snapshot: original %v, restored %v, want %v", next.recs, restored.recs, want)
	}
}

func TestAddSplitsMalformed(t *testing.T) {
	bounded := Sequence(1, 10)
	unbounded := Generator(-1, func(i int64) int64 { return i })
	good := span{start: 0, end: 5, step: 1}.splitState("range-0")
	withData := func(id string, data []byte) connector.SplitState { return connector.SplitState{ID: id, Data: data} }
	withPos := func(st connector.SplitState, pos []byte) connector.SplitState { st.Position = pos; return st }
	tests := []struct {
		name    string
		src     *Source[int64]
		split   connector.SplitState
		wantErr string
	}{
		{"short data", bounded, withData("range-1", make([]byte, 23)), `split "range-1": Data has 23 bytes, want 24`},
		{"no data", bounded, withData("range-1", nil), `split "range-1": Data has 0 bytes, want 24`},
		{"short position", bounded, withPos(span{5, 10, 1}.splitState("range-1"), []byte{0, 0, 0, 7}), `split "range-1": Position has 4 bytes, want 8`},
		{"position past the end", bounded, withPos(span{5, 10, 1}.splitState("range-1"), encodePosition(11)), "position 11 is not an index"},
		{"position before the start", bounded, withPos(span{5, 10, 1}.splitState("range-1"), encodePosition(4)), "position 4 is not an index"},
		{"position off the step", unbounded, withPos(span{1, unboundedEnd, 3}.splitState("range-1"), encodePosition(5)), "position 5 is not an index"},
		{"range past the source", bounded, span{5, 11, 1}.splitState("range-1"), "does not fit a source of 10 records"},
		{"unbounded range, bounded source", bounded, span{5, unboundedEnd, 2}.splitState("range-1"), "does not fit a source of 10 records"},
		{"bounded range, unbounded source", unbounded, span{5, 10, 1}.splitState("range-1"), "bounded range [5, 10) given to an unbounded source"},
		{"zero step", unbounded, span{5, unboundedEnd, 0}.splitState("range-1"), "malformed range"},
		{"negative start", bounded, span{-1, 3, 1}.splitState("range-1"), "malformed range"},
		{"end before start", bounded, span{4, 3, 1}.splitState("range-1"), "malformed range"},
		{"duplicate", bounded, good, `split "range-0" assigned twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.src.NewReader(readerContext(0, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var first []connector.SplitState
			if tt.src == bounded {
				first = []connector.SplitState{good}
			}
			err = r.AddSplits(append(first, tt.split))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("AddSplits: err = %v, want one containing %q", err, tt.wantErr)
			}
			// A rejected batch leaves the reader without any of its splits.
			if snap, _ := r.Snapshot(1); len(snap) != 0 {
				t.Errorf("after a failed AddSplits the reader holds %v", splitIDs(snap))
			}
		})
	}
}

func TestAddSplitsTwice(t *testing.T) {
	src := Sequence(1, 10)
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits[:1])
	if err := r.AddSplits(splits); err == nil || !strings.Contains(err.Error(), `"range-0" assigned twice`) {
		t.Errorf("AddSplits of an assigned split: err = %v", err)
	}
}
