package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClusterJob builds the example and runs it as real processes on
// 127.0.0.1: a JobManager and two TaskManagers of one slot each (so every
// edge crosses the data plane between processes) of the example's own
// binary, to which ./clusterjob run counts --jobmanager submits the job by
// name; its committed output is that of ./clusterjob run counts in local
// mode. The JobManager's REST API says where each subtask ran: on both
// TaskManagers. Bad input (an unknown job, an unknown vertex) is a clear
// error naming what exists.
func TestClusterJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example and starts real processes")
	}
	dir := t.TempDir()
	bin := example(t)
	job := []string{"run", "counts", "--events", "20000", "--keys", "37", "--parallelism", "2", "--checkpoint-interval", "100ms"}

	// Local mode: the whole job in one process.
	local := filepath.Join(dir, "local")
	if out, err := exec.Command(bin, append(job, "--output", local, "--checkpoint-dir", filepath.Join(dir, "ck-local"), "--rest-address", "off")...).CombinedOutput(); err != nil {
		t.Fatalf("local run: %v\n%s", err, out)
	}
	want := committed(t, local)
	checkCounts(t, want, 20000, 37)

	// A cluster of the example's binary.
	jm, got := start(t, bin, []string{"jobmanager", "--rpc-address", "127.0.0.1:0", "--rest-address", "127.0.0.1:0"},
		`JobManager RPC on (\S+)`, `REST API on (http\S+)`)
	rpc, url := got[0], got[1]
	var tmIDs []string
	for range 2 {
		_, got := start(t, bin, []string{"taskmanager", "--jobmanager", rpc, "--slots", "1"}, `TaskManager (\S+) with`, `msg=registered`)
		tmIDs = append(tmIDs, got[0])
	}
	out := filepath.Join(dir, "cluster")
	run := exec.Command(bin, append(job, "--output", out, "--checkpoint-dir", filepath.Join(dir, "ck-cluster"), "--jobmanager", rpc)...)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil || !strings.Contains(stdout.String(), "counts: job counts finished on the cluster") {
		t.Fatalf("cluster run: %v\nstdout %s\nstderr %s\nJobManager:\n%s", err, stdout.String(), stderr.String(), jm.String())
	}
	if got := committed(t, out); !slices.Equal(got, want) {
		t.Errorf("the cluster committed %d lines, local mode %d; they differ", len(got), len(want))
	}

	// Where each subtask ran: GET /jobs/counts/vertices/{vid}.
	var details struct {
		Vertices []struct {
			ID          string `json:"id"`
			Parallelism int    `json:"parallelism"`
		} `json:"vertices"`
	}
	getJSON(t, url+"/jobs/counts", http.StatusOK, &details)
	if len(details.Vertices) == 0 {
		t.Fatal("GET /jobs/counts lists no vertices")
	}
	seen := map[string]bool{}
	for _, v := range details.Vertices {
		var vd struct {
			Subtasks []struct {
				Subtask       int    `json:"subtask"`
				Host          string `json:"host"`
				TaskManagerID string `json:"taskmanager-id"`
			} `json:"subtasks"`
		}
		getJSON(t, url+"/jobs/counts/vertices/"+v.ID, http.StatusOK, &vd)
		if len(vd.Subtasks) != v.Parallelism {
			t.Errorf("vertex %s: %d subtasks, parallelism %d", v.ID, len(vd.Subtasks), v.Parallelism)
		}
		for _, s := range vd.Subtasks {
			if !slices.Contains(tmIDs, s.TaskManagerID) || s.Host != "127.0.0.1" {
				t.Errorf("vertex %s subtask %d ran on %q at %q, not on a TaskManager of %v", v.ID, s.Subtask, s.TaskManagerID, s.Host, tmIDs)
			}
			seen[s.TaskManagerID] = true
		}
		var tms struct {
			TaskManagers []struct {
				TaskManagerID string `json:"taskmanager-id"`
				Subtasks      []int  `json:"subtasks"`
			} `json:"taskmanagers"`
		}
		getJSON(t, url+"/jobs/counts/vertices/"+v.ID+"/taskmanagers", http.StatusOK, &tms)
		if v.Parallelism == 2 && len(tms.TaskManagers) != 2 {
			t.Errorf("vertex %s ran on %d TaskManagers, want both: %+v", v.ID, len(tms.TaskManagers), tms.TaskManagers)
		}
	}
	if len(seen) != 2 {
		t.Errorf("the subtasks ran on %v, want both TaskManagers %v", seen, tmIDs)
	}

	// Bad input.
	var e struct{ Errors []string }
	getJSON(t, url+"/jobs/counts/vertices/99", http.StatusNotFound, &e)
	if len(e.Errors) != 1 || !strings.Contains(e.Errors[0], `vertex "99" not found in job "counts": its vertices are 0`) {
		t.Errorf("unknown vertex: %v", e.Errors)
	}
	getJSON(t, url+"/jobs/counts/vertices/abc/taskmanagers", http.StatusNotFound, &e)
	if len(e.Errors) != 1 || !strings.Contains(e.Errors[0], `vertex "abc" not found in job "counts": a vertex id is a number`) {
		t.Errorf("non-numeric vertex: %v", e.Errors)
	}
	for _, args := range [][]string{{"run", "nope"}, {"run", "nope", "--jobmanager", rpc}} {
		res, err := exec.Command(bin, args...).CombinedOutput()
		msg := strings.TrimSpace(string(res))
		if err == nil || strings.Count(msg, "\n") > 0 || !strings.Contains(msg, `unknown command "nope" for "clusterjob run": use counts`) {
			t.Errorf("clusterjob %v: %v, %q; want one line naming the known job", args, err, msg)
		}
	}
	if res, err := exec.Command(bin, "run", "counts", "--keys", "0", "--jobmanager", rpc).CombinedOutput(); err == nil || !strings.Contains(string(res), "--keys 0") {
		t.Errorf("clusterjob run counts --keys 0 on the cluster: %v, %s", err, res)
	}
}

