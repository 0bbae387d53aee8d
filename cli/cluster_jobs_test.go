package cli

// Jobs on a cluster of real weir processes on 127.0.0.1: a JobManager,
// TaskManagers, and weir run --jobmanager submitting bundled jobs by name.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/testutil/certtest"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// testCluster is a JobManager and its TaskManagers.
type testCluster struct {
	t        *testing.T
	jm       *roleProc
	rpc, url string
	// tms[i] is the i-th TaskManager's current process; tmArgs[i] its
	// flags, to start it again.
	tms    []*roleProc
	tmIDs  []string
	tmArgs [][]string
	tmEnv  [][]string
}

// startCluster starts a JobManager with jmArgs and n TaskManagers of
// slots slots each, and waits until they are registered.
func startCluster(t *testing.T, n, slots int, jmArgs ...string) *testCluster {
	t.Helper()
	jm, rpc, url := startJobManager(t, jmArgs...)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	for range n {
		c.addTaskManager(nil, "--slots", strconv.Itoa(slots))
	}
	c.waitRegistered(n)
	return c
}

// addTaskManager starts one more TaskManager with env and args.
func (c *testCluster) addTaskManager(env []string, args ...string) int {
	c.t.Helper()
	full := append([]string{"taskmanager", "--jobmanager", c.rpc}, args...)
	p, got := startRole(c.t, env, full, `TaskManager (\S+) with`, `msg=registered`)
	c.tms = append(c.tms, p)
	c.tmIDs = append(c.tmIDs, got[0])
	c.tmArgs = append(c.tmArgs, full)
	c.tmEnv = append(c.tmEnv, env)
	return len(c.tms) - 1
}

// restart starts TaskManager i again (after it was killed), under a new
// id, and waits until it registered.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	p, got := startRole(c.t, c.tmEnv[i], c.tmArgs[i], `TaskManager (\S+) with`, `msg=registered`)
	c.tms[i], c.tmIDs[i] = p, got[0]
}

func (c *testCluster) waitRegistered(n int) {
	c.t.Helper()
	waitTaskManagers(c.t, c.url, fmt.Sprintf("%d TaskManagers are registered", n), func(m map[string]rest.TaskManagerEntry) bool { return len(m) == n })
}

// client dials the JobManager from the test.
func (c *testCluster) client(token string) *cluster.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := cluster.Dial(ctx, c.rpc, cluster.ClientOptions{Token: token})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// logs is every process's stderr, for a failure report.
func (c *testCluster) logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- JobManager:\n%s", c.jm.stderr.String())
	for i, p := range c.tms {
		fmt.Fprintf(&b, "--- TaskManager %d (%s):\n%s", i, c.tmIDs[i], p.stderr.String())
	}
	return b.String()
}

// committedLines are the lines of the committed files of dir.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	forEachCommittedLine(t, dir, func(_, line string) { out = append(out, line) })
	return out
}

// wordCountArgs are weir run wordcount's flags for input into out with
// checkpoints in ck.
func wordCountArgs(input, out, ck string, extra ...string) []string {
	return append([]string{"run", "wordcount", "--input", input, "--output", out, "--parallelism", "2",
		"--checkpoint-interval", "100ms", "--checkpoint-dir", ck}, extra...)
}

