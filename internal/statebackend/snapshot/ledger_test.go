package snapshot

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestLedger runs the scripts under testdata/ledger. Commands:
//
//	new [local]                     a ledger (local: local recovery)
//	uploaded id=N files=a,b [store=S]  checkpoint N's asynchronous part uploaded these
//	released id=N                   checkpoint N's asynchronous part ended
//	complete id=N dirs=1,2          checkpoint N completed; chk-1, chk-2 are on disk
//	abort id=N dirs=1,2             checkpoint N aborted
//	restored id=N files=a,b         the instance restored checkpoint N
//	close dirs=1,2                  the instance closes
//
// Every command prints the local directories to remove (if any), the base
// (the checkpoint the next one refers to, and its files) and the pending
// checkpoints.
func TestLedger(t *testing.T) {
	datadriven.Walk(t, "testdata/ledger", func(t *testing.T, path string) {
		l := NewLedger(false)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var id int64
			var files, dirs, store string
			for _, a := range td.CmdArgs {
				switch a.Key {
				case "id":
					td.ScanArgs(t, "id", &id)
				case "files":
					td.ScanArgs(t, "files", &files)
				case "dirs":
					td.ScanArgs(t, "dirs", &dirs)
				case "store":
					td.ScanArgs(t, "store", &store)
				case "local":
				default:
					t.Fatalf("%s: unknown argument %q", td.Pos, a.Key)
				}
			}
			up := Upload{ID: id, Store: store, Files: map[string]SharedFile{}}
			if files != "" {
				for _, f := range strings.Split(files, ",") {
					up.Files[f] = SharedFile{Object: fmt.Sprintf("shared/c%d-%s", id, f)}
				}
			}
			var local []int64
			if dirs != "" {
				for _, d := range strings.Split(dirs, ",") {
					n, err := strconv.ParseInt(d, 10, 64)
					if err != nil {
						t.Fatalf("%s: dirs: %v", td.Pos, err)
					}
					local = append(local, n)
				}
			}
			var remove []int64
			switch td.Cmd {
			case "new":
				l = NewLedger(td.HasArg("local"))
			case "uploaded":
				l.Uploaded(up)
			case "released":
				if l.Released(id) {
					remove = []int64{id}
				}
			case "complete":
				remove = l.Complete(id, local)
			case "abort":
				remove = l.Aborted(id, local)
			case "restored":
				l.Restored(up)
			case "close":
				remove = l.Close(local)
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var b strings.Builder
			if len(remove) > 0 {
				fmt.Fprintf(&b, "remove local %v\n", remove)
			}
			base := l.Base()
			if base.Files == nil {
				b.WriteString("base none")
			} else {
				objs := make([]string, 0, len(base.Files))
				for _, name := range slices.Sorted(maps.Keys(base.Files)) {
					objs = append(objs, base.Files[name].Object)
				}
				fmt.Fprintf(&b, "base %d [%s]", base.ID, strings.Join(objs, " "))
				if base.Store != "" {
					fmt.Fprintf(&b, " in %v", base.Store)
				}
			}
			fmt.Fprintf(&b, "\npending %v", l.Pending())
			return b.String()
		})
	})
}
