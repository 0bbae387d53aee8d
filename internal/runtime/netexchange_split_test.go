package runtime

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/storage"
)

// listeningNode is a node on 127.0.0.1, closed at the end of the test.
func listeningNode(t *testing.T) *network.Node {
	t.Helper()
	n, err := network.New(network.Options{BufferSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// pollAll reads in until its end of partition, with events by name.
func pollAll(t *testing.T, in *Input[int], doorbell chan struct{}, got *[]string) []Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var events []Event
	for len(events) == 0 || events[len(events)-1].Kind != EndOfPartition {
		ev, isEvent, ok := in.Poll()
		switch {
		case ok && isEvent:
			events = append(events, ev)
			*got = append(*got, ev.Kind.String())
		case !ok:
			select {
			case <-doorbell:
			case <-deadline:
				t.Fatalf("timed out after %v", *got)
			}
		}
	}
	return events
}

// TestSendReceiveTwoExchanges: the two halves of a channel on two nodes
// (as on two workers): records, a watermark, a barrier and the end of
// partition arrive in order; the barrier's options are rebuilt from its
// payload, the store opened from its URL (the consumer's exchange does not
// have the producer's table), kind and directory as sent. The producer
// ended normally, so its queued records are sent even though the
// attempt's stop closed before the consumer read them.
func TestSendReceiveTwoExchanges(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	storage.ForgetMemory("exchange-split")
	defer storage.ForgetMemory("exchange-split")
	store, err := storage.Open("memory://exchange-split")
	if err != nil {
		t.Fatal(err)
	}
	prod := NewExchange(listeningNode(t), nil, logger)
	cons := NewExchange(listeningNode(t), nil, logger)
	done := make(chan struct{})
	src, err := Send(prod, "job/attempt-1/edge-0/0->0", codec.Int(), 2, done)
	if err != nil {
		t.Fatal(err)
	}
	doorbell := make(chan struct{}, 1)
	dst := NewChannel[int](2, doorbell, nil)
	consDone := make(chan struct{}) // the consumer's worker still runs
	defer close(consDone)
	if err := Receive(cons, dst, prod.Addr(), "job/attempt-1/edge-0/0->0", codec.Int(), consDone); err != nil {
		t.Fatal(err)
	}
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 5, Done: done})
	opts := &BarrierOptions{Kind: checkpoint.KindSavepoint, Store: store, Dir: "savepoints/sp-4"}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range 40 {
			w.Emit(i, int64(i))
			if i == 20 {
				w.Broadcast(Event{Kind: Watermark, Timestamp: 19})
				w.Broadcast(Event{Kind: Barrier, ID: 4, Timestamp: 7, Options: opts})
			}
		}
		w.Broadcast(Event{Kind: EndOfPartition})
	}()
	prod.Start()
	<-sent
	close(done) // the attempt stops: what the producer queued still goes
	cons.Start()
	var got []string
	in := NewInput(dst, Output[int](outputFunc(func(v int, ts int64) { got = append(got, fmt.Sprint(v, "@", ts)) })), nil)
	events := pollAll(t, in, doorbell, &got)
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprint(i, "@", i))
		if i == 20 {
			want = append(want, "watermark", "barrier")
		}
	}
	want = append(want, "end-of-partition")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	b := events[1]
	if b.ID != 4 || b.Timestamp != 7 || b.Options == nil || b.Options == opts {
		t.Fatalf("barrier %+v: want id 4 at 7 with options rebuilt from the payload", b)
	}
	if b.Options.Kind != checkpoint.KindSavepoint || b.Options.Dir != "savepoints/sp-4" || b.Options.Store == nil || b.Options.Store.URL() != store.URL() {
		t.Fatalf("barrier options %+v, want those sent (store %s)", *b.Options, store.URL())
	}
}

// TestSendAbortsWithoutEndOfPartition: when the attempt stops before the
// producer queued its end of partition, the sending pump gives up (the
// consumer's channel fails) and the exchanges end their goroutines.
func TestSendAbortsWithoutEndOfPartition(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	prod := NewExchange(listeningNode(t), nil, logger)
	cons := NewExchange(listeningNode(t), nil, logger)
	done := make(chan struct{})
	src, err := Send(prod, "c", codec.Int(), 2, done)
	if err != nil {
		t.Fatal(err)
	}
	dst := NewChannel[int](2, make(chan struct{}, 1), nil)
	if err := Receive(cons, dst, prod.Addr(), "c", codec.Int(), done); err != nil {
		t.Fatal(err)
	}
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 5, Done: done})
	for i := range 7 {
		w.Emit(i, NoTimestamp)
	}
	w.Flush()
	prod.Start()
	cons.Start()
	close(done)
	finished := make(chan struct{})
	go func() {
		prod.wg.Wait()
		cons.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the pumps did not end after the stop")
	}
}

func TestBarrierOptionsCodec(t *testing.T) {
	for _, b := range [][]byte{nil, {9, 1}, {1, 1, 5, 'a'}, {1, 1, 0, 0, 1}} {
		if _, _, _, err := decodeBarrierOptions(b); err == nil {
			t.Errorf("decode %v: no error", b)
		}
	}
	p, err := encodeBarrierOptions(&BarrierOptions{Kind: checkpoint.KindCheckpoint, Dir: "chk-1"})
	if err != nil {
		t.Fatal(err)
	}
	if k, url, dir, err := decodeBarrierOptions(p); err != nil || k != checkpoint.KindCheckpoint || url != "" || dir != "chk-1" {
		t.Fatalf("round trip: %v %q %q %v", k, url, dir, err)
	}
	long := make([]byte, network.MaxEventPayload)
	if _, err := encodeBarrierOptions(&BarrierOptions{Dir: string(long)}); err == nil {
		t.Fatal("a directory longer than a payload was encoded")
	}
}
