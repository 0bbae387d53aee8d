package datagen

import (
	"slices"
	"testing"

	"github.com/weirstream/weir/connector"
)

// batchEmitter records the batches a reader hands over, copying them (the
// reader reuses its buffer), and the records it emits one by one.
type batchEmitter[T any] struct {
	sliceEmitter[T]
	batches [][]T
}

func (e *batchEmitter[T]) EmitBatch(recs []T) {
	e.batches = append(e.batches, slices.Clone(recs))
	e.recs = append(e.recs, recs...)
}

// TestBatchEmitter: with an emitter that takes batches, a Poll hands over
// one batch per split it reads from, with the same records and the same
// positions afterwards as record by record.
func TestBatchEmitter(t *testing.T) {
	tests := []struct {
		name string
		src  *Source[int64]
		want []int64
	}{
		{"sequence", Sequence(0, 19), seq(0, 19)},
		{"slice", FromSlice(seq(100, 119)), seq(100, 119)},
		{"generator", Generator(20, func(i int64) int64 { return 100 + i }), seq(100, 119)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testBatchEmitter(t, tt.src, tt.want) })
	}
}

func testBatchEmitter(t *testing.T, src *Source[int64], want []int64) {
	src = src.WithOptions(Options{BatchSize: 7})
	splits, err := src.Splits(t.Context(), 2) // two splits of 10, both read by one reader
	if err != nil {
		t.Fatal(err)
	}
	batched := newReader(t, src, 0, 1, splits)
	single := newReader(t, src, 0, 1, splits)
	var be batchEmitter[int64]
	var se sliceEmitter[int64]
	var sizes [][]int
	for {
		before := len(be.batches)
		st, err := batched.Poll(&be)
		if err != nil {
			t.Fatal(err)
		}
		var polled []int
		for _, b := range be.batches[before:] {
			polled = append(polled, len(b))
		}
		sizes = append(sizes, polled)
		st2, err := single.Poll(&se)
		if err != nil || st2 != st {
			t.Fatalf("record by record: Poll = %v, %v; batches gave %v", st2, err, st)
		}
		bs, _ := batched.Snapshot(1)
		ss, _ := single.Snapshot(1)
		if !slices.EqualFunc(bs, ss, func(a, b connector.SplitState) bool {
			return a.ID == b.ID && slices.Equal(a.Position, b.Position) && slices.Equal(a.Data, b.Data)
		}) {
			t.Fatalf("snapshots differ: batches %v, records %v", bs, ss)
		}
		if st == connector.EndOfInput {
			break
		}
	}
	if want := [][]int{{7}, {3, 4}, {6}}; !slices.EqualFunc(sizes, want, slices.Equal) {
		t.Errorf("batch sizes per Poll = %v, want %v", sizes, want)
	}
	if !slices.Equal(be.recs, want) || !slices.Equal(se.recs, want) {
		t.Errorf("records: batches %v, one by one %v; want %v", be.recs, se.recs, want)
	}
}

// TestBatchBufferHoldsNoRecords: after a Poll, the reader's reused buffer
// keeps no references to the records it handed over.
func TestBatchBufferHoldsNoRecords(t *testing.T) {
	src := Generator(10, func(i int64) *int64 { return &i })
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e batchEmitter[*int64]
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	if len(e.recs) != 10 || *e.recs[9] != 9 {
		t.Fatalf("emitted %d records", len(e.recs))
	}
	buf := r.(*reader[*int64]).buf
	if len(buf) == 0 || slices.ContainsFunc(buf, func(p *int64) bool { return p != nil }) {
		t.Errorf("buffer after Poll = %v, want all nil", buf)
	}
}

// TestBatchEmitterStrided: a split whose indexes are not contiguous (a
// step above 1, as a restored or hand-made split may have) gives the same
// records in batches as one by one.
func TestBatchEmitterStrided(t *testing.T) {
	for _, src := range []*Source[int64]{Sequence(100, 119), FromSlice(seq(100, 119)), Generator(20, func(i int64) int64 { return 100 + i })} {
		splits := []connector.SplitState{span{start: 1, end: 20, step: 3}.splitState("strided")}
		var be batchEmitter[int64]
		if _, err := newReader(t, src, 0, 1, splits).Poll(&be); err != nil {
			t.Fatal(err)
		}
		if want := []int64{101, 104, 107, 110, 113, 116, 119}; !slices.Equal(be.recs, want) || len(be.batches) != 1 {
			t.Errorf("batches %v, want one batch %v", be.batches, want)
		}
	}
}

// TestSequenceFill: Sequence's fill (the scalar loop, four records per
// iteration, or with AVX2 the vector one from 16 records on) gives what its
// generator gives, for every length around the unrolled stride and the
// vector threshold and for strides other than one.
func TestSequenceFill(t *testing.T) {
	s := Sequence(-5, 1000)
	for _, step := range []int64{1, 3} {
		for n := range 40 {
			buf := make([]int64, n)
			s.fill(buf, 2, step)
			for j, v := range buf {
				if want := s.gen(2 + int64(j)*step); v != want {
					t.Fatalf("step %d, %d records: buf[%d] = %d, want %d", step, n, j, v, want)
				}
			}
		}
	}
}
