package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/graph"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countSource emits n integers from start (n < 0: forever), batch per Poll.
type countSource struct {
	next, end int
	batch     int
	out       Output[int]
	ready     chan struct{}
	closed    bool
}

func (s *countSource) Open() error { return nil }
func (s *countSource) Poll() (connector.Status, error) {
	for range s.batch {
		if s.end >= 0 && s.next >= s.end {
			return connector.EndOfInput, nil
		}
		s.out.Emit(s.next, NoTimestamp)
		s.next++
	}
	return connector.MoreAvailable, nil
}
func (s *countSource) Available() <-chan struct{} { return s.ready }
func (s *countSource) Close() error               { s.closed = true; return nil }

// recorder collects what reaches it and how the lifecycle went.
type recorder struct {
	mu       sync.Mutex
	got      []int
	finished bool
	closed   bool
	cur      *Cursor
	idx      int
	onEmit   func(int)
}

func (r *recorder) Emit(v int, _ int64) {
	r.cur.Current = r.idx
	if r.onEmit != nil {
		r.onEmit(v)
	}
	r.mu.Lock()
	r.got = append(r.got, v)
	r.mu.Unlock()
}
func (r *recorder) Open() error   { return nil }
func (r *recorder) Finish() error { r.finished = true; return nil }
func (r *recorder) Close() error  { r.closed = true; return nil }

type pipeline struct {
	src   *countSource
	sinks []*recorder
	tasks []*Task
	stop  chan struct{}
	stats *ChannelStats
}

// newPipeline wires one source subtask to par consumer subtasks over part.
func newPipeline(n, par int, part graph.Partitioner, queue, batch int) *pipeline {
	p := &pipeline{stop: make(chan struct{}), stats: new(ChannelStats)}
	var chans []*Channel[int]
	for s := range par {
		bell := make(chan struct{}, 1)
		ch := NewChannel[int](queue, bell, p.stats)
		chans = append(chans, ch)
		cur := new(Cursor)
		r := &recorder{cur: cur}
		p.sinks = append(p.sinks, r)
		p.tasks = append(p.tasks, NewTask(TaskConfig{
			Name: "sink", Subtask: s, Parallelism: par, Doorbell: bell, Cursor: cur,
			Inputs: []InputChannel{NewInput(ch, Output[int](r), nil)}, InputGate: []int{0},
			Chain: []Chained{{Name: "sink", Op: r}},
		}))
	}
	w := NewRecordWriter(chans, WriterOptions[int]{
		Partitioner: part, BatchSize: batch, Done: p.stop, MaxParallelism: 128,
		KeyGroup: func(v int) int { return v % 128 },
	})
	p.src = &countSource{end: n, batch: 100, out: w, ready: make(chan struct{})}
	p.tasks = append(p.tasks, NewTask(TaskConfig{
		Name: "src", Parallelism: 1, Source: p.src, Writers: []Writer{w},
		Chain: []Chained{{Name: "src", Op: nopOp{}}},
	}))
	return p
}

type nopOp struct{}

func (nopOp) Open() error   { return nil }
func (nopOp) Finish() error { return nil }
func (nopOp) Close() error  { return nil }

func (p *pipeline) run(ctx context.Context) error { return NewJob(p.tasks, p.stop).Run(ctx) }

func TestEndOfInputDeliversEverything(t *testing.T) {
	for _, part := range []graph.Partitioner{graph.Rebalance, graph.Hash, graph.Broadcast} {
		t.Run(part.String(), func(t *testing.T) {
			p := newPipeline(10_000, 3, part, 2, 64)
			if err := p.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var all []int
			for i, s := range p.sinks {
				if !s.finished || !s.closed {
					t.Errorf("sink %d: finished=%v closed=%v", i, s.finished, s.closed)
				}
				if part == graph.Hash {
					for _, v := range s.got {
						if got := (v % 128) * 3 / 128; got != i {
							t.Fatalf("record %d (key group %d) reached subtask %d, want %d", v, v%128, i, got)
						}
					}
				}
				if part == graph.Broadcast {
					if len(s.got) != 10_000 || !slices.IsSorted(s.got) {
						t.Fatalf("sink %d got %d records (sorted=%v), want all 10000 in order", i, len(s.got), slices.IsSorted(s.got))
					}
					continue
				}
				all = append(all, s.got...)
			}
			if part == graph.Broadcast {
				return
			}
			slices.Sort(all)
			if len(all) != 10_000 {
				t.Fatalf("got %d records, want 10000", len(all))
			}
			for i, v := range all {
				if v != i {
					t.Fatalf("record %d is %d: lost or duplicated records", i, v)
				}
			}
			if !p.src.closed {
				t.Error("source reader was not closed")
			}
		})
	}
}

func TestCancelStopsEveryTask(t *testing.T) {
	p := newPipeline(-1, 2, graph.Rebalance, 2, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.sinks[0].mu.Lock()
		n := len(p.sinks[0].got)
		p.sinks[0].mu.Unlock()
		if n > 1000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for i, s := range p.sinks {
		if !s.closed {
			t.Errorf("sink %d not closed after cancel", i)
		}
	}
}

func TestOperatorErrorNamesOperatorAndSubtask(t *testing.T) {
	p := newPipeline(1000, 2, graph.Rebalance, 2, 16)
	p.sinks[1].onEmit = func(v int) {
		if v > 500 {
			Fail(errors.New("disk on fire"))
		}
	}
	err := p.run(context.Background())
	var oe *OperatorError
	if !errors.As(err, &oe) {
		t.Fatalf("Run = %v, want an OperatorError", err)
	}
	if want := `operator "sink" (subtask 2/2): disk on fire`; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
}

func TestPanicNamesOperator(t *testing.T) {
	p := newPipeline(1000, 1, graph.Rebalance, 2, 16)
	p.sinks[0].onEmit = func(v int) {
		if v == 77 {
			var m map[string]int
			m["x"] = 1
		}
	}
	err := p.run(context.Background())
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `operator "sink" (subtask 1/1): panic: assignment to entry in nil map`) {
		t.Fatalf("Run = %v, want a panic error naming the sink", err)
	}
	if !strings.Contains(pe.Stack, "runtime_test.go") {
		t.Errorf("panic stack does not show the panicking code:\n%s", pe.Stack)
	}
}

// A slow consumer must not make the runtime buffer more: batches allocated
// stay bounded by the queue capacity whatever the input size.
func TestBackpressureBoundsBufferedBatches(t *testing.T) {
	for _, n := range []int{20_000, 200_000} {
		p := newPipeline(n, 1, graph.Rebalance, 3, 100)
		p.sinks[0].onEmit = func(v int) {
			if v%1000 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if err := p.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(p.sinks[0].got) != n {
			t.Fatalf("got %d records, want %d", len(p.sinks[0].got), n)
		}
		// queue capacity + the one being filled + the one being consumed
		if a := p.stats.BatchesAllocated.Load(); a > 3+2 {
			t.Errorf("n=%d: %d batches allocated, want <= 5", n, a)
		}
		if p.stats.BackpressuredNanos.Load() == 0 {
			t.Errorf("n=%d: the source never waited for the slow sink", n)
		}
	}
}
