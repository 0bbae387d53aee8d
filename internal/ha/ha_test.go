package ha_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/etcdtest"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The embedded etcd server and its gRPC clients leave pooled and
		// lazily-stopped goroutines behind for a moment after Close.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).linearizableReadLoop"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/pkg/v3/schedule.(*fifo).run"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/mvcc/backend.(*backend).run"),
	)
}

// etcdServer is an embedded etcd (etcdtest.Start) or a real etcd process
// (etcdtest.StartProcess).
type etcdServer interface {
	Endpoint() string
	Stop()
	Restart()
}

func dial(t *testing.T, e etcdServer, name string, ttl time.Duration) *ha.Client {
	t.Helper()
	c, err := ha.Dial(context.Background(), ha.Options{
		Endpoints: []string{e.Endpoint()}, ClusterID: clusterID(t), SessionTTL: ttl, Name: name,
		RequestTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterID is the test's own cluster id, so tests sharing an etcd do not
// meet.
func clusterID(t *testing.T) string {
	id := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	if len(id) > 63 {
		id = id[len(id)-63:]
	}
	return strings.TrimLeft(id, "-._")
}

func campaign(c *ha.Client, name string) (chan *ha.Leadership, chan error) {
	won, failed := make(chan *ha.Leadership, 1), make(chan error, 1)
	go func() {
		l, err := c.Campaign(context.Background(), ha.LeaderInfo{Name: name, RPCAddress: "127.0.0.1:1", RESTURL: "http://" + name})
		if err != nil {
			failed <- err
			return
		}
		won <- l
	}()
	return won, failed
}

func await[T any](t *testing.T, ch chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
		var zero T
		return zero
	}
}

// TestDeposedLeaderCannotWrite is the paused leader at the store's level:
// A leads and writes; its keep-alives stop (Orphan: what SIGSTOP does to
// the process) until its lease expires; B is elected after about the TTL;
// A's next writes, made on the leadership it still holds as an object,
// fail on the revision guard, and B's succeed and are what etcd holds.
func TestDeposedLeaderCannotWrite(t *testing.T) { deposedLeaderCannotWrite(t, etcdtest.Start(t)) }

// TestRealEtcdProcess runs the fencing and the etcd-restart proofs against
// a real etcd process (killed with SIGKILL and started again).
func TestRealEtcdProcess(t *testing.T) {
	p := etcdtest.StartProcess(t)
	t.Run("DeposedLeaderCannotWrite", func(t *testing.T) { deposedLeaderCannotWrite(t, p) })
	t.Run("CheckpointsThroughEtcdRestart", func(t *testing.T) { checkpointsThroughEtcdRestart(t, p) })
}

func deposedLeaderCannotWrite(t *testing.T, e etcdServer) {
	const ttl = 2 * time.Second
	a, b := dial(t, e, "a", ttl), dial(t, e, "b", ttl)
	la := await(t, func() chan *ha.Leadership { w, _ := campaign(a, "a"); return w }(), 10*time.Second, "a's campaign")
	defer la.Resign(context.Background())
	ctx := context.Background()
	ja := la.Store().Job("job1")
	if err := la.Store().PutJob(ctx, ha.JobRecord{ID: "job1", Name: "wordcount", Args: []string{"--parallelism", "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := ja.Reserve(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := ja.AddCompleted(ctx, 5, "file:///cp/job1/chk-5", false); err != nil {
		t.Fatal(err)
	}

	wonB, failedB := campaign(b, "b")
	select {
	case <-wonB:
		t.Fatal("b was elected while a leads")
	case err := <-failedB:
		t.Fatal(err)
	case <-time.After(ttl + 500*time.Millisecond):
	}
	if info, ok, err := b.Leader(ctx); err != nil || !ok || info.Name != "a" || info.Revision != la.Revision() {
		t.Fatalf("Leader = %+v, %v, %v; want a at revision %d", info, ok, err, la.Revision())
	}

	paused := time.Now()
	orphan(t, la) // a stops renewing its lease, as a stopped process
	lb := await(t, wonB, 3*ttl+5*time.Second, "b's campaign after a's lease expired")
	defer lb.Resign(context.Background())
	took := time.Since(paused)
	t.Logf("b elected %v after a stopped renewing (TTL %v)", took.Round(time.Millisecond), ttl)
	// a renewed its lease every TTL/3, so at least 2/3 of it was left.
	if took < ttl/2 {
		t.Fatalf("b elected after %v, before a's lease (TTL %v) could have run out", took, ttl)
	}
	if lb.Revision() <= la.Revision() {
		t.Fatalf("b's revision %d not above a's %d", lb.Revision(), la.Revision())
	}

	// a "resumes": each of its writes fails on the guard.
	for name, write := range map[string]func() error{
		"AddCompleted": func() error { return ja.AddCompleted(ctx, 6, "file:///cp/job1/chk-6", false) },
		"Reserve":      func() error { return ja.Reserve(ctx, 200) },
		"PutJob":       func() error { return la.Store().PutJob(ctx, ha.JobRecord{ID: "job2", Name: "x"}) },
		"RemoveJob":    func() error { return la.Store().RemoveJob(ctx, "job1") },
	} {
		if err := write(); !errors.Is(err, ha.ErrNotLeader) {
			t.Errorf("deposed %s = %v, want ErrNotLeader", name, err)
		}
	}
	if st := la.Store().Stats(); st.Fenced != 4 || st.Writes != 3 {
		t.Errorf("a's store stats %+v, want 4 fenced and 3 writes", st)
	}

	// b recovers what a wrote before it was deposed, and nothing after.
	plan, err := lb.Store().Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].Job.ID != "job1" || plan[0].Checkpoint != 5 || plan[0].Restore != "file:///cp/job1/chk-5" || plan[0].NextID != 101 {
		t.Fatalf("b's recovery plan = %+v", plan)
	}
	if !slices.Equal(plan[0].Job.Args, []string{"--parallelism", "2"}) {
		t.Fatalf("args = %q", plan[0].Job.Args)
	}
	if err := lb.Store().Job("job1").AddCompleted(ctx, 101, "file:///cp/job1/chk-101", false); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := lb.Store().Job("job1").Latest(ctx); err != nil || !ok || p.Checkpoint != 101 {
		t.Fatalf("Latest = %+v, %v, %v", p, ok, err)
	}
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a's leadership is not Done after its lease expired")
	}
}

// orphan stops a leadership's keep-alives without revoking its lease, as
// a process stopped by SIGSTOP: the lease then runs out on etcd's side.
func orphan(t *testing.T, l *ha.Leadership) {
	t.Helper()
	ha.OrphanForTest(l)
}

// TestResignElectsStandbyAtOnce: a leader that stops cleanly gives up its
// lease, and the standby is elected without waiting for the TTL; the
// watcher sees a, then b.
func TestResignElectsStandbyAtOnce(t *testing.T) {
	e := etcdtest.Start(t)
	const ttl = 10 * time.Second
	a, b := dial(t, e, "a", ttl), dial(t, e, "b", ttl)
	wctx, stopWatch := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		b.WatchLeader(wctx, func(info ha.LeaderInfo, ok bool) {
			mu.Lock()
			defer mu.Unlock()
			// Called again when the leader proclaims new values; the
			// test follows who leads.
			if ok && (len(seen) == 0 || seen[len(seen)-1] != info.Name) {
				seen = append(seen, info.Name)
			}
		})
	}()
	wonA, _ := campaign(a, "a")
	la := await(t, wonA, 10*time.Second, "a's campaign")
	wonB, _ := campaign(b, "b")
	time.Sleep(300 * time.Millisecond)
	members, err := a.Members(context.Background())
	if err != nil || len(members) != 2 || members[0].Name != "a" || members[1].Name != "b" {
		t.Fatalf("Members = %+v, %v", members, err)
	}
	resigned := time.Now()
	if err := la.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	lb := await(t, wonB, 3*time.Second, "b's campaign after a resigned")
	defer lb.Resign(context.Background())
	if d := time.Since(resigned); d > 2*time.Second {
		t.Fatalf("b elected %v after a resigned (TTL %v): should be at once", d, ttl)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		s := slices.Clone(seen)
		mu.Unlock()
		if slices.Equal(s, []string{"a", "b"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher saw %v, want [a b]", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopWatch()
	<-watched
}

// TestDialUnreachable: an etcd that does not answer fails Dial within the
// dial timeout, with one line naming the endpoint.
func TestDialUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = ha.Dial(context.Background(), ha.Options{Endpoints: []string{addr}, ClusterID: "c", DialTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--ha-endpoints") {
		t.Fatalf("Dial = %v, want a one-line error naming %s and --ha-endpoints", err, addr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Dial took %v with a 1s timeout", d)
	}
}

// TestRemoveJobAndOrphans: a removed job leaves nothing; keys of a job
// without a record are removed by Recover.
func TestRemoveJobAndOrphans(t *testing.T) {
	e := etcdtest.Start(t)
	c := dial(t, e, "a", 5*time.Second)
	won, _ := campaign(c, "a")
	l := await(t, won, 10*time.Second, "campaign")
	defer l.Resign(context.Background())
	ctx := context.Background()
	s := l.Store()
	for _, id := range []string{"j1", "j2"} {
		if err := s.PutJob(ctx, ha.JobRecord{ID: id, Name: "wordcount"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Job(id).Reserve(ctx, 99); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Job("ghost").AddCompleted(ctx, 3, "file:///x", false); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	plan, err := s.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].Job.ID != "j2" || plan[0].NextID != 100 {
		t.Fatalf("plan = %+v", plan)
	}
	resp, err := c.Etcd().Get(ctx, c.Keys().Checkpoints(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if !slices.Equal(keys, []string{c.Keys().Counter("j2")}) {
		t.Fatalf("checkpoint keys left: %v", keys)
	}
	if err := s.PutJob(ctx, ha.JobRecord{ID: "bad/id"}); err == nil || !strings.Contains(err.Error(), "job id") {
		t.Fatalf("PutJob(bad/id) = %v", err)
	}
}

// --- a JobMaster checkpointing through etcd -----------------------------------

// ackGateway plays tasks "a" (a source) and "b" that acknowledge every
// checkpoint at once, and records the completions the tasks are told of.
type ackGateway struct {
	mu       sync.Mutex
	l        jobmaster.Listener
	attempt  int
	complete []notice
	aborted  []notice
}

type notice struct {
	id int64
	at time.Time
}

func (g *ackGateway) Deploy(ctx context.Context, req jobmaster.DeployRequest, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	g.mu.Lock()
	g.l, g.attempt = l, req.Attempt
	g.mu.Unlock()
	for _, id := range []string{"a", "b"} {
		l.Report(jobmaster.TaskRunning{Attempt: req.Attempt, Task: id})
	}
	return []jobmaster.TaskInfo{{ID: "a", Source: true}, {ID: "b"}}, nil
}

func (g *ackGateway) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	g.mu.Lock()
	l := g.l
	g.mu.Unlock()
	for _, id := range []string{"a", "b"} {
		l.Report(jobmaster.Acknowledge{Attempt: req.Attempt, Task: id, Checkpoint: req.Checkpoint, StateSize: 1, CheckpointedSize: 1})
	}
}

func (g *ackGateway) NotifyComplete(n jobmaster.Notification) {
	g.mu.Lock()
	g.complete = append(g.complete, notice{n.Checkpoint, time.Now()})
	g.mu.Unlock()
}

func (g *ackGateway) NotifyAborted(n jobmaster.Notification) {
	g.mu.Lock()
	g.aborted = append(g.aborted, notice{n.Checkpoint, time.Now()})
	g.mu.Unlock()
}
func (g *ackGateway) FinishSources(int) {}
func (g *ackGateway) StopTasks(int)     {}
func (g *ackGateway) Cancel(req jobmaster.CancelRequest) {
	g.mu.Lock()
	l := g.l
	g.mu.Unlock()
	l.Report(jobmaster.AttemptEnded{Attempt: req.Attempt, Err: req.Err, Error: req.Reason, Cancellation: true})
}

func (g *ackGateway) completions() []notice {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.complete)
}

// TestJobMasterCheckpointsThroughEtcdRestart: a JobMaster checkpoints every
// 50 ms with its id counter and completed-checkpoint store in etcd. etcd
// is stopped for 2 s: no checkpoint completes from the moment it is down
// until it is back, the ones whose pointer cannot be written are aborted
// and counted (NotRecorded), the job does not fail; once etcd is back
// checkpoints complete again, and etcd's pointer is the last one the tasks
// were told of. Ids never repeat.
func TestJobMasterCheckpointsThroughEtcdRestart(t *testing.T) {
	checkpointsThroughEtcdRestart(t, etcdtest.Start(t))
}

func checkpointsThroughEtcdRestart(t *testing.T, e etcdServer) {
	c := dial(t, e, "a", 30*time.Second)
	won, _ := campaign(c, "a")
	l := await(t, won, 10*time.Second, "campaign")
	defer l.Resign(context.Background())
	js := l.Store().Job("job")
	gw := &ackGateway{}
	jm, err := jobmaster.New(jobmaster.Options{
		JobID:      "job",
		Checkpoint: checkpoint.Options{Interval: 50, Timeout: 60_000},
		Storage:    storage.NewMemoryStore(),
		IDCounter:  js, CompletedStore: js,
		StorageTimeout: 3 * time.Second,
	}, gw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- jm.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, 10*time.Second, "3 checkpoints before etcd stops", func() bool { return len(gw.completions()) >= 3 })

	e.Stop() // the embedded server's Close takes a few seconds; SIGKILL of a process none
	down := time.Now()
	time.Sleep(2 * time.Second)
	up := time.Now()
	e.Restart()
	before := len(gw.completions())
	waitFor(t, 20*time.Second, "3 more checkpoints once etcd is back", func() bool { return len(gw.completions()) >= before+3 })

	var during []int64
	all := gw.completions()
	for _, n := range all {
		// One checkpoint whose pointer etcd committed just before it
		// stopped may reach the tasks a moment later.
		if n.at.After(down.Add(100*time.Millisecond)) && n.at.Before(up) {
			during = append(during, n.id)
		}
	}
	if len(during) > 0 {
		t.Fatalf("checkpoints %v completed while etcd was down", during)
	}
	if jm.NotRecorded() == 0 {
		t.Fatal("no checkpoint was counted as not recorded while etcd was down")
	}
	ids := make([]int64, len(all))
	for i, n := range all {
		ids[i] = n.id
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatalf("completed ids not increasing: %v", ids)
	}
	sum, _ := jm.Stats()
	if sum.Failed == 0 {
		t.Fatalf("summary %+v: the checkpoints not recorded should show as failed", sum)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the cancellation (the job must not fail while etcd is down)", err)
	}
	done <- nil
	p, ok, err := js.Latest(context.Background())
	last := all[len(all)-1].id
	if err != nil || !ok || p.Checkpoint < last {
		t.Fatalf("etcd's pointer = %+v, %v, %v; the tasks were told %d completed", p, ok, err, last)
	}
	t.Logf("%d checkpoints completed, %d not recorded while etcd was down for %v; pointer at %d", len(all), jm.NotRecorded(), up.Sub(down).Round(time.Millisecond), p.Checkpoint)
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
