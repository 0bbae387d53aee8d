package cli

// The first hour of a new user (issue 26), against real `weir run`
// processes and the real client binary: stop and savepoint answered to the
// end, savepoint directories, typos, the token variable, what info,
// checkpoints and cancel say, the checkpoint flags and the --config file.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir/internal/config"
	"github.com/weirstream/weir/internal/rest"
)

// runWeirEnv is runWeir with env ("NAME=value") added to the process's
// environment.
func runWeirEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "WEIR_TEST_MAIN=1"), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// waitRunning waits until the job of w lists as RUNNING with every task
// running (tasks of parallelism 2: 4).
func waitRunning(t *testing.T, w *runningWeir, env ...string) {
	t.Helper()
	running := regexp.MustCompile(`(?m)^wordcount +wordcount +RUNNING +.* (\d+)/(\d+) running$`)
	for deadline := time.Now().Add(30 * time.Second); ; {
		stdout, _, _ := runWeirEnv(t, env, "list", "--jobmanager", w.url)
		if m := running.FindStringSubmatch(stdout); m != nil && m[1] == m[2] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never ran all its tasks: list says\n%s\nstderr of weir run:\n%s", stdout, w.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits until the process of w exits and returns its exit code.
func waitExit(t *testing.T, w *runningWeir) int {
	t.Helper()
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run still runs after 30s; stderr:\n%s", w.stderr.String())
	}
	if ee, ok := w.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if w.err != nil {
		t.Fatal(w.err)
	}
	return 0
}

// oneLine fails unless s is one line.
func wantOneLine(t *testing.T, what, s string) {
	t.Helper()
	if strings.Count(strings.TrimSuffix(s, "\n"), "\n") != 0 || s == "" {
		t.Errorf("%s: want one line, got %q", what, s)
	}
}

// savepointAt checks that path (a path or file:// URL) is a complete
// savepoint on disk under the directory under.
func savepointAt(t *testing.T, path, under string) {
	t.Helper()
	path = strings.TrimPrefix(path, "file://") // a URL of file storage
	if !strings.HasPrefix(path, under+string(filepath.Separator)) {
		t.Errorf("savepoint %s is not under %s", path, under)
	}
	if _, err := os.Stat(filepath.Join(path, "_metadata")); err != nil {
		t.Errorf("savepoint %s: %v", path, err)
	}
}

var (
	stopLine      = regexp.MustCompile(`^Job wordcount stopped with savepoint (\S+)\n$`)
	savepointLine = regexp.MustCompile(`^Savepoint \d+ \(.*\) of job wordcount completed: (\S+)\n$`)
	runStopLine   = regexp.MustCompile(`(?m)^wordcount: stopped with savepoint (\S+); resume with --restore (\S+)$`)
)

// TestRunStopAndSavepointWithDir: without --savepoint-dir, weir stop and
// weir savepoint say to pass --dir or --savepoint-dir and the job runs on;
// with --dir both succeed against the real process, exit 0, and weir run
// prints the stop's savepoint too.
func TestRunStopAndSavepointWithDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// --dir targets must lie under an allowed root (docs/rest-security.md):
	// the test directory is one, but the job has no savepoint directory.
	w := startWordCount(t, "--repeat-rate", "2000", "--checkpoint-interval", "200ms",
		"--checkpoint-dir", dir+"/ck", "--output", dir+"/out", "--rest-address", "127.0.0.1:0",
		"--savepoint-allowed-roots", dir)
	waitRunning(t, w)

	for _, cmd := range []string{"stop", "savepoint"} {
		stdout, stderr, code := runWeir(t, cmd, "wordcount", "--jobmanager", w.url)
		wantOneLine(t, "weir "+cmd+" without a directory", stderr)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "weir "+cmd+" --dir DIR") || !strings.Contains(stderr, "--savepoint-dir DIR") {
			t.Errorf("weir %s without a savepoint directory: exit %d, stdout %q, stderr %q; want an error naming --dir and --savepoint-dir", cmd, code, stdout, stderr)
		}
	}
	waitRunning(t, w) // still running: the refusals stopped nothing

	stdout, stderr, code := runWeir(t, "savepoint", "wordcount", "--dir", dir+"/sp1", "--jobmanager", w.url)
	m := savepointLine.FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("weir savepoint --dir: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	savepointAt(t, m[1], dir+"/sp1")
	// weir run reports the savepoint too.
	reported := regexp.MustCompile(`(?m)^weir: savepoint \d+ completed: ` + regexp.QuoteMeta(m[1]) + `$`)
	for deadline := time.Now().Add(10 * time.Second); !reported.MatchString(w.stderr.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weir run does not report the savepoint %s; stderr:\n%s", m[1], w.stderr.String())
		}
	}

	stdout, stderr, code = runWeir(t, "stop", "wordcount", "--dir", dir+"/sp2", "--jobmanager", w.url)
	m = stopLine.FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("weir stop --dir: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	savepointAt(t, m[1], dir+"/sp2")
	if code := waitExit(t, w); code != 0 {
		t.Fatalf("weir run exited %d after the stop; stderr:\n%s", code, w.stderr.String())
	}
	if r := runStopLine.FindStringSubmatch(w.stdout.String()); r == nil || r[1] != m[1] || r[2] != m[1] {
		t.Errorf("weir run does not print the savepoint %s it was stopped with; stdout:\n%s", m[1], w.stdout.String())
	}
}

