package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/storage"
)

// lockedBuffer is a log sink that goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Over real gRPC, a hand-driven TaskManager sends subtask figures on its
// task stream: those of the current attempt land in the job's Figures;
// a malformed report (an unknown subtask, counters going backwards) is
// refused with a warning naming the subtask, leaves the figures as they
// were and keeps the stream up; a report of an old attempt is dropped
// quietly as stale.
func TestTaskStreamFigures(t *testing.T) {
	logs := &lockedBuffer{}
	jm := startJM(t, JobManagerOptions{HeartbeatInterval: time.Second, HeartbeatTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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
	run := &jobRun{jm: jm, id: "job1", name: "numbers", probe: "weir-probe/x", mopts: jobmaster.Options{Storage: st}}
	// Attempt 1: a source (vertex 0) of 2 subtasks and a sink (vertex 1)
	// of 1, all on tm1.
	plan := deploy.Plan{Job: "numbers", Fingerprint: "fp", Vertices: []deploy.Vertex{{ID: 0, Parallelism: 2}, {ID: 1, Parallelism: 1}}}
	p := deploy.Placement{Workers: map[string]string{"tm1": "127.0.0.1:7001"}, Subtasks: [][]string{{"tm1", "tm1"}, {"tm1"}}}
	run.placed(1, plan, p)
	w := newRemoteWorker(jm, run, ts)
	done := make(chan error, 1)
	go func() {
		_, err := w.Deploy(ctx, jobmaster.DeployRequest{JobID: "job1", Attempt: 1}, plan, p, &recorder{})
		done <- err
	}()
	cmd, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *pb.TaskManagerMessage) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.TaskManagerMessage{Session: reg.Session, JobId: "job1", Attempt: 1,
		Body: &pb.TaskManagerMessage_Deployed{Deployed: &pb.DeployReply{Request: cmd.GetDeploy().GetRequest()}}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	figures := func(attempt int64, subs ...*pb.SubtaskMetrics) {
		t.Helper()
		send(&pb.TaskManagerMessage{Session: reg.Session, JobId: "job1", Attempt: attempt,
			Body: &pb.TaskManagerMessage_Metrics{Metrics: &pb.TaskMetrics{Subtasks: subs}}})
	}
	sink := func(in int64) *pb.SubtaskMetrics {
		return &pb.SubtaskMetrics{Task: "1-0", RecordsIn: in, Operators: []string{"sink"},
			OperatorRecordsIn: []int64{in}, OperatorRecordsOut: []int64{0}}
	}
	held := func() [3]int64 {
		run.mu.Lock()
		defer run.mu.Unlock()
		return [3]int64{run.figures.Subtask(0, 0).RecordsOut, run.figures.Subtask(0, 1).RecordsOut, run.figures.Subtask(1, 0).RecordsIn}
	}
	before := jm.Rejected()
	figures(1, &pb.SubtaskMetrics{Task: "0-0", RecordsOut: 4}, &pb.SubtaskMetrics{Task: "0-1", RecordsOut: 3}, sink(6))
	eventually(t, "the figures landed", func() bool { return held() == [3]int64{4, 3, 6} })
	// One message with an unknown subtask, a task id that is no subtask's
	// and a sink whose count went back: all three refused, the good
	// subtask of the same message taken.
	figures(1, &pb.SubtaskMetrics{Task: "0-7", RecordsOut: 100}, &pb.SubtaskMetrics{Task: "bogus"}, sink(2),
		&pb.SubtaskMetrics{Task: "0-1", RecordsOut: 5})
	eventually(t, "the good subtask of the bad message landed", func() bool { return held() == [3]int64{4, 5, 6} })
	// A stale attempt: dropped.
	figures(0, &pb.SubtaskMetrics{Task: "0-0", RecordsOut: 50})
	figures(1, sink(7)) // the stream still works after all that
	eventually(t, "the last figures landed", func() bool { return held() == [3]int64{4, 5, 7} })
	if got := jm.Rejected() - before; got != 2 {
		t.Errorf("rejected %d messages, want 2 (the malformed one, the stale one)", got)
	}
	log := logs.String()
	for _, want := range []string{
		`level=WARN msg="ignoring subtask figures of a TaskManager" taskmanager=tm1 job=job1 attempt=1`,
		"task 0-7: vertex 0 has 2 subtasks in attempt 1",
		`task \"bogus\" is not named`,
		"task 1-0 of attempt 1: records went backwards (in 2 after 6",
		`level=DEBUG msg="dropping a message of a TaskManager" taskmanager=tm1 job=job1 attempt=0`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	cancel()
	eventually(t, "tm1 dropped", func() bool { return len(jm.Members()) == 0 })
}

// A vertex's figures in REST are its subtasks' summed (the highest
// backpressured ratio), each operator's and the bytes too; a subtask that
// has not reported counts 0 and lacks operators. Bytes are counted on a
// cluster: read-bytes-complete.
func TestVertexFigures(t *testing.T) {
	src := func(out int64, ratio float64) SubtaskFigures {
		return SubtaskFigures{RecordsOut: out, BytesOut: 10 * out, Busy: time.Duration(out) * time.Millisecond, BackPressuredRatio: ratio,
			Operators: []string{"src", "map"}, OperatorRecordsIn: []int64{0, out}, OperatorRecordsOut: []int64{out, out}}
	}
	for _, tc := range []struct {
		name      string
		subtasks  []SubtaskFigures
		want      rest.IOMetrics
		wantRatio float64
		wantOps   []rest.OperatorRecords
	}{
		{"none reported", []SubtaskFigures{noFigures, noFigures}, rest.IOMetrics{}, 0, nil},
		{"one of two reported", []SubtaskFigures{noFigures, src(5, 0.5)},
			rest.IOMetrics{WriteRecords: 5, WriteBytes: 50, BusyTime: 5 * time.Millisecond}, 0.5,
			[]rest.OperatorRecords{{Name: "src", WriteRecords: 5}, {Name: "map", ReadRecords: 5, WriteRecords: 5}}},
		{"both", []SubtaskFigures{src(2, 0.1), src(5, 0.5)},
			rest.IOMetrics{WriteRecords: 7, WriteBytes: 70, BusyTime: 7 * time.Millisecond}, 0.5,
			[]rest.OperatorRecords{{Name: "src", WriteRecords: 7}, {Name: "map", ReadRecords: 7, WriteRecords: 7}}},
		{"sinks", []SubtaskFigures{{RecordsIn: 3, BytesIn: 30, Idle: time.Second, BackPressured: time.Millisecond}, {RecordsIn: 4, BytesIn: 1}},
			rest.IOMetrics{ReadRecords: 7, ReadBytes: 31, IdleTime: time.Second, BackPressuredTime: time.Millisecond}, 0, nil},
	} {
		got, ratio, ops := vertexFigures(tc.subtasks)
		if got != tc.want || ratio != tc.wantRatio || !equalOps(ops, tc.wantOps) {
			t.Errorf("%s: vertexFigures = %+v, %v, %+v; want %+v, %v, %+v", tc.name, got, ratio, ops, tc.want, tc.wantRatio, tc.wantOps)
		}
	}
}

func equalOps(a, b []rest.OperatorRecords) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A task's figures cross the wire (encoded and decoded) and come back
// the same: records, watermarks (none, an instant, the end of input) and
// the bytes of its network channels, summed.
func TestSubtaskMetricsWire(t *testing.T) {
	tk := metrics.NewTask("3-1", "3", "src -> map", 1, 2, []string{"src", "map"})
	c := tk.NewCounter(0, []int{1})
	var out1, out2, in1 atomic.Int64
	tk.AddNetworkBytes(nil, &out1)
	tk.AddNetworkBytes(&in1, &out2)
	tk.RecordsOut.Add(9)
	c.N = 9
	tk.Publish()
	out1.Store(100)
	out2.Store(23)
	in1.Store(7)
	for _, wm := range [][2]int64{{metrics.MinWatermark, metrics.MinWatermark}, {1_700_000_000_000, 1_699_999_996_000}, {math.MaxInt64, math.MaxInt64}} {
		tk.InputWatermark.Store(wm[0])
		tk.OutputWatermark.Store(wm[1])
		snap := tk.Snapshot(time.Now())
		b, err := proto.Marshal(subtaskMetricsToWire(tk.ID, tk.Operators, snap))
		if err != nil {
			t.Fatal(err)
		}
		var m pb.SubtaskMetrics
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got := subtaskFiguresFromWire(&m)
		if m.Task != "3-1" || got.RecordsOut != 9 || got.RecordsIn != 0 || !equalStrings(got.Operators, []string{"src", "map"}) ||
			got.OperatorRecordsIn[1] != 9 || got.OperatorRecordsOut[0] != 9 || got.OperatorRecordsOut[1] != 0 {
			t.Errorf("round trip: %+v from %+v", got, snap)
		}
		if got.InputWatermark != wm[0] || got.OutputWatermark != wm[1] || got.BytesIn != 7 || got.BytesOut != 123 {
			t.Errorf("round trip: watermarks %d and %d, bytes in %d and out %d; want %d, %d, 7 and 123",
				got.InputWatermark, got.OutputWatermark, got.BytesIn, got.BytesOut, wm[0], wm[1])
		}
	}
}

func equalStrings(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }
