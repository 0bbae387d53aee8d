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
	src := Sequence(0, 19).WithOptions(Options{BatchSize: 7})
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
	if len(be.sliceEmitter.recs) != 20 || !slices.Equal(be.recs, seq(0, 19)) || !slices.Equal(se.recs, seq(0, 19)) {
		t.Errorf("records: batches %v, one by one %v; want 0..19", be.recs, se.recs)
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