// TestRunStopWithSavepointDir: with --savepoint-dir, weir stop and weir
// stop --drain need no --dir; the savepoint is in the directory, both
// processes print its path and exit 0. Several rounds: the answer must not
// depend on the client's poll beating the job's end.
func TestRunStopWithSavepointDir(t *testing.T) {
	t.Parallel()
	for round, drain := range []bool{false, true, false, true} {
		dir := t.TempDir()
		w := startWordCount(t, "--repeat-rate", "2000", "--checkpoint-interval", "200ms",
			"--savepoint-dir", dir+"/sp", "--output", dir+"/out", "--rest-address", "127.0.0.1:0")
		waitRunning(t, w)
		args := []string{"stop", "wordcount", "--jobmanager", w.url}
		if drain {
			args = append(args, "--drain")
		}
		stdout, stderr, code := runWeir(t, args...)
		m := stopLine.FindStringSubmatch(stdout)
		if code != 0 || m == nil {
			t.Fatalf("round %d: weir %s: exit %d, stdout %q, stderr %q", round, strings.Join(args, " "), code, stdout, stderr)
		}
		savepointAt(t, m[1], dir+"/sp")
		if code := waitExit(t, w); code != 0 {
			t.Fatalf("round %d: weir run exited %d after the stop; stderr:\n%s", round, code, w.stderr.String())
		}
		if r := runStopLine.FindStringSubmatch(w.stdout.String()); r == nil || r[1] != m[1] {
			t.Errorf("round %d: weir run does not print the savepoint %s; stdout:\n%s", round, m[1], w.stdout.String())
		}
	}
}

