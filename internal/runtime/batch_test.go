package runtime

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
)

// call is one delivery seen by a test output: a single record (batch false)
// or a whole batch.
type call struct {
	batch bool
	recs  []int
	ts    []int64 // as received: nil for a batch without timestamps
}

// recordingOutput records what reaches it, without a batch path.
type recordingOutput struct{ calls []call }

func (r *recordingOutput) Emit(rec int, ts int64) {
	r.calls = append(r.calls, call{recs: []int{rec}, ts: []int64{ts}})
}

// batchRecordingOutput also takes batches; it copies them, since the
// caller reuses the slices.
type batchRecordingOutput struct{ recordingOutput }

func (r *batchRecordingOutput) EmitBatch(recs []int, ts []int64) {
	r.calls = append(r.calls, call{batch: true, recs: slices.Clone(recs), ts: slices.Clone(ts)})
}

// flatten returns the records and timestamps of calls in order, with
// NoTimestamp for the records of a batch without timestamps.
func flatten(calls []call) (recs []int, ts []int64) {
	for _, c := range calls {
		recs = append(recs, c.recs...)
		if c.ts == nil {
			for range c.recs {
				ts = append(ts, NoTimestamp)
			}
		} else {
			ts = append(ts, c.ts...)
		}
	}
	return recs, ts
}

func TestEmitBatchPerRecordFallback(t *testing.T) {
	tests := []struct {
		name   string
		ts     []int64
		wantTS []int64
	}{
		{"no timestamps", nil, []int64{NoTimestamp, NoTimestamp, NoTimestamp}},
		{"timestamps", []int64{10, NoTimestamp, 30}, []int64{10, NoTimestamp, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := new(recordingOutput)
			EmitBatch[int](plain, []int{1, 2, 3}, tt.ts)
			if len(plain.calls) != 3 || plain.calls[0].batch {
				t.Fatalf("a plain Output got %+v, want three single records", plain.calls)
			}
			recs, ts := flatten(plain.calls)
			if !slices.Equal(recs, []int{1, 2, 3}) || !slices.Equal(ts, tt.wantTS) {
				t.Errorf("plain Output got %v %v, want [1 2 3] %v", recs, ts, tt.wantTS)
			}

			batched := new(batchRecordingOutput)
			EmitBatch[int](batched, []int{1, 2, 3}, tt.ts)
			if len(batched.calls) != 1 || !batched.calls[0].batch {
				t.Fatalf("a BatchOutput got %+v, want one batch", batched.calls)
			}
			if got := batched.calls[0].ts; !slices.Equal(got, tt.ts) || (got == nil) != (tt.ts == nil) {
				t.Errorf("batch timestamps %v, want %v", got, tt.ts)
			}
		})
	}
}

func TestBatchedKeepsABatchOutput(t *testing.T) {
	b := new(batchRecordingOutput)
	if got := Batched[int](b); got != BatchOutput[int](b) {
		t.Errorf("Batched(BatchOutput) = %T, want the output itself", got)
	}
	plain := new(recordingOutput)
	adapted := Batched[int](plain)
	adapted.EmitBatch([]int{4, 5}, nil)
	adapted.Emit(6, 7)
	recs, ts := flatten(plain.calls)
	if !slices.Equal(recs, []int{4, 5, 6}) || !slices.Equal(ts, []int64{NoTimestamp, NoTimestamp, 7}) {
		t.Errorf("adapter delivered %v %v", recs, ts)
	}
}

// TestFanOutBatchMixedOutputs checks that a fan-out hands each output the
// whole batch: in one call when it takes batches, record by record else.
func TestFanOutBatchMixedOutputs(t *testing.T) {
	plain, batched := new(recordingOutput), new(batchRecordingOutput)
	f := FanOut[int]{plain, batched}
	f.EmitBatch([]int{1, 2}, []int64{5, 6})
	f.Emit(3, NoTimestamp)
	for name, calls := range map[string][]call{"plain": plain.calls, "batched": batched.calls} {
		recs, ts := flatten(calls)
		if !slices.Equal(recs, []int{1, 2, 3}) || !slices.Equal(ts, []int64{5, 6, NoTimestamp}) {
			t.Errorf("%s output got %v %v", name, recs, ts)
		}
	}
	if len(batched.calls) != 2 || !batched.calls[0].batch {
		t.Errorf("batch output got %+v, want one batch then one record", batched.calls)
	}
}

