package cluster

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
)

// parallelismOf is the highest parallelism of the job's vertices, as the
// REST API shows them.
func parallelismOf(jm *JobManager, id string) int {
	j, ok := jm.Job(id)
	if !ok {
		return 0
	}
	n := 0
	for _, v := range j.Vertices() {
		n = max(n, v.Parallelism)
	}
	return n
}

// waitStatus polls the job until cond holds, failing after within.
func waitStatus(t *testing.T, cl *Client, id string, within time.Duration, what string, cond func(JobStatus) bool) JobStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := cl.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		if st.Terminal() || time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (the job ended too soon? make --n larger): %+v", what, within, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterReactive: a JobManager in reactive mode runs the job at the
// parallelism of the one slot registered, ignoring its --parallelism; a
// second TaskManager joins and the job rescales to 2 from its latest
// checkpoint; the second is cut off and the job goes on at 1 on the slot
// left. Rescales count as restarts (numRestarts) but leave no exception;
// the committed output is exactly once.
func TestClusterReactive(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{SchedulerMode: SchedulerReactive})
	cl := dial(t, jm)
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 1})
	eventually(t, "tm1 registered", func() bool { return attached(jm) == 1 })
	dir := t.TempDir()
	const n = 6000
	args := []string{"--n", "6000", "--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt"),
		"--parallelism", "3", "--slow", "1ms", "--restarts", "5", "--interval", "50ms"}
	id, err := cl.Submit(context.Background(), "counts", args)
	if err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, cl, id, 30*time.Second, "running at parallelism 1 with a checkpoint", func(st JobStatus) bool {
		return st.State == "RUNNING" && st.LastCheckpoint >= 1 && parallelismOf(jm, id) == 1
	})
	if want := "reactive mode: parallelism 1 (at most 32); --parallelism 3 is ignored"; st.Note != want {
		t.Errorf("note %q, want %q", st.Note, want)
	}
	px := newProxy(t, jm.Addr())
	tm2, _ := startTaskManager(t, TaskManagerOptions{JobManager: px.Addr(), ResourceID: "tm2", Slots: 1})
	before := st.LastCheckpoint
	st = waitStatus(t, cl, id, 30*time.Second, "rescaled to 2, with a checkpoint since", func(st JobStatus) bool {
		return st.State == "RUNNING" && parallelismOf(jm, id) == 2 && st.LastCheckpoint > before && len(tm2.RunningJobs()) == 1
	})
	if st.Restarts != 1 || !strings.Contains(st.Error, "rescaling from parallelism 1 to 2") {
		t.Errorf("after the scale up: %+v, want 1 restart, the rescale its cause", st)
	}
	jm.mu.Lock()
	run := jm.jobs[id]
	jm.mu.Unlock()
	if ex := run.Exceptions(); len(ex) != 0 {
		t.Errorf("a rescale left exceptions: %+v", ex)
	}
	if p := run.Placement(); len(p.Workers) != 2 {
		t.Errorf("placed on %+v, want both TaskManagers", p)
	}
	px.Cut()
	waitStatus(t, cl, id, 30*time.Second, "rescaled down to 1 on tm1", func(st JobStatus) bool {
		return st.State == "RUNNING" && parallelismOf(jm, id) == 1 && st.Restarts == 2
	})
	st = waitJob(t, cl, id, 60*time.Second)
	if st.State != "FINISHED" || st.Restarts != 2 {
		t.Fatalf("job ended %+v, want FINISHED after 2 restarts", st)
	}
	if d := diffLines(committed(t, filepath.Join(dir, "out")), wantCounts(n)); d != "" {
		t.Errorf("committed output is not exactly once: %s", d)
	}
	if ex := run.Exceptions(); len(ex) != 1 || !strings.Contains(ex[0].Message, "TaskManager tm2") {
		t.Errorf("exceptions %+v, want the loss of tm2 only", ex)
	}
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/jobs/"+id, nil)
	req.Host = "127.0.0.1:8081"
	srv.Handler().ServeHTTP(rec, req)
	for _, want := range []string{`"numRestarts":2`, `"parallelism":1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET /jobs/%s = %s, want %s", id, rec.Body.String(), want)
		}
	}
}

// TestReactiveWaitTimeout: in reactive mode a job waits for a first slot
// up to the resource wait timeout, then fails saying so.
func TestReactiveWaitTimeout(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{SchedulerMode: SchedulerReactive, Reactive: ReactiveOptions{WaitTimeout: 300 * time.Millisecond}})
	cl := dial(t, jm)
	dir := t.TempDir()
	id, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt")})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, cl, id, 30*time.Second)
	if st.State != "FAILED" || !strings.Contains(st.Error, "no free slot came within 300ms (jobmanager.adaptive-scheduler.resource-wait-timeout)") {
		t.Fatalf("job ended %+v, want FAILED for want of a slot", st)
	}
}

// TestReactiveStabilization: with a resource stabilization timeout the
// first attempt waits for the slots to settle before it is placed on fewer
// slots than the job could use, and a scale up waits as long after the
// last TaskManager joined (never less: the times are lower bounds).
func TestReactiveStabilization(t *testing.T) {
	const settle = 1500 * time.Millisecond
	jm := clusterJM(t, JobManagerOptions{SchedulerMode: SchedulerReactive, Reactive: ReactiveOptions{StabilizationTimeout: settle}})
	cl := dial(t, jm)
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 1})
	eventually(t, "tm1 registered", func() bool { return attached(jm) == 1 })
	attachedAt := time.Now()
	dir := t.TempDir()
	id, err := cl.Submit(context.Background(), "counts", []string{"--n", "6000", "--out", filepath.Join(dir, "out"),
		"--ckpt", filepath.Join(dir, "ckpt"), "--slow", "1ms", "--restarts", "5"})
	if err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, cl, id, 10*time.Second, "waiting for the slots to settle", func(st JobStatus) bool {
		return st.State == "CREATED" && strings.HasPrefix(st.Note, "waiting for the slots to settle (reactive mode, 1 free")
	})
	waitStatus(t, cl, id, 30*time.Second, "running at parallelism 1", func(st JobStatus) bool {
		return st.State == "RUNNING" && parallelismOf(jm, id) == 1
	})
	if d := time.Since(attachedAt); d < settle {
		t.Errorf("placed %v after the slots last changed, before the stabilization timeout %v (note %q)", d, settle, st.Note)
	}
	joined := time.Now() // before: the slots change after it
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm2", Slots: 1})
	waitStatus(t, cl, id, 30*time.Second, "rescaled to 2", func(st JobStatus) bool {
		return st.State == "RUNNING" && parallelismOf(jm, id) == 2
	})
	if d := time.Since(joined); d < settle {
		t.Errorf("rescaled %v after tm2 joined, before the stabilization timeout %v", d, settle)
	}
	if st := waitJob(t, cl, id, 60*time.Second); st.State != "FINISHED" {
		t.Fatalf("job ended %+v", st)
	}
	if d := diffLines(committed(t, filepath.Join(dir, "out")), wantCounts(6000)); d != "" {
		t.Errorf("committed output is not exactly once: %s", d)
	}
}
