package weir_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

// markerSource emits n numbers; every 500th is a marker record that asks
// for a checkpoint.
type markerSource struct{ n int64 }

func (s markerSource) Boundedness() connector.Boundedness { return connector.Bounded }
func (s markerSource) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "all"}}, nil
}
func (s markerSource) NewReader(ctx connector.ReaderContext) (connector.Reader[int64], error) {
	return &markerReader{n: s.n, ctx: ctx}, nil
}

type markerReader struct {
	n, next int64
	has     bool
	ctx     connector.ReaderContext
	last    time.Time
}

func (r *markerReader) AddSplits(s []connector.SplitState) error {
	r.has = len(s) > 0
	if r.has && len(s[0].Position) == 8 {
		for _, b := range s[0].Position {
			r.next = r.next<<8 | int64(b)
		}
	}
	return nil
}
func (r *markerReader) NoMoreSplits() {}
func (r *markerReader) Poll(out connector.Emitter[int64]) (connector.Status, error) {
	if time.Since(r.last) < time.Millisecond {
		return connector.NothingAvailable, nil
	}
	r.last = time.Now()
	for k := 0; r.has && r.next < r.n && k < 50; k++ {
		out.Emit(r.next)
		if r.next%500 == 499 {
			r.ctx.RequestCheckpoint()
		}
		r.next++
	}
	if !r.has || r.next >= r.n {
		return connector.EndOfInput, nil
	}
	return connector.MoreAvailable, nil
}
func (r *markerReader) Available() <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(time.Millisecond, func() { close(c) })
	return c
}
func (r *markerReader) Snapshot(int64) ([]connector.SplitState, error) {
	p := make([]byte, 8)
	for i := range 8 {
		p[i] = byte(r.next >> (56 - 8*i))
	}
	return []connector.SplitState{{ID: "all", Position: p}}, nil
}
func (r *markerReader) Close() error { return nil }

func TestMarkerRecordsTriggerCheckpoints(t *testing.T) {
	opts := weir.Options{Parallelism: 1}
	env := weir.NewEnvironment(opts)
	sink := collect.New[int64]()
	env.FromSource("markers", connector.Source[int64](markerSource{n: 3000})).
		KeyBy(func(v int64) int64 { return v % 10 }).
		Reduce("sum", func(a, b int64) int64 { return a + b }).
		SinkTo("out", sink)
	job, err := env.ExecuteAsync(context.Background(), "markers")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	sum, hist := job.Checkpoints()
	// Six markers, plus the final checkpoint at the end of input. Markers
	// that arrive while a checkpoint runs are served by a later one.
	if sum.Completed < 3 {
		t.Fatalf("%d checkpoints completed (%v); want >= 3 from marker records", sum.Completed, hist)
	}
	if len(sink.Results()) != 3000 {
		t.Fatalf("got %d results", len(sink.Results()))
	}
}

func TestExternalSignalTriggersCheckpoint(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	env.FromSource("forever", datagen.Generator(-1, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 10_000})).
		KeyBy(func(v int64) int64 { return v % 100 }).
		Reduce("sum", func(a, b int64) int64 { return a + b }).
		SinkTo("out", collect.New[int64]())
	job, err := env.ExecuteAsync(context.Background(), "signal")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := job.SignalCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Fatalf("checkpoint ids %d then %d: ids must increase", first, second)
	}
	st, ok := job.Checkpoint(first)
	if !ok || st.Status != "COMPLETED" || st.StateSize == 0 || len(st.Subtasks) != st.NumTasks {
		t.Fatalf("stats of checkpoint %d: %+v", first, st)
	}
}
