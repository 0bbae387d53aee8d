package weir

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/adapt"
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
// records-in counter (inCount's recordsIn: a method of that name declared
// here with another signature would hide it from the wiring, which would
// then count the operators' records with a CountingOutput and never fuse
// a map with its filter).
type testOp interface {
	runtime.BatchOutput[int]
	recordsInCounter
}

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
	type opCase struct {
		name string
		make func(out runtime.Output[int], env *opEnv) testOp
	}
	ops := []opCase{
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
	// Each loop of the filter, on a pattern and on random answers.
	for _, flavor := range []adapt.Flavor{branchFree, branching} {
		for name, keep := range map[string]func(int) bool{"fifths": func(v int) bool { return v%5 != 0 }, "random": randomKeep} {
			ops = append(ops, opCase{fmt.Sprintf("filter %s flavor=%d", name, flavor), func(out runtime.Output[int], env *opEnv) testOp {
				f := newFilterOp(keep, out, env)
				f.adapt = adapt.Fixed(flavor)
				return f
			}})
		}
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
							return out.(*plainOut).got, o.recordsIn().N
						}
						return out.(*batchOut).got, o.recordsIn().N
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

// TestMapFilterFusion: a map whose only output is a chained filter runs
// both functions in one pass on its batch path. What comes out of the
// filter must be what the two give record by record, in batches only (to a
// downstream that takes them), with both operators' records in exact.
func TestMapFilterFusion(t *testing.T) {
	const n = 2500
	input := make([]int, n)
	stamps := make([]int64, n)
	for i := range input {
		input[i] = i
		stamps[i] = int64(1000 + i)
	}
	scale := func(v int) int { return 3*v + 1 }
	keeps := map[string]func(int) bool{
		"fifths": func(v int) bool { return v%5 != 0 },
		"none":   func(int) bool { return false },
		"all":    func(int) bool { return true },
		"random": randomKeep,
	}
	// The filter's Chooser picks the fused loop too: each is run, and the
	// adaptive choice, which tries both in its first batches.
	flavors := map[string]func() *adapt.Chooser{
		"adaptive":   func() *adapt.Chooser { return adapt.New(adapt.Options{Trials: 1, Exploit: 1, MinRecords: 1}) },
		"branchFree": func() *adapt.Chooser { return adapt.Fixed(branchFree) },
		"branching":  func() *adapt.Chooser { return adapt.Fixed(branching) },
	}
	for name, keep := range keeps {
		for flavor, chooser := range flavors {
			for _, timed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/timed=%v", name, flavor, timed), func(t *testing.T) {
					var ts []int64
					if timed {
						ts = stamps
					}
					run := func(batches bool) (*batchOut, *mapOp[int, int], *filterOp[int]) {
						cur := new(runtime.Cursor)
						down := &batchOut{plainOut{cur: cur, idx: 3}}
						f := newFilterOp(keep, down, &opEnv{cursor: cur, index: 2})
						f.adapt = chooser()
						m := newMapOp(scale, f, &opEnv{cursor: cur, index: 1})
						if m.filter != f {
							t.Fatal("a map whose output is a filter is not fused with it")
						}
						if !batches {
							for i, v := range input {
								st := runtime.NoTimestamp
								if ts != nil {
									st = ts[i]
								}
								m.Emit(v, st)
							}
							return down, m, f
						}
						for _, b := range [][2]int{{0, 1}, {1, 1024}, {1024, 2500}, {2500, 2500}} {
							var bts []int64
							if ts != nil {
								bts = ts[b[0]:b[1]]
							}
							m.EmitBatch(input[b[0]:b[1]], bts)
						}
						return down, m, f
					}
					want, _, _ := run(false)
					got, m, f := run(true)
					wr, wt := flat(want.got)
					gr, gt := flat(got.got)
					if !slices.Equal(gr, wr) || !slices.Equal(gt, wt) {
						t.Errorf("fused batches gave %d records %v… (ts %v…), records gave %d %v… (ts %v…)",
							len(gr), gr[:min(len(gr), 8)], gt[:min(len(gt), 8)], len(wr), wr[:min(len(wr), 8)], wt[:min(len(wt), 8)])
					}
					if m.in.N != n || f.in.N != n {
						t.Errorf("records in: map %d, filter %d; want %d each", m.in.N, f.in.N, n)
					}
					for _, d := range got.got {
						if !d.batch || timed != (d.ts != nil) {
							t.Fatalf("the downstream got %+v; want batches, with timestamps %v", d, timed)
						}
					}
				})
			}
		}
	}
}

// randomKeep keeps about half the records, as a hash of the record decides:
// answers no branch predictor can learn.
func randomKeep(v int) bool {
	x := uint64(v) // murmur3's 64-bit finalizer
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x>>63 == 0
}

// TestMapFilterFusionBlame: a panic in the middle of a fused batch names
// the map when the map's function raised it and the filter when the
// filter's did, and nothing of the batch has gone downstream.
func TestMapFilterFusionBlame(t *testing.T) {
	const bad = 700
	tests := []struct {
		culprit string
		fn      func(int) int
		keep    func(int) bool
		want    int // chain index
	}{
		{"map", func(v int) int {
			if v == bad {
				panic("bad record")
			}
			return v
		}, func(int) bool { return true }, 1},
		{"filter", func(v int) int { return v }, func(v int) bool {
			if v == bad {
				panic("bad record")
			}
			return true
		}, 2},
		// The panic is raised deeper down, in a function the user's
		// function calls.
		{"filter-helper", func(v int) int { return v }, func(v int) bool { return checkRecord(v, bad) }, 2},
		{"map-helper", func(v int) int { return v + boolInt(checkRecord(v, bad)) }, func(int) bool { return true }, 1},
		// Method values: the pass calls the compiler's wrapper.
		{"filter-method", func(v int) int { return v }, recordChecker{bad}.keep, 2},
		{"map-method", recordChecker{bad}.mapped, func(int) bool { return true }, 1},
	}
	input := make([]int, 1024)
	stamps := make([]int64, len(input))
	for i := range input {
		input[i] = i
		stamps[i] = int64(i)
	}
	for _, tt := range tests {
		for _, timed := range []bool{false, true} {
			for _, flavor := range []adapt.Flavor{branchFree, branching} {
				t.Run(fmt.Sprintf("%s/timed=%v/flavor=%d", tt.culprit, timed, flavor), func(t *testing.T) {
					var ts []int64
					if timed {
						ts = stamps
					}
					cur := new(runtime.Cursor)
					down := &batchOut{plainOut{cur: cur, idx: 3}}
					f := newFilterOp(tt.keep, down, &opEnv{cursor: cur, index: 2})
					f.adapt = adapt.Fixed(flavor)
					m := newMapOp(tt.fn, f, &opEnv{cursor: cur, index: 1})
					// A batch goes through first, leaving the Cursor on the
					// downstream.
					m.EmitBatch(input[:bad], ts[:min(len(ts), bad)])
					if cur.Current != 3 {
						t.Fatalf("Cursor at %d after a batch, want the downstream's 3", cur.Current)
					}
					func() {
						defer func() {
							if r := recover(); fmt.Sprint(r) != "bad record" {
								t.Fatalf("recovered %v, want the user's panic", r)
							}
						}()
						m.EmitBatch(input, ts)
					}()
					if cur.Current != tt.want {
						t.Errorf("Cursor at %d after a panic in the %s's function, want its index %d", cur.Current, tt.culprit, tt.want)
					}
					if len(down.got) != 1 {
						t.Errorf("the downstream got %d batches, want only the one before the panic", len(down.got))
					}
				})
			}
		}
	}
}

// checkRecord panics on the bad record.
func checkRecord(v, bad int) bool {
	if v == bad {
		panic("bad record")
	}
	return true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type recordChecker struct{ bad int }

func (c recordChecker) keep(v int) bool { return checkRecord(v, c.bad) }
func (c recordChecker) mapped(v int) int {
	checkRecord(v, c.bad)
	return v
}

// TestMapFilterFusionBlameOneFunction: when the map and the filter are one
// function, the blame still follows the call that raised the panic: the
// function panics at its n-th call, and the fused pass alternates the
// map's call and the filter's.
func TestMapFilterFusionBlameOneFunction(t *testing.T) {
	for _, tt := range []struct {
		call int // the call that panics
		want int // chain index
	}{{call: 2 * 300, want: 1}, {call: 2*300 + 1, want: 2}} {
		for _, timed := range []bool{false, true} {
			t.Run(fmt.Sprintf("call=%d/timed=%v", tt.call, timed), func(t *testing.T) {
				calls := 0
				both := func(b bool) bool {
					if calls == tt.call {
						panic("bad record")
					}
					calls++
					return b
				}
				input := make([]bool, 1024)
				var ts []int64
				if timed {
					ts = make([]int64, len(input))
				}
				for i := range input {
					input[i] = true
				}
				cur := new(runtime.Cursor)
				m := newMapOp(both, newFilterOp(both, discard[bool]{}, &opEnv{cursor: cur, index: 2}), &opEnv{cursor: cur, index: 1})
				func() {
					defer func() {
						if r := recover(); r != "bad record" {
							t.Fatalf("recovered %v, want the user's panic", r)
						}
					}()
					m.EmitBatch(input, ts)
				}()
				if cur.Current != tt.want {
					t.Errorf("Cursor at %d after a panic in call %d, want %d", cur.Current, tt.call, tt.want)
				}
			})
		}
	}
}

// TestMapFilterFusionBlameRuntimeError: a runtime error (an index out of
// range, raised by the runtime on the user's behalf) is blamed as a
// panic is.
func TestMapFilterFusionBlameRuntimeError(t *testing.T) {
	table := make([]int, 500)
	cur := new(runtime.Cursor)
	down := &batchOut{plainOut{cur: cur, idx: 3}}
	m := newMapOp(func(v int) int { return v }, newFilterOp(func(v int) bool { return table[v] == 0 }, down, &opEnv{cursor: cur, index: 2}), &opEnv{cursor: cur, index: 1})
	input := make([]int, 1024)
	for i := range input {
		input[i] = i
	}
	func() {
		defer func() {
			if _, ok := recover().(goruntime.Error); !ok {
				t.Fatal("want a runtime error")
			}
		}()
		m.EmitBatch(input, nil)
	}()
	if cur.Current != 2 {
		t.Errorf("Cursor at %d after an index out of range in the filter, want 2", cur.Current)
	}
}

// TestMapFilterFusedOnlyWhenChainedAlone deploys jobs and looks at the
// built map: it is fused with the filter that follows it only when the
// filter is chained to it and takes all of its output.
func TestMapFilterFusedOnlyWhenChainedAlone(t *testing.T) {
	scale := func(v int64) int64 { return 3*v + 1 }
	notFifth := func(v int64) bool { return v%5 != 0 }
	tests := []struct {
		name  string
		build func(s *Stream[int64])
		fused bool
	}{
		{"chained", func(s *Stream[int64]) {
			s.Map("scale", scale).Filter("keep", notFifth).SinkTo("out", collect.New[int64]())
		}, true},
		{"rebalance between", func(s *Stream[int64]) {
			s.Map("scale", scale).Rebalance().Filter("keep", notFifth).SinkTo("out", collect.New[int64]())
		}, false},
		{"other parallelism", func(s *Stream[int64]) {
			s.Map("scale", scale).Parallelism(2).Filter("keep", notFifth).SinkTo("out", collect.New[int64]())
		}, false},
		{"chaining disabled", func(s *Stream[int64]) {
			s.Map("scale", scale).Filter("keep", notFifth).DisableChaining().SinkTo("out", collect.New[int64]())
		}, false},
		{"a second consumer", func(s *Stream[int64]) {
			m := s.Map("scale", scale)
			m.Filter("keep", notFifth).SinkTo("out", collect.New[int64]())
			m.SinkTo("all", collect.New[int64]())
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := NewEnvironment(Options{Parallelism: 1})
			tt.build(env.FromSource("nums", datagen.Sequence(0, 9)))
			var maps int
			for _, task := range deployForTest(t, env) {
				for _, c := range task.Chain {
					m, ok := c.Op.(*mapOp[int64, int64])
					if !ok {
						continue
					}
					maps++
					if fused := m.filter != nil; fused != tt.fused {
						t.Errorf("map fused = %v, want %v", fused, tt.fused)
					}
				}
			}
			if maps == 0 {
				t.Fatal("no map operator in the deployed tasks")
			}
		})
	}
}

// deployForTest builds env's tasks as Execute would, without running them,
// and returns their configurations.
func deployForTest(t *testing.T, env *Environment) []*runtime.TaskConfig {
	t.Helper()
	opts := env.opts
	opts.EnsureDefaults()
	opts.JobID = "deploy-test"
	jg, err := compile(env, opts, opts.JobID)
	if err != nil {
		t.Fatal(err)
	}
	bc := &buildCtx{ctx: t.Context(), opts: opts, jg: jg, stop: make(chan struct{}), logger: opts.Logger}
	if _, err := bc.deploy(env); err != nil {
		t.Fatal(err)
	}
	var cfgs []*runtime.TaskConfig
	for _, v := range bc.tasks {
		cfgs = append(cfgs, v...)
	}
	return cfgs
}
