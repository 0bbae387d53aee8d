package weir_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

// The batch path: a source batch goes through a chain of map, filter and
// flatMap in one call per operator, and so does every batch received from
// a shuffle. These tests run it end to end.

// stampedPair is a record with the event-time timestamp it was seen with.
type stampedPair struct {
	V, TS int64
}

// withTimestamp emits each record with the timestamp its Context carries
// (-1 when it has none).
type withTimestamp struct{}

func (withTimestamp) ProcessElement(ctx *weir.Context, v int64, out weir.Collector[stampedPair]) error {
	ts, ok := ctx.Timestamp()
	if !ok {
		ts = -1
	}
	out.Collect(stampedPair{v, ts})
	return nil
}

// TestBatchPathCarriesRecordsAndTimestamps runs map → filter → flatMap →
// process chained after the source (source batches without timestamps) and
// chained behind a rebalance (the input hands the chain whole received
// batches, with the timestamps the source's watermark strategy assigned).
// The output must be exactly what the functions give record by record.
func TestBatchPathCarriesRecordsAndTimestamps(t *testing.T) {
	const n = 5000 // several source batches (1024) per subtask
	scale := func(v int64) int64 { return 3*v + 1 }
	notFifth := func(v int64) bool { return v%5 != 0 }
	dup := func(v int64, out weir.Collector[int64]) {
		for k := range v % 3 {
			out.Collect(10*v + k)
		}
	}
	for _, behindShuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("behindShuffle=%v", behindShuffle), func(t *testing.T) {
			var want []stampedPair
			for i := range int64(n) {
				v := scale(i)
				if !notFifth(v) {
					continue
				}
				ts := int64(-1)
				if behindShuffle {
					ts = 1000 + i
				}
				for k := range v % 3 {
					want = append(want, stampedPair{10*v + k, ts})
				}
			}
			env := weir.NewEnvironment(weir.Options{Parallelism: 2, BatchSize: 100})
			var s *weir.Stream[int64]
			if behindShuffle {
				strategy := weir.ForBoundedOutOfOrderness[int64](0).
					WithTimestampAssigner(func(v, _ int64) int64 { return 1000 + v })
				s = env.FromSource("nums", datagen.Sequence(0, n-1), strategy).Rebalance()
			} else {
				s = env.FromSource("nums", datagen.Sequence(0, n-1))
			}
			sink := collect.New[stampedPair]()
			s.Map("scale", scale).
				Filter("not-fifth", notFifth).
				FlatMap("dup", dup).
				Process("stamp", withTimestamp{}).
				SinkTo("out", sink)
			run(t, env)
			got := sink.Results()
			cmp := func(a, b stampedPair) int {
				if a.V != b.V {
					return int(a.V - b.V)
				}
				return int(a.TS - b.TS)
			}
			slices.SortFunc(got, cmp)
			slices.SortFunc(want, cmp)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d records, want %d; first got %v, want %v", len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
			}
		})
	}
}

// failingSink's writer takes batches and fails on one record.
type failingSink struct{ bad int64 }

func (s failingSink) NewWriter(connector.WriterContext) (connector.Writer[int64], error) {
	return &failingWriter{bad: s.bad}, nil
}

type failingWriter struct{ bad int64 }

var errBadRecord = errors.New("cannot write this record")

func (w *failingWriter) Write(v int64) error {
	if v == w.bad {
		return errBadRecord
	}
	return nil
}

func (w *failingWriter) WriteBatch(recs []int64) error {
	if slices.Contains(recs, w.bad) {
		return errBadRecord
	}
	return nil
}
func (w *failingWriter) Flush(bool) error { return nil }
func (w *failingWriter) Close() error     { return nil }

// TestBatchPathBlamesTheRightOperator fails a job in the middle of a batch
// (record 3000 of the third source batch) in each operator of a chain, in
// front of a shuffle and behind one: the error must name that operator.
func TestBatchPathBlamesTheRightOperator(t *testing.T) {
	const bad = 3000
	boom := func(v int64) {
		if v == bad {
			panic("bad record")
		}
	}
	tests := []struct {
		culprit string
		gen     func(int64) int64
		mapFn   func(int64) int64
		keep    func(int64) bool
		flat    func(int64, weir.Collector[int64])
		sinkBad int64
		want    string
	}{
		{culprit: "nums", gen: func(i int64) int64 { boom(i); return i }, want: "panic: bad record"},
		{culprit: "scale", mapFn: func(v int64) int64 { boom(v); return v }, want: "panic: bad record"},
		{culprit: "keep", keep: func(v int64) bool { boom(v); return true }, want: "panic: bad record"},
		{culprit: "dup", flat: func(v int64, out weir.Collector[int64]) { boom(v); out.Collect(v) }, want: "panic: bad record"},
		{culprit: "out", sinkBad: bad, want: errBadRecord.Error()},
	}
	ident := func(v int64) int64 { return v }
	all := func(int64) bool { return true }
	pass := func(v int64, out weir.Collector[int64]) { out.Collect(v) }
	for _, tt := range tests {
		for _, shuffle := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shuffle=%v", tt.culprit, shuffle), func(t *testing.T) {
				gen, mapFn, keep, flat := ident, ident, all, pass
				if tt.gen != nil {
					gen = tt.gen
				}
				if tt.mapFn != nil {
					mapFn = tt.mapFn
				}
				if tt.keep != nil {
					keep = tt.keep
				}
				if tt.flat != nil {
					flat = tt.flat
				}
				sinkBad := int64(-1)
				if tt.sinkBad != 0 {
					sinkBad = tt.sinkBad
				}
				env := weir.NewEnvironment(weir.Options{Parallelism: 1})
				s := env.FromSource("nums", datagen.Generator(5000, gen))
				if shuffle {
					s = s.Rebalance()
				}
				s.Map("scale", mapFn).
					Filter("keep", keep).
					FlatMap("dup", flat).
					SinkTo("out", failingSink{bad: sinkBad})
				err := env.Execute(context.Background(), "blame")
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("operator %q (subtask 1/1)", tt.culprit)) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Execute = %v, want an error naming operator %q and %q", err, tt.culprit, tt.want)
				}
			})
		}
	}
}

