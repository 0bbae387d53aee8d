package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCoordinator runs the scripts in testdata/coordinator. Each command is
// one input to the coordinator (or a query of its state); the expected output
// is the decisions it queued, one per line. Regenerate with
// `go test ./internal/checkpoint -run TestCoordinator -rewrite`.
//
//	new [interval=ms] [min-pause=ms] [max-concurrent=n] [timeout=ms] [tolerable=n]
//	    [retained=n] [every-n=n] [last-id=n] [recovered=1,2] [recovered-savepoint=n]
//	    [recovered-tasks=a,b]
//	start now=ms tasks=a,b [restored=n]
//	tick now=ms
//	trigger now=ms [kind=savepoint] [dir=path] [stop-after]
//	external now=ms
//	records now=ms n=n
//	marker now=ms
//	ack now=ms id=n task=t [size=n] [checkpointed=n] [sync=ms] [async=ms] [align=ms] [delay=ms]
//	decline now=ms id=n task=t [reason=text]
//	metadata-durable now=ms id=n (ok | err=text)
//	task-failed now=ms task=t
//	stop now=ms [reason=text]
//	pending | retained | counts
func TestCoordinator(t *testing.T) {
	datadriven.Walk(t, "testdata/coordinator", func(t *testing.T, path string) {
		var c *Coordinator
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			a := scriptArgs{t: t, td: td}
			if td.Cmd != "new" && c == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			switch td.Cmd {
			case "new":
				opts := Options{
					Interval:          a.int64("interval", 0),
					MinPause:          a.int64("min-pause", 0),
					MaxConcurrent:     int(a.int64("max-concurrent", 0)),
					Timeout:           a.int64("timeout", 0),
					TolerableFailures: int(a.int64("tolerable", 0)),
					Retained:          int(a.int64("retained", 0)),
					EveryNRecords:     a.int64("every-n", 0),
				}
				var acks []TaskAck
				for _, task := range a.list("recovered-tasks") {
					acks = append(acks, TaskAck{Task: TaskID(task)})
				}
				var recovered []CompletedCheckpoint
				for _, id := range a.list("recovered") {
					recovered = append(recovered, CompletedCheckpoint{ID: parseInt(t, id), Kind: KindCheckpoint, Acks: acks})
				}
				if a.has("recovered-savepoint") {
					recovered = append(recovered, CompletedCheckpoint{ID: a.int64("recovered-savepoint", 0), Kind: KindSavepoint, Acks: acks})
				}
				var err error
				c, err = NewCoordinator(opts, a.int64("last-id", 0), recovered)
				if err != nil {
					c = nil
					return "error: " + err.Error()
				}
				o := c.Options()
				head := fmt.Sprintf("interval=%d min-pause=%d max-concurrent=%d timeout=%d tolerable=%d retained=%d every-n=%d last-id=%d",
					o.Interval, o.MinPause, o.MaxConcurrent, o.Timeout, o.TolerableFailures, o.Retained, o.EveryNRecords, c.LastID())
				return head + "\n" + formatDecisions(c.Decisions())
			case "start":
				var tasks []TaskID
				for _, s := range a.list("tasks") {
					tasks = append(tasks, TaskID(s))
				}
				if err := c.Start(a.now(), tasks, a.int64("restored", 0)); err != nil {
					return "error: " + err.Error()
				}
			case "tick":
				c.Tick(a.now())
			case "trigger":
				req := Request{TargetDir: a.str("dir"), StopAfter: a.has("stop-after")}
				switch k := a.str("kind"); k {
				case "", "checkpoint":
				case "savepoint":
					req.Kind = KindSavepoint
				default:
					t.Fatalf("%s: unknown kind %q", td.Pos, k)
				}
				id := c.TriggerManual(a.now(), req)
				return fmt.Sprintf("request=%d\n%s", id, formatDecisions(c.Decisions()))
			case "external":
				id := c.ExternalSignal(a.now())
				return fmt.Sprintf("request=%d\n%s", id, formatDecisions(c.Decisions()))
			case "records":
				c.SourceRecords(a.now(), a.int64("n", 0))
			case "marker":
				c.MarkerRecord(a.now())
			case "ack":
				c.Ack(a.now(), a.int64("id", 0), TaskID(a.str("task")), TaskSnapshot{
					StateSize:        a.int64("size", 0),
					CheckpointedSize: a.int64("checkpointed", a.int64("size", 0)),
					SyncMs:           a.int64("sync", 0),
					AsyncMs:          a.int64("async", 0),
					AlignmentMs:      a.int64("align", 0),
					StartDelayMs:     a.int64("delay", 0),
					Handle:           []byte(fmt.Sprintf("chk-%d/%s", a.int64("id", 0), a.str("task"))),
				})
			case "decline":
				c.Decline(a.now(), a.int64("id", 0), TaskID(a.str("task")), a.str("reason"))
			case "metadata-durable":
				var err error
				if !a.has("ok") {
					err = errors.New(a.str("err"))
				}
				c.MetadataDurable(a.now(), a.int64("id", 0), err)
			case "task-failed":
				c.TaskFailed(a.now(), TaskID(a.str("task")))
			case "stop":
				c.Stop(a.now(), a.str("reason"))
			case "quiesce":
				c.Quiesce()
			case "resume":
				c.Resume(a.now())
			case "pending":
				var b strings.Builder
				for _, p := range c.Pending() {
					fmt.Fprintf(&b, "chk-%d kind=%s reason=%s triggered=%d acked=%d/%d", p.ID, p.Kind, p.Reason, p.TriggeredAt, len(p.Acks), p.NumTasks)
					if p.WritingMetadata {
						b.WriteString(" writing-metadata")
					}
					b.WriteString("\n")
				}
				return orNone(b.String())
			case "retained":
				var b strings.Builder
				for _, r := range c.Retained() {
					formatCompleted(&b, r)
				}
				if sp, ok := c.LatestSavepoint(); ok {
					b.WriteString("latest savepoint: ")
					formatCompleted(&b, sp)
				}
				return orNone(b.String())
			case "counts":
				n := c.Counts()
				return fmt.Sprintf("triggered=%d in-progress=%d completed=%d failed=%d restored=%d",
					n.Triggered, n.InProgress, n.Completed, n.Failed, n.Restored)
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			return formatDecisions(c.Decisions())
		})
	})
}

