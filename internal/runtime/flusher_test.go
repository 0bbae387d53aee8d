package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/graph"
)

// busySource is a source that always has more (MoreAvailable), so its
// task is never idle: it emits n at the n-th poll (every poll when
// steady, only the first otherwise) until stop is set. A fast one emits
// 64 records per poll without pause; a slow one one record per ms.
type busySource struct {
	out    Output[int]
	steady bool
	fast   bool
	n      int
	polled atomic.Int64 // records emitted so far
	stop   *atomic.Bool
}

func (s *busySource) Open() error { return nil }
func (s *busySource) Poll() (connector.Status, error) {
	if s.stop.Load() {
		return connector.EndOfInput, nil
	}
	if s.fast {
		for range 64 {
			s.out.Emit(s.n, NoTimestamp)
			s.n++
		}
		return connector.MoreAvailable, nil
	}
	time.Sleep(time.Millisecond)
	if s.steady || s.n == 0 {
		s.out.Emit(s.n, NoTimestamp)
		s.polled.Add(1)
	}
	s.n++
	return connector.MoreAvailable, nil
}
func (s *busySource) Available() <-chan struct{} { return nil }
func (s *busySource) Close() error               { return nil }

// busyOp is the head of an input task that takes a ms per record (so its
// full input keeps it from ever being idle) and emits each record when
// steady, else only the first.
type busyOp struct {
	nopOp
	out     Output[int]
	steady  bool
	seen    int
	emitted atomic.Int64
}

func (b *busyOp) Emit(v int, ts int64) {
	time.Sleep(time.Millisecond)
	if b.steady || b.seen == 0 {
		b.out.Emit(v, ts)
		b.emitted.Add(1)
	}
	b.seen++
}

// TestBufferTimeoutFlushesBusyTasks: a record in a partly filled batch of
// a task that never runs out of work reaches the next task within the
// buffer timeout, for both kinds of task (a source task and one that
// reads inputs) and both ways a busy task holds a record back: it goes on
// emitting slowly (the batch fills after 1024 records, at 1 ms each), or
// it emits nothing more (the batch never fills).
func TestBufferTimeoutFlushesBusyTasks(t *testing.T) {
	const batch = 1024
	for _, tc := range []struct {
		name           string
		source, steady bool
	}{
		{"source task, emitting", true, true},
		{"source task, silent", true, false},
		{"input task, emitting", false, true},
		{"input task, silent", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stopJob := make(chan struct{})
			stop := new(atomic.Bool)
			bell := make(chan struct{}, 1)
			out := NewChannel[int](4, bell, nil)
			first := make(chan int64, 1)
			var emitted func() int64
			sinkCur := new(Cursor)
			sink := &recorder{cur: sinkCur, onEmit: func(int) {
				select {
				case first <- emitted():
				default:
				}
			}}
			tasks := []*Task{NewTask(TaskConfig{
				Name: "sink", Parallelism: 1, Doorbell: bell, Cursor: sinkCur,
				Inputs: []InputChannel{NewInput(out, Output[int](sink), nil)}, InputGate: []int{0},
				Chain: []Chained{{Name: "sink", Op: sink}},
			})}
			w := NewRecordWriter([]*Channel[int]{out}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: batch, Done: stopJob})
			if tc.source {
				src := &busySource{out: w, steady: tc.steady, stop: stop}
				emitted = src.polled.Load
				tasks = append(tasks, NewTask(TaskConfig{
					Name: "src", Parallelism: 1, Source: src, Writers: []Writer{w},
					Chain: []Chained{{Name: "src", Op: nopOp{}}}, BufferTimeout: 10 * time.Millisecond,
				}))
			} else {
				midBell := make(chan struct{}, 1)
				in := NewChannel[int](2, midBell, nil)
				op := &busyOp{out: w, steady: tc.steady}
				emitted = op.emitted.Load
				up := NewRecordWriter([]*Channel[int]{in}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 64, Done: stopJob})
				src := &busySource{out: up, fast: true, stop: stop}
				tasks = append(tasks,
					NewTask(TaskConfig{
						Name: "busy", Parallelism: 1, Doorbell: midBell,
						Inputs: []InputChannel{NewInput(in, Output[int](op), nil)}, InputGate: []int{0},
						Writers: []Writer{w}, Chain: []Chained{{Name: "busy", Op: op}},
						BufferTimeout: 10 * time.Millisecond,
					}),
					NewTask(TaskConfig{
						Name: "src", Parallelism: 1, Source: src, Writers: []Writer{up},
						Chain: []Chained{{Name: "src", Op: nopOp{}}},
					}))
			}
			done := make(chan error, 1)
			go func() { done <- NewJob(tasks, stopJob).Run(context.Background()) }()
			select {
			case n := <-first:
				// The busy task had emitted n records when the first
				// reached the sink: fewer than a batch, so a timed flush
				// sent it (without one it waits for 1024, or for ever).
				if n >= batch {
					t.Errorf("the first record reached the sink after %d records were emitted, want fewer than a batch (%d)", n, batch)
				}
			case err := <-done:
				t.Fatalf("the job ended (%v) before a record reached the sink", err)
			case <-time.After(20 * time.Second):
				t.Fatalf("no record reached the sink in 20s although %d were emitted: the busy task's partly filled batch was never sent", emitted())
			}
			stop.Store(true)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