// batchThenPanic is a source whose reader hands the chain a batch and then
// panics, in the same Poll.
type batchThenPanic struct{}

func (batchThenPanic) Boundedness() connector.Boundedness { return connector.Bounded }
func (batchThenPanic) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "only"}}, nil
}
func (batchThenPanic) NewReader(connector.ReaderContext) (connector.Reader[int64], error) {
	return batchThenPanicReader{}, nil
}

type batchThenPanicReader struct{}

func (batchThenPanicReader) AddSplits([]connector.SplitState) error { return nil }
func (batchThenPanicReader) NoMoreSplits()                          {}
func (batchThenPanicReader) Poll(out connector.Emitter[int64]) (connector.Status, error) {
	out.(connector.BatchEmitter[int64]).EmitBatch([]int64{1, 2, 3})
	panic("reader broke")
}
func (batchThenPanicReader) Available() <-chan struct{}                     { return nil }
func (batchThenPanicReader) Snapshot(int64) ([]connector.SplitState, error) { return nil, nil }
func (batchThenPanicReader) Close() error                                   { return nil }

// TestReaderPanicAfterABatchBlamesTheSource: the chain ran (and set the
// Cursor) for the reader's batch; the reader's panic that follows, in the
// same Poll, is the source's.
func TestReaderPanicAfterABatchBlamesTheSource(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	env.FromSource("reader", connector.Source[int64](batchThenPanic{})).
		Map("scale", func(v int64) int64 { return v }).
		SinkTo("out", collect.New[int64]())
	err := env.Execute(context.Background(), "blame-reader")
	if err == nil || !strings.Contains(err.Error(), `operator "reader" (subtask 1/1)`) || !strings.Contains(err.Error(), "reader broke") {
		t.Fatalf("Execute = %v, want an error naming the source and its panic", err)
	}
}

// collectThenPanic collects each record, to its main output or to a side
// output, and then panics on the bad one: the panic comes after the chained
// operators downstream ran (and named themselves in the Cursor).
type collectThenPanic struct {
	bad  int64
	side bool
	tag  weir.OutputTag[int64]
	out  weir.Collector[int64]
}

func (f *collectThenPanic) Open(ctx *weir.Context) (err error) {
	if f.side {
		f.out, err = weir.SideOutput(ctx, f.tag)
	}
	return err
}

func (f *collectThenPanic) ProcessElement(_ *weir.Context, v int64, out weir.Collector[int64]) error {
	f.emit(v, out)
	return nil
}

func (f *collectThenPanic) emit(v int64, out weir.Collector[int64]) {
	if f.side {
		out = f.out
	}
	out.Collect(v)
	if v == f.bad {
		panic("bad record")
	}
}

// keyedCollectThenPanic is collectThenPanic as a keyed process function.
type keyedCollectThenPanic struct{ collectThenPanic }

func (f *keyedCollectThenPanic) Open(*weir.KeyedContext[int64]) error { return nil }

func (f *keyedCollectThenPanic) ProcessElement(_ *weir.KeyedContext[int64], v int64, out weir.Collector[int64]) error {
	f.emit(v, out)
	return nil
}

// TestPanicAfterCollectBlamesTheFunction: a process function that emits a
// record through its collector (main or side output) into a chained map,
// and then panics, fails the job naming the process function's operator,
// not the map that ran last.
func TestPanicAfterCollectBlamesTheFunction(t *testing.T) {
	const bad = 3000
	tag := weir.NewOutputTag[int64]("side")
	ident := func(v int64) int64 { return v }
	tests := map[string]func(s *weir.Stream[int64]) *weir.Stream[int64]{
		"process": func(s *weir.Stream[int64]) *weir.Stream[int64] {
			return s.Process("culprit", &collectThenPanic{bad: bad}).Map("after", ident)
		},
		"keyed-process": func(s *weir.Stream[int64]) *weir.Stream[int64] {
			return s.KeyBy(ident).Process("culprit", &keyedCollectThenPanic{collectThenPanic{bad: bad}}).Map("after", ident)
		},
		"side-output": func(s *weir.Stream[int64]) *weir.Stream[int64] {
			p := s.Process("culprit", &collectThenPanic{bad: bad, side: true, tag: tag})
			return p.SideOutput(tag).Map("after", ident)
		},
		"flatmap-record-path": func(s *weir.Stream[int64]) *weir.Stream[int64] {
			// Behind a keyed process function the flatMap gets records one
			// by one (its Emit, not EmitBatch) and collects through the
			// general collector.
			return s.KeyBy(ident).Process("pass", &keyedCollectThenPanic{collectThenPanic{bad: -1}}).
				FlatMap("culprit", func(v int64, out weir.Collector[int64]) {
					out.Collect(v)
					if v == bad {
						panic("bad record")
					}
				}).Map("after", ident)
		},
	}
	for name, build := range tests {
		t.Run(name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 1})
			build(env.FromSource("nums", datagen.Generator(5000, ident))).SinkTo("out", collect.New[int64]())
			err := env.Execute(context.Background(), "blame-collect")
			if err == nil || !strings.Contains(err.Error(), `operator "culprit" (subtask 1/1)`) || !strings.Contains(err.Error(), "bad record") {
				t.Fatalf("Execute = %v, want an error naming operator %q and its panic", err, "culprit")
			}
		})
	}
}
