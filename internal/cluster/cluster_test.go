package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/testutil/certtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast are heartbeat settings short enough for tests.
const (
	fastInterval = 50 * time.Millisecond
	fastTimeout  = 400 * time.Millisecond
)

func startJM(t *testing.T, opts JobManagerOptions) *JobManager {
	t.Helper()
	if opts.Address == "" {
		opts.Address = "127.0.0.1:0"
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval, opts.HeartbeatTimeout = fastInterval, fastTimeout
	}
	jm, err := NewJobManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := jm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jm.Close() })
	return jm
}

// runTM runs a TaskManager agent until the test ends or stop is called;
// done yields Run's error once it returned.
func runTM(t *testing.T, opts TaskManagerOptions) (tm *TaskManager, stop func(), done <-chan error) {
	t.Helper()
	if opts.Backoff.Initial == 0 {
		opts.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	tm, err := NewTaskManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	ended := make(chan struct{})
	go func() { ch <- tm.Run(ctx); close(ended) }()
	stop = func() { cancel(); <-ended }
	t.Cleanup(stop)
	return tm, stop, ch
}

// eventually polls cond until it holds or 5 s passed.
func eventually(t *testing.T, what string, cond func() bool, last ...func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, l := range last {
				t.Logf("last seen: %s", l())
			}
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func members(jm *JobManager) map[string]Member {
	out := map[string]Member{}
	for _, m := range jm.Members() {
		out[m.ResourceID] = m
	}
	return out
}

func TestRegisterHeartbeatDeregister(t *testing.T) {
	jm := startJM(t, JobManagerOptions{})
	tm1, stop1, _ := runTM(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 2, DataAddress: "127.0.0.1:7001"})
	runTM(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm2", Slots: 3})
	eventually(t, "both registered", func() bool { return len(jm.Members()) == 2 })
	ms := members(jm)
	if m := ms["tm1"]; m.Slots != 2 || m.FreeSlots != 2 || m.DataAddress != "127.0.0.1:7001" {
		t.Errorf("tm1 = %+v", m)
	}
	if ms["tm2"].Slots != 3 {
		t.Errorf("tm2 = %+v", ms["tm2"])
	}
	// Heartbeats flow both ways: the agent answers requests, the
	// JobManager's last heartbeat moves.
	first := ms["tm1"].LastHeartbeat
	eventually(t, "heartbeats answered", func() bool {
		return tm1.Stats().Heartbeats >= 3 && members(jm)["tm1"].LastHeartbeat.After(first)
	})
	rest := jm.TaskManagers()
	if len(rest) != 2 || rest[0].ID != "tm1" || rest[0].DataPort != 7001 || rest[0].Slots != 2 || rest[1].FreeSlots != 3 {
		t.Errorf("REST view = %+v", rest)
	}
	if _, _, ok := tm1.Registration(); !ok {
		t.Error("tm1 does not know its registration")
	}
	// A TaskManager that stops deregisters: it is gone at once.
	stop1()
	if ms := members(jm); len(ms) != 1 || ms["tm2"].ResourceID == "" {
		t.Errorf("after tm1 stopped: %v", ms)
	}
}

// rawClient is a hand-driven TaskManager for the protocol's edges.
func rawClient(t *testing.T, addr string) pb.JobManagerClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewJobManagerClient(conn)
}

func register(t *testing.T, c pb.JobManagerClient, id string) *pb.RegisterReply {
	t.Helper()
	r, err := c.Register(context.Background(), &pb.RegisterRequest{ResourceId: id, Slots: 1, BuildFingerprint: BuildFingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestConnectionBreakDropsAtOnce: a TaskManager whose heartbeat stream
// breaks is dropped long before the heartbeat timeout.
func TestConnectionBreakDropsAtOnce(t *testing.T) {
	jm := startJM(t, JobManagerOptions{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Minute})
	c := rawClient(t, jm.Addr())
	r := register(t, c, "tm1")
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.TaskManagerBeat{InstanceId: r.InstanceId, Session: r.Session}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Recv(); err != nil || b.Seq != 1 || b.Session != jm.Session() {
		t.Fatalf("first heartbeat request: %v, %v", b, err)
	}
	start := time.Now()
	cancel()
	eventually(t, "tm1 dropped", func() bool { return len(jm.Members()) == 0 })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("dropped after %v", d)
	}
}

// TestHeartbeatTimeout: a TaskManager that registers but does not answer
// is dropped after the timeout, and its stream is told to register again;
// one that never attaches a stream is dropped too.
func TestHeartbeatTimeout(t *testing.T) {
	jm := startJM(t, JobManagerOptions{})
	c := rawClient(t, jm.Addr())
	r := register(t, c, "silent")
	register(t, c, "never-attached")
	s, err := c.Heartbeat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.TaskManagerBeat{InstanceId: r.InstanceId, Session: r.Session}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		b, err := s.Recv()
		if err != nil {
			t.Fatalf("stream ended without register_again: %v", err)
		}
		if b.RegisterAgain {
			if !strings.Contains(b.Reason, "heartbeat timeout") {
				t.Errorf("reason %q", b.Reason)
			}
			break
		}
	}
	if d := time.Since(start); d < fastTimeout-fastInterval {
		t.Errorf("dropped after %v, before the timeout %v", d, fastTimeout)
	}
	eventually(t, "both dropped", func() bool { return len(jm.Members()) == 0 })
}

// TestStaleSessionIsToldToRegisterAgain: the fencing token of a previous
// JobManager session, or a dropped instance, gets register_again.
func TestStaleSessionIsToldToRegisterAgain(t *testing.T) {
	jm := startJM(t, JobManagerOptions{})
	c := rawClient(t, jm.Addr())
	r := register(t, c, "tm1")
	for _, tc := range []struct{ name, instance, session, want string }{
		{"old session", r.InstanceId, "jm-old", "session jm-old, which ended"},
		{"unknown instance", "tm1-gone", r.Session, "not registered"},
	} {
		s, err := c.Heartbeat(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&pb.TaskManagerBeat{InstanceId: tc.instance, Session: tc.session})
		b, err := s.Recv()
		if err != nil || !b.RegisterAgain || !strings.Contains(b.Reason, tc.want) || b.Session != jm.Session() {
			t.Errorf("%s: %v, %v", tc.name, b, err)
		}
	}
	d, err := c.Deregister(context.Background(), &pb.DeregisterRequest{InstanceId: r.InstanceId, Session: "jm-old"})
	if err != nil || d.Removed || d.Session != jm.Session() {
		t.Errorf("deregister with a stale session: %v, %v", d, err)
	}
	// Registering again under the same id replaces the instance.
	r2 := register(t, c, "tm1")
	if r2.InstanceId == r.InstanceId || len(jm.Members()) != 1 || jm.Members()[0].Instance != r2.InstanceId {
		t.Errorf("re-registration: %v, members %v", r2, jm.Members())
	}
}

// TestJobManagerRestart: a TaskManager reconnects with backoff to a
// JobManager restarted on the same address and registers with its new
// session.
func TestJobManagerRestart(t *testing.T) {
	jm := startJM(t, JobManagerOptions{})
	addr := jm.Addr()
	tm, _, _ := runTM(t, TaskManagerOptions{JobManager: addr, ResourceID: "tm1", Slots: 2})
	eventually(t, "registered and heartbeating", func() bool { return len(jm.Members()) == 1 && tm.Stats().Heartbeats > 0 })
	old, _, _ := tm.Registration()
	jm.Close()
	time.Sleep(100 * time.Millisecond)
	jm2 := startJM(t, JobManagerOptions{Address: addr})
	// The JobManager knows the registration before the TaskManager has its
	// reply: wait for both.
	eventually(t, "registered with the new JobManager", func() bool {
		s, _, _ := tm.Registration()
		return len(jm2.Members()) == 1 && s != "" && s != old
	})
	if s, _, _ := tm.Registration(); s != jm2.Session() || s == old {
		t.Errorf("session %s, want the new %s (old %s)", s, jm2.Session(), old)
	}
	if st := tm.Stats(); st.Registrations != 2 || st.Losses < 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestRefusals(t *testing.T) {
	jmTok := startJM(t, JobManagerOptions{Token: "s3cret"})
	jmNone := startJM(t, JobManagerOptions{})
	for _, tc := range []struct {
		name string
		opts TaskManagerOptions
		want string
	}{
		{"wrong token", TaskManagerOptions{JobManager: jmTok.Addr(), Token: "nope"}, "wrong cluster token"},
		{"no token", TaskManagerOptions{JobManager: jmTok.Addr()}, "requires a cluster token"},
		{"token to a JobManager without", TaskManagerOptions{JobManager: jmNone.Addr(), Token: "x"}, "has no cluster token"},
		{"another build", TaskManagerOptions{JobManager: jmNone.Addr(), Fingerprint: "0123456789abcdef"}, "another build of weir (fingerprint 0123456789abcdef)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, done := runTM(t, tc.opts)
			select {
			case err := <-done:
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Run: %v, want refused: %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not fail")
			}
		})
	}
	if len(jmTok.Members())+len(jmNone.Members()) != 0 {
		t.Error("a refused TaskManager registered")
	}
	// The right token registers.
	runTM(t, TaskManagerOptions{JobManager: jmTok.Addr(), Token: "s3cret"})
	eventually(t, "registered with the token", func() bool { return len(jmTok.Members()) == 1 })
}

func TestNoJobManagerAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	_, _, done := runTM(t, TaskManagerOptions{JobManager: addr, RegistrationTimeout: 300 * time.Millisecond})
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "no JobManager answered at "+addr+" within 300ms") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}
}

