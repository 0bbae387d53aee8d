package cluster

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/storage"
)

// A JobManager and TaskManagers in this process, over real gRPC on
// 127.0.0.1 and real network nodes, running the jobs of testJobs.

// startTaskManager runs a TaskManager with its own data plane; opts may
// set the registry (default testJobs), the JobManager address, slots.
func startTaskManager(t *testing.T, opts TaskManagerOptions) (tm *TaskManager, stop func()) {
	t.Helper()
	node, err := network.New(network.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	opts.Node, opts.DataAddress = node, node.Addr()
	if opts.Jobs == nil {
		opts.Jobs = testJobs{}
	}
	tm, stopTM, _ := runTM(t, opts)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopTM()
			node.Close()
		})
	}
	t.Cleanup(stop)
	return tm, stop
}

func clusterJM(t *testing.T, opts JobManagerOptions) *JobManager {
	t.Helper()
	if opts.Jobs == nil {
		opts.Jobs = testJobs{}
	}
	if opts.HeartbeatInterval == 0 {
		// A TaskManager lost by a heartbeat timeout under -race and a
		// loaded machine would fail jobs these tests expect to finish:
		// their losses are connection cuts, detected at once.
		opts.HeartbeatInterval, opts.HeartbeatTimeout = 100*time.Millisecond, 5*time.Second
	}
	return startJM(t, opts)
}

// attached is the number of TaskManagers whose task stream is attached
// (the scheduler places only on those).
func attached(jm *JobManager) int {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	n := 0
	for _, m := range jm.instances {
		if m.tasks != nil && !m.tasks.isLost() {
			n++
		}
	}
	return n
}

