package runtime

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
)

// TestBridgeUnalignedOvertakes: under backpressure an unaligned barrier
// sent into a bridged channel overtakes every queue on the way, the
// writer's, the network sender's (a priority event, without credit, while
// the pump waits for a buffer) and the receiver's (received, not yet
// consumed), and the records it overtook are exactly the producer's output
// state followed by the consumer's input state: with those the consumer
// sees the stream of records emitted before the barrier whole, once.
func TestBridgeUnalignedOvertakes(t *testing.T) {
	x, err := NewNetExchange(network.Options{BufferSize: 64, ExclusiveBuffers: 1, FloatingBuffers: -1, SenderBuffers: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	doorbell := make(chan struct{}, 1)
	dst := NewChannel[int](2, doorbell, nil)
	src, err := Bridge(x, dst, codec.Int(), done)
	if err != nil {
		t.Fatal(err)
	}
	x.Start()
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 4, Done: done})
	w.SetChannelState(codec.Int(), []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
	const before, after = 1000, 50
	outState := make(chan []ChannelData, 1)
	go func() {
		for i := range before {
			w.Emit(i, NoTimestamp)
		}
		outState <- w.Overtake(Event{Kind: Barrier, ID: 1, Unaligned: true})
		for i := range after {
			w.Emit(before+i, NoTimestamp)
		}
		w.Broadcast(Event{Kind: EndOfPartition})
	}()
	got, barrierAt, inState := readBridged(t, dst, doorbell, "")
	if barrierAt < 0 || !slices.Equal(got, seq(before+after)) {
		i := 0
		for i < len(got) && got[i] == i {
			i++
		}
		t.Fatalf("consumer saw %d records (barrier at %d), want %d in order; first wrong at %d: %v", len(got), barrierAt, before+after, i, got[max(0, i-5):min(len(got), i+60)])
	}
	outs := <-outState
	if len(outs) != 1 {
		t.Fatalf("output state of %d channels, want 1", len(outs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resolved, err := resolveChannelData(ctx, outs)
	if err != nil {
		t.Fatal(err)
	}
	net := 0
	if recs, _ := outs[0].(*pendingOutput[int]).slot.recs.([]int); recs != nil {
		net = len(recs)
	}
	var state []int
	if inState != nil {
		state = append(state, recsOf(inState)...)
	}
	nIn := len(state)
	for _, d := range resolved {
		state = append(state, recsOf(d)...)
	}
	// The barrier came after got[:barrierAt]; everything else emitted
	// before it is channel state, input state first.
	if want := seq(before)[barrierAt:]; !slices.Equal(state, want) {
		t.Fatalf("channel state %v\nwant the records after the barrier's place %v", state, want)
	}
	t.Logf("barrier after %d of %d records: input state %d records, output state %d (%d of them overtaken in the network sender)", barrierAt, before, nIn, len(state)-nIn, net)
	if nIn == 0 || net == 0 {
		t.Fatalf("input state %d, network output state %d records: the barrier did not overtake both network ends", nIn, net)
	}
}

// recsOf decodes the records of d as the checkpoint would store them.
func recsOf(d ChannelData) []int {
	recs, _, err := DecodeChannelRecords(codec.Int(), d.AppendTo(nil), int64(d.Len()), !d.Handle().NoTimestamps)
	if err != nil {
		panic(err)
	}
	return recs
}

// TestBridgeTimedBarrierConvertedInNetwork: an aligned barrier with a
// timeout that its pump moved into the network's queue and that is still
// queued there at the deadline (no credit) is converted there: it goes
// out as an unaligned priority barrier, and the records it overtook are
// the producer's output state of the checkpoint (TimedBarrier.Converted),
// followed by the consumer's input state: exactly the records emitted
// before it and consumed after it.
func TestBridgeTimedBarrierConvertedInNetwork(t *testing.T) {
	x, err := NewNetExchange(network.Options{BufferSize: 64, ExclusiveBuffers: 1, FloatingBuffers: -1, SenderBuffers: 64,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	doorbell := make(chan struct{}, 1)
	dst := NewChannel[int](2, doorbell, nil)
	src, err := Bridge(x, dst, codec.Int(), done)
	if err != nil {
		t.Fatal(err)
	}
	x.Start()
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 4, Done: done})
	w.SetChannelState(codec.Int(), []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
	const before, after = 600, 50
	timed := make(chan *TimedBarrier, 1)
	go func() {
		for i := range before {
			w.Emit(i, NoTimestamp)
		}
		w.Flush()
		time.Sleep(10 * time.Millisecond) // the pump moves everything into the network's queue
		now := time.Now()
		timed <- w.SendTimed(Event{Kind: Barrier, ID: 1, Timestamp: now.UnixMilli(), AlignedTimeoutMs: 30}, now.Add(30*time.Millisecond))
		for i := range after {
			w.Emit(before+i, NoTimestamp)
		}
		for w.ConvertDue() {
			time.Sleep(time.Millisecond)
		}
		w.Broadcast(Event{Kind: EndOfPartition})
	}()
	got, barrierAt, inState := readBridged(t, dst, doorbell, ": not converted")
	if barrierAt < 0 || !slices.Equal(got, seq(before+after)) {
		t.Fatalf("consumer saw %d records (barrier at %d), want %d in order", len(got), barrierAt, before+after)
	}
	tb := <-timed
	select {
	case <-tb.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the timed barrier was neither taken nor converted")
	}
	outs, converted := tb.Converted()
	if !converted || len(outs) != 1 {
		t.Fatalf("Converted = %d channels, %v; want the network's conversion", len(outs), converted)
	}
	if _, ok := outs[0].(*channelData[int]); !ok {
		t.Fatalf("output state %T: converted in the writer's queue, not in the network's", outs[0])
	}
	var state []int
	if inState != nil {
		state = append(state, recsOf(inState)...)
	}
	nIn := len(state)
	state = append(state, recsOf(outs[0])...)
	if want := seq(before)[barrierAt:]; !slices.Equal(state, want) {
		t.Fatalf("channel state %v\nwant the records after the barrier's place %v", state, want)
	}
	t.Logf("barrier after %d of %d records: input state %d, output state %d (converted in the network's queue)", barrierAt, before, nIn, len(state)-nIn)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestBridgeTimedBarrierConvertedAtReceiver: an aligned barrier with a
// timeout that went on the wire (the producer can no longer convert it)
// and waits at the receiver, behind records its slow consumer has not
// read, is converted there at its deadline: the consumer reads it
// unaligned ahead of them, and they (received, not yet consumed) are its
// input state, with nothing as the producer's output state. Without the
// receiver's conversion it arrives aligned, after all 600 records.
func TestBridgeTimedBarrierConvertedAtReceiver(t *testing.T) {
	x, err := NewNetExchange(network.Options{BufferSize: 64, ExclusiveBuffers: 2, FloatingBuffers: 256, SenderBuffers: 64,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	doorbell := make(chan struct{}, 1)
	dst := NewChannel[int](2, doorbell, nil)
	src, err := Bridge(x, dst, codec.Int(), done)
	if err != nil {
		t.Fatal(err)
	}
	x.Start()
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 4, Done: done})
	w.SetChannelState(codec.Int(), []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
	const before, after = 600, 50
	timed := make(chan *TimedBarrier, 1)
	go func() {
		for i := range before {
			w.Emit(i, NoTimestamp)
		}
		w.Flush()
		time.Sleep(20 * time.Millisecond) // everything crosses to the receiver
		now := time.Now()
		w.Announce(Event{Kind: BarrierAnnouncement, ID: 1, Timestamp: now.UnixMilli(), AlignedTimeoutMs: 30})
		timed <- w.SendTimed(Event{Kind: Barrier, ID: 1, Timestamp: now.UnixMilli(), AlignedTimeoutMs: 30}, now.Add(30*time.Millisecond))
		for i := range after {
			w.Emit(before+i, NoTimestamp)
		}
		for w.ConvertDue() {
			time.Sleep(time.Millisecond)
		}
		w.Broadcast(Event{Kind: EndOfPartition})
	}()
	got, barrierAt, inState := readBridged(t, dst, doorbell, ": not converted at the receiver")
	if barrierAt < 0 || !slices.Equal(got, seq(before+after)) {
		t.Fatalf("consumer saw %d records (barrier at %d), want %d in order", len(got), barrierAt, before+after)
	}
	tb := <-timed
	select {
	case <-tb.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the timed barrier was neither taken nor converted at the producer")
	}
	if outs, converted := tb.Converted(); converted || len(outs) != 0 {
		t.Fatalf("Converted = %d channels, %v: the producer converted it, not the receiver", len(outs), converted)
	}
	var state []int
	if inState != nil {
		state = recsOf(inState)
	}
	if want := seq(before)[barrierAt:]; len(state) == 0 || !slices.Equal(state, want) {
		t.Fatalf("input state %v\nwant the records after the barrier's place %v", state, want)
	}
	t.Logf("barrier after %d of %d records: input state %d records (converted at the receiver)", barrierAt, before, len(state))
}

// readBridged reads dst as a slow consumer (2 ms a batch until the
// barrier, so that the queues stay full) up to the end of partition: the
// records in order, where the barrier came (-1: none) and the input state
// it closed. An aligned barrier fails t, what saying why that is wrong.
func readBridged(t *testing.T, dst *Channel[int], doorbell chan struct{}, what string) (got []int, barrierAt int, inState ChannelData) {
	t.Helper()
	in := NewInput(dst, Output[int](outputFunc(func(v int, _ int64) { got = append(got, v) })), nil)
	in.SetChannelState(codec.Int(), ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, false), nil, nil)
	deadline := time.After(20 * time.Second)
	barrierAt = -1
	for {
		ev, isEvent, ok := in.Poll()
		if ok && isEvent {
			if ev.Kind == EndOfPartition {
				return got, barrierAt, inState
			}
			if ev.Kind == Barrier {
				if !ev.Unaligned {
					t.Fatalf("barrier %+v arrived aligned after %d records%s", ev, len(got), what)
				}
				barrierAt = len(got)
				inState = in.TakeRecording(1)
			}
			continue
		}
		if ok && barrierAt < 0 {
			time.Sleep(2 * time.Millisecond)
		}
		if !ok {
			select {
			case <-doorbell:
			case <-deadline:
				t.Fatalf("timed out after %d records (barrier at %d)", len(got), barrierAt)
			}
		}
	}
}