// TestRunResumeFromStop: a job stopped with a savepoint resumes from the
// path both processes printed; weir checkpoints then explains why the new
// run's checkpoint ids do not follow the savepoint's, and weir info says
// why the byte columns are empty.
func TestRunResumeFromStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--repeat-rate", "2000", "--checkpoint-interval", "100ms", "--checkpoint-dir", dir + "/ck",
		"--savepoint-dir", dir + "/sp", "--output", dir + "/out", "--rest-address", "127.0.0.1:0"}
	w := startWordCount(t, args...)
	waitRunning(t, w)
	if _, stderr, code := runWeir(t, "checkpoint", "wordcount", "--jobmanager", w.url); code != 0 {
		t.Fatalf("checkpoint: %s", stderr)
	}
	stdout, stderr, code := runWeir(t, "stop", "wordcount", "--jobmanager", w.url)
	m := stopLine.FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("weir stop: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code := waitExit(t, w); code != 0 {
		t.Fatalf("weir run exited %d; stderr:\n%s", code, w.stderr.String())
	}

	w = startWordCount(t, append(args, "--restore", m[1])...)
	waitRunning(t, w)
	if _, stderr, code := runWeir(t, "checkpoint", "wordcount", "--jobmanager", w.url); code != 0 {
		t.Fatalf("checkpoint after the restore: %s", stderr)
	}
	stdout, stderr, code = runWeir(t, "checkpoints", "wordcount", "--jobmanager", w.url)
	if code != 0 {
		t.Fatalf("checkpoints: %s", stderr)
	}
	restored := regexp.MustCompile(`(?m)^Latest restore: savepoint (\d+) from `).FindStringSubmatch(stdout)
	gap := regexp.MustCompile(`(?m)^Checkpoint ids of this run start at (\d+), not (\d+): each run reserves ids in blocks of 100 in the checkpoint storage`).FindStringSubmatch(stdout)
	if restored == nil || gap == nil || fmt.Sprint(atoi(t, restored[1])+1) != gap[2] || atoi(t, gap[1]) <= atoi(t, gap[2]) {
		t.Errorf("weir checkpoints after a restore does not explain the ids:\n%s", stdout)
	}

	stdout, _, code = runWeir(t, "info", "wordcount", "--jobmanager", w.url)
	if code != 0 || !regexp.MustCompile(`(?m)^\d+ +\S+.* RUNNING +\d+ +\d+ +- +- +`).MatchString(stdout) ||
		!strings.Contains(stdout, "Bytes (-) are not counted: they measure records serialized between processes") {
		t.Errorf("weir info does not mark the uncounted bytes:\n%s", stdout)
	}
	if strings.Contains(stdout, " 0 B ") {
		t.Errorf("weir info shows 0 B:\n%s", stdout)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunCancelWithoutCheckpoints: the message of a cancelled job that
// never checkpointed does not speak of checkpoints that committed.
func TestRunCancelWithoutCheckpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := startWordCount(t, "--repeat-rate", "2000", "--output", dir+"/out", "--rest-address", "127.0.0.1:0")
	waitRunning(t, w)
	if _, stderr, code := runWeir(t, "cancel", "wordcount", "--jobmanager", w.url); code != 0 {
		t.Fatalf("cancel: %s", stderr)
	}
	if code := waitExit(t, w); code == 0 {
		t.Errorf("weir run exited 0 after cancel")
	}
	want := "weir: job wordcount was cancelled: it ran without checkpoints, so " + dir + "/out holds what it wrote until then, uncommitted and incomplete\n"
	if !strings.HasSuffix(w.stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant it to end with %q", w.stderr.String(), want)
	}
}

// TestCommandMistakes: typos and missing arguments are errors that say
// what to type, on one line, exit 1, and print no help on stdout.
func TestCommandMistakes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "wordcnt"}, `weir: unknown command "wordcnt" for "weir run": did you mean "wordcount"?`},
		{[]string{"run", "wordcnt", "--input", "x"}, `weir: unknown command "wordcnt" for "weir run": did you mean "wordcount"?`},
		{[]string{"run", "grep"}, `weir: unknown command "grep" for "weir run": use one of nexmark, wordcount (see weir run --help)`},
		{[]string{"run"}, `weir: weir run needs a job: one of nexmark, wordcount (see weir run --help)`},
		{[]string{"lsit"}, `weir: unknown command "lsit" for "weir": did you mean "list"?`},
		{[]string{"nexmark", "rnu"}, `weir: unknown command "rnu" for "weir nexmark": did you mean "run"?`},
		{[]string{"stop"}, `weir: weir stop needs the id of a job (JOB): weir list shows the jobs of the JobManager`},
		{[]string{"savepoint"}, `weir: weir savepoint needs the id of a job (JOB): weir list shows the jobs of the JobManager`},
		{[]string{"info", "a", "b"}, `weir: weir info takes one job, not 2 (a b): run it once per job`},
	} {
		stdout, stderr, code := runWeir(t, c.args...)
		if code != 1 || stdout != "" || stderr != c.want+"\n" {
			t.Errorf("weir %s: exit %d, stdout %q, stderr %q\nwant exit 1 and %q", strings.Join(c.args, " "), code, stdout, stderr, c.want)
		}
	}
}