func dial(t *testing.T, jm *JobManager) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := Dial(ctx, jm.Addr(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// waitJob polls the job until it ended or within passed.
func waitJob(t *testing.T, cl *Client, id string, within time.Duration) JobStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := cl.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Terminal() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end within %v: %+v", id, within, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committed reads the lines of the exactly-once sink's committed files
// (hidden files are pending or in progress), sorted.
func committed(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
	}
	slices.Sort(lines)
	return lines
}

// diffLines describes how got differs from want (missing and repeated
// lines), "" when equal.
func diffLines(got, want []string) string {
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var missing, extra []string
	for l, c := range count {
		switch {
		case c > 0:
			missing = append(missing, l)
		case c < 0:
			extra = append(extra, l)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return "missing " + strings.Join(head(missing), " ") + "; repeated or unexpected " + strings.Join(head(extra), " ")
}

func head(s []string) []string {
	if len(s) > 10 {
		return append(s[:10:10], "…")
	}
	return s
}

// A job submitted before any TaskManager registered waits for slots
// (saying so), then runs on two TaskManagers to the end, with the output
// of local mode.
func TestClusterJobRunsToTheEnd(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{})
	cl := dial(t, jm)
	dir := t.TempDir()
	args := []string{"--n", "2000", "--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt"), "--parallelism", "2", "--slow", "1ms"}
	id, err := cl.Submit(context.Background(), "counts", args)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job waits for slots", func() bool {
		st, err := cl.Status(context.Background(), id)
		return err == nil && st.State == "CREATED" && st.Note == "waiting for 2 slots, 0 registered"
	})
	// One slot each: the job needs both, and its keyed exchange crosses
	// the data plane.
	tm1, _ := startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 1, MetricsInterval: 20 * time.Millisecond})
	eventually(t, "the job waits for the second slot", func() bool {
		st, err := cl.Status(context.Background(), id)
		return err == nil && st.State == "CREATED" && st.Note == "waiting for 2 slots, 1 registered"
	})
	tm2, _ := startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm2", Slots: 1, MetricsInterval: 20 * time.Millisecond})
	eventually(t, "the job holds both slots", func() bool {
		ms := members(jm)
		return ms["tm1"].FreeSlots == 0 && ms["tm2"].FreeSlots == 0
	})
	// While it runs, every subtask reports running on its TaskManager.
	jm.mu.Lock()
	run := jm.jobs[id]
	jm.mu.Unlock()
	eventually(t, "every subtask runs on a TaskManager", func() bool {
		for _, v := range run.Vertices() {
			for _, st := range v.Subtasks {
				if st.Status != rest.TaskRunning || (st.TaskManager != "tm1" && st.TaskManager != "tm2") {
					return false
				}
			}
		}
		return true
	})
	// While it runs (at 1 ms a record, a second at least), the
	// TaskManagers report their subtasks' records.
	var last string
	eventually(t, "the running source's records reach the JobManager", func() bool {
		v := run.Vertices()[0]
		if l := fmt.Sprintf("%s %d", v.Status, v.Metrics.WriteRecords); !strings.HasSuffix(last, l) {
			last += fmt.Sprintf(" | %v %s", time.Now().Format("05.000"), l)
		}
		return v.Status == rest.TaskRunning && v.Metrics.WriteRecords > 0 && v.Metrics.WriteRecords < 2000
	}, func() string { return last })
	st := waitJob(t, cl, id, 60*time.Second)
	if st.State != "FINISHED" || st.Restarts != 0 || st.Note != "" {
		t.Fatalf("job ended %+v", st)
	}
	eventually(t, "the slots are free again", func() bool {
		ms := members(jm)
		return ms["tm1"].FreeSlots == 1 && ms["tm2"].FreeSlots == 1
	})
	got := committed(t, filepath.Join(dir, "out"))
	if d := diffLines(got, wantCounts(2000)); d != "" {
		t.Errorf("cluster output: %s", d)
	}
	// The same job in local mode writes the same.
	env, err := countsEnv([]string{"--n", "2000", "--out", filepath.Join(dir, "local"), "--ckpt", filepath.Join(dir, "ckpt-local"), "--parallelism", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background(), "counts"); err != nil {
		t.Fatal(err)
	}
	if local := committed(t, filepath.Join(dir, "local")); !slices.Equal(local, got) {
		t.Errorf("local mode wrote %d lines, the cluster %d: %s", len(local), len(got), diffLines(got, local))
	}
	// The subtasks were spread over both TaskManagers; the REST view has
	// the job.
	if p := run.Placement(); len(p.Workers) != 2 || p.Worker(0, 0) == p.Worker(0, 1) {
		t.Errorf("placement = %+v", p)
	}
	if js := jm.Jobs(); len(js) != 1 || js[0].ID() != id || js[0].Status() != "FINISHED" || len(js[0].Vertices()) == 0 {
		t.Errorf("REST jobs = %v", js)
	}
	// Each vertex's subtasks name the TaskManager the placement put them
	// on, with its data address (GET /jobs/{id}/vertices/{vid}).
	p := run.Placement()
	for _, v := range run.Vertices() {
		var vid int
		fmt.Sscan(v.ID, &vid)
		for s, st := range v.Subtasks {
			if w := p.Worker(vid, s); st.TaskManager != w || st.Endpoint != p.Workers[w] || w == "" || st.Status != rest.TaskFinished || st.StartTime.IsZero() {
				t.Errorf("vertex %s subtask %d: %+v, placed on %q at %q", v.ID, s, st, w, p.Workers[w])
			}
		}
		if len(v.Subtasks) != v.Parallelism {
			t.Errorf("vertex %s: %d subtasks, parallelism %d", v.ID, len(v.Subtasks), v.Parallelism)
		}
	}
	// The final figures of each TaskManager: the source vertex (numbers
	// -> slow) sent the 2000 numbers, the keyed vertex (count -> out)
	// read them; each subtask did its part and the vertex sums them.
	vs := run.Vertices()
	if len(vs) != 2 {
		t.Fatalf("%d vertices, want 2", len(vs))
	}
	for i, want := range []rest.IOMetrics{{WriteRecords: 2000}, {ReadRecords: 2000}} {
		v := vs[i]
		var sum rest.IOMetrics
		for s, st := range v.Subtasks {
			m := st.Metrics
			if (want.WriteRecords > 0 && m.WriteRecords == 0) || (want.ReadRecords > 0 && m.ReadRecords == 0) || m.BusyTime+m.IdleTime == 0 {
				t.Errorf("vertex %s subtask %d: figures %+v", v.ID, s, m)
			}
			sum.ReadRecords += m.ReadRecords
			sum.WriteRecords += m.WriteRecords
		}
		if v.Metrics.ReadRecords != sum.ReadRecords || v.Metrics.WriteRecords != sum.WriteRecords {
			t.Errorf("vertex %s: %+v, its subtasks sum to %+v", v.ID, v.Metrics, sum)
		}
		if v.Metrics.ReadRecords != want.ReadRecords || (i == 0 && v.Metrics.WriteRecords != want.WriteRecords) {
			t.Errorf("vertex %s (%s): read %d, wrote %d; want %+v", v.ID, v.Name, v.Metrics.ReadRecords, v.Metrics.WriteRecords, want)
		}
	}
	if ops := vs[1].Operators; len(ops) != 2 || ops[0].Name != "count" || ops[0].ReadRecords != 2000 || ops[1].ReadRecords != ops[0].WriteRecords {
		t.Errorf("keyed vertex operators: %+v", ops)
	}
	// The keyed exchange's channels between tm1 and tm2 crossed the data
	// plane: the bytes the subtasks wrote, they read, above 0 (those
	// within one TaskManager count none). Every subtask ended at the end
	// of input's watermark.
	var read, written int64
	for _, v := range vs {
		for s, st := range v.Subtasks {
			read += st.Metrics.ReadBytes
			written += st.Metrics.WriteBytes
			if !st.Watermarks || st.InputWatermark != math.MaxInt64 || st.OutputWatermark != math.MaxInt64 {
				t.Errorf("vertex %s subtask %d: watermarks %+v, want the end of input", v.ID, s, st)
			}
		}
	}
	if read != written || read == 0 || vs[0].Metrics.WriteBytes == 0 || vs[1].Metrics.ReadBytes == 0 {
		t.Errorf("the subtasks wrote %d bytes and read %d (the source vertex wrote %d, the keyed one read %d): want all the same, above 0",
			written, read, vs[0].Metrics.WriteBytes, vs[1].Metrics.ReadBytes)
	}
	// Each TaskManager holds its subtasks' figures, for its /metrics: those
	// the JobManager reports.
	for _, tm := range []*TaskManager{tm1, tm2} {
		jobs := tm.Jobs()
		if len(jobs) != 1 || jobs[0].ID() != id || jobs[0].Name() != "counts" || jobs[0].TaskManagerID() != tm.ResourceID() {
			t.Fatalf("%s: jobs %+v, want job %s", tm.ResourceID(), jobs, id)
		}
		attempt, tasks := jobs[0].Metrics().Tasks()
		placed := 0
		for _, v := range vs {
			for _, st := range v.Subtasks {
				if st.TaskManager == tm.ResourceID() {
					placed++
				}
			}
		}
		if len(tasks) != placed {
			t.Errorf("%s holds %d tasks, runs %d subtasks", tm.ResourceID(), len(tasks), placed)
		}
		for _, task := range tasks {
			var vid int
			fmt.Sscan(task.Vertex, &vid)
			st := vs[vid].Subtasks[task.Subtask]
			s := task.Snapshot(time.Now())
			if st.TaskManager != tm.ResourceID() || st.Attempt != attempt || s.RecordsIn != st.Metrics.ReadRecords || s.RecordsOut != st.Metrics.WriteRecords ||
				s.BytesIn != st.Metrics.ReadBytes || s.BytesOut != st.Metrics.WriteBytes || s.InputWatermark != st.InputWatermark || s.OutputWatermark != st.OutputWatermark {
				t.Errorf("%s task %s of attempt %d: %+v; the JobManager has %+v", tm.ResourceID(), task.ID, attempt, s, st)
			}
		}
	}
	list, err := cl.List(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].LastCheckpoint == 0 {
		t.Errorf("List = %+v, %v", list, err)
	}
	// The REST API serves the job (what weir list/info/checkpoints read).
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/jobs":                        `"id":"` + id + `","status":"FINISHED"`,
		"/jobs/" + id:                  `"state":"FINISHED"`,
		"/jobs/" + id + "/checkpoints": `"completed":`,
		"/jobs/overview":               `"name":"counts"`,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:8081"
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s = %d %s, want %s", path, rec.Code, rec.Body.String(), want)
		}
	}
}