func TestCountingOutputCountsBatches(t *testing.T) {
	m := metrics.NewTask("v-0", "v", "v", 0, 1, []string{"a", "b"})
	inner := new(batchRecordingOutput)
	c := &CountingOutput[int]{Out: inner, Counter: m.NewCounter(0, []int{1})}
	c.EmitBatch([]int{1, 2, 3}, nil)
	c.Emit(4, NoTimestamp)
	c.EmitBatch(nil, nil)
	if c.Counter.N != 4 {
		t.Errorf("counted %d records, want 4", c.Counter.N)
	}
	if recs, _ := flatten(inner.calls); !slices.Equal(recs, []int{1, 2, 3, 4}) {
		t.Errorf("passed on %v", recs)
	}
}

// TestRecordWriterEmitBatch checks that a batch written to a RecordWriter
// reaches the channels as the same records one by one would, timestamps
// included.
func TestRecordWriterEmitBatch(t *testing.T) {
	const batch = 4
	recs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	ts := []int64{NoTimestamp, 11, NoTimestamp, 13, 14, 15, 16, 17, 18, 19}
	for _, part := range []graph.Partitioner{graph.Forward, graph.Rebalance, graph.Hash, graph.Broadcast} {
		t.Run(part.String(), func(t *testing.T) {
			run := func(emit func(w *RecordWriter[int])) [][]call {
				targets := 2
				if part == graph.Forward {
					targets = 1
				}
				chans := make([]*Channel[int], targets)
				for i := range chans {
					chans[i] = NewChannel[int](16, make(chan struct{}, 1), nil)
				}
				w := NewRecordWriter(chans, WriterOptions[int]{
					Partitioner: part, BatchSize: batch, MaxParallelism: 8,
					KeyGroup: func(v int) int { return v % 8 },
				})
				emit(w)
				w.Flush()
				got := make([][]call, targets)
				for i, ch := range chans {
					out := new(batchRecordingOutput)
					in := NewInput[int](ch, out, nil)
					for {
						if _, _, ok := in.Poll(); !ok {
							break
						}
					}
					got[i] = out.calls
				}
				return got
			}
			perRecord := run(func(w *RecordWriter[int]) {
				for i, r := range recs {
					w.Emit(r, ts[i])
				}
			})
			batched := run(func(w *RecordWriter[int]) {
				w.EmitBatch(recs[:3], ts[:3])
				w.EmitBatch(recs[3:], ts[3:])
			})
			for i := range perRecord {
				wr, wt := flatten(perRecord[i])
				gr, gt := flatten(batched[i])
				if !slices.Equal(gr, wr) || !slices.Equal(gt, wt) {
					t.Errorf("target %d: batches gave %v %v, records gave %v %v", i, gr, gt, wr, wt)
				}
			}
		})
	}
}

// TestInputHandsWholeEnvelopes checks that an input delivers a batch to a
// BatchOutput in one call, with its timestamps (nil when the batch has
// none), and to a plain Output record by record.
func TestInputHandsWholeEnvelopes(t *testing.T) {
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 3})
	w.Emit(1, NoTimestamp)
	w.Emit(2, NoTimestamp)
	w.Emit(3, NoTimestamp) // full: sent without timestamps
	w.Emit(4, NoTimestamp)
	w.Emit(5, 50) // the batch gets timestamps from here
	w.Flush()

	out := new(batchRecordingOutput)
	var records atomic.Int64
	in := NewInput[int](ch, out, &records)
	for range 2 {
		if _, isEvent, ok := in.Poll(); !ok || isEvent {
			t.Fatalf("Poll: isEvent %v ok %v, want a batch", isEvent, ok)
		}
	}
	want := []call{
		{batch: true, recs: []int{1, 2, 3}},
		{batch: true, recs: []int{4, 5}, ts: []int64{NoTimestamp, 50}},
	}
	if len(out.calls) != len(want) {
		t.Fatalf("got %+v, want %+v", out.calls, want)
	}
	for i, c := range out.calls {
		if c.batch != want[i].batch || !slices.Equal(c.recs, want[i].recs) || !slices.Equal(c.ts, want[i].ts) || (c.ts == nil) != (want[i].ts == nil) {
			t.Errorf("call %d = %+v, want %+v", i, c, want[i])
		}
	}
	if records.Load() != 5 {
		t.Errorf("input counted %d records, want 5", records.Load())
	}
}
