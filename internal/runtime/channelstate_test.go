package runtime

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
)

// TestOvertake: the barrier goes ahead of the queued batches, which stay
// queued behind it in order (the partly filled one last); the channel
// state returned is a copy of them that decodes to the same records and
// timestamps; Announce puts an event at the head without copying; a
// restored output state is sent before anything else.
func TestOvertake(t *testing.T) {
	c, err := codec.Of[int]()
	if err != nil {
		t.Fatal(err)
	}
	// Room for the re-sent batches behind the barrier: with a full queue
	// Overtake waits for the consumer to make room, as any send does.
	ch := NewChannel[int](8, make(chan struct{}, 1), nil)
	w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
	w.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
	for i := range 5 {
		w.Emit(i, int64(100+i))
	}
	w.Announce(Event{Kind: BarrierAnnouncement, ID: 6})
	state := w.Overtake(Event{Kind: Barrier, ID: 7, Unaligned: true})
	var got []string
	for range 5 {
		env := <-ch.queue
		if env.recs == nil {
			got = append(got, fmt.Sprintf("%s %d", env.ev.Kind, env.ev.ID))
			continue
		}
		got = append(got, fmt.Sprint(env.recs, env.ts))
	}
	want := []string{"barrier 7", "barrier-announcement 6", "[0 1] [100 101]", "[2 3] [102 103]", "[4] [104]"}
	if !slices.Equal(got, want) {
		t.Fatalf("queue after Overtake = %q, want %q", got, want)
	}
	if len(state) != 1 || state[0].Len() != 5 || state[0].Handle().Edge != "a->b/0" {
		t.Fatalf("output state %v: want one channel of 5 records", state)
	}
	recs, ts, err := DecodeChannelRecords(c, state[0].AppendTo(nil), 5)
	if err != nil || !slices.Equal(recs, []int{0, 1, 2, 3, 4}) || !slices.Equal(ts, []int64{100, 101, 102, 103, 104}) {
		t.Fatalf("decoded %v %v %v", recs, ts, err)
	}
	if _, _, err := DecodeChannelRecords(c, state[0].AppendTo(nil), 4); err == nil {
		t.Fatal("a record count that does not match decoded without error")
	}

	w2 := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
	w2.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, [][]int{{7, 8, 9}}, [][]int64{{1, 2, 3}})
	w2.ReplayRecovered()
	w2.Emit(10, NoTimestamp)
	w2.Flush()
	got = nil
	for range 3 {
		env := <-ch.queue
		got = append(got, fmt.Sprint(env.recs, env.ts))
	}
	if want := []string{"[7 8] [1 2]", "[9] [3]", "[10] []"}; !slices.Equal(got, want) {
		t.Fatalf("replayed output state then new records = %q, want %q", got, want)
	}
}

// TestInputRecording: an input keeps copies of what it delivers only while
// recording, replays its restored state first, and hands the recording
// over once.
func TestInputRecording(t *testing.T) {
	c, _ := codec.Of[int]()
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	var seen []int
	in := NewInput(ch, collectOutput{&seen}, nil)
	in.SetChannelState(c, ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, false), []int{-2, -1}, []int64{NoTimestamp, NoTimestamp})
	in.ReplayRecovered()
	send := func(recs ...int) { ch.queue <- envelope[int]{recs: recs} }
	send(0, 1)
	in.Poll()
	in.StartRecording()
	send(2, 3)
	in.Poll()
	in.StopRecording()
	send(4)
	in.Poll()
	d := in.TakeRecording()
	if !slices.Equal(seen, []int{-2, -1, 0, 1, 2, 3, 4}) {
		t.Fatalf("delivered %v", seen)
	}
	if d == nil || d.Len() != 2 {
		t.Fatalf("recording %v: want the 2 records read while recording", d)
	}
	if in.TakeRecording() != nil {
		t.Fatal("the recording was handed over twice")
	}
}

type collectOutput struct{ recs *[]int }

func (o collectOutput) Emit(r int, _ int64) { *o.recs = append(*o.recs, r) }