func TestMutualTLS(t *testing.T) {
	files := certtest.WriteCA(t, t.TempDir())
	tlsFiles := &TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}
	jm := startJM(t, JobManagerOptions{TLS: tlsFiles})
	runTM(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tls", TLS: tlsFiles})
	eventually(t, "registered over TLS", func() bool { return len(jm.Members()) == 1 })
	// Without TLS the JobManager does not answer.
	_, _, done := runTM(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "plain", RegistrationTimeout: 300 * time.Millisecond})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "no JobManager answered") {
		t.Errorf("plain TaskManager to a TLS JobManager: %v", err)
	}
	if _, err := NewJobManager(JobManagerOptions{TLS: &TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.Cert + ".missing"}}); err == nil || !strings.Contains(err.Error(), "CA file") {
		t.Errorf("missing CA file: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"jm public without token", jmErr(JobManagerOptions{Address: "0.0.0.0:6123"}), "a cluster token is required"},
		{"jm not host:port", jmErr(JobManagerOptions{Address: "6123"}), "is not host:port"},
		{"jm timeout <= interval", jmErr(JobManagerOptions{HeartbeatInterval: time.Second, HeartbeatTimeout: time.Second}), "must be longer than the heartbeat interval"},
		{"jm token with space", jmErr(JobManagerOptions{Token: "a b"}), "white space"},
		{"tm public jobmanager without token", tmErr(TaskManagerOptions{JobManager: "10.0.0.1:6123"}), "JobManager address 10.0.0.1:6123 is not a loopback address"},
		{"tm public data address without token", tmErr(TaskManagerOptions{DataAddress: "0.0.0.0:0"}), "data address 0.0.0.0:0 is not a loopback address"},
		{"tm slots", tmErr(TaskManagerOptions{Slots: -1}), "offers -1 slots"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if err := jmErr(JobManagerOptions{Address: "0.0.0.0:0", Token: "t"}); err != nil {
		t.Errorf("public address with a token: %v", err)
	}
}

func jmErr(o JobManagerOptions) error  { _, err := NewJobManager(o); return err }
func tmErr(o TaskManagerOptions) error { _, err := NewTaskManager(o); return err }
