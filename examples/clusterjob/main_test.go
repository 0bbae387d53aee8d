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
	bin := filepath.Join(dir, "clusterjob")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
