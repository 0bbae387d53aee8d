package network

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// priorityRecords are records of about 100 bytes, so that they span the
// tests' 256-byte buffers.
func priorityRecords(n int) []string {
	recs := make([]string, n)
	for i := range recs {
		recs[i] = fmt.Sprintf("%03d%s", i, strings.Repeat(".", 90+i%7))
	}
	return recs
}

// checkOvertaken drains in after a priority barrier went out and checks the
// rule of EmitPriority: the records after the barrier are exactly those it
// overtook, but a record the receiver began before the barrier (Partial),
// which is the receiver's; nothing is lost or repeated.
func checkOvertaken(t *testing.T, g *Gate, in *InputChannel[string], all, overtaken []string) {
	t.Helper()
	var before, after []string
	var barrier *Event
	partial := false
	deadline := time.After(10 * time.Second)
	for {
		what, recs, _, ev, err := in.Poll()
		if err != nil {
			t.Fatal(err)
		}
		switch what {
		case Records:
			if barrier == nil {
				before = append(before, recs...)
			} else {
				after = append(after, recs...)
			}
			continue
		case Control:
			switch ev.Kind {
			case Barrier:
				e := ev
				barrier = &e
				partial = in.Partial()
			case EndOfPartition:
				if barrier == nil || !barrier.Priority || !barrier.Unaligned || barrier.ID != 7 {
					t.Fatalf("barrier %+v, want unaligned barrier 7 received as a priority event", barrier)
				}
				if got := append(slices.Clone(before), after...); !slices.Equal(got, all) {
					t.Fatalf("received %d records, want the %d written in order", len(got), len(all))
				}
				want := after
				if partial {
					want = after[1:]
				}
				if !slices.Equal(overtaken, want) {
					t.Fatalf("overtaken %d records (%.8v), want the %d after the barrier but a partial one (partial=%t, %.8v)", len(overtaken), overtaken, len(want), partial, want)
				}
				if len(overtaken) == 0 {
					t.Fatal("the barrier overtook nothing: the test proves nothing")
				}
				t.Logf("%d records before the barrier, %d after (%d overtaken, partial=%t)", len(before), len(after), len(overtaken), partial)
				return
			}
			continue
		}
		select {
		case <-g.Doorbell():
		case <-deadline:
			t.Fatalf("timed out: %d before, %d after", len(before), len(after))
		}
	}
}

// TestPriorityEvent: a priority barrier overtakes the buffers its sender
// had not sent (no credit for them), goes without credit, and reports the
// records it overtook: those of the buffers not sent, but the end of a
// record the receiver began.
func TestPriorityEvent(t *testing.T) {
	o := Options{BufferSize: 256, ExclusiveBuffers: 2, FloatingBuffers: -1, SenderBuffers: 32}
	prod := newNode(t, o, true)
	cons := newNode(t, o, false)
	out, err := NewOutput(prod, "p", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "p", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	all := priorityRecords(40)
	if err := out.Write(all, nil); err != nil {
		t.Fatal(err)
	}
	for out.Metrics().BuffersOut.Load() < 2 {
		time.Sleep(time.Millisecond) // the two credits are spent
	}
	overtaken, ts, err := out.EmitPriority(Event{Kind: Barrier, ID: 7, Unaligned: true}, true)
	if err != nil || ts != nil {
		t.Fatalf("EmitPriority: %v (ts %v)", err, ts)
	}
	if err := out.Emit(Event{Kind: EndOfPartition}); err != nil {
		t.Fatal(err)
	}
	checkOvertaken(t, g, in, all, overtaken)
}

// TestPriorityEventDuringWrite: a write waiting for a free sender buffer
// runs the priority hook; the barrier it emits overtakes the rest of the
// batch being written too.
func TestPriorityEventDuringWrite(t *testing.T) {
	o := Options{BufferSize: 256, ExclusiveBuffers: 1, FloatingBuffers: -1, SenderBuffers: 3}
	prod := newNode(t, o, true)
	cons := newNode(t, o, false)
	out, err := NewOutput(prod, "w", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	var overtaken []string
	hooked := make(chan error, 1)
	out.SetPriorityHook(wake, func() {
		var err error
		overtaken, _, err = out.EmitPriority(Event{Kind: Barrier, ID: 7, Unaligned: true}, true)
		hooked <- err
	})
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "w", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	all := priorityRecords(30)
	wrote := make(chan error, 1)
	go func() {
		err := out.Write(all, nil)
		if err == nil {
			err = out.Emit(Event{Kind: EndOfPartition})
		}
		wrote <- err
	}()
	for out.Metrics().BackPressuredNanos.Load() == 0 && out.Metrics().BuffersOut.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the write waits for a buffer
	wake <- struct{}{}
	if err := <-hooked; err != nil {
		t.Fatal(err)
	}
	checkOvertaken(t, g, in, all, overtaken)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestPriorityEventFields: the unaligned flag, the aligned timeout and
// the announcement travel; a priority event with nothing queued goes at
// once; end of partition is never a priority event.
func TestPriorityEventFields(t *testing.T) {
	prod := newNode(t, Options{}, true)
	cons := newNode(t, Options{}, false)
	out, err := NewOutput(prod, "f", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "f", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := out.EmitPriority(Event{Kind: EndOfPartition}, false); err == nil {
		t.Fatal("end of partition as a priority event: no error")
	}
	ann := Event{Kind: BarrierAnnouncement, ID: 3, Timestamp: 1234, AlignedTimeoutMs: 50, Payload: []byte("opts")}
	if _, _, err := out.EmitPriority(ann, false); err != nil {
		t.Fatal(err)
	}
	if err := out.Emit(Event{Kind: Barrier, ID: 3, Timestamp: 1234, AlignedTimeoutMs: 50, Priority: true}); err != nil {
		t.Fatal(err)
	}
	out.Emit(Event{Kind: EndOfPartition})
	got, err := drain(t, g, in, ident, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := "[barrier-announcement(3) barrier(3) end-of-partition]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	a, b := *got[0].ev, *got[1].ev
	if !a.Priority || a.AlignedTimeoutMs != 50 || a.Timestamp != 1234 || string(a.Payload) != "opts" {
		t.Fatalf("announcement arrived as %+v", a)
	}
	if b.Priority || b.AlignedTimeoutMs != 50 || b.Unaligned {
		t.Fatalf("barrier sent with Emit arrived as %+v: want no priority (Emit clears it), the timeout", b)
	}
	if in.PriorityQueued() != 0 {
		t.Fatalf("PriorityQueued = %d after polling everything", in.PriorityQueued())
	}
}