// TestClusterJobLocalCluster: ./clusterjob cluster start starts a
// JobManager and TaskManagers that are the example's own binary, which run
// its job; ./clusterjob cluster stop stops them.
func TestClusterJobLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example and starts real processes")
	}
	dir := t.TempDir()
	bin := example(t)
	state := filepath.Join(dir, "cluster")
	out, err := exec.Command(bin, "cluster", "start", "--taskmanagers", "2", "--slots", "1", "--rpc-address", "127.0.0.1:0",
		"--rest-address", "127.0.0.1:0", "--state-dir", state).CombinedOutput()
	t.Cleanup(func() { exec.Command(bin, "cluster", "stop", "--state-dir", state).Run() })
	m := regexp.MustCompile(`JobManager pid (\d+) \(RPC (\S+), REST API`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("clusterjob cluster start: %v\n%s", err, out)
	}
	var st struct {
		TaskManagers []struct{ Pid int } `json:"taskmanagers"`
	}
	data, _ := os.ReadFile(filepath.Join(state, "cluster.json"))
	if err := json.Unmarshal(data, &st); err != nil || len(st.TaskManagers) != 2 {
		t.Fatalf("cluster.json: %v: %s", err, data)
	}
	pids := []string{string(m[1])}
	for _, tm := range st.TaskManagers {
		pids = append(pids, fmt.Sprint(tm.Pid))
	}
	for _, pid := range pids {
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != bin {
			t.Errorf("process %s of the cluster runs %q (%v), want the example's binary %s", pid, exe, err, bin)
		}
	}
	res, err := exec.Command(bin, "run", "counts", "--events", "3000", "--keys", "5", "--parallelism", "2", "--checkpoint-interval", "100ms",
		"--checkpoint-dir", filepath.Join(dir, "ck"), "--output", filepath.Join(dir, "out"), "--jobmanager", string(m[2])).CombinedOutput()
	if err != nil {
		t.Fatalf("run counts on the local cluster: %v\n%s", err, res)
	}
	checkCounts(t, committed(t, filepath.Join(dir, "out")), 3000, 5)
	if res, err := exec.Command(bin, "cluster", "stop", "--state-dir", state).CombinedOutput(); err != nil {
		t.Fatalf("clusterjob cluster stop: %v\n%s", err, res)
	}
}

// built is the example's binary, built once for the tests (example).
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// example builds the example (once) and returns its binary.
func example(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "clusterjob-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "clusterjob")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// committed are the sorted lines of the committed part files of dir.
func committed(t *testing.T, dir string) []string {
	t.Helper()
	parts, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	var lines []string
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(b))...)
	}
	slices.Sort(lines)
	return lines
}

// checkCounts checks that lines are the running counts 1..c of each of
// keys keys over events events, each once.
func checkCounts(t *testing.T, lines []string, events, keys int) {
	t.Helper()
	var want []string
	for k := range keys {
		n := events / keys
		if k < events%keys {
			n++
		}
		for c := 1; c <= n; c++ {
			want = append(want, fmt.Sprintf("key-%02d,%d", k, c))
		}
	}
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("%d lines committed, want %d (each key's running counts once)", len(lines), len(want))
	}
}

func getJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// logBuffer is a process's stderr.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start starts bin with args, killed at the end of the test, and returns
// once its stderr matched each of want, with their first submatches.
func start(t *testing.T, bin string, args []string, want ...string) (*logBuffer, []string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	log := new(logBuffer)
	lines := make(chan string, 100)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			log.add(sc.Text())
			select {
			case lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	got := make([]string, len(want))
	timeout := time.After(30 * time.Second)
	for missing := len(want); missing > 0; {
		select {
		case l := <-lines:
			for i, w := range want {
				if m := regexp.MustCompile(w).FindStringSubmatch(l); m != nil && got[i] == "" {
					got[i] = m[len(m)-1]
					missing--
				}
			}
		case <-exited:
			t.Fatalf("clusterjob %s exited before printing %q:\n%s", args[0], want, log)
		case <-timeout:
			t.Fatalf("clusterjob %s printed no %q in 30 s:\n%s", args[0], want, log)
		}
	}
	return log, got
}
