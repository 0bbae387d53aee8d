package cli

// Reactive mode (weir jobmanager --scheduler reactive) with real weir
// processes on 127.0.0.1.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
)

// jobDetails is GET /jobs/{id}.
func jobDetails(t *testing.T, url, id string) (rest.JobDetailsInfo, bool) {
	t.Helper()
	resp, err := http.Get(url + "/jobs/" + id)
	if err != nil {
		return rest.JobDetailsInfo{}, false
	}
	defer resp.Body.Close()
	var d rest.JobDetailsInfo
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&d) != nil {
		return rest.JobDetailsInfo{}, false
	}
	return d, true
}

// highestParallelism is the highest parallelism of the job's vertices.
func highestParallelism(d rest.JobDetailsInfo) int {
	n := 0
	for _, v := range d.Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

// waitParallelism waits (up to d) until GET /jobs/{id} shows the job
// RUNNING at parallelism n, and returns what it showed.
func waitParallelism(t *testing.T, c *testCluster, run *roleProc, id string, n int, d time.Duration) rest.JobDetailsInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	var last rest.JobDetailsInfo
	for {
		if got, ok := jobDetails(t, c.url, id); ok {
			last = got
			if got.State == "RUNNING" && highestParallelism(got) == n {
				return got
			}
		}
		if time.Now().After(deadline) || isDone(run) {
			t.Fatalf("job %s not RUNNING at parallelism %d within %v (ended: %v): state %s, parallelism %d\nweir run:\n%s\n%s",
				id, n, d, isDone(run), last.State, highestParallelism(last), run.stderr.String(), c.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterReactiveMode is the proof of reactive mode: a
// JobManager with --scheduler reactive and one TaskManager of one slot run
// wordcount at parallelism 1 (its --parallelism 4 ignored, with a note);
// a second TaskManager joins and the job rescales to 2 (REST shows it); the
// second is killed with SIGKILL and the job goes on at 1; more input comes
// in each phase (the job follows a directory), and once it is all
// committed the job is stopped with a savepoint and finishes. The
// committed output holds each "word,k" exactly once; the JobManager logged
// both rescales with the checkpoint they restored, and numRestarts counts
// them (as Flink's adaptive scheduler does).
func TestClusterReactiveMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	in, out, ck, sp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "ck"), filepath.Join(dir, "sp")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(wordsInput(t, dir, 30_000))
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))
	total := 0
	for _, n := range want {
		total += n
	}
	lines := strings.SplitAfter(string(text), "\n")
	part := func(i int) {
		t.Helper()
		seg := strings.Join(lines[i*len(lines)/3:(i+1)*len(lines)/3], "")
		if err := os.WriteFile(filepath.Join(in, string(rune('a'+i))+".txt"), []byte(seg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	part(0)

	jm, rpc, url := startJobManager(t, "--scheduler", "reactive", "--heartbeat-interval", "200ms", "--heartbeat-timeout", "3s")
	if !strings.Contains(jm.stderr.String(), "weir: reactive mode:") {
		t.Errorf("the JobManager does not say it is in reactive mode:\n%s", jm.stderr.String())
	}
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	c.addTaskManager(nil, "--slots", "1")
	c.waitRegistered(1)
	start := time.Now()
	run, _ := startRole(t, nil, []string{"run", "wordcount", "--input", in, "--watch", "50ms", "--output", out,
		"--parallelism", "4", "--checkpoint-interval", "100ms", "--checkpoint-dir", ck, "--savepoint-dir", sp,
		"--restart", clusterRestart, "--jobmanager", rpc}, `submitted to the JobManager`)
	const id = "wordcount"
	waitParallelism(t, c, run, id, 1, 30*time.Second)
	waitLine(t, run, `reactive mode: parallelism 1 \(at most 128\); --parallelism 4 is ignored`, 10*time.Second)
	waitLine(t, run, `completed checkpoint`, 30*time.Second)

	// Scale up: a TaskManager of one more slot joins.
	c.addTaskManager(nil, "--slots", "1")
	up := waitParallelism(t, c, run, id, 2, 30*time.Second)
	t.Logf("at parallelism 2 after %v (restarts %d)", time.Since(start).Round(time.Millisecond), up.NumRestarts)
	part(1)
	checkpoints := strings.Count(run.stderr.String(), "completed checkpoint")
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(run.stderr.String(), "completed checkpoint") < checkpoints+2 {
		if time.Now().After(deadline) || isDone(run) {
			t.Fatalf("no checkpoint at parallelism 2:\n%s\n%s", run.stderr.String(), c.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Scale down: the TaskManager that joined is killed; the job fails
	// over at once on the slot left.
	c.tms[1].cmd.Process.Kill()
	<-c.tms[1].exited
	down := waitParallelism(t, c, run, id, 1, 30*time.Second)
	t.Logf("at parallelism 1 after %v (restarts %d)", time.Since(start).Round(time.Millisecond), down.NumRestarts)
	part(2)

	// Once every line is committed, stop with a savepoint: the job finishes.
	deadline = time.Now().Add(40 * time.Second)
	for committed := 0; committed < total; {
		committed = 0
		forEachCommittedLine(t, out, func(string, string) { committed++ })
		if time.Now().After(deadline) || isDone(run) {
			t.Fatalf("%d of %d lines committed within 40s (ended: %v):\n%s\n%s", committed, total, isDone(run), run.stderr.String(), c.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if stdout, stderr, code := runWeir(t, "stop", id, "--jobmanager", url); code != 0 {
		t.Fatalf("weir stop: exit %d\n%s%s\n%s", code, stdout, stderr, c.logs())
	}
	if code := exitCode(t, run, 60*time.Second, "weir run"); code != 0 || !strings.Contains(run.stderr.String(), "is FINISHED") {
		t.Fatalf("weir run exited %d:\n%s\n%s", code, run.stderr.String(), c.logs())
	}
	t.Logf("finished after %v", time.Since(start).Round(time.Millisecond))
	checkWordCountOutput(t, out, want)

	// Both rescales are logged with the checkpoint they restored; the
	// restarts count them.
	for _, re := range []string{`msg=rescaled job=wordcount from=1 to=2 checkpoint=[1-9]\d* `, `msg=rescaled job=wordcount from=2 to=1 checkpoint=[1-9]\d* `} {
		if !regexp.MustCompile(re).MatchString(jm.stderr.String()) {
			t.Errorf("the JobManager's log has no %q:\n%s", re, jm.stderr.String())
		}
	}
	if d, ok := jobDetails(t, url, id); !ok || d.State != "FINISHED" || d.NumRestarts < 2 {
		t.Errorf("GET /jobs/%s: %+v, want FINISHED with at least 2 restarts (the rescales)", id, d)
	}
}

// TestClusterReactiveBadInput: an unknown scheduler mode is a one-line
// error and a non-zero exit, from the flag of weir jobmanager and of weir
// cluster start, and from the config file's scheduler-mode; the config
// file's scheduler-mode: reactive puts the JobManager in reactive mode.
func TestClusterReactiveBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("scheduler-mode: adaptive\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobmanager", "--scheduler", "nonsense", "--rpc-address", "127.0.0.1:0", "--rest-address", "off"},
			`weir: --scheduler is "nonsense": use default or reactive (Flink's scheduler-mode)`},
		{[]string{"cluster", "start", "--scheduler", "nonsense", "--state-dir", filepath.Join(dir, "state")},
			`weir: --scheduler is "nonsense": use default or reactive (Flink's scheduler-mode)`},
		{[]string{"jobmanager", "--config", bad, "--rpc-address", "127.0.0.1:0", "--rest-address", "off"},
			`weir: ` + bad + `:1: scheduler-mode is "adaptive": use reactive (or default: each job at the parallelism of its flags)`},
		{[]string{"jobmanager", "--resource-wait-timeout", "soon", "--rpc-address", "127.0.0.1:0", "--rest-address", "off"},
			`resource-wait-timeout`},
	} {
		_, stderr, code := runWeir(t, tc.args...)
		msg := strings.TrimSpace(stderr)
		if code == 0 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("weir %v: exit %d, stderr %q; want one line with %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state", clusterPidFile)); err == nil {
		t.Errorf("weir cluster start with a bad --scheduler started a cluster")
	}
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("scheduler-mode: reactive\njobmanager.adaptive-scheduler.resource-wait-timeout: -1\n"), 0o644)
	jm, _, _ := startJobManager(t, "--config", good)
	if _, ok := stderrContains(jm, "weir: reactive mode:", 10*time.Second); !ok {
		t.Errorf("scheduler-mode: reactive in --config did not put the JobManager in reactive mode:\n%s", jm.stderr.String())
	}
}
