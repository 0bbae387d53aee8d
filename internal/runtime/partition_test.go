package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/graph"
)

// drain returns the records queued on each channel, in order.
func drain(chans []*Channel[int]) [][]int {
	out := make([][]int, len(chans))
	for i, c := range chans {
		for len(c.queue) > 0 {
			env := <-c.queue
			out[i] = append(out[i], env.recs...)
		}
	}
	return out
}

func TestPartitioners(t *testing.T) {
	tests := []struct {
		name    string
		part    graph.Partitioner
		subtask int
		targets int
		recs    []int
		want    [][]int
	}{
		{"forward", graph.Forward, 0, 1, []int{1, 2, 3}, [][]int{{1, 2, 3}}},
		{"rebalance from subtask 0", graph.Rebalance, 0, 3, []int{1, 2, 3, 4, 5}, [][]int{{1, 4}, {2, 5}, {3}}},
		{"rebalance from subtask 1 starts at target 1", graph.Rebalance, 1, 3, []int{1, 2, 3, 4}, [][]int{{3}, {1, 4}, {2}}},
		{"hash by key group (kg = v mod 128, 3 targets)", graph.Hash, 0, 3, []int{0, 42, 43, 85, 86, 127, 128}, [][]int{{0, 42, 128}, {43, 85}, {86, 127}}},
		{"broadcast", graph.Broadcast, 0, 2, []int{7, 8}, [][]int{{7, 8}, {7, 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chans []*Channel[int]
			for range tt.targets {
				chans = append(chans, NewChannel[int](16, make(chan struct{}, 1), nil))
			}
			w := NewRecordWriter(chans, WriterOptions[int]{
				Partitioner: tt.part, Subtask: tt.subtask, BatchSize: 4, MaxParallelism: 128,
				KeyGroup: func(v int) int { return v % 128 },
			})
			for _, r := range tt.recs {
				w.Emit(r, NoTimestamp)
			}
			w.Flush()
			got := drain(chans)
			for i := range got {
				if !slices.Equal(got[i], tt.want[i]) {
					t.Fatalf("target %d got %v, want %v (all: %v)", i, got[i], tt.want[i], got)
				}
			}
		})
	}
}

func TestTimestampsTravelWithRecords(t *testing.T) {
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 8})
	w.Emit(1, NoTimestamp)
	w.Emit(2, 2000)
	w.Emit(3, NoTimestamp)
	w.Flush()
	w.Emit(4, NoTimestamp)
	w.Broadcast(Event{Kind: EndOfPartition})
	var got []int64
	in := NewInput(ch, Output[int](outputFunc(func(v int, ts int64) { got = append(got, int64(v), ts) })), nil)
	var events []EventKind
	for {
		ev, isEvent, ok := in.Poll()
		if !ok {
			break
		}
		if isEvent {
			events = append(events, ev.Kind)
		}
	}
	want := []int64{1, NoTimestamp, 2, 2000, 3, NoTimestamp, 4, NoTimestamp}
	if !slices.Equal(got, want) || !slices.Equal(events, []EventKind{EndOfPartition}) {
		t.Fatalf("got %v events %v, want %v then end-of-partition", got, events, want)
	}
}

type outputFunc func(int, int64)

func (f outputFunc) Emit(v int, ts int64) { f(v, ts) }

func TestMailRunsOnTaskGoroutine(t *testing.T) {
	p := newPipeline(-1, 1, graph.Rebalance, 2, 64)
	src := p.tasks[len(p.tasks)-1]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	ran := make(chan int, 1)
	// The mail reads the source's position without a lock: it must run on
	// the task goroutine, between polls (the race detector checks this).
	if err := src.Post(ctx, func() error { ran <- p.src.next; return nil }); err != nil {
		t.Fatal(err)
	}
	if n := <-ran; n < 0 {
		t.Fatalf("position %d", n)
	}
	cancel()
	<-done
}
