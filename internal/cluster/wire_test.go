package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// Every report crosses the wire and comes back the same (errors as their
// text).
func TestReportWireRoundTrip(t *testing.T) {
	ops := []runtime.OperatorStateResult{{}}
	for _, r := range []jobmaster.Report{
		jobmaster.TaskRunning{Attempt: 3, Task: "1-0"},
		jobmaster.SourceFinished{Attempt: 3, Task: "0-1"},
		jobmaster.SourceRecords{Attempt: 3, Task: "0-1", N: 42},
		jobmaster.CheckpointMarker{Attempt: 3, Task: "0-0"},
		jobmaster.Acknowledge{Attempt: 3, Task: "2-1", Checkpoint: 7, Operators: ops, Sync: time.Millisecond,
			Async: 2 * time.Millisecond, Alignment: 3, StartDelay: 4, StateSize: 100, CheckpointedSize: 50,
			Unaligned: true, PersistedData: 9},
		jobmaster.Decline{Attempt: 3, Task: "2-1", Checkpoint: 8, Reason: "disk full"},
		jobmaster.TaskFailed{Attempt: 3, Task: "1-1", Operator: "count", Subtask: 1, Error: "boom"},
		jobmaster.AttemptEnded{Attempt: 3, Error: "boom"},
		jobmaster.AttemptEnded{Attempt: 3, Error: "context canceled", Cancellation: true},
	} {
		w, err := reportToWire(r)
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		back, err := reportFromWire(3, w)
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("round trip of %T:\n got %#v\nwant %#v", r, back, r)
		}
	}
	// An error value travels as its text.
	w, _ := reportToWire(jobmaster.TaskFailed{Attempt: 1, Err: errors.New("gone"), Subtask: -1})
	back, _ := reportFromWire(1, w)
	if f := back.(jobmaster.TaskFailed); f.Error != "gone" || f.Subtask != -1 {
		t.Errorf("TaskFailed with an error value = %+v", f)
	}
}

// A bytes field of another encoding version is refused, naming it; a
// damaged acknowledgement becomes a decline.
func TestWireJSONVersion(t *testing.T) {
	var p deploy.Placement
	err := decodeJSON(append([]byte{9}, "{}"...), &p, "the placement")
	if err == nil || !strings.Contains(err.Error(), "the placement: encoding version 9, this build reads version 1") {
		t.Errorf("err = %v", err)
	}
	r, err := reportFromWire(2, &pb.TaskReport{Body: &pb.TaskReport_Acknowledge{Acknowledge: &pb.Acknowledge{Task: "t", Checkpoint: 5, OperatorsJson: []byte{1, '{'}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := r.(jobmaster.Decline); !ok || d.Checkpoint != 5 || !strings.Contains(d.Reason, "the state handles of task t") {
		t.Errorf("damaged ack = %#v", r)
	}
	in := deploy.Placement{Workers: map[string]string{"a": "127.0.0.1:1"}, Subtasks: [][]string{{"a"}}}
	b, err := encodeJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeJSON(b, &p, "placement"); err != nil || !reflect.DeepEqual(p, in) {
		t.Errorf("placement round trip = %+v, %v", p, err)
	}
}

func TestFence(t *testing.T) {
	for _, c := range []struct {
		session          string
		attempt, current int64
		want             string
	}{
		{"s1", 2, 2, ""},
		{"s0", 2, 2, `JobManager session "s0" is not the current one ("s1")`},
		{"s1", 1, 2, "attempt 1 is not the current attempt 2"},
		{"s1", 3, 2, "attempt 3 is not the current attempt 2"},
		{"s1", 0, -1, "attempt 0: no attempt is deployed"},
	} {
		err := fence(c.session, "s1", c.attempt, c.current)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("fence(%s, %d, %d) = %q, want %q", c.session, c.attempt, c.current, got, c.want)
		}
	}
}

// recorder is a Listener that keeps the reports.
type recorder struct {
	mu      sync.Mutex
	reports []jobmaster.Report
}

func (r *recorder) Report(rep jobmaster.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, rep)
}

func (r *recorder) got() []jobmaster.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]jobmaster.Report(nil), r.reports...)
}

