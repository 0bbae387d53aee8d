package checkpoint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestAligner runs the scripts in testdata/aligner. Each command is one
// control event read from an input channel; the expected output is the
// actions returned, one per line, then the blocked channels. Regenerate with
// `go test ./internal/checkpoint -run TestAligner -rewrite`.
//
//	new mode=(exactly-once | at-least-once) channels=n
//	barrier ch=n id=n now=ms [unaligned] [trigger=ms timeout=ms]
//	announce ch=n id=n now=ms trigger=ms timeout=ms
//	tick now=ms
//	cancel ch=n id=n
//	eop ch=n now=ms
//
// After the blocked channels come the recording ones (whose data is input
// channel state of an unaligned snapshot) and the time of the next aligned
// timeout, when there are any.
func TestAligner(t *testing.T) {
	datadriven.Walk(t, "testdata/aligner", func(t *testing.T, path string) {
		var al *Aligner
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			a := scriptArgs{t: t, td: td}
			if td.Cmd != "new" && al == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			var acts []Action
			switch td.Cmd {
			case "new":
				mode := ExactlyOnce
				switch m := a.str("mode"); m {
				case "exactly-once":
				case "at-least-once":
					mode = AtLeastOnce
				default:
					t.Fatalf("%s: unknown mode %q", td.Pos, m)
				}
				var err error
				al, err = NewAligner(mode, int(a.int64("channels", 0)))
				if err != nil {
					al = nil
					return "error: " + err.Error()
				}
				return "ok"
			case "barrier":
				if a.has("unaligned") || a.has("timeout") {
					acts = al.OnBarrierInfo(int(a.int64("ch", 0)), a.barrier(), a.now())
				} else {
					acts = al.OnBarrier(int(a.int64("ch", 0)), a.int64("id", 0), a.now())
				}
			case "announce":
				acts = al.OnAnnounce(int(a.int64("ch", 0)), a.barrier(), a.now())
			case "tick":
				acts = al.Tick(a.now())
			case "cancel":
				acts = al.OnCancel(int(a.int64("ch", 0)), a.int64("id", 0))
			case "eop":
				acts = al.OnEndOfPartition(int(a.int64("ch", 0)), a.now())
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var b strings.Builder
			for _, act := range acts {
				b.WriteString(act.String())
				b.WriteString("\n")
			}
			var blocked, finished, recording []string
			for ch := range al.NumChannels() {
				if al.Blocked(ch) {
					blocked = append(blocked, fmt.Sprint(ch))
				}
				if al.Recording(ch) {
					recording = append(recording, fmt.Sprint(ch))
				}
				if al.Finished(ch) {
					finished = append(finished, fmt.Sprint(ch))
				}
			}
			fmt.Fprintf(&b, "blocked=[%s]", strings.Join(blocked, " "))
			if len(finished) > 0 {
				fmt.Fprintf(&b, " finished=[%s]", strings.Join(finished, " "))
			}
			if len(recording) > 0 {
				fmt.Fprintf(&b, " recording=[%s]", strings.Join(recording, " "))
			}
			if at, ok := al.NextTimeout(); ok {
				fmt.Fprintf(&b, " timeout-at=%d", at)
			}
			if id, ok := al.Aligning(); ok {
				fmt.Fprintf(&b, " aligning=%d", id)
			}
			return b.String()
		})
	})
}

// barrier reads a barrier's or announcement's arguments.
func (a scriptArgs) barrier() BarrierInfo {
	return BarrierInfo{ID: a.int64("id", 0), TriggeredAt: a.int64("trigger", 0),
		Unaligned: a.has("unaligned"), AlignedTimeoutMs: a.int64("timeout", 0)}
}

func TestNewAlignerRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		mode     AlignmentMode
		channels int
	}{
		{"no channels", ExactlyOnce, 0},
		{"negative channels", AtLeastOnce, -1},
		{"unknown mode", AlignmentMode(9), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewAligner(tt.mode, tt.channels); err == nil {
				t.Fatalf("NewAligner(%v, %d) = nil error, want one", tt.mode, tt.channels)
			}
		})
	}
}

// TestAlignerTracksBoundedCheckpoints checks that an at-least-once aligner
// whose channels drift far apart drops the oldest checkpoint in flight rather
// than growing without bound, even when the newcomer is the oldest.
func TestAlignerTracksBoundedCheckpoints(t *testing.T) {
	al, err := NewAligner(AtLeastOnce, 2)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(2); id <= maxTrackedAlignments+1; id++ {
		if acts := al.OnBarrier(0, id, id); len(acts) != 0 {
			t.Fatalf("barrier %d: unexpected actions %v", id, acts)
		}
	}
	// Tracking is full (2..65): barrier 1 is the oldest and dropped at once.
	got := al.OnBarrier(1, 1, 100)
	want := []Action{AbortAlignment{ID: 1, Reason: AlignSubsumed}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("barrier 1 on a full tracker: got %v, want %v", got, want)
	}
	// A newer one drops the oldest tracked, 2.
	got = al.OnBarrier(0, maxTrackedAlignments+2, 101)
	want = []Action{AbortAlignment{ID: 2, Reason: AlignSubsumed}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("barrier %d on a full tracker: got %v, want %v", maxTrackedAlignments+2, got, want)
	}
	// Completing 3 on the lagging channel still works.
	got = al.OnBarrier(1, 3, 102)
	want = []Action{Snapshot{ID: 3, FirstBarrierAt: 3, AlignmentMs: 99}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("barrier 3: got %v, want %v", got, want)
	}
}