// proxy forwards TCP connections to a target until Cut, which closes
// every connection at once (a connection cut, not a shutdown).
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			p.mu.Lock()
			if err != nil || p.cut {
				p.mu.Unlock()
				c.Close()
				if u != nil {
					u.Close()
				}
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(u, c); u.Close() })
			p.wg.Go(func() { io.Copy(c, u); c.Close() })
		}
	})
	t.Cleanup(func() {
		p.Cut()
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Heal lets new connections through again.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Cut closes every connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A TaskManager whose control connection is cut while the job runs is
// lost at once; the job restarts from its latest checkpoint on the
// remaining slots, and the committed output is exactly once.
func TestClusterTaskManagerLost(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{})
	cl := dial(t, jm)
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 2})
	px := newProxy(t, jm.Addr())
	tm2, _ := startTaskManager(t, TaskManagerOptions{JobManager: px.Addr(), ResourceID: "tm2", Slots: 2})
	eventually(t, "both registered with their task streams", func() bool { return attached(jm) == 2 })
	dir := t.TempDir()
	const n = 6000
	args := []string{"--n", "6000", "--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt"),
		"--parallelism", "2", "--slow", "1ms", "--restarts", "3", "--interval", "50ms"}
	id, err := cl.Submit(context.Background(), "counts", args)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := cl.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == "RUNNING" && st.LastCheckpoint >= 1 && len(tm2.RunningJobs()) == 1 {
			break
		}
		if st.Terminal() || time.Now().After(deadline) {
			t.Fatalf("the job did not run with a checkpoint and tasks on tm2 (make --n larger?): %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	px.Cut()
	eventually(t, "tm2 lost and its tasks cancelled", func() bool {
		_, ok := members(jm)["tm2"]
		return !ok && len(tm2.RunningJobs()) == 0
	})
	st := waitJob(t, cl, id, 60*time.Second)
	if st.State != "FINISHED" || st.Restarts < 1 {
		t.Fatalf("job ended %+v", st)
	}
	jm.mu.Lock()
	run := jm.jobs[id]
	jm.mu.Unlock()
	if p := run.Placement(); len(p.Workers) != 1 || p.Worker(0, 0) != "tm1" {
		t.Errorf("the restart was placed on %+v, want tm1 alone", p)
	}
	if d := diffLines(committed(t, filepath.Join(dir, "out")), wantCounts(n)); d != "" {
		t.Errorf("committed output is not exactly once: %s", d)
	}
	// The job's one-time preparation ran once, in the JobManager: not on
	// the restart, not on the TaskManagers.
	if b, err := os.ReadFile(filepath.Join(dir, "out.prepared")); err != nil || string(b) != "prepared\n" {
		t.Errorf("prepared %q, %v; want once", b, err)
	}
	if ex := run.Exceptions(); len(ex) == 0 || !strings.Contains(ex[len(ex)-1].Message, "TaskManager tm2") || ex[len(ex)-1].Location != "tm2" {
		t.Errorf("exceptions = %+v", ex)
	}
	// REST shows the figures of the last attempt, as Flink shows the
	// current execution attempt's: its subtasks counted from 0 when it was
	// placed, so the source sent at most the n records, only those after
	// the checkpoint it resumed from.
	run.mu.Lock()
	figAttempt, _ := run.figures.Attempt()
	run.mu.Unlock()
	if figAttempt != st.Attempt || st.Attempt < 1 {
		t.Errorf("figures of attempt %d, the job's last attempt is %d", figAttempt, st.Attempt)
	}
	if v := run.Vertices()[0]; v.Metrics.WriteRecords > n || v.Subtasks[0].Attempt != st.Attempt {
		t.Errorf("source vertex after the restart: wrote %d records (of %d), subtask 0 of attempt %d (want %d)",
			v.Metrics.WriteRecords, n, v.Subtasks[0].Attempt, st.Attempt)
	}
	// /jobs/{id} reports the restart as Flink's numRestarts.
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/jobs/"+id, nil)
	req.Host = "127.0.0.1:8081"
	srv.Handler().ServeHTTP(rec, req)
	if want := fmt.Sprintf(`"numRestarts":%d`, st.Restarts); !strings.Contains(rec.Body.String(), want) {
		t.Errorf("GET /jobs/%s = %s, want %s", id, rec.Body.String(), want)
	}
	// Once it reaches the JobManager again, tm2 registers again and its
	// slots are used: a job of parallelism 4 needs them.
	px.Heal()
	eventually(t, "tm2 registered again", func() bool { return attached(jm) == 2 })
	out2 := filepath.Join(dir, "out2")
	id2, err := cl.Submit(context.Background(), "counts", []string{"--n", "500", "--out", out2, "--ckpt", filepath.Join(dir, "ckpt2"), "--parallelism", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, cl, id2, 60*time.Second); st.State != "FINISHED" {
		t.Fatalf("second job ended %+v", st)
	}
	jm.mu.Lock()
	run2 := jm.jobs[id2]
	jm.mu.Unlock()
	if p := run2.Placement(); len(p.Workers) != 2 {
		t.Errorf("the second job was placed on %+v, want tm1 and tm2", p)
	}
	if d := diffLines(committed(t, out2), wantCounts(500)); d != "" {
		t.Errorf("second job's output: %s", d)
	}
}

// skewedJobs builds every job at another parallelism: another graph.
type skewedJobs struct{}

func (skewedJobs) Names() []string { return testJobs{}.Names() }
func (skewedJobs) Job(name string, args []string) (deploy.Job, error) {
	return testJobs{}.Job(name, append(slices.Clone(args), "--parallelism", "1"))
}

// A TaskManager whose build of the job gives another graph refuses it,
// naming both fingerprints; the job fails with that.
func TestClusterFingerprintMismatch(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{})
	cl := dial(t, jm)
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm-other", Slots: 2, Jobs: skewedJobs{}})
	eventually(t, "registered", func() bool { return len(jm.Members()) == 1 })
	dir := t.TempDir()
	id, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt")})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, cl, id, 30*time.Second)
	if st.State != "FAILED" || !strings.Contains(st.Error, "TaskManager tm-other refuses job counts: its build of the job has graph fingerprint") ||
		!strings.Contains(st.Error, "the JobManager's") {
		t.Fatalf("job ended %+v", st)
	}
}

// Checkpoint storage in a JobManager's memory is refused at submission;
// storage a TaskManager does not see (here: its file system is another
// machine's) fails the job naming the path and the TaskManager.
func TestClusterStorageMustBeShared(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{})
	cl := dial(t, jm)
	dir := t.TempDir()
	_, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", "memory://ckpt"})
	if err == nil || !strings.Contains(err.Error(), "checkpoint storage memory://ckpt lives in the JobManager's memory") {
		t.Fatalf("memory:// submission: %v", err)
	}
	// tm2 sees its own disk under the same path.
	elsewhere := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 1})
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm2", Slots: 1,
		OpenStorage: func(url string) (storage.Store, error) {
			return storage.Open(strings.Replace(url, dir, elsewhere, 1))
		}})
	eventually(t, "registered", func() bool { return len(jm.Members()) == 2 })
	id, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", ckpt})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, cl, id, 30*time.Second)
	if st.State != "FAILED" || !strings.Contains(st.Error, "TaskManager tm2 does not share the checkpoint storage") || !strings.Contains(st.Error, ckpt) {
		t.Fatalf("job ended %+v", st)
	}
}