func formatCompleted(b *strings.Builder, r CompletedCheckpoint) {
	fmt.Fprintf(b, "chk-%d kind=%s reason=%s triggered=%d acked=%d completed=%d duration=%d size=%d checkpointed=%d\n",
		r.ID, r.Kind, r.Reason, r.TriggeredAt, r.AckedAt, r.CompletedAt, r.Duration(), r.StateSize(), r.CheckpointedSize())
	for _, a := range r.Acks {
		s := a.Snapshot
		fmt.Fprintf(b, "  %s at=%d size=%d checkpointed=%d sync=%d async=%d align=%d delay=%d handle=%s\n",
			a.Task, a.At, s.StateSize, s.CheckpointedSize, s.SyncMs, s.AsyncMs, s.AlignmentMs, s.StartDelayMs, s.Handle)
	}
}

func formatDecisions(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		// Show that the state handles reach the shell.
		switch d := d.(type) {
		case DiscardTaskState:
			fmt.Fprintf(&b, " handle=%s", d.Handle)
		case Discard:
			var tasks []string
			for _, a := range d.Acks {
				tasks = append(tasks, fmt.Sprintf("%s:%s", a.Task, a.Snapshot.Handle))
			}
			fmt.Fprintf(&b, " acks=[%s]", strings.Join(tasks, " "))
		}
		b.WriteString("\n")
	}
	return orNone(b.String())
}

func orNone(s string) string {
	if s == "" {
		return "(none)\n"
	}
	return s
}

// scriptArgs reads a datadriven command's key=value arguments.
type scriptArgs struct {
	t  *testing.T
	td *datadriven.TestData
}

func (a scriptArgs) has(key string) bool { return a.td.HasArg(key) }

func (a scriptArgs) str(key string) string {
	arg, ok := a.td.Arg(key)
	if !ok {
		return ""
	}
	return strings.Join(arg.Vals, ",")
}

func (a scriptArgs) list(key string) []string {
	s := a.str(key)
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (a scriptArgs) int64(key string, def int64) int64 {
	if !a.has(key) {
		return def
	}
	return parseInt(a.t, a.str(key))
}

func (a scriptArgs) now() int64 {
	if !a.has("now") {
		a.t.Fatalf("%s: missing now=", a.td.Pos)
	}
	return a.int64("now", 0)
}

func parseInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q: %v", s, err)
	}
	return n
}