// TestRESTTokenVariable: WEIR_REST_TOKEN is the token of weir run and of
// the client commands; WEIR_TOKEN still works for both, with a note.
func TestRESTTokenVariable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := startWordCountEnv(t, []string{"WEIR_REST_TOKEN=s3cret"}, "--repeat-rate", "500", "--output", dir+"/out", "--rest-address", "127.0.0.1:0")
	waitRunning(t, w, "WEIR_REST_TOKEN=s3cret")
	stdout, stderr, code := runWeirEnv(t, []string{"WEIR_REST_TOKEN=s3cret"}, "list", "--jobmanager", w.url)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "wordcount") {
		t.Errorf("list with WEIR_REST_TOKEN: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = runWeirEnv(t, []string{"WEIR_TOKEN=s3cret"}, "list", "--jobmanager", w.url)
	if code != 0 || !strings.Contains(stdout, "wordcount") ||
		stderr != "weir: WEIR_TOKEN is deprecated: set WEIR_REST_TOKEN instead (weir run and the client commands both read it)\n" {
		t.Errorf("list with WEIR_TOKEN: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runWeir(t, "list", "--jobmanager", w.url)
	if code != 1 || !strings.Contains(stderr, "(pass --token or set WEIR_REST_TOKEN)") {
		t.Errorf("list without a token: exit %d, stderr %q", code, stderr)
	}

	// The server reads the old name too, with the same note.
	w2 := startWordCountEnv(t, []string{"WEIR_TOKEN=older"}, "--repeat-rate", "500", "--output", dir+"/out2", "--rest-address", "127.0.0.1:0")
	waitRunning(t, w2, "WEIR_REST_TOKEN=older")
	if !strings.Contains(w2.stderr.String(), "weir: WEIR_TOKEN is deprecated: set WEIR_REST_TOKEN instead") {
		t.Errorf("weir run with WEIR_TOKEN says nothing of it; stderr:\n%s", w2.stderr.String())
	}
}

// checkpointConfig reads the job's checkpoint configuration from its REST API.
func checkpointConfig(t *testing.T, url string) rest.CheckpointConfig {
	t.Helper()
	resp, err := http.Get(url + "/jobs/wordcount/checkpoints/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg rest.CheckpointConfig
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// vertexParallelism reads the parallelism of the job's vertices.
func vertexParallelism(t *testing.T, url string) []int {
	t.Helper()
	resp, err := http.Get(url + "/jobs/wordcount")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d rest.JobDetailsInfo
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, v := range d.Vertices {
		out = append(out, v.Parallelism)
	}
	return out
}

// TestRunCheckpointFlagsAndConfigFile: every checkpoint option reaches the
// job, from flags and from a --config file with Flink's keys; flags
// override the file.
func TestRunCheckpointFlagsAndConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := rest.CheckpointConfig{Mode: "at_least_once", Interval: 150, Timeout: 60_000, MinPause: 50, MaxConcurrent: 2,
		TolerableFailedCheckpoints: 3, SavepointDir: dir + "/sp", StateBackend: "heap"}
	check := func(what string, got rest.CheckpointConfig) {
		t.Helper()
		got2 := rest.CheckpointConfig{Mode: got.Mode, Interval: got.Interval, Timeout: got.Timeout, MinPause: got.MinPause,
			MaxConcurrent: got.MaxConcurrent, TolerableFailedCheckpoints: got.TolerableFailedCheckpoints,
			SavepointDir: got.SavepointDir, StateBackend: got.StateBackend}
		if got2 != want {
			t.Errorf("%s: the job's checkpoint configuration is\n%+v\nwant\n%+v", what, got2, want)
		}
	}

	w := startWordCount(t, "--repeat-rate", "500", "--output", dir+"/out1", "--rest-address", "127.0.0.1:0",
		"--checkpoint-interval", "150ms", "--checkpointing-mode", "at-least-once", "--checkpoint-timeout", "1m",
		"--checkpoint-min-pause", "50ms", "--max-concurrent-checkpoints", "2", "--tolerable-failed-checkpoints", "3",
		"--savepoint-dir", dir+"/sp")
	check("flags", checkpointConfig(t, w.url))

	cfg := filepath.Join(dir, "weir.yaml")
	os.WriteFile(cfg, []byte(`# a Flink user's settings
parallelism.default: 3
execution:
  checkpointing:
    interval: 150 ms
    mode: AT_LEAST_ONCE
    timeout: 1 min
    min-pause: 50
    max-concurrent-checkpoints: 7   # overridden by the flag
    tolerable-failed-checkpoints: 3
    savepoint-dir: `+dir+`/sp
state.backend.type: pebble           # overridden by the flag
`), 0o644)
	w = startWordCount(t, "--repeat-rate", "500", "--output", dir+"/out2", "--rest-address", "127.0.0.1:0",
		"--config", cfg, "--max-concurrent-checkpoints", "2", "--state-backend", "heap")
	check("--config", checkpointConfig(t, w.url))
	if p := vertexParallelism(t, w.url); len(p) == 0 || slices.ContainsFunc(p, func(n int) bool { return n != 3 }) {
		t.Errorf("parallelism.default: 3 gave vertices of parallelism %v", p)
	}
}

// TestRunBadCheckpointFlagsAndConfig: a bad checkpoint flag or config file
// is one line naming the flag or key and what it accepts, and the earlier
// result in the output directory stays.
func TestRunBadCheckpointFlagsAndConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	earlier := filepath.Join(out, "part-0-0")
	os.WriteFile(earlier, []byte("weir,1\n"), 0o644)
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--checkpointing-mode", "twice"}, `--checkpointing-mode is "twice": use exactly-once or at-least-once`},
		{[]string{"--checkpoint-timeout", "0s"}, "--checkpoint-timeout is 0s: use a duration of at least 1ms"},
		{[]string{"--checkpoint-min-pause", "-1s"}, "--checkpoint-min-pause is -1s: use 0 or a positive duration"},
		{[]string{"--max-concurrent-checkpoints", "0"}, "--max-concurrent-checkpoints is 0: use 1 or more"},
		{[]string{"--tolerable-failed-checkpoints", "-2"}, "--tolerable-failed-checkpoints is -2: use 0 or more, or -1 for unlimited"},
		{[]string{"--config", filepath.Join(dir, "none.yaml")}, "--config " + filepath.Join(dir, "none.yaml") + ": no such file"},
		{[]string{"--config", file("typo.yaml", "execution.checkpointing.intervall: 1s\n")},
			`typo.yaml:1: unknown key "execution.checkpointing.intervall": did you mean "execution.checkpointing.interval"?`},
		{[]string{"--config", file("range.yaml", "execution:\n  checkpointing:\n    max-concurrent-checkpoints: 0\n")},
			`range.yaml:3: execution.checkpointing.max-concurrent-checkpoints is "0": use an integer of at least 1`},
		{[]string{"--config", file("mode.yaml", "execution.checkpointing.mode: twice\n")},
			`mode.yaml:1: execution.checkpointing.mode is "twice": use EXACTLY_ONCE or AT_LEAST_ONCE`},
		{[]string{"--unaligned", "--checkpointing-mode", "at-least-once"}, "--unaligned needs --checkpointing-mode exactly-once"},
		{[]string{"--unaligned", "--max-concurrent-checkpoints", "2"}, "--unaligned needs --max-concurrent-checkpoints 1 (now 2)"},
		{[]string{"--aligned-checkpoint-timeout", "1s"}, "--aligned-checkpoint-timeout 1s needs --unaligned"},
		{[]string{"--unaligned", "--aligned-checkpoint-timeout", "-1s"}, "--aligned-checkpoint-timeout is -1s: use 0 (always unaligned) or a positive duration"},
		{[]string{"--config", file("ua.yaml", "execution.checkpointing.unaligned.enabled: true\nexecution.checkpointing.max-concurrent-checkpoints: 3\n")},
			"--unaligned needs --max-concurrent-checkpoints 1 (now 3)"},
		{[]string{"--config", file("uat.yaml", "execution.checkpointing.aligned-checkpoint-timeout: 5 s\n")},
			"--aligned-checkpoint-timeout 5s needs --unaligned"},
		{[]string{"--buffer-timeout", "500us"}, "--buffer-timeout is 500µs: use 0 (after every record) or a duration of at least 1ms"},
		{[]string{"--buffer-timeout", "-1s"}, "--buffer-timeout is -1s: use 0 (after every record) or a duration of at least 1ms"},
		{[]string{"--config", file("bt.yaml", "execution.buffer-timeout.interval: -1\n")},
			`bt.yaml:1: execution.buffer-timeout.interval is "-1": use 0 (a flush after every record) or a duration of at least 1 ms`},
		{[]string{"--config", file("bte.yaml", "execution.buffer-timeout.enabled: sometimes\n")},
			`bte.yaml:1: execution.buffer-timeout.enabled is "sometimes": use true or false`},
	} {
		_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--output", out}, c.args...)...)
		wantOneLine(t, strings.Join(c.args, " "), stderr)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", c.args, code, stderr, c.want)
		}
		if _, err := os.Stat(earlier); err != nil {
			t.Fatalf("%v removed the earlier result: %v", c.args, err)
		}
	}
}

// TestAtLeastOnceMode runs wordcount with --checkpointing-mode
// at-least-once: without a failure the output is exact; with processes
// killed by SIGKILL and restarted with --restore latest, nothing is lost
// (each word's last count reaches its total; counts may repeat or run
// ahead, as at-least-once allows).
func TestAtLeastOnceMode(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 200_000)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))
	args := func(out string) []string {
		return []string{"run", "wordcount", "--input", input, "--output", out, "--parallelism", "2",
			"--checkpointing-mode", "at-least-once", "--checkpoint-interval", "30ms", "--checkpoint-dir", out + "-ck"}
	}

	out := filepath.Join(dir, "clean")
	if r := startAndKill(t, args(out), sigkillRunTimeout); r.killed || r.code != 0 {
		t.Fatalf("at-least-once run: %v", r)
	}
	checkWordCountOutput(t, out, want)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	out = filepath.Join(dir, "killed")
	kills := 0
	for run := 0; ; run++ {
		a := args(out)
		if run > 0 {
			a = append(a, "--restore", "latest")
		}
		delay := sigkillRunTimeout
		if kills < 2 {
			delay = 250*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		}
		r := startAndKill(t, a, delay)
		r.restore, r.committed = run > 0, committedBytes(t, out)
		t.Logf("run %d: %v", run, r)
		if r.killed && delay == sigkillRunTimeout {
			t.Fatalf("run %d did not finish within %v", run, sigkillRunTimeout)
		}
		if r.killed {
			kills++
			continue
		}
		if r.code != 0 {
			t.Fatalf("run %d exited %d", run, r.code)
		}
		break
	}
	last := map[string]int{}
	forEachCommittedLine(t, out, func(file, line string) {
		w, k, ok := parseCountLine(line)
		if _, known := want[w]; !ok || !known || k < 1 {
			t.Errorf("%s: unexpected line %q", file, line)
			return
		}
		last[w] = max(last[w], k)
	})
	for w, n := range want {
		if last[w] < n {
			t.Errorf("word %q: last committed count %d, want at least %d (records lost)", w, last[w], n)
		}
	}
	t.Logf("%d kills; %d words", kills, len(want))
}