// Too few slots: the job waits for the slot request timeout, then fails
// saying how many it waited for.
func TestClusterTooFewSlots(t *testing.T) {
	jm := clusterJM(t, JobManagerOptions{SlotRequestTimeout: 300 * time.Millisecond})
	cl := dial(t, jm)
	startTaskManager(t, TaskManagerOptions{JobManager: jm.Addr(), ResourceID: "tm1", Slots: 1})
	eventually(t, "registered", func() bool { return len(jm.Members()) == 1 })
	dir := t.TempDir()
	id, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt"), "--parallelism", "2"})
	if err != nil {
		t.Fatal(err)
	}
	// While it waits, the same job id cannot be submitted again.
	if _, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt")}); err == nil ||
		!strings.Contains(err.Error(), "job id counts is already running (job counts): cancel it first") {
		t.Errorf("a second submission: %v", err)
	}
	st := waitJob(t, cl, id, 30*time.Second)
	if st.State != "FAILED" || !strings.Contains(st.Error, "waiting for 2 slots, 1 registered: not enough slots came within 300ms (slot.request.timeout") {
		t.Fatalf("job ended %+v", st)
	}
	// A job waiting for slots is cancelled.
	id, err = cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "out"), "--ckpt", filepath.Join(dir, "ckpt"), "--parallelism", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, cl, id, 30*time.Second); st.State != "CANCELED" {
		t.Errorf("cancelled job ended %+v", st)
	}
	if err := cl.Cancel(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `no job "nope"`) {
		t.Errorf("cancel of an unknown id: %v", err)
	}
	if _, err := cl.Submit(context.Background(), "counts", []string{"--out", filepath.Join(dir, "prepare-fails"), "--ckpt", filepath.Join(dir, "ckpt")}); err == nil ||
		!strings.Contains(err.Error(), "job counts: output "+filepath.Join(dir, "prepare-fails")+" is not usable") {
		t.Errorf("a failing Prepare: %v", err)
	}
	if _, err := cl.Submit(context.Background(), "nope", nil); err == nil || !strings.Contains(err.Error(), `unknown job "nope" (known: counts)`) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := cl.Status(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `no job "nope"`) {
		t.Errorf("unknown id: %v", err)
	}
}

// A JobManager address that does not answer fails Dial, naming it.
func TestDialNoJobManager(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = Dial(ctx, addr, ClientOptions{})
	if err == nil || !strings.Contains(err.Error(), "no JobManager answered at "+addr) {
		t.Errorf("Dial = %v", err)
	}
}
