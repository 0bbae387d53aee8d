package runtime

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/network"
)

// TestBridge: records, timestamps and events sent by a RecordWriter into a
// bridged channel reach the consumer's Channel through the network in
// order, a barrier with its options; the exchange closes itself when the
// channel ends.
func TestBridge(t *testing.T) {
	x, err := NewNetExchange(network.Options{BufferSize: 64, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	w := NewRecordWriter([]*Channel[int]{src}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 7, Done: done})
	opts := &BarrierOptions{Dir: "chk-3"}
	go func() {
		for i := range 100 {
			ts := NoTimestamp
			if i%3 == 0 {
				ts = int64(i)
			}
			w.Emit(i, ts)
			if i == 50 {
				w.Broadcast(Event{Kind: Barrier, ID: 3, Timestamp: 9, Options: opts})
				w.Broadcast(Event{Kind: Watermark, Timestamp: 49})
			}
		}
		w.Broadcast(Event{Kind: EndOfPartition})
	}()
	var got []string
	in := NewInput(dst, Output[int](outputFunc(func(v int, ts int64) {
		got = append(got, fmt.Sprint(v, "@", ts))
	})), nil)
	deadline := time.After(10 * time.Second)
	var events []Event
	for len(events) == 0 || events[len(events)-1].Kind != EndOfPartition {
		ev, isEvent, ok := in.Poll()
		switch {
		case ok && isEvent:
			events = append(events, ev)
			got = append(got, ev.Kind.String())
		case !ok:
			select {
			case <-doorbell:
			case <-deadline:
				t.Fatalf("timed out after %v", got)
			}
		}
	}
	var want []string
	for i := range 100 {
		ts := NoTimestamp
		if i%3 == 0 {
			ts = int64(i)
		}
		want = append(want, fmt.Sprint(i, "@", ts))
		if i == 50 {
			want = append(want, "barrier", "watermark")
		}
	}
	want = append(want, "end-of-partition")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	if b := events[0]; b.ID != 3 || b.Timestamp != 9 || b.Options != opts || events[1].Timestamp != 49 {
		t.Fatalf("events %+v: want barrier 3 with its options, then watermark 49", events)
	}
	// The network channel's byte counts, which the builder sums into its
	// tasks' figures: every payload byte sent was received by the end of
	// partition; an in-process channel has none.
	netOut, netIn := src.NetworkMetrics(), dst.NetworkMetrics()
	if netOut == nil || netIn == nil || netOut == netIn {
		t.Fatalf("network metrics of the sending half %p, of the receiving half %p: want two", netOut, netIn)
	}
	if sent, got := netOut.BytesOut.Load(), netIn.BytesIn.Load(); sent <= 0 || sent != got {
		t.Errorf("bytes sent %d, received %d: want the same, above 0", sent, got)
	}
	if m := NewChannel[int](2, doorbell, nil).NetworkMetrics(); m != nil {
		t.Errorf("an in-process channel has network metrics %+v", m)
	}
}
