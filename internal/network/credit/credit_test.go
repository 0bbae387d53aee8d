package credit

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/testutil/purity"
)

// TestPurity fails if a non-test file imports a package that does I/O,
// reads the clock, locks or logs, or starts a goroutine.
func TestPurity(t *testing.T) {
	purity.Check(t, "credit", "let the shell in internal/network do it")
}

func intArg(t *testing.T, td *datadriven.TestData, key string, def int) int {
	t.Helper()
	if !td.HasArg(key) {
		return def
	}
	var s string
	td.ScanArgs(t, key, &s)
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %s=%q is not a number", td.Pos, key, s)
	}
	return n
}

// TestGate runs testdata/gate/*. Commands:
//
//	new exclusive=n floating=n
//	add ch=n
//	buffer ch=n backlog=n
//	release ch=n [times=n]
//	remove ch=n
//
// The output lists the grants (add-credit frames to send), then every
// channel's buffers and the pool. Regenerate with -rewrite.
func TestGate(t *testing.T) {
	datadriven.Walk(t, "testdata/gate", func(t *testing.T, path string) {
		var g *Gate
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "new" && g == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			var b strings.Builder
			var grants []Grant
			var err error
			ch := intArg(t, td, "ch", 0)
			switch td.Cmd {
			case "new":
				o := Options{ExclusiveBuffers: intArg(t, td, "exclusive", 0), FloatingBuffers: intArg(t, td, "floating", 0), BufferSize: 1024}
				g, err = NewGate(*o.EnsureDefaults())
				if err != nil {
					g = nil
					return "error: " + err.Error()
				}
			case "add":
				var c int
				c, err = g.AddChannel(ch)
				if err == nil {
					fmt.Fprintf(&b, "initial credit=%d\n", c)
				}
			case "buffer":
				grants, err = g.OnBuffer(ch, intArg(t, td, "backlog", 0))
			case "release":
				for range intArg(t, td, "times", 1) {
					var gs []Grant
					gs, err = g.Release(ch)
					if err != nil {
						break
					}
					grants = append(grants, gs...)
				}
			case "remove":
				grants, err = g.RemoveChannel(ch)
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			}
			for _, gr := range grants {
				b.WriteString(gr.String() + "\n")
			}
			ids := make([]int, 0, len(g.chans))
			for id := range g.chans {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				s, _ := g.Channel(id)
				fmt.Fprintf(&b, "ch%d: free=%d in-use=%d floating=%d backlog=%d\n", id, s.Free, s.InUse, s.Floating, s.Backlog)
			}
			fmt.Fprintf(&b, "pool=%d waiting=%v", g.Pool(), g.Waiting())
			return b.String()
		})
	})
}

// TestOutbox runs testdata/outbox/*. Commands:
//
//	push kind=(data|event|blocking|priority) [n=count]
//	prioritize item=n   converts queued event #n to a priority event
//	credit n=n
//	resume
//	pop [max=n]   pops while available, at most max items (default all)
//	drain
func TestOutbox(t *testing.T) {
	datadriven.Walk(t, "testdata/outbox", func(t *testing.T, path string) {
		var o Outbox[int]
		seq := 0
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var b strings.Builder
			var err error
			switch td.Cmd {
			case "push":
				var kind string
				td.ScanArgs(t, "kind", &kind)
				k := map[string]Kind{"data": Data, "event": Event, "blocking": BlockingEvent, "priority": PriorityEvent}[kind]
				if k == 0 {
					t.Fatalf("%s: unknown kind %q", td.Pos, kind)
				}
				for range intArg(t, td, "n", 1) {
					seq++
					if k == PriorityEvent {
						o.PushPriority(seq, func(k Kind, v int) { fmt.Fprintf(&b, "overtook #%d %s\n", v, k) })
						continue
					}
					o.Push(k, seq)
				}
			case "prioritize":
				n := intArg(t, td, "item", 0)
				ok := o.Prioritize(func(v int) bool { return v == n }, n, func(k Kind, v int) { fmt.Fprintf(&b, "overtook #%d %s\n", v, k) })
				if !ok {
					fmt.Fprintf(&b, "#%d is not queued\n", n)
				}
			case "credit":
				err = o.AddCredit(intArg(t, td, "n", 0))
			case "resume":
				err = o.Resume()
			case "pop":
				limit := intArg(t, td, "max", -1)
				for limit != 0 && o.Available() {
					k, v, backlog := o.Pop()
					fmt.Fprintf(&b, "sent #%d %s backlog=%d\n", v, k, backlog)
					limit--
				}
			case "drain":
				o.Drain(func(k Kind, v int) { fmt.Fprintf(&b, "drained #%d %s\n", v, k) })
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			}
			fmt.Fprintf(&b, "queued=%d backlog=%d credit=%d blocked=%t available=%t", o.Queued(), o.Backlog(), o.Credit(), o.Blocked(), o.Available())
			if o.Priority() > 0 {
				fmt.Fprintf(&b, " priority=%d", o.Priority())
			}
			return b.String()
		})
	})
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Options
		want string // substring of the error; "" for valid
	}{
		{"defaults", Options{}, ""},
		{"no floating", Options{FloatingBuffers: -1}, ""},
		{"negative exclusive", Options{ExclusiveBuffers: -1}, "ExclusiveBuffers is -1"},
		{"floating below -1", Options{FloatingBuffers: -2}, "FloatingBuffers is -2"},
		{"tiny buffers", Options{BufferSize: 8}, "BufferSize is 8, want 64 to 16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			err := o.EnsureDefaults().Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidOptions)):
				t.Fatalf("Validate = %v, want an ErrInvalidOptions naming %q", err, tc.want)
			}
		})
	}
	o := Options{}
	o.EnsureDefaults()
	if o.ExclusiveBuffers != 2 || o.FloatingBuffers != 8 || o.BufferSize != 32768 {
		t.Fatalf("defaults = %+v, want 2 exclusive, 8 floating, 32 KiB", o)
	}
}
