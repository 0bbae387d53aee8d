package jobstate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestMachine runs the scripts in testdata. Each command is one event (or a
// query); the expected output is the actions it returned, one a line, then
// the machine's state. Regenerate with
// `go test ./internal/jobstate -run TestMachine -rewrite`.
//
//	new [retain-on-cancel]
//	start
//	deployed sources=n
//	deploy-failed err=text [job-cancelled]
//	source-finished task=t
//	final-done [err=text] [coordinator-stopped]
//	stop-requested
//	stop-done [err=text]
//	completed [savepoint] [stop-after]
//	fail-job reason=text
//	cancel
//	stop-grace
//	attempt-ended [err=text] [cancellation] [job-cancelled]
//	restart-decided (ok delay=ms | no)
//	restart-timer
//	restart-point [err=text]
//	accepts attempt=n
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Machine
		now := int64(0)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range td.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			flag := func(k string) bool { _, ok := args[k]; return ok }
			errArg := func(k string) error {
				if v, ok := args[k]; ok {
					return errors.New(v)
				}
				return nil
			}
			num := func(k string) int64 {
				v, ok := args[k]
				if !ok {
					t.Fatalf("%s: %s needs %s=", td.Pos, td.Cmd, k)
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %s=%q: %v", td.Pos, k, v, err)
				}
				return n
			}
			if td.Cmd != "new" && m == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			now += 10
			var ev Event
			switch td.Cmd {
			case "new":
				m = New(Options{RetainOnCancel: flag("retain-on-cancel")})
				return m.String() + "\n"
			case "start":
				ev = Start{}
			case "deployed":
				ev = Deployed{Sources: int(num("sources"))}
			case "deploy-failed":
				ev = DeployFailed{Err: errArg("err"), JobCancelled: flag("job-cancelled")}
			case "source-finished":
				ev = SourceFinished{Task: args["task"]}
			case "final-done":
				ev = FinalCheckpointDone{Err: errArg("err"), CoordinatorRunning: !flag("coordinator-stopped")}
			case "stop-requested":
				ev = StopRequested{}
			case "stop-done":
				ev = StopRequestDone{Err: errArg("err")}
			case "completed":
				ev = CheckpointCompleted{Savepoint: flag("savepoint"), StopAfter: flag("stop-after")}
			case "fail-job":
				ev = FailJob{Reason: args["reason"]}
			case "cancel":
				ev = Cancel{}
			case "stop-grace":
				ev = StopGraceExpired{}
			case "attempt-ended":
				ev = AttemptEnded{Err: errArg("err"), Cancellation: flag("cancellation"), JobCancelled: flag("job-cancelled")}
			case "restart-decided":
				d := RestartDecided{Restart: flag("ok")}
				if d.Restart {
					d.DelayMs = num("delay")
				}
				ev = d
			case "restart-timer":
				ev = RestartTimerFired{}
			case "restart-point":
				ev = RestartPointResolved{Err: errArg("err")}
			case "accepts":
				return fmt.Sprintf("%t\n", m.Accepts(int(num("attempt"))))
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var b strings.Builder
			for _, a := range m.Step(ev, now) {
				b.WriteString(a.String())
				b.WriteByte('\n')
			}
			b.WriteString(m.String())
			b.WriteByte('\n')
			return b.String()
		})
	})
}

// TestTransitionsTable checks the table itself: terminal states have no way
// out, and every non-terminal state can reach a terminal one.
func TestTransitionsTable(t *testing.T) {
	for s := Created; s <= Failed; s++ {
		if s.Terminal() && len(transitions[s]) > 0 {
			t.Errorf("terminal state %s has transitions %v", s, transitions[s])
		}
		if !s.Terminal() && !slicesContainsTerminal(transitions[s]) {
			t.Errorf("state %s cannot end: %v", s, transitions[s])
		}
	}
	if Legal(Finished, Running) || Legal(Restarting, Finishing) || !Legal(Running, Finishing) {
		t.Error("Legal disagrees with the table")
	}
}

func slicesContainsTerminal(ss []State) bool {
	for _, s := range ss {
		if s.Terminal() {
			return true
		}
	}
	return false
}