// TestNexmarkRunConfig: weir nexmark run reads the same file, and refuses
// a key it has no flag for.
func TestNexmarkRunConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("parallelism.default: 1\nexecution.checkpointing.interval: 100 ms\nstate.backend.type: hashmap\n"), 0o644)
	stdout, stderr, code := runWeir(t, "nexmark", "run", "--query", "q0", "--events", "1000", "--config", good)
	if code != 0 || !strings.Contains(stdout, "1000") {
		t.Errorf("nexmark run --config: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("execution.checkpointing.savepoint-dir: "+dir+"\n"), 0o644)
	_, stderr, code = runWeir(t, "nexmark", "run", "--query", "q0", "--events", "1000", "--config", bad)
	if want := bad + ":1: execution.checkpointing.savepoint-dir does not apply to weir nexmark run: it has no --savepoint-dir\n"; code != 1 || stderr != "weir: "+want {
		t.Errorf("nexmark run with a key it lacks: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestConfigKeysHaveFlags: every key of the configuration file sets a flag
// of weir run wordcount, the command the README shows it with, or, for the
// cluster's keys, of weir jobmanager or weir taskmanager.
func TestConfigKeysHaveFlags(t *testing.T) {
	wc := newJobCommand(wordCountSpec()).Flags()
	jm, tm := newJobManagerCommand(bundledJobs()).Flags(), newTaskManagerCommand(bundledJobs()).Flags()
	for _, k := range config.Keys {
		has := wc.Lookup(k.Flag) != nil
		if k.Cluster {
			for _, fs := range []*pflag.FlagSet{jm, tm} {
				has = has || fs.Lookup(k.Flag) != nil || (k.AltFlag != "" && fs.Lookup(k.AltFlag) != nil)
			}
		}
		if !has {
			t.Errorf("%s sets --%s, which no command has", k.Name, k.Flag)
		}
	}
}