// At the message level, over real gRPC: a hand-driven TaskManager gets a
// deployment on its task stream and answers it; its reports of the
// current attempt pass, those of an old attempt, of another session or of
// an unknown job are dropped; when its stream breaks the worker reports
// the attempt failed and ended, once.
func TestTaskStreamFencing(t *testing.T) {
	// Heartbeats slow enough that the hand-driven TaskManager, which
	// sends none, stays registered.
	jm := startJM(t, JobManagerOptions{HeartbeatInterval: time.Second, HeartbeatTimeout: time.Minute})
	conn, err := grpc.NewClient("passthrough:///"+jm.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewJobManagerClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, err := c.Register(ctx, &pb.RegisterRequest{ResourceId: "tm1", Slots: 2, DataAddress: "127.0.0.1:7001", BuildFingerprint: BuildFingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.TaskManagerMessage{Session: reg.Session, InstanceId: reg.InstanceId}); err != nil {
		t.Fatal(err)
	}
	var ts *taskStream
	eventually(t, "the task stream attached", func() bool {
		jm.mu.Lock()
		defer jm.mu.Unlock()
		ts = jm.instances[reg.InstanceId].tasks
		return ts != nil
	})
	st, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := &jobRun{jm: jm, id: "job1", name: "numbers", args: []string{"--n", "3"}, probe: "weir-probe/x",
		mopts: jobmaster.Options{Storage: st}}
	w := newRemoteWorker(jm, run, ts)
	rec := &recorder{}
	type deployed struct {
		tasks []jobmaster.TaskInfo
		err   error
	}
	done := make(chan deployed, 1)
	p := deploy.Placement{Workers: map[string]string{"tm1": "127.0.0.1:7001"}, Subtasks: [][]string{{"tm1"}}}
	go func() {
		tasks, err := w.Deploy(ctx, jobmaster.DeployRequest{JobID: "job1", Attempt: 1}, deploy.Plan{Job: "numbers", Fingerprint: "fp"}, p, rec)
		done <- deployed{tasks, err}
	}()
	cmd, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	d := cmd.GetDeploy()
	if cmd.Session != reg.Session || cmd.JobId != "job1" || cmd.Attempt != 1 || d == nil ||
		d.JobName != "numbers" || d.Fingerprint != "fp" || d.Worker != "tm1" || d.ProbeName != "weir-probe/x" || d.StorageUrl != st.URL() {
		t.Fatalf("deploy command = %v", cmd)
	}
	var gotP deploy.Placement
	if err := decodeJSON(d.PlacementJson, &gotP, "placement"); err != nil || !reflect.DeepEqual(gotP, p) {
		t.Fatalf("placement = %+v, %v", gotP, err)
	}
	sendMsg := func(m *pb.TaskManagerMessage) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send := func(session, job string, attempt int64, r jobmaster.Report) {
		t.Helper()
		w, err := reportToWire(r)
		if err != nil {
			t.Fatal(err)
		}
		sendMsg(&pb.TaskManagerMessage{Session: session, JobId: job, Attempt: attempt, Body: &pb.TaskManagerMessage_Report{Report: w}})
	}
	// A reply to the deployment of another session first: dropped.
	sendMsg(&pb.TaskManagerMessage{Session: "jm-old", JobId: "job1", Attempt: 1,
		Body: &pb.TaskManagerMessage_Deployed{Deployed: &pb.DeployReply{Request: d.Request}}})
	sendMsg(&pb.TaskManagerMessage{Session: reg.Session, JobId: "job1", Attempt: 1,
		Body: &pb.TaskManagerMessage_Deployed{Deployed: &pb.DeployReply{Request: d.Request, Tasks: []*pb.TaskInfo{{Id: "0-0", Source: true}}}}})
	r := <-done
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0] != (jobmaster.TaskInfo{ID: "0-0", Source: true}) {
		t.Fatalf("Deploy = %+v, %v", r.tasks, r.err)
	}
	before := jm.Rejected()
	ack := jobmaster.Acknowledge{Attempt: 1, Task: "0-0", Checkpoint: 4, Operators: []runtime.OperatorStateResult{}}
	send(reg.Session, "job1", 0, jobmaster.Acknowledge{Attempt: 0, Task: "0-0", Checkpoint: 4}) // an old attempt
	send("jm-old", "job1", 1, ack)                                                              // another session
	send(reg.Session, "job2", 1, ack)                                                           // an unknown job
	send(reg.Session, "job1", 1, ack)                                                           // current
	eventually(t, "the current ack passed", func() bool { return len(rec.got()) == 1 })
	if got := jm.Rejected() - before; got != 3 {
		t.Errorf("rejected %d messages, want 3", got)
	}
	if a, ok := rec.got()[0].(jobmaster.Acknowledge); !ok || a.Checkpoint != 4 || a.Attempt != 1 {
		t.Errorf("passed %#v", rec.got()[0])
	}
	// Commands of attempt 1 reach the stream; those of another attempt do
	// not.
	w.NotifyComplete(jobmaster.Notification{Attempt: 0, Checkpoint: 4})
	w.NotifyComplete(jobmaster.Notification{Attempt: 1, Checkpoint: 4})
	cmd, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Attempt != 1 || cmd.GetNotifyComplete().GetCheckpoint() != 4 || cmd.Session != reg.Session {
		t.Errorf("command = %v", cmd)
	}
	// The stream breaks: the attempt fails and ends on the worker's
	// behalf, and the instance is dropped.
	cancel()
	eventually(t, "the lost TaskManager's attempt ended", func() bool { return len(rec.got()) == 3 })
	got := rec.got()
	f, ok1 := got[1].(jobmaster.TaskFailed)
	e, ok2 := got[2].(jobmaster.AttemptEnded)
	if !ok1 || !ok2 || f.Attempt != 1 || e.Attempt != 1 || !strings.Contains(f.Error, "TaskManager tm1") || !strings.Contains(e.Error, "was lost") {
		t.Errorf("after the break: %#v", got[1:])
	}
	eventually(t, "tm1 dropped", func() bool { return len(jm.Members()) == 0 })
	time.Sleep(20 * time.Millisecond)
	if n := len(rec.got()); n != 3 {
		t.Errorf("%d reports after the loss, want 3", n)
	}
}

// fakeWorker records the calls of the executor.
type fakeWorker struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeWorker) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeWorker) ID() string { return "tm1" }
func (f *fakeWorker) Deploy(context.Context, jobmaster.DeployRequest, deploy.Plan, deploy.Placement, jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	return nil, nil
}
func (f *fakeWorker) TriggerCheckpoint(r jobmaster.TriggerRequest) { f.add("trigger") }
func (f *fakeWorker) NotifyComplete(n jobmaster.Notification) {
	f.add(fmt.Sprint("complete ", n.Checkpoint))
}
func (f *fakeWorker) NotifyAborted(jobmaster.Notification) { f.add("aborted") }
func (f *fakeWorker) FinishSources(int)                    { f.add("finish") }
func (f *fakeWorker) StopTasks(int)                        { f.add("stop") }
func (f *fakeWorker) Cancel(jobmaster.CancelRequest)       { f.add("cancel") }

// The TaskManager's side at the message level: a command of another
// session or of an attempt not deployed here is dropped, so a zombie of an
// old attempt never commits (sinks commit on notify-complete).
func TestExecutorFencing(t *testing.T) {
	tm, err := NewTaskManager(TaskManagerOptions{ResourceID: "tm1"})
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeWorker{}
	ex := &executor{tm: tm, session: "jm-2", log: tm.opts.Logger, ctx: context.Background(),
		jobs:   map[string]*tmJob{"job1": {id: "job1", worker: fw, attempt: 5, running: map[int64]chan struct{}{}}},
		stores: map[string]storage.Store{}}
	notify := func(session, job string, attempt int64, id int64) {
		ex.command(&pb.JobManagerCommand{Session: session, JobId: job, Attempt: attempt,
			Body: &pb.JobManagerCommand_NotifyComplete{NotifyComplete: &pb.CheckpointNotice{Checkpoint: id}}})
	}
	notify("jm-1", "job1", 5, 1) // the JobManager of before
	notify("jm-2", "job1", 4, 2) // an old attempt
	notify("jm-2", "job9", 5, 3) // a job not here
	notify("jm-2", "job1", 5, 4) // current
	ex.command(&pb.JobManagerCommand{Session: "jm-2", JobId: "job1", Attempt: 5, Body: &pb.JobManagerCommand_FinishSources{FinishSources: &pb.Empty{}}})
	ex.command(&pb.JobManagerCommand{Session: "jm-2", JobId: "job1", Attempt: 3, Body: &pb.JobManagerCommand_Cancel{Cancel: &pb.CancelTasks{Reason: "x"}}})
	if want := []string{"complete 4", "finish"}; !reflect.DeepEqual(fw.calls, want) {
		t.Errorf("worker calls = %q, want %q", fw.calls, want)
	}
	if got := tm.Stats().Rejected; got != 4 {
		t.Errorf("rejected %d commands, want 4", got)
	}
}
