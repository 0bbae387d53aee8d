package weir

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/runtime"
)

// delivery is one call seen by a test output: one record or a batch.
type delivery struct {
	batch bool
	recs  []int
	ts    []int64 // as received; nil for a batch without timestamps
}

// plainOut records what reaches it and has no batch path. As an operator
// of a chain would, it sets the Cursor to its own index.
type plainOut struct {
	got []delivery
	cur *runtime.Cursor
	idx int
}

func (o *plainOut) Emit(rec int, ts int64) {
	o.cur.Current = o.idx
	o.got = append(o.got, delivery{recs: []int{rec}, ts: []int64{ts}})
}

// batchOut also takes batches (and copies them: the caller reuses them).
type batchOut struct{ plainOut }

func (o *batchOut) EmitBatch(recs []int, ts []int64) {
	o.cur.Current = o.idx
	o.got = append(o.got, delivery{batch: true, recs: slices.Clone(recs), ts: slices.Clone(ts)})
}

// flat returns the records and timestamps of ds in order.
func flat(ds []delivery) (recs []int, ts []int64) {
	for _, d := range ds {
		recs = append(recs, d.recs...)
		if d.ts == nil {
			for range d.recs {
				ts = append(ts, runtime.NoTimestamp)
			}
		} else {
			ts = append(ts, d.ts...)
		}
	}
	return recs, ts
}

// testOp is an operator under test with both entry points and its
// records-in counter.
type testOp interface {
	runtime.BatchOutput[int]
	recordsIn() *int64
}

func (o *mapOp[T, U]) recordsIn() *int64     { return &o.in.N }
func (o *filterOp[T]) recordsIn() *int64     { return &o.in.N }
func (o *flatMapOp[T, U]) recordsIn() *int64 { return &o.in.N }

// TestOperatorBatchesMatchRecords feeds the same input to an operator
// record by record and in batches, to a downstream with and without a
// batch path, with and without timestamps: what comes out must be the
// same records with the same timestamps, and the records in the same count.
func TestOperatorBatchesMatchRecords(t *testing.T) {
	const n = 2500 // the flatMap emits more than flatMapBatch per input batch
	input := make([]int, n)
	stamps := make([]int64, n)
	for i := range input {
		input[i] = i
		stamps[i] = int64(1000 + i)
	}
	stamps[3] = runtime.NoTimestamp
	ops := []struct {
		name string
		make func(out runtime.Output[int], env *opEnv) testOp
	}{
		{"map", func(out runtime.Output[int], env *opEnv) testOp {
			return newMapOp(func(v int) int { return 3*v + 1 }, out, env)
		}},
		{"filter", func(out runtime.Output[int], env *opEnv) testOp {
			return newFilterOp(func(v int) bool { return v%5 != 0 }, out, env)
		}},
		{"filter none", func(out runtime.Output[int], env *opEnv) testOp {
			return newFilterOp(func(int) bool { return false }, out, env)
		}},
		{"flatMap", func(out runtime.Output[int], env *opEnv) testOp {
			return newFlatMapOp(func(v int, c Collector[int]) {
				for k := range v % 3 {
					c.Collect(10*v + k)
				}
			}, out, env)
		}},
	}
	for _, op := range ops {
		for _, downstream := range []string{"plain", "batch"} {
			for _, timed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/timed=%v", op.name, downstream, timed), func(t *testing.T) {
					var ts []int64
					if timed {
						ts = stamps
					}
					run := func(batches bool) ([]delivery, int64) {
						cur := new(runtime.Cursor)
						var out runtime.Output[int]
						if downstream == "plain" {
							out = &plainOut{cur: cur, idx: 2}
						} else {
							out = &batchOut{plainOut{cur: cur, idx: 2}}
						}
						o := op.make(out, &opEnv{cursor: cur, index: 1})
						if batches {
							// Uneven batches, the last one empty.
							for _, b := range [][2]int{{0, 1}, {1, 1024}, {1024, 2500}, {2500, 2500}} {
								var bts []int64
								if ts != nil {
									bts = ts[b[0]:b[1]]
								}
								o.EmitBatch(input[b[0]:b[1]], bts)
							}
						} else {
							for i, v := range input {
								st := runtime.NoTimestamp
								if ts != nil {
									st = ts[i]
								}
								o.Emit(v, st)
							}
						}
						if downstream == "plain" {
							return out.(*plainOut).got, *o.recordsIn()
						}
						return out.(*batchOut).got, *o.recordsIn()
					}
					want, wantIn := run(false)
					got, gotIn := run(true)
					wr, wt := flat(want)
					gr, gt := flat(got)
					if !slices.Equal(gr, wr) || !slices.Equal(gt, wt) {
						t.Errorf("batches gave %d records %v… (ts %v…), records gave %d %v… (ts %v…)",
							len(gr), gr[:min(len(gr), 8)], gt[:min(len(gt), 8)], len(wr), wr[:min(len(wr), 8)], wt[:min(len(wt), 8)])
					}
					if gotIn != n || wantIn != n {
						t.Errorf("records in: %d with batches, %d with records; want %d", gotIn, wantIn, n)
					}
					if downstream == "batch" {
						for _, d := range got {
							if !d.batch {
								t.Fatalf("a batch downstream got a single record: %+v", d)
							}
							if timed != (d.ts != nil) {
								t.Fatalf("a batch of %d records came with timestamps %v; input timed %v", len(d.recs), d.ts, timed)
							}
						}
					}
				})
			}
		}
	}
}

