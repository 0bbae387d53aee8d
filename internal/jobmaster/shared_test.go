package jobmaster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestSharedRegistry runs the scripts in testdata/shared against the
// shared-state registry. Commands:
//
//	ack id=n task=t [base=n] files=a,b     an acknowledgement of pending n
//	complete id=n [files=a,b]              n completed (files: recovered)
//	discard id=n                           retained n discarded
//	abort id=n                             pending n aborted
//	collect                                files that can go now
//	attempt floor=n                        a new attempt, restored from n
//	pin files=a,b
//	unreferenced files=a,b                 between attempts: what shared/ holds
//	gone files=a,b                         which of them were returned for deletion
//
// Every command prints what to delete (if anything) and the files retained
// checkpoints list.
func TestSharedRegistry(t *testing.T) {
	datadriven.Walk(t, "testdata/shared", func(t *testing.T, path string) {
		r := newSharedRegistry()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var id, floor, base int64
			var task, files string
			hasBase := td.HasArg("base")
			for _, a := range td.CmdArgs {
				switch a.Key {
				case "id":
					td.ScanArgs(t, "id", &id)
				case "floor":
					td.ScanArgs(t, "floor", &floor)
				case "base":
					td.ScanArgs(t, "base", &base)
				case "task":
					td.ScanArgs(t, "task", &task)
				case "files":
					td.ScanArgs(t, "files", &files)
				default:
					t.Fatalf("%s: unknown argument %q", td.Pos, a.Key)
				}
			}
			var list []string
			if files != "" {
				list = strings.Split(files, ",")
			}
			var del []string
			switch td.Cmd {
			case "ack":
				r.Ack(id, task, list, base, hasBase)
			case "complete":
				r.Complete(id, list)
			case "discard":
				r.Discard(id)
			case "abort":
				del = r.Abort(id)
			case "collect":
				del = r.Collect()
			case "attempt":
				r.NewAttempt(floor)
			case "pin":
				r.Pin(list)
			case "unreferenced":
				del = r.Unreferenced(list)
			case "gone":
				return fmt.Sprintf("gone [%s]", strings.Join(r.Gone(list), " "))
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var b strings.Builder
			if len(del) > 0 {
				fmt.Fprintf(&b, "delete %s\n", strings.Join(del, " "))
			}
			fmt.Fprintf(&b, "referenced [%s]", strings.Join(r.Referenced(), " "))
			return b.String()
		})
	})
}