// exitCode waits (up to d) for p to end and returns its exit code.
func exitCode(t *testing.T, p *roleProc, d time.Duration, what string) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("%s did not end within %v; stderr:\n%s", what, d, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// TestClusterWordCountSameAsLocal: wordcount on a JobManager and two
// TaskManagers of one slot each (so every edge crosses the data plane
// between processes) commits the same lines as in local mode; with
// --detached weir run prints the job's id and returns, and the job runs
// to its end.
func TestClusterWordCountSameAsLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 20_000)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))

	localOut := filepath.Join(dir, "local")
	if _, stderr, code := runWeir(t, wordCountArgs(input, localOut, filepath.Join(dir, "ck-local"))...); code != 0 {
		t.Fatalf("local run: exit %d\n%s", code, stderr)
	}
	c := startCluster(t, 2, 1)
	// Relative paths: weir run makes them absolute for the cluster's
	// processes, which run elsewhere.
	rel := func(p string) string {
		wd, _ := os.Getwd()
		r, err := filepath.Rel(wd, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	clusterOut := filepath.Join(dir, "cluster")
	// An earlier result in the output directory: the JobManager removes it
	// once, at submission (deploy.Preparer), as weir run does in local mode.
	os.MkdirAll(clusterOut, 0o755)
	stale := filepath.Join(clusterOut, "part-00000-0000-0000000007")
	os.WriteFile(stale, []byte("stale,1\n"), 0o644)
	start := time.Now()
	stdout, stderr, code := runWeir(t, append(wordCountArgs(rel(input), rel(clusterOut), rel(filepath.Join(dir, "ck-cluster"))), "--jobmanager", c.rpc)...)
	t.Logf("on the cluster in %v", time.Since(start).Round(time.Millisecond))
	if code != 0 || !strings.Contains(stdout, "wordcount: job wordcount finished on the cluster") {
		t.Fatalf("cluster run: exit %d\nstdout %s\nstderr %s\n%s", code, stdout, stderr, c.logs())
	}
	for _, w := range []string{"weir: job wordcount submitted to the JobManager at " + c.rpc, "weir: job wordcount is FINISHED (attempt"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("weir run's progress lacks %q:\n%s", w, stderr)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the earlier result %s is still there: the job was not prepared at submission", stale)
	}
	missing, extra := multiset.Diff(committedLines(t, localOut), committedLines(t, clusterOut))
	if len(missing)+len(extra) > 0 {
		t.Errorf("cluster output differs from local: %d lines missing (first %v), %d extra (first %v)",
			len(missing), missing[:min(len(missing), 5)], len(extra), extra[:min(len(extra), 5)])
	}
	checkWordCountOutput(t, clusterOut, want)
	// The JobManager's /metrics carries the job's checkpoint figures and
	// numRestarts, as Flink's JobManager reports them.
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range []string{`weir_jobmanager_job_numRestarts{job_id="wordcount"`, `weir_jobmanager_job_numberOfCompletedCheckpoints{job_id="wordcount"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), w) {
			t.Errorf("JobManager /metrics: status %d, lacks %q:\n%s", resp.StatusCode, w, body)
			break
		}
	}
	// Both TaskManagers ran a part of it.
	for i, p := range c.tms {
		if !strings.Contains(p.stderr.String(), "wordcount") {
			t.Logf("TaskManager %d's log does not name the job:\n%s", i, p.stderr.String())
		}
	}

	// Detached: the id on stdout, at once; the job goes on to its end.
	detachedOut := filepath.Join(dir, "detached")
	stdout, stderr, code = runWeir(t, append(wordCountArgs(input, detachedOut, filepath.Join(dir, "ck-detached")), "--jobmanager", c.rpc, "--detached")...)
	id := strings.TrimSpace(stdout)
	if code != 0 || id != "wordcount" {
		t.Fatalf("detached: exit %d, stdout %q\nstderr %s", code, stdout, stderr)
	}
	st := waitJob(t, c.client(""), id, time.Minute, func(s cluster.JobStatus) bool { return s.Terminal() })
	if st.State != "FINISHED" {
		t.Fatalf("detached job ended %+v\n%s", st, c.logs())
	}
	checkWordCountOutput(t, detachedOut, want)
}

// waitJob polls the job's status until cond holds (or d passes).
func waitJob(t *testing.T, cl *cluster.Client, id string, d time.Duration, cond func(cluster.JobStatus) bool) cluster.JobStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cl.Status(ctx, id)
		cancel()
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met within %v; last status %+v, %v", id, d, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Bounds of the cluster's SIGKILL test: the input is sized so that the job
// runs a few seconds on two TaskManagers, long enough for the kills.
//
// On a loaded machine the job may progress little between kills, on a
// fast one it may end before the last: the test wants clusterKills kills
// and fails only when the job ended before the first.
const (
	clusterKillLines    = 400_000
	clusterKills        = 3
	clusterKillMinDelay = 200 * time.Millisecond
	clusterKillMaxDelay = 700 * time.Millisecond
)

// clusterRestart is the restart strategy of the failover tests: quick
// retries, many of them.
const clusterRestart = "fixed-delay:attempts=100,delay=100ms"

// TestClusterSIGKILLTaskManagersExactlyOnce kills TaskManagers with SIGKILL
// at random moments while wordcount writes through the exactly-once file
// sink, and starts each again after a random pause. The job restarts from
// its latest checkpoint on the slots left and runs to its end; the
// committed output holds each "word,k" exactly once. Rerun a failure with
// WEIR_SIGKILL_SEED.
func TestClusterSIGKILLTaskManagersExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real weir processes")
	}
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_SIGKILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with WEIR_SIGKILL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	dir := t.TempDir()
	input := wordsInput(t, dir, clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	// Two slots each: the job fits on either TaskManager alone.
	c := startCluster(t, 2, 2, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "3s")
	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart), "--jobmanager", c.rpc)
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	kills := 0
	for kills < clusterKills {
		delay := clusterKillMinDelay + time.Duration(rng.Int64N(int64(clusterKillMaxDelay-clusterKillMinDelay)))
		select {
		case <-run.exited:
		case <-time.After(delay):
		}
		if isDone(run) {
			t.Logf("the job ended after %d kills", kills)
			break
		}
		i := rng.IntN(len(c.tms))
		c.tms[i].cmd.Process.Kill()
		<-c.tms[i].exited
		kills++
		t.Logf("kill %d: TaskManager %d (%s) after %v", kills, i, c.tmIDs[i], delay.Round(time.Millisecond))
		time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
		c.restart(i)
	}
	if code := exitCode(t, run, 90*time.Second, "weir run"); code != 0 {
		t.Fatalf("weir run exited %d after %d kills:\n%s\n%s", code, kills, run.stderr.String(), c.logs())
	}
	if kills == 0 {
		t.Fatalf("the job ended before the first kill: make the input larger\n%s", run.stderr.String())
	}
	restarts := strings.Count(run.stderr.String(), "restarted (restart")
	t.Logf("%d kills, %d restarts seen by weir run", kills, restarts)
	checkWordCountOutput(t, out, want)
}

func isDone(p *roleProc) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// waitLine waits (up to d) until p's stderr matches re.
func waitLine(t *testing.T, p *roleProc, re string, d time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(d)
	for !rx.MatchString(p.stderr.String()) {
		if time.Now().After(deadline) || isDone(p) {
			t.Fatalf("no %q within %v (ended: %v); stderr:\n%s", re, d, isDone(p), p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterZombieTaskManager: a TaskManager stopped (SIGSTOP) past the
// heartbeat timeout is dropped and the job restarts without it; resumed
// (SIGCONT) while the new attempt runs, its tasks of the old attempt wake
// up with their pending output, but nothing of an old attempt is acked or
// committed (the JobManager drops its messages; the zombie, finding it
// lost the JobManager, cancels them), so the committed output stays
// exactly once.
func TestClusterZombieTaskManager(t *testing.T) {
	if testing.Short() {
		t.Skip("stops real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	// Debug: the JobManager logs each message it drops.
	c := startCluster(t, 2, 2, "--heartbeat-interval", "100ms", "--heartbeat-timeout", "1s", "--log-level", "debug")
	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart), "--jobmanager", c.rpc)
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	waitLine(t, run, `completed checkpoint`, 30*time.Second)
	zombie := c.tms[0]
	if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Dropped by the heartbeat, the job restarts on the other one, and
	// checkpoints again there.
	waitLine(t, run, `restarted \(restart 1\)`, 30*time.Second)
	t.Logf("restarted %v after SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	n := strings.Count(run.stderr.String(), "completed checkpoint")
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(run.stderr.String(), "completed checkpoint") < n+2 && !isDone(run) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if isDone(run) {
		t.Fatalf("the job ended before the zombie woke up: make the input larger\n%s", run.stderr.String())
	}
	zombie.cmd.Process.Signal(syscall.SIGCONT)
	resumed := time.Now()
	if code := exitCode(t, run, 90*time.Second, "weir run"); code != 0 {
		t.Fatalf("weir run exited %d:\n%s\n%s", code, run.stderr.String(), c.logs())
	}
	t.Logf("the job ran %v after the zombie woke up", time.Since(resumed).Round(time.Millisecond))
	checkWordCountOutput(t, out, want)
	// Either side fences the zombie: the JobManager drops what its old
	// attempt sends (another instance, another attempt), or the zombie,
	// silent past the heartbeat timeout, finds it lost the JobManager and
	// cancels its tasks before they send anything.
	dropped := strings.Count(c.jm.stderr.String(), "dropping a message of a TaskManager")
	zlog := zombie.stderr.String()
	cancelled := strings.Contains(zlog, "cancelling every task: the JobManager was lost")
	t.Logf("the JobManager dropped %d messages of TaskManagers; the zombie cancelled its tasks itself: %v", dropped, cancelled)
	if dropped == 0 && !cancelled {
		t.Errorf("the zombie was fenced by neither side; its log:\n%s", zlog)
	}
}

// TestClusterRunBadInput: each mistake of weir run --jobmanager, and each
// TaskManager that cannot take part, gives a one-line error and a non-zero
// exit.
func TestClusterRunBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	os.WriteFile(input, []byte("a b c\n"), 0o644)
	c := startCluster(t, 1, 1, "--slot-request-timeout", "1s")
	_, tokenRPC, _ := startJobManager(t, "--cluster-token", "right")
	dead := freeAddr(t)
	ck := filepath.Join(dir, "ck")
	cfg := filepath.Join(dir, "weir.yaml")
	os.WriteFile(cfg, []byte("jobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: 6123\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown job", []string{"run", "wordcnt", "--jobmanager", c.rpc}, `unknown command "wordcnt" for "weir run": did you mean "wordcount"?`},
		{"unknown job, far off", []string{"run", "sort", "--jobmanager", c.rpc}, `unknown command "sort" for "weir run": use one of nexmark, wordcount`},
		{"no JobManager answers", wordCountArgs(input, filepath.Join(dir, "o1"), ck, "--jobmanager", dead, "--jobmanager-timeout", "1s"), "no JobManager answered at " + dead},
		{"wrong token", wordCountArgs(input, filepath.Join(dir, "o8"), ck, "--jobmanager", tokenRPC, "--cluster-token", "wrong"), "JobManager " + tokenRPC + ": wrong cluster token"},
		{"no token", wordCountArgs(input, filepath.Join(dir, "o9"), ck, "--jobmanager", tokenRPC), "the JobManager requires a cluster token"},
		{"more parallelism than slots", wordCountArgs(input, filepath.Join(dir, "o2"), ck, "--jobmanager", c.rpc, "--parallelism", "3", "--restart", "none"), "waiting for 3 slots"},
		{"bad flag value", wordCountArgs(input, filepath.Join(dir, "o3"), ck, "--jobmanager", c.rpc, "--state-backend", "rocks"), `--state-backend is "rocks": use heap or pebble`},
		{"no shared checkpoint storage", []string{"run", "wordcount", "--input", input, "--output", filepath.Join(dir, "o4"), "--jobmanager", c.rpc}, "checkpoint storage"},
		{"checkpoints in memory", wordCountArgs(input, filepath.Join(dir, "o5"), "memory://x", "--jobmanager", c.rpc), "memory"},
		{"local REST API flag", wordCountArgs(input, filepath.Join(dir, "o6"), ck, "--jobmanager", c.rpc, "--rest-address", "127.0.0.1:0"), "--rest-address is for a job run here, without --jobmanager"},
		{"the JobManager from the config file", wordCountArgs(input, filepath.Join(dir, "o10"), ck, "--config", cfg), "weir run takes the JobManager from --jobmanager only"},
		{"half TLS", wordCountArgs(input, filepath.Join(dir, "o7"), ck, "--jobmanager", c.rpc, "--tls-cert", "x.pem"), "--tls-cert, --tls-key and --tls-ca go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, stderr, code := runWeir(t, tc.args...)
			took := time.Since(start)
			last := lastLine([]byte(stderr))
			if code == 0 || !strings.Contains(last, tc.want) {
				t.Errorf("exit %d, last line %q; want non-zero and %q; stderr:\n%s", code, last, tc.want, stderr)
			}
			if took > 20*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}

	// The JobManager's registry refuses an unknown name too (a client of
	// another build), listing the jobs it knows.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.client("").Submit(ctx, "sort", nil); err == nil || !strings.Contains(err.Error(), `unknown job "sort": the known jobs are nexmark, wordcount`) {
		t.Errorf("Submit of an unknown job: %v", err)
	}
}

// TestClusterOtherBuild: a TaskManager whose build of the job gives another
// graph (another binary, here one more subtask per operator) is refused the
// deployment, naming the fingerprints, and the job fails with that cause.
func TestClusterOtherBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	os.WriteFile(input, []byte("a b c\n"), 0o644)
	jm, rpc, url := startJobManager(t)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	c.addTaskManager([]string{otherBuildEnv + "=1"}, "--slots", "2")
	_, stderr, code := runWeir(t, wordCountArgs(input, filepath.Join(dir, "out"), filepath.Join(dir, "ck"), "--jobmanager", rpc, "--restart", "none")...)
	last := lastLine([]byte(stderr))
	if code == 0 || !strings.Contains(last, "fingerprint") {
		t.Fatalf("exit %d, last line %q; want non-zero and a fingerprint mismatch\n%s\n%s", code, last, stderr, c.logs())
	}
}

// vethNamespace is a network namespace joined to the host by a veth pair:
// a TaskManager started in it (cmd) is cut off from the host's processes
// when the host's end goes down (cut), and reachable again once it is up
// (heal). Needs root and ip(8).
type vethNamespace struct {
	t                        *testing.T
	ns, host, hostIP, peerIP string
}

func newVethNamespace(t *testing.T, salt int) *vethNamespace {
	t.Helper()
	n := (os.Getpid() + salt) % 250
	id := fmt.Sprintf("%d", (os.Getpid()+salt)%100000)
	v := &vethNamespace{t: t, ns: "weirjob" + id, host: "wjh" + id,
		hostIP: fmt.Sprintf("10.232.%d.1", n), peerIP: fmt.Sprintf("10.232.%d.2", n)}
	peer := "wjp" + id
	v.ip("netns", "add", v.ns)
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", v.host).Run()
		exec.Command("ip", "netns", "del", v.ns).Run()
	})
	v.ip("link", "add", v.host, "type", "veth", "peer", "name", peer)
	v.ip("link", "set", peer, "netns", v.ns)
	v.ip("addr", "add", v.hostIP+"/30", "dev", v.host)
	v.ip("link", "set", v.host, "up")
	v.ip("netns", "exec", v.ns, "ip", "addr", "add", v.peerIP+"/30", "dev", peer)
	v.ip("netns", "exec", v.ns, "ip", "link", "set", peer, "up")
	v.ip("netns", "exec", v.ns, "ip", "link", "set", "lo", "up")
	return v
}

func (v *vethNamespace) ip(args ...string) {
	v.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		v.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (v *vethNamespace) cut()  { v.ip("link", "set", v.host, "down") }
func (v *vethNamespace) heal() { v.ip("link", "set", v.host, "up") }

// cmd is weir with args, run in the namespace.
func (v *vethNamespace) cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", v.ns, os.Args[0]}, args...)...)
}

// needNetns skips the test without root or ip(8).
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8)")
	}
}

// TestClusterPartitionedTaskManager: a TaskManager in a network namespace
// of its own, joined to the host by a veth pair, is cut off (the host's end
// taken down) while wordcount runs on it and on a TaskManager of the host.
// No connection breaks: the heartbeat timeout finds it, and the job
// restarts without it on the host's TaskManager and runs to its end,
// exactly once. Needs root and ip(8); skipped otherwise.
func TestClusterPartitionedTaskManager(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	needNetns(t)
	t.Parallel()
	v := newVethNamespace(t, 101)
	dir := t.TempDir()
	input := wordsInput(t, dir, clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	c, token := startPartitionCluster(t, v, "100ms", "1s")
	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart), "--jobmanager", c.rpc)
	args = append(args, token...)
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	waitLine(t, run, `completed checkpoint`, 30*time.Second)
	v.cut()
	cut := time.Now()
	waitLine(t, run, `restarted \(restart 1\)`, 30*time.Second)
	t.Logf("restarted %v after the partition", time.Since(cut).Round(time.Millisecond))
	if code := exitCode(t, run, 90*time.Second, "weir run"); code != 0 {
		t.Fatalf("weir run exited %d:\n%s\n%s", code, run.stderr.String(), c.logs())
	}
	v.heal()
	checkWordCountOutput(t, out, want)
}

// startPartitionCluster starts a JobManager on the host's end of v's veth
// pair, a TaskManager of 2 slots on the host (c.tms[0]) and one of 2 slots
// in v's namespace (c.tms[1]), and returns the token flags a client needs.
func startPartitionCluster(t *testing.T, v *vethNamespace, interval, timeout string) (*testCluster, []string) {
	t.Helper()
	// Not loopback addresses: the cluster token is required.
	token := []string{"--cluster-token", "part"}
	jm, got := startRole(t, nil, append([]string{"jobmanager", "--rpc-address", v.hostIP + ":0", "--rest-address", "127.0.0.1:0",
		"--heartbeat-interval", interval, "--heartbeat-timeout", timeout}, token...),
		`JobManager RPC on (\S+)`, `REST API on (http\S+)`)
	c := &testCluster{t: t, jm: jm, rpc: got[0], url: got[1]}
	c.addTaskManager(nil, append([]string{"--slots", "2", "--data-address", v.hostIP + ":0"}, token...)...)
	tmArgs := append([]string{"taskmanager", "--jobmanager", c.rpc, "--slots", "2", "--data-address", v.peerIP + ":0"}, token...)
	p, got := startRoleCmd(t, v.cmd(tmArgs...), nil, tmArgs, `TaskManager (\S+) with`, `msg=registered`)
	c.tms, c.tmIDs = append(c.tms, p), append(c.tmIDs, got[0])
	c.tmArgs, c.tmEnv = append(c.tmArgs, nil), append(c.tmEnv, nil)
	c.waitRegistered(2)
	return c, token
}

// TestClusterPartitionFailoverTime measures the failover time of a job
// whose TaskManager is partitioned (ip netns + veth, the host's end taken
// down): no connection breaks, the heartbeat timeout (3 s here, interval
// 500 ms) finds it, and the job runs again on the host's TaskManager. To
// bring the job back onto the namespace's TaskManager for the next cut,
// each round then heals the link and kills the host's TaskManager with
// SIGKILL (and starts it again). p50 and max over WEIR_CLUSTER_FAILOVER
// partitions (10 when set to 1); not run otherwise; needs root.
//
//	WEIR_CLUSTER_FAILOVER=1 go test -run TestClusterPartitionFailoverTime -v ./cli/
func TestClusterPartitionFailoverTime(t *testing.T) {
	cuts, _ := strconv.Atoi(os.Getenv("WEIR_CLUSTER_FAILOVER"))
	if cuts == 0 {
		t.Skip("a measurement: set WEIR_CLUSTER_FAILOVER=1 (10 partitions) or to the number of partitions")
	}
	if cuts == 1 {
		cuts = 10
	}
	needNetns(t)
	v := newVethNamespace(t, 151)
	c, token := startPartitionCluster(t, v, "500ms", "3s")
	dir := t.TempDir()
	args := append([]string{"run", "wordcount", "--repeat-rate", "20000", "--output", filepath.Join(dir, "out"), "--parallelism", "2",
		"--checkpoint-interval", "500ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--restart", clusterRestart, "--jobmanager", c.rpc, "--detached"}, token...)
	stdout, stderr, code := runWeir(t, args...)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	cl := c.client("part")
	st := waitJob(t, cl, id, 30*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.LastCheckpoint > 0 })
	var times []time.Duration
	for k := range cuts {
		attempt := st.Attempt
		v.cut()
		cut := time.Now()
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.Attempt > attempt })
		d := time.Since(cut)
		times = append(times, d)
		v.heal()
		c.waitRegistered(2)
		// The job is on the host's TaskManager alone: kill it, so that
		// the job moves to the namespace's one for the next cut.
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" })
		attempt = st.Attempt
		c.tms[0].cmd.Process.Kill()
		<-c.tms[0].exited
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.Attempt > attempt })
		ckpt := st.LastCheckpoint
		c.restart(0)
		c.waitRegistered(2)
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.LastCheckpoint > ckpt })
		t.Logf("partition %d: RUNNING again after %v", k+1, d.Round(time.Millisecond))
	}
	slices.Sort(times)
	t.Logf("failover after a partition (heartbeat timeout 3s), %d partitions: p50 %v, max %v", len(times),
		times[(len(times)-1)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl.Cancel(ctx, id)
}

// TestClusterFailoverTime measures the failover time of a job on a
// cluster: a TaskManager killed with SIGKILL, to the job RUNNING again
// (a new attempt, deployed from the latest checkpoint on the TaskManager
// left). p50 and max over WEIR_CLUSTER_FAILOVER kills (20 by default when
// set to 1); not run otherwise.
//
//	WEIR_CLUSTER_FAILOVER=1 go test -run TestClusterFailoverTime -v ./cli/
func TestClusterFailoverTime(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("WEIR_CLUSTER_FAILOVER"))
	if kills == 0 {
		t.Skip("a measurement: set WEIR_CLUSTER_FAILOVER=1 (20 kills) or to the number of kills")
	}
	if kills == 1 {
		kills = 20
	}
	dir := t.TempDir()
	c := startCluster(t, 2, 2, "--heartbeat-interval", "1s", "--heartbeat-timeout", "6s")
	// An unbounded job: the demo text again and again.
	args := []string{"run", "wordcount", "--repeat-rate", "20000", "--output", filepath.Join(dir, "out"), "--parallelism", "2",
		"--checkpoint-interval", "500ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--restart", clusterRestart, "--jobmanager", c.rpc, "--detached"}
	stdout, stderr, code := runWeir(t, args...)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	cl := c.client("")
	st := waitJob(t, cl, id, 30*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.LastCheckpoint > 0 })
	var times []time.Duration
	for k := range kills {
		i := k % len(c.tms)
		ckpt := st.LastCheckpoint
		attempt := st.Attempt
		c.tms[i].cmd.Process.Kill()
		killed := time.Now()
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.Attempt > attempt })
		d := time.Since(killed)
		times = append(times, d)
		<-c.tms[i].exited
		c.restart(i)
		c.waitRegistered(2)
		// A checkpoint of the new attempt before the next kill.
		st = waitJob(t, cl, id, 60*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.LastCheckpoint > ckpt })
		t.Logf("kill %d: TaskManager %d, RUNNING again (attempt %d) after %v", k+1, i, st.Attempt, d.Round(time.Millisecond))
	}
	slices.Sort(times)
	t.Logf("failover after SIGKILL of a TaskManager, %d kills: p50 %v, max %v", len(times),
		times[(len(times)-1)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl.Cancel(ctx, id)
}

// procCPU is processCPU, failing the test on an error.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := processCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runCPU runs weir with args to its end and returns its CPU time.
func runCPU(t *testing.T, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("weir %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// TestClusterWordCountCPU measures the CPU time of wordcount on a
// JobManager and two TaskManagers of one slot each (every edge between
// the two subtasks of a vertex crosses processes), every process counted,
// against local mode at the same parallelism, in the same run. Not run
// unless WEIR_CLUSTER_CPU is set (to the number of input lines; 1 means
// 1,000,000).
//
//	WEIR_CLUSTER_CPU=1 go test -run TestClusterWordCountCPU -v ./cli/
func TestClusterWordCountCPU(t *testing.T) {
	lines, _ := strconv.Atoi(os.Getenv("WEIR_CLUSTER_CPU"))
	if lines == 0 {
		t.Skip("a measurement: set WEIR_CLUSTER_CPU=1 (1,000,000 lines) or to the number of lines")
	}
	if lines == 1 {
		lines = 1_000_000
	}
	dir := t.TempDir()
	input := wordsInput(t, dir, lines)
	text, _ := os.ReadFile(input)
	words := 0
	for _, n := range wordTotals(string(text)) {
		words += n
	}
	c := startCluster(t, 2, 1)
	for round := range 2 {
		local := runCPU(t, wordCountArgs(input, filepath.Join(dir, fmt.Sprint("local", round)), filepath.Join(dir, fmt.Sprint("ck-local", round)))...)
		pids := []int{c.jm.cmd.Process.Pid}
		for _, p := range c.tms {
			pids = append(pids, p.cmd.Process.Pid)
		}
		before := make([]time.Duration, len(pids))
		for i, pid := range pids {
			before[i] = procCPU(t, pid)
		}
		start := time.Now()
		client := runCPU(t, append(wordCountArgs(input, filepath.Join(dir, fmt.Sprint("cluster", round)), filepath.Join(dir, fmt.Sprint("ck-cluster", round))), "--jobmanager", c.rpc)...)
		wall := time.Since(start)
		total := client
		var parts []string
		for i, pid := range pids {
			d := procCPU(t, pid) - before[i]
			total += d
			parts = append(parts, d.Round(time.Millisecond).String())
		}
		t.Logf("round %d, %d words: local %v CPU (%.0f ns/word); cluster %v CPU (%.0f ns/word; JobManager, TaskManagers %v, client %v; wall %v): cluster/local %.2f",
			round, words, local.Round(time.Millisecond), float64(local)/float64(words), total.Round(time.Millisecond), float64(total)/float64(words),
			parts, client.Round(time.Millisecond), wall.Round(time.Millisecond), float64(total)/float64(local))
	}
}

// TestNexmarkReportCluster: weir nexmark report --cluster 2 runs each query
// as the nexmark job on a local cluster it starts (and stops), and prints
// its row with the CPU of every process.
func TestNexmarkReportCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	profiles := t.TempDir()
	stdout, stderr, code := runWeirEnv(t, []string{"TMPDIR=" + t.TempDir()}, "nexmark", "report", "--events", "20000", "--queries", "q0,q3", "--cluster", "2", "--checkpoint-interval", "200ms",
		"--cpu-profile-dir", profiles)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	// --cpu-profile-dir with --cluster: a CPU profile of each process,
	// written when the cluster stops; the TaskManagers' show the queries'
	// code, which runs there.
	for _, name := range []string{"jobmanager.prof", "taskmanager-1.prof", "taskmanager-2.prof"} {
		f, err := os.Open(filepath.Join(profiles, name))
		if err != nil {
			t.Errorf("no CPU profile of the cluster's process: %v", err)
			continue
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			t.Errorf("%s is not a profile (gzipped protobuf): %v", name, err)
			continue
		}
		data, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.HasPrefix(name, "taskmanager") && !bytes.Contains(data, []byte("weirstream/weir/nexmark")) {
			t.Errorf("%s (%d bytes) names no function of the nexmark queries", name, len(data))
		}
	}
	for _, q := range []string{"q0", "q3"} {
		if !regexp.MustCompile(`(?m)^\| ` + q + ` \| heap \| \d+ K \| \d+ K \|`).MatchString(stdout) {
			t.Errorf("no row of %s:\n%s", q, stdout)
		}
	}
	if !strings.Contains(stdout, "On a local cluster: a JobManager and 2 TaskManagers of 1 slots") {
		t.Errorf("the report does not say it ran on a cluster:\n%s", stdout)
	}
	if strings.Contains(stdout, "failed") {
		t.Errorf("a run failed:\n%s", stdout)
	}
}

// TestRunNexmark: weir run nexmark is the Nexmark job, here (as weir
// nexmark run) and on a cluster.
func TestRunNexmark(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := runWeir(t, "run", "nexmark", "--query", "q1", "--events", "3000", "--output", filepath.Join(dir, "local"))
	if code != 0 || !strings.Contains(stdout, "nexmark q1: 3000 events (generated)") {
		t.Fatalf("local: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	c := startCluster(t, 1, 2)
	stdout, stderr, code = runWeir(t, "run", "nexmark", "--query", "q1", "--events", "3000", "--output", filepath.Join(dir, "cluster"),
		"--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", c.rpc)
	if code != 0 || !strings.Contains(stdout, "nexmark: job nexmark-q1 finished on the cluster") {
		t.Fatalf("cluster: exit %d\nstdout %s\nstderr %s\n%s", code, stdout, stderr, c.logs())
	}
	missing, extra := multiset.Diff(committedLines(t, filepath.Join(dir, "local")), committedLines(t, filepath.Join(dir, "cluster")))
	if len(missing)+len(extra) > 0 || len(committedLines(t, filepath.Join(dir, "local"))) != 3000*92/100 {
		t.Errorf("rows differ: %d missing, %d extra, %d local rows", len(missing), len(extra), len(committedLines(t, filepath.Join(dir, "local"))))
	}
}

// TestClusterRunOverTLS: weir run --tls-cert/--tls-key/--tls-ca submits to
// a JobManager on mutual TLS (its TaskManager too); without them it gets
// no answer, within --jobmanager-timeout.
func TestClusterRunOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	files := certtest.WriteCA(t, dir)
	tlsArgs := []string{"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA}
	jm, rpc, url := startJobManager(t, tlsArgs...)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	c.addTaskManager(nil, append([]string{"--slots", "2"}, tlsArgs...)...)
	input := filepath.Join(dir, "in.txt")
	os.WriteFile(input, []byte("a b a\n"), 0o644)
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runWeir(t, append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--jobmanager", rpc), tlsArgs...)...)
	if code != 0 || !strings.Contains(stdout, "finished on the cluster") {
		t.Fatalf("over TLS: exit %d\nstdout %s\nstderr %s\n%s", code, stdout, stderr, c.logs())
	}
	checkWordCountOutput(t, out, map[string]int{"a": 2, "b": 1})
	_, stderr, code = runWeir(t, wordCountArgs(input, filepath.Join(dir, "out2"), filepath.Join(dir, "ck2"), "--jobmanager", rpc, "--jobmanager-timeout", "1s")...)
	if last := lastLine([]byte(stderr)); code == 0 || !strings.Contains(last, "no JobManager answered at "+rpc) {
		t.Errorf("plain client: exit %d, last line %q", code, last)
	}
}

// TestClusterRunDetachesAndCancel: SIGINT stops weir run following a job,
// which runs on (exit 130); a job cancelled by another client ends weir run
// following it non-zero, saying so.
func TestClusterRunDetachesAndCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, 1, 2)
	// An unbounded job: the demo text again and again.
	args := []string{"run", "wordcount", "--repeat-rate", "1000", "--output", filepath.Join(dir, "out"), "--parallelism", "2",
		"--checkpoint-interval", "200ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", c.rpc}
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	waitLine(t, run, `is RUNNING`, 30*time.Second)
	run.cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, run, 10*time.Second, "weir run after SIGINT"); code != 130 || !strings.Contains(run.stderr.String(), "weir: stopped following job wordcount (wordcount), which runs on in the cluster") {
		t.Fatalf("exit %d after SIGINT; stderr:\n%s", code, run.stderr.String())
	}
	cl := c.client("")
	waitJob(t, cl, "wordcount", 10*time.Second, func(s cluster.JobStatus) bool { return s.State == "RUNNING" && s.LastCheckpoint > 0 })

	// A second submission of the running job's id is refused.
	args2 := []string{"run", "wordcount", "--repeat-rate", "1000", "--output", filepath.Join(dir, "out2"), "--parallelism", "2",
		"--checkpoint-interval", "200ms", "--checkpoint-dir", filepath.Join(dir, "ck2"), "--jobmanager", c.rpc}
	_, stderr, code := runWeir(t, args2...)
	if last := lastLine([]byte(stderr)); code == 0 || !strings.Contains(last, "already running") {
		t.Errorf("second job of the same id: exit %d, last line %q", code, last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Cancel(ctx, "wordcount"); err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, cl, "wordcount", 30*time.Second, func(s cluster.JobStatus) bool { return s.Terminal() })
	if st.State != "CANCELED" {
		t.Fatalf("after Cancel: %+v", st)
	}
	run2, _ := startRole(t, nil, args2, `submitted to the JobManager`)
	waitLine(t, run2, `is RUNNING`, 30*time.Second)
	if err := cl.Cancel(ctx, "wordcount"); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, run2, 30*time.Second, "weir run of a cancelled job"); code == 0 || !strings.Contains(lastLine([]byte(run2.stderr.String())), "job wordcount (wordcount) was cancelled") {
		t.Fatalf("exit %d; stderr:\n%s", code, run2.stderr.String())
	}
}

// TestClusterRunJobManagerLost: weir run following a job whose JobManager
// dies gives up after --jobmanager-timeout, non-zero, saying so.
func TestClusterRunJobManagerLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, 1, 2)
	args := []string{"run", "wordcount", "--repeat-rate", "1000", "--output", filepath.Join(dir, "out"), "--parallelism", "2",
		"--checkpoint-interval", "200ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", c.rpc, "--jobmanager-timeout", "1s"}
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	waitLine(t, run, `is RUNNING`, 30*time.Second)
	c.jm.cmd.Process.Kill()
	killed := time.Now()
	code := exitCode(t, run, 20*time.Second, "weir run after its JobManager died")
	last := lastLine([]byte(run.stderr.String()))
	if code == 0 || !strings.Contains(last, "lost job wordcount: the JobManager has not reported it for 1s") {
		t.Fatalf("exit %d, last line %q", code, last)
	}
	t.Logf("gave up %v after the JobManager died", time.Since(killed).Round(time.Millisecond))
}

// TestClusterSameJobTwice: a job submitted twice under one id on the same
// TaskManagers runs the second time without a restart (its network
// channels are named by submission: the first run's stay registered on
// the TaskManagers, and the second's first deploy failed on them).
func TestClusterSameJobTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 2000)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	c := startCluster(t, 2, 1)
	for round := range 2 {
		out := filepath.Join(dir, fmt.Sprint("out", round))
		stdout, stderr, code := runWeir(t, append(wordCountArgs(input, out, filepath.Join(dir, fmt.Sprint("ck", round))), "--jobmanager", c.rpc)...)
		if code != 0 {
			t.Fatalf("round %d: exit %d\n%s\n%s\n%s", round, code, stdout, stderr, c.logs())
		}
		if strings.Contains(stderr, "restarted (restart") || strings.Contains(c.logs(), "registered twice") {
			t.Fatalf("round %d restarted:\n%s\n%s", round, stderr, c.logs())
		}
		checkWordCountOutput(t, out, want)
	}
}
