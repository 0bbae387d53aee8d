package cli

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runningWeir is a `weir run` process.
type runningWeir struct {
	url    string      // its REST API
	stdout *syncBuffer // what it printed on stdout so far
	stderr *syncBuffer // what it printed on stderr so far
	exited chan struct{}
	err    error // its exit error, once exited is closed
}

// startWordCount starts `weir run wordcount` as a process with args and
// returns it once it printed its REST API's URL on stderr. The process is
// killed at the end of the test if still running.
func startWordCount(t *testing.T, args ...string) *runningWeir {
	t.Helper()
	return startWordCountEnv(t, nil, args...)
}

// startWordCountEnv is startWordCount with env ("NAME=value") added to the
// process's environment.
func startWordCountEnv(t *testing.T, env []string, args ...string) *runningWeir {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"run", "wordcount"}, args...)...)
	cmd.Env = append(append(os.Environ(), "WEIR_TEST_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &runningWeir{stdout: new(syncBuffer), stderr: new(syncBuffer), exited: make(chan struct{})}
	cmd.Stdout = w.stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.exited
	})
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`REST API on (https?://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.stderr.Write(append(sc.Bytes(), '\n'))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		w.err = cmd.Wait()
		close(w.exited)
	}()
	select {
	case w.url = <-urls:
		return w
	case <-w.exited:
		t.Fatalf("weir run wordcount exited without serving the REST API; stderr:\n%s", w.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run wordcount printed no REST address; stderr:\n%s", w.stderr.String())
	}
	return nil
}

// TestRunServesRESTToTheClient drives a real `weir run wordcount` (an
// unbounded input, periodic checkpoints) with the client commands over
// its REST API: list, info, checkpoint, checkpoints, cancel.
func TestRunServesRESTToTheClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := startWordCount(t, "--repeat-rate", "2000", "--checkpoint-interval", "300ms",
		"--checkpoint-dir", dir+"/ckpt", "--output", dir+"/out", "--rest-address", "127.0.0.1:0")
	url := w.url

	// The REST API serves from the start; the tasks start running a moment
	// later.
	running := regexp.MustCompile(`(?m)^wordcount +wordcount +RUNNING +.* 4/4 running$`)
	var stdout string
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		stdout, _, err = runClient("list", "--jobmanager", url)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if running.MatchString(stdout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list never showed the job with 4/4 tasks running:\n%s", stdout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	matchLines(t, stdout, []string{`^JOB ID +NAME +STATE `, `^wordcount +wordcount +RUNNING +.* 4/4 running$`})

	stdout, _, err = runClient("checkpoint", "wordcount", "--jobmanager", url)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	m := regexp.MustCompile(`^Checkpoint (\d+) of job wordcount completed in `).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("checkpoint printed %q", stdout)
	}
	stdout, _, err = runClient("checkpoints", "wordcount", "--jobmanager", url)
	if err != nil {
		t.Fatalf("checkpoints: %v", err)
	}
	if !regexp.MustCompile(`(?m)^` + m[1] + ` +checkpoint +COMPLETED `).MatchString(stdout) {
		t.Errorf("checkpoints does not list checkpoint %s as completed:\n%s", m[1], stdout)
	}
	stdout, _, err = runClient("info", "wordcount", "--jobmanager", url)
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	if !strings.Contains(stdout, "RUNNING") || !strings.Contains(stdout, "lines") {
		t.Errorf("info:\n%s", stdout)
	}

	if _, _, err := runClient("cancel", "wordcount", "--jobmanager", url); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case <-w.exited:
		if w.err == nil {
			t.Errorf("weir run exited 0 after cancel; want a failure exit")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run still runs 30s after cancel; stderr:\n%s", w.stderr.String())
	}
	if !strings.Contains(w.stderr.String(), "job wordcount was cancelled: "+dir+"/out holds what its checkpoints committed, up to checkpoint ") {
		t.Errorf("stderr does not say the job was cancelled:\n%s", w.stderr.String())
	}
}

// TestRunRESTAddressInUse: a busy --rest-address fails the command at
// once, in one line, before the job starts.
func TestRunRESTAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	_, stderr, code := runWeir(t, "run", "wordcount", "--output", dir, "--rest-address", ln.Addr().String())
	if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, ln.Addr().String()+" is already in use") {
		t.Fatalf("exit %d, stderr %q: want a one-line 'already in use' error", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		var names bytes.Buffer
		for _, e := range entries {
			names.WriteString(e.Name() + " ")
		}
		t.Errorf("the job ran anyway: %s", names.String())
	}
}

// TestRunRESTFlagsRejected: bad addresses and a public address without a
// token are refused with a clear error.
func TestRunRESTFlagsRejected(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args []string }{
		{[]string{"--rest-address", "nonsense"}},
		{[]string{"--rest-address", "0.0.0.0:0"}},
		{[]string{"--repeat-rate", "-1"}},
		{[]string{"--repeat-rate", "5", "--input", "/"}},
		{[]string{"--rest-tls-cert", "cert.pem", "--rest-address", "127.0.0.1:0"}},
		{[]string{"--rest-tls-key", "key.pem", "--rest-address", "127.0.0.1:0"}},
		{[]string{"--rest-tls-cert", "/nonexistent/cert.pem", "--rest-tls-key", "/nonexistent/key.pem", "--rest-address", "127.0.0.1:0"}},
		{[]string{"--savepoint-allowed-roots", "ftp://x", "--rest-address", "127.0.0.1:0"}},
		{[]string{"--rest-trusted-origins", "evil.example", "--rest-address", "127.0.0.1:0"}},
	} {
		dir := t.TempDir()
		_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--output", dir}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.args[0]) {
			t.Errorf("%v: exit %d, stderr %q: want an error naming %s", c.args, code, stderr, c.args[0])
		}
	}
}
