package adapt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestChooser runs the scripts in testdata: batches of given sizes, whose
// timed runs take a given time per record with each flavor. Each command
// prints what the batches ran (per flavor: batches, of which timed) and
// the Chooser's state after them. Regenerate with
// `go test ./internal/adapt -run TestChooser -rewrite`.
//
//	new [trials=n] [exploit=n] [max-exploit=n] [min-records=n]
//	run [batches=n] [records=n] ns0=t ns1=t   t: nanoseconds per record
func TestChooser(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Chooser
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			intArg := func(key string, def int) int {
				if !td.HasArg(key) {
					return def
				}
				var v int
				td.ScanArgs(t, key, &v)
				return v
			}
			switch td.Cmd {
			case "new":
				opts := Options{
					Trials:     intArg("trials", 0),
					Exploit:    intArg("exploit", 0),
					MaxExploit: intArg("max-exploit", 0),
					MinRecords: intArg("min-records", 0),
				}
				probe := opts
				probe.EnsureDefaults()
				if err := probe.Validate(); err != nil {
					return "error: " + err.Error()
				}
				c = New(opts)
				return c.String()
			case "run":
				if c == nil {
					t.Fatalf("%s: run `new` first", td.Pos)
				}
				batches, records := intArg("batches", 1), intArg("records", 1024)
				perRecord := [2]int{intArg("ns0", 1), intArg("ns1", 1)}
				var ran, timed [2]int
				for range batches {
					f, tm := c.Next(records)
					ran[f]++
					if tm {
						timed[f]++
						c.Observe(f, records, int64(perRecord[f]*records))
					}
				}
				var b strings.Builder
				for f := range 2 {
					fmt.Fprintf(&b, "flavor %d: %d batches, %d timed\n", f, ran[f], timed[f])
				}
				b.WriteString(c.String())
				return b.String()
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
				return ""
			}
		})
	})
}

// TestChooserIgnoresBadReports: reports out of turn, of an unknown flavor
// or of an empty batch change nothing.
func TestChooserIgnoresBadReports(t *testing.T) {
	c := New(Options{Trials: 1, Exploit: 4})
	before := c.String()
	c.Observe(2, 100, 100)
	c.Observe(0, 0, 100)
	if got := c.String(); got != before {
		t.Fatalf("state changed by bad reports: %s, was %s", got, before)
	}
	for f := range Flavor(2) {
		if g, timed := c.Next(100); g != f || !timed {
			t.Fatalf("trial %d: Next = %d, %v", f, g, timed)
		}
		c.Observe(f, 100, int64(100*(2-int(f))))
	}
	after := c.String()
	c.Observe(0, 100, 1) // no trial is under way
	if got := c.String(); got != after || c.Current() != 1 {
		t.Fatalf("after the exploration: %s (current %d), want %s with flavor 1", got, c.Current(), after)
	}
}

// TestFixed: a fixed chooser answers its flavor, untimed, for ever.
func TestFixed(t *testing.T) {
	for f := range Flavor(2) {
		c := Fixed(f)
		for i := range 100000 {
			if g, timed := c.Next(1024); g != f || timed {
				t.Fatalf("batch %d: Next = %d, %v; want %d untimed", i, g, timed, f)
			}
		}
	}
}
