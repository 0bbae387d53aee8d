package runtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/watermark"
)

func TestTaskMetricsCountRecordsAndStatus(t *testing.T) {
	p := newPipeline(10_000, 3, graph.Rebalance, 2, 64)
	if err := p.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	src := p.tasks[len(p.tasks)-1].Metrics().Snapshot(time.Now())
	if src.RecordsOut != 10_000 || src.RecordsIn != 0 {
		t.Errorf("source: %d records in, %d out; want 0 and 10000", src.RecordsIn, src.RecordsOut)
	}
	var in int64
	for _, task := range p.tasks[:3] {
		s := task.Metrics().Snapshot(time.Now())
		in += s.RecordsIn
		if s.RecordsOut != 0 {
			t.Errorf("a sink sent %d records", s.RecordsOut)
		}
	}
	if in != 10_000 {
		t.Errorf("sinks received %d records, want 10000", in)
	}
	for _, task := range p.tasks {
		s := task.Metrics().Snapshot(time.Now())
		if s.Status != metrics.Finished || s.Start.IsZero() || s.End.Before(s.Start) {
			t.Errorf("task %s: status %s, start %v, end %v; want FINISHED with both times", task.Name(), s.Status, s.Start, s.End)
		}
	}
}

// TestTaskMetricsBackpressureAndIdle: a source feeding a slow sink spends
// its time backpressured while the sink is busy; a slow source leaves its
// sink idle. Time is synctest's, so the figures are exact.
func TestTaskMetricsBackpressureAndIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeline(1000, 1, graph.Forward, 1, 10)
		p.sinks[0].onEmit = func(int) { time.Sleep(10 * time.Millisecond) } // 10s in all
		if err := p.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		src := p.tasks[1].Metrics().Snapshot(time.Now())
		sink := p.tasks[0].Metrics().Snapshot(time.Now())
		if src.BackPressured < 9*time.Second || src.BackPressured > 10*time.Second {
			t.Errorf("source backpressured %v, want 9s to 10s of the sink's 10s", src.BackPressured)
		}
		if sink.Busy < 10*time.Second || sink.Idle > 0 || sink.BackPressured != 0 {
			t.Errorf("sink busy %v idle %v backpressured %v; want 10s busy", sink.Busy, sink.Idle, sink.BackPressured)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		p := newPipeline(0, 1, graph.Forward, 4, 10)
		slow := &slowSource{left: 100, out: p.src.out}
		p.tasks[1] = NewTask(TaskConfig{Name: "src", Parallelism: 1, Source: slow,
			Writers: p.tasks[1].cfg.Writers, Chain: []Chained{{Name: "src", Op: nopOp{}}}})
		if err := p.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		sink := p.tasks[0].Metrics().Snapshot(time.Now())
		if sink.Idle < 9*time.Second || sink.Idle > 10*time.Second || sink.RecordsIn != 100 {
			t.Errorf("sink idle %v with %d records, want 9s to 10s of the source's 10s, 100 records", sink.Idle, sink.RecordsIn)
		}
	})
}

// slowSource emits one record every 100ms, and flushes it at once (as the
// source task does when its reader has nothing).
type slowSource struct {
	left  int
	out   Output[int]
	ready chan struct{}
}

func (s *slowSource) Open() error { s.ready = make(chan struct{}); close(s.ready); return nil }
func (s *slowSource) Poll() (connector.Status, error) {
	if s.left == 0 {
		return connector.EndOfInput, nil
	}
	time.Sleep(100 * time.Millisecond)
	s.out.Emit(s.left, NoTimestamp)
	s.left--
	return connector.NothingAvailable, nil
}
func (s *slowSource) Available() <-chan struct{} { return s.ready }
func (s *slowSource) Close() error               { return nil }

func TestTaskMetricsWatermarks(t *testing.T) {
	task := NewTask(TaskConfig{Name: "t", Parallelism: 1, Chain: []Chained{{Name: "op", Op: nopOp{}}}})
	m := task.Metrics()
	if m.InputWatermark.Load() != metrics.MinWatermark || m.OutputWatermark.Load() != metrics.MinWatermark {
		t.Fatal("watermarks before the first are not MinWatermark")
	}
	if err := task.advanceWatermark(0, 42); err != nil {
		t.Fatal(err)
	}
	if m.OutputWatermark.Load() != 42 || m.InputWatermark.Load() != metrics.MinWatermark {
		t.Errorf("watermarks in %d out %d, want none in (a chained emitter's) and 42 out", m.InputWatermark.Load(), m.OutputWatermark.Load())
	}
	if err := task.EmitWatermarkOutput(watermark.Output{Advanced: true, Watermark: 50}); err != nil {
		t.Fatal(err)
	}
	if m.InputWatermark.Load() != 50 || m.OutputWatermark.Load() != 50 {
		t.Errorf("watermarks in %d out %d, want 50 and 50", m.InputWatermark.Load(), m.OutputWatermark.Load())
	}
}

// endlessSource always has more; it counts its polls.
type endlessSource struct{ polls int }

func (s *endlessSource) Open() error { return nil }
func (s *endlessSource) Poll() (connector.Status, error) {
	s.polls++
	return connector.MoreAvailable, nil
}
func (s *endlessSource) Available() <-chan struct{} { return nil }
func (s *endlessSource) Close() error               { return nil }

// TestTaskDrain: a drained source task polls its reader no more and has
// sent the maximum watermark; Undrain resumes the polling; Stop ends it.
func TestTaskDrain(t *testing.T) {
	src := &endlessSource{}
	task := NewTask(TaskConfig{ID: "1-0", Name: "src", Parallelism: 1, Source: src, Chain: []Chained{{Name: "src", Op: nopOp{}}}})
	done := make(chan error, 1)
	go func() { done <- task.Run(context.Background()) }()
	ctx := context.Background()
	// ask runs fn on the task goroutine and waits for it.
	ask := func(fn func()) {
		ran := make(chan struct{})
		if err := task.Post(ctx, func() error { fn(); close(ran); return nil }); err != nil {
			t.Fatal(err)
		}
		<-ran
	}
	if err := task.Post(ctx, task.Drain()); err != nil {
		t.Fatal(err)
	}
	var before, after int
	var wm int64
	ask(func() { before, wm = src.polls, task.Metrics().OutputWatermark.Load() })
	for range 3 {
		ask(func() { after = src.polls })
	}
	if after != before {
		t.Errorf("a drained source was polled %d more times", after-before)
	}
	if wm != watermark.MaxWatermark {
		t.Errorf("output watermark %d after the drain, want the maximum", wm)
	}
	if err := task.Post(ctx, task.Undrain()); err != nil {
		t.Fatal(err)
	}
	// Polling resumes: a mail sees more polls eventually (the loop polls
	// between two turns of its mailbox).
	for after == before {
		ask(func() { after = src.polls })
	}
	if err := task.Post(ctx, task.Stop()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
}
