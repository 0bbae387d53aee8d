package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestLiveness runs the scripts under testdata/liveness. Times are
// milliseconds from an epoch. Commands:
//
//	new timeout=MS           bookkeeping with that timeout
//	watch id=A at=MS         start watching A
//	heard id=A at=MS         a heartbeat of A (prints "unknown" if A is not watched)
//	unwatch id=A             A's connection broke
//	expired at=MS            which peers are lost at MS
//
// Every command then prints the peers watched with their last heartbeat
// and the next deadline.
func TestLiveness(t *testing.T) {
	epoch := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	datadriven.Walk(t, "testdata/liveness", func(t *testing.T, path string) {
		var l *Liveness
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var id string
			var ms int
			if td.HasArg("id") {
				td.ScanArgs(t, "id", &id)
			}
			if td.HasArg("at") {
				td.ScanArgs(t, "at", &ms)
			}
			var b strings.Builder
			switch td.Cmd {
			case "new":
				var timeout int
				td.ScanArgs(t, "timeout", &timeout)
				l = NewLiveness(time.Duration(timeout) * time.Millisecond)
			case "watch":
				l.Watch(id, at(ms))
			case "heard":
				if !l.Heard(id, at(ms)) {
					b.WriteString("unknown\n")
				}
			case "unwatch":
				if !l.Unwatch(id) {
					b.WriteString("unknown\n")
				}
			case "expired":
				fmt.Fprintf(&b, "lost: %s\n", strings.Join(l.Expired(at(ms)), ","))
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var ids []string
			for id := range l.last {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				last, _ := l.Last(id)
				fmt.Fprintf(&b, "%s last=%d\n", id, last.Sub(epoch).Milliseconds())
			}
			if next, ok := l.Next(); ok {
				fmt.Fprintf(&b, "next=%d\n", next.Sub(epoch).Milliseconds())
			} else {
				b.WriteString("next=none\n")
			}
			return b.String()
		})
	})
}

// TestSlotPool runs the scripts under testdata/slots. Commands:
//
//	add tm=A slots=N          instance A offers N slots
//	remove tm=A               A is lost (prints the owners that lost slots)
//	allocate owner=J n=N      J asks for N slots (prints them, or the error)
//	allocate-on owner=J tm=A n=N  J asks for N slots of A
//	release owner=J           J frees its slots (prints how many)
//	held owner=J              the slots J holds on each instance
//
// Every command then prints each instance's slots (owner or "-") and the
// totals.
func TestSlotPool(t *testing.T) {
	datadriven.Walk(t, "testdata/slots", func(t *testing.T, path string) {
		p := NewSlotPool()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var b strings.Builder
			switch td.Cmd {
			case "add":
				var tm string
				var n int
				td.ScanArgs(t, "tm", &tm)
				td.ScanArgs(t, "slots", &n)
				if err := p.Add(tm, n); err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
				}
			case "remove":
				var tm string
				td.ScanArgs(t, "tm", &tm)
				fmt.Fprintf(&b, "lost owners: %s\n", strings.Join(p.Remove(tm), ","))
			case "allocate", "allocate-on":
				var owner string
				var n int
				td.ScanArgs(t, "owner", &owner)
				td.ScanArgs(t, "n", &n)
				var ids []SlotID
				var err error
				if td.Cmd == "allocate" {
					ids, err = p.Allocate(owner, n)
				} else {
					var tm string
					td.ScanArgs(t, "tm", &tm)
					ids, err = p.AllocateOn(owner, tm, n)
				}
				if err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
				} else {
					var s []string
					for _, id := range ids {
						s = append(s, id.String())
					}
					fmt.Fprintf(&b, "allocated: %s\n", strings.Join(s, " "))
				}
			case "release":
				var owner string
				td.ScanArgs(t, "owner", &owner)
				fmt.Fprintf(&b, "released: %d\n", p.Release(owner))
			case "held":
				var owner string
				td.ScanArgs(t, "owner", &owner)
				for _, inst := range p.Instances() {
					fmt.Fprintf(&b, "%s holds %d of %s\n", owner, p.Held(inst, owner), inst)
				}
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			for _, inst := range p.Instances() {
				var s []string
				for _, o := range p.tms[inst] {
					if o == "" {
						o = "-"
					}
					s = append(s, o)
				}
				total, free, _ := p.Slots(inst)
				fmt.Fprintf(&b, "%s [%s] total=%d free=%d\n", inst, strings.Join(s, " "), total, free)
			}
			fmt.Fprintf(&b, "total=%d free=%d\n", p.Total(), p.Free())
			return b.String()
		})
	})
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {60, time.Second}} {
		if got := b.Delay(c.n); got != c.want {
			t.Errorf("Delay(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}
