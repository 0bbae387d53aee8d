package network

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// largeRecords are records of 2 to 4 buffers of 256 bytes: the output
// channel lends their encodings to the connection (lend) instead of
// copying them into buffers.
func largeRecords(n int) []string {
	recs := make([]string, n)
	for i := range recs {
		recs[i] = fmt.Sprintf("%03d%s", i, strings.Repeat(string(rune('a'+i%26)), 520+i*37%500))
	}
	return recs
}

// TestLendLargeRecords: large records (lent) mixed with small ones (into
// the open buffer) arrive whole and in order, with one credit and two
// sender buffers, so that lending waits for the previous record.
func TestLendLargeRecords(t *testing.T) {
	o := Options{BufferSize: 256, ExclusiveBuffers: 1, FloatingBuffers: -1, SenderBuffers: 2}
	prod := newNode(t, o, true)
	cons := newNode(t, o, false)
	out, err := NewOutput(prod, "l", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "l", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i, r := range largeRecords(30) {
		all = append(all, r, fmt.Sprintf("small %d", i))
	}
	go func() {
		for i := 0; i < len(all); i += 3 {
			if err := out.Write(all[i:min(i+3, len(all))], nil); err != nil {
				t.Error(err)
				return
			}
		}
		out.Emit(Event{Kind: EndOfPartition})
	}()
	var got []string
	deadline := time.After(10 * time.Second)
	for {
		what, recs, _, ev, err := in.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if what == Records {
			got = append(got, recs...)
			continue
		}
		if what == Control && ev.Kind == EndOfPartition {
			break
		}
		select {
		case <-g.Doorbell():
		case <-deadline:
			t.Fatalf("timed out after %d records", len(got))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("received %d records, want the %d written, in order", len(got), len(all))
	}
	out.mu.Lock()
	lent, idle := out.lentOut, len(out.lentIdle)
	out.mu.Unlock()
	if lent != 0 || idle != 1 {
		t.Fatalf("after the end: %d records lent, %d idle; want 0 and 1 (lending was used and every slice came back)", lent, idle)
	}
}

// TestPriorityEventLargeRecords: a priority barrier overtakes queued
// slices of lent records as it does buffers (their partial lengths are
// right), also when emitted from the hook of a write waiting to lend.
func TestPriorityEventLargeRecords(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(fmt.Sprintf("during-write=%v", during), func(t *testing.T) {
			o := Options{BufferSize: 256, ExclusiveBuffers: 2, FloatingBuffers: -1, SenderBuffers: 32}
			if during {
				o.ExclusiveBuffers, o.SenderBuffers = 1, 3
			}
			prod := newNode(t, o, true)
			cons := newNode(t, o, false)
			out, err := NewOutput(prod, "p", codec.String(), nil)
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
			in, err := Subscribe(g, prod.Addr(), "p", codec.String())
			if err != nil {
				t.Fatal(err)
			}
			// Without the hook, the write must end with two credits: one
			// large record (lent at once), then small ones into buffers.
			all := largeRecords(12)
			if !during {
				all = append(all[:1], priorityRecords(10)...)
			}
			wrote := make(chan error, 1)
			go func() {
				err := out.Write(all, nil)
				if err == nil && during {
					err = out.Emit(Event{Kind: EndOfPartition})
				}
				wrote <- err
			}()
			if during {
				for out.Metrics().BuffersOut.Load() < 1 {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond) // the write waits to lend or for a buffer
				wake <- struct{}{}
				if err := <-hooked; err != nil {
					t.Fatal(err)
				}
			} else {
				if err := <-wrote; err != nil {
					t.Fatal(err)
				}
				for out.Metrics().BuffersOut.Load() < 2 {
					time.Sleep(time.Millisecond)
				}
				if overtaken, _, err = out.EmitPriority(Event{Kind: Barrier, ID: 7, Unaligned: true}, true); err != nil {
					t.Fatal(err)
				}
				if err := out.Emit(Event{Kind: EndOfPartition}); err != nil {
					t.Fatal(err)
				}
			}
			checkOvertaken(t, g, in, all, overtaken)
			if during {
				if err := <-wrote; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