// TestFlatMapBatchPanicBlamesFlatMap: the flatMap's collector sends a full
// batch downstream in the middle of the input (the downstream sets the
// Cursor to itself); a panic of the user function afterwards must still
// find the Cursor on the flatMap.
func TestFlatMapBatchPanicBlamesFlatMap(t *testing.T) {
	cur := new(runtime.Cursor)
	down := &batchOut{plainOut{cur: cur, idx: 2}}
	op := newFlatMapOp(func(v int, c Collector[int]) {
		if v == flatMapBatch+10 {
			panic("bad record")
		}
		c.Collect(v)
	}, down, &opEnv{cursor: cur, index: 1})
	input := make([]int, 2*flatMapBatch)
	for i := range input {
		input[i] = i
	}
	func() {
		defer func() {
			if r := recover(); r != "bad record" {
				t.Fatalf("recovered %v, want the user's panic", r)
			}
		}()
		op.EmitBatch(input, nil)
	}()
	if len(down.got) != 1 {
		t.Fatalf("downstream got %d batches before the panic, want 1", len(down.got))
	}
	if cur.Current != 1 {
		t.Errorf("Cursor at %d after the panic, want the flatMap's index 1", cur.Current)
	}
}

// TestSourceEmitterBatch: a batch from a reader goes downstream in one call
// and counts its records; afterwards the Cursor names the source again, so
// that the reader's next panic is the source's.
func TestSourceEmitterBatch(t *testing.T) {
	cur := new(runtime.Cursor)
	down := &batchOut{plainOut{cur: cur, idx: 3}}
	var e emitter[int]
	e.setOutput(down, &opEnv{cursor: cur, index: 0})
	e.EmitBatch([]int{1, 2, 3})
	if cur.Current != 0 {
		t.Errorf("Cursor at %d after EmitBatch, want the source's 0", cur.Current)
	}
	e.Emit(4)
	if cur.Current != 0 {
		t.Errorf("Cursor at %d after Emit, want the source's 0", cur.Current)
	}
	splitBatch := connector.BatchEmitter[int](e.ForSplit("s").(splitEmitter[int]))
	splitBatch.EmitBatch([]int{5})
	if got := e.count; got != 5 {
		t.Errorf("counted %d records, want 5", got)
	}
	recs, ts := flat(down.got)
	if !slices.Equal(recs, []int{1, 2, 3, 4, 5}) || ts[0] != runtime.NoTimestamp {
		t.Errorf("downstream got %v %v", recs, ts)
	}
	if !down.got[0].batch || down.got[0].ts != nil {
		t.Errorf("first delivery %+v, want one batch without timestamps", down.got[0])
	}
}

// batchWriter records Write and WriteBatch calls.
type batchWriter struct {
	plainWriter
	calls [][]int
}

func (w *batchWriter) WriteBatch(recs []int) error {
	w.calls = append(w.calls, slices.Clone(recs))
	return nil
}

// plainWriter has no batch path.
type plainWriter struct{ writes []int }

func (w *plainWriter) Write(v int) error {
	w.writes = append(w.writes, v)
	return nil
}
func (w *plainWriter) Flush(bool) error { return nil }
func (w *plainWriter) Close() error     { return nil }

func TestSinkBatch(t *testing.T) {
	cur := new(runtime.Cursor)
	env := &opEnv{cursor: cur, index: 2}

	bw := new(batchWriter)
	op := &sinkOp[int]{env: env, w: bw, bw: bw}
	op.EmitBatch([]int{1, 2, 3}, []int64{7, 8, 9})
	op.Emit(4, runtime.NoTimestamp)
	if len(bw.calls) != 1 || !slices.Equal(bw.calls[0], []int{1, 2, 3}) || !slices.Equal(bw.writes, []int{4}) {
		t.Errorf("batch writer got batches %v and writes %v", bw.calls, bw.writes)
	}
	if op.in.N != 4 || cur.Current != 2 {
		t.Errorf("records in %d, Cursor %d; want 4 and the sink's 2", op.in.N, cur.Current)
	}

	pw := new(plainWriter)
	op = &sinkOp[int]{env: env, w: pw}
	op.EmitBatch([]int{1, 2, 3}, nil)
	if !slices.Equal(pw.writes, []int{1, 2, 3}) || op.in.N != 3 {
		t.Errorf("plain writer got %v, records in %d; want [1 2 3] and 3", pw.writes, op.in.N)
	}
}
