package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// clientFixture runs a real REST server on a random loopback port for a
// fake JobManager with three jobs: "wordcount" (running, with a checkpoint
// history), "etl" (finished, restored from a savepoint) and "nodir"
// (running, without a savepoint directory).
func clientFixture(t *testing.T, opts rest.Options) (jm *resttest.JobManager, wc *resttest.Job, url string) {
	t.Helper()
	old := pollInterval
	pollInterval = 2 * time.Millisecond
	t.Cleanup(func() { pollInterval = old })

	jm = resttest.NewJobManager()
	wc = resttest.NewJob("wordcount", "WordCount")
	t0 := time.Now().Add(-time.Hour)
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 1, Status: jobmaster.Completed, TriggerTime: t0, EndTime: t0.Add(1500 * time.Millisecond),
		Duration: 1500 * time.Millisecond, StateSize: 3 << 20, CheckpointedSize: 1 << 20, NumTasks: 4, Path: "file:///ckpt/wordcount/chk-1"})
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 2, Status: jobmaster.Failed, TriggerTime: t0.Add(time.Minute), EndTime: t0.Add(2 * time.Minute),
		Duration: time.Minute, NumTasks: 4, FailureReason: "checkpoint expired before completing\nsecond line"})
	etl := resttest.NewJob("etl", "ETL")
	etl.SetRestore(7, "file:///sp/savepoint-777777", t0, 0)
	etl.SetStatus(rest.JobFinished)
	nodir := resttest.NewJob("nodir", "NoDir")
	nodir.SetCheckpointConfig(rest.CheckpointConfigInfo{CheckpointStorage: "memory://"})
	jm.Add(wc, etl, nodir)

	opts.Address = "127.0.0.1:0"
	srv, err := rest.New(jm, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", opts.Address)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(context.Background(), ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	<-srv.Ready()
	return jm, wc, "http://" + srv.Addr().String()
}

// serveJM serves jm's REST API on a free loopback port until the test ends
// and returns its host:port.
func serveJM(t *testing.T, jm rest.JobManager) string {
	t.Helper()
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	t.Cleanup(func() { srv.Close(); <-served })
	<-srv.Ready()
	return srv.Addr().String()
}

// checkLeaks verifies, after the test's cleanups (registered later, so
// run earlier), that no goroutine it started is left.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// syncBuffer is a bytes.Buffer safe to read while a command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runClient runs weir with args in process, as main does.
func runClient(args ...string) (stdout, stderr string, err error) {
	var o, e syncBuffer
	root := newRootCommand("weir", jobSpecs)
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return o.String(), e.String(), err
}

func TestClientCommands(t *testing.T) {
	checkLeaks(t)
	_, _, url := clientFixture(t, rest.Options{SavepointAllowedRoots: []string{"s3://bucket/sp", "/savepoints"}})
	tests := []struct {
		name string
		args []string
		want []string // lines (regular expressions) of stdout, in order
	}{
		{"list", []string{"list"}, []string{
			`^JOB ID +NAME +STATE +STARTED +DURATION +TASKS$`,
			`^wordcount +WordCount +RUNNING +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +1m\ds +4/4 running$`,
			`^etl +ETL +FINISHED +.* +0/4 running$`,
			`^nodir +NoDir +RUNNING `,
		}},
		{"info", []string{"info", "wordcount"}, []string{
			`^Job: +wordcount \(WordCount\)$`,
			`^State: +RUNNING$`,
			`^Started: +\d{4}-`,
			`^Duration: +1m\ds$`,
			`^Checkpoints: +1 completed, 1 failed, 0 in progress; latest completed: 1$`,
			`^$`,
			`^VERTEX +NAME +PARALLELISM +STATUS +RECORDS IN +RECORDS OUT +BYTES IN +BYTES OUT +BACKPRESSURE$`,
			`^1 +Source: lines -> split +2 +RUNNING +0 +1000 +0 B +62\.5 KiB +low \(30%\)$`,
			`^2 +count -> Sink: out +2 +RUNNING +1000 +0 +62\.5 KiB +0 B +ok \(0%\)$`,
		}},
		{"info of an ended job", []string{"info", "etl"}, []string{
			`^Job: +etl \(ETL\)$`, `^State: +FINISHED$`, `^Started: `, `^Ended: +\d{4}-`, `^Duration: `, `^Checkpoints: +0 completed`,
			`^$`, `^VERTEX`, `^1 .* FINISHED `, `^2 .* FINISHED `,
		}},
		{"checkpoints", []string{"checkpoints", "wordcount"}, []string{
			`^Checkpoints of job wordcount: 2 triggered, 1 completed, 1 failed, 0 in progress, 0 restored$`,
			`^$`,
			`^ID +TYPE +STATUS +TRIGGERED +DURATION +CHECKPOINTED +FULL SIZE +ACKS +PATH OR FAILURE$`,
			`^2 +checkpoint +FAILED +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +1m0s +0 B +0 B +0/4 +checkpoint expired before completing \(…\)$`,
			`^1 +checkpoint +COMPLETED +\d{4}-.* +1\.5s +1\.0 MiB +3\.0 MiB +0/4 +file:///ckpt/wordcount/chk-1$`,
		}},
		{"checkpoints of a restored job", []string{"checkpoints", "etl"}, []string{
			`^Checkpoints of job etl: 0 triggered, 0 completed, 0 failed, 0 in progress, 1 restored$`,
			`^Latest restore: savepoint 7 from file:///sp/savepoint-777777 at \d{4}-`,
			`^No checkpoints yet\.$`,
		}},
		{"checkpoint", []string{"checkpoint", "wordcount"}, []string{
			`^Checkpoint 3 of job wordcount completed in \d+(\.\d+)?[µnm]?s, 1\.5 KiB uploaded of 6\.0 KiB of state: file:///tmp/ckpt/wordcount/chk-3$`,
		}},
		{"savepoint", []string{"savepoint", "wordcount", "--dir", "s3://bucket/sp"}, []string{
			`^Savepoint 4 \(\d+(\.\d+)?[µnm]?s, 6\.0 KiB\) of job wordcount completed: s3://bucket/sp/savepoint-[0-9a-f]{6}$`,
		}},
		{"savepoint into the default directory", []string{"savepoint", "wordcount"}, []string{
			`^Savepoint 5 .* completed: file:///tmp/savepoints/savepoint-[0-9a-f]{6}$`,
		}},
		{"checkpoints after both", []string{"checkpoints", "wordcount"}, []string{
			`^Checkpoints of job wordcount: 5 triggered, 4 completed, 1 failed`, `^$`, `^ID`,
			`^5 +savepoint +COMPLETED .* 6\.0 KiB +6\.0 KiB +4/4 +file:///tmp/savepoints/savepoint-`,
			`^4 +savepoint +COMPLETED `,
			`^3 +checkpoint +COMPLETED .* file:///tmp/ckpt/wordcount/chk-3$`,
			`^2 +checkpoint +FAILED `,
			`^1 +checkpoint +COMPLETED .* file:///ckpt/wordcount/chk-1 \(discarded\)$`,
		}},
		{"stop", []string{"stop", "wordcount", "--dir", "/savepoints"}, []string{
			`^Job wordcount stopped with savepoint /savepoints/savepoint-[0-9a-f]{6}$`,
		}},
		{"list after the stop", []string{"list"}, []string{`^JOB ID`, `^wordcount +WordCount +FINISHED `, `^etl `, `^nodir `}},
		{"cancel", []string{"cancel", "nodir"}, []string{`^Cancelling job nodir\.$`}},
		{"info after the cancel", []string{"info", "nodir"}, []string{`^Job: `, `^State: +CANCELED$`, `^Started: `, `^Ended: `,
			`^Duration: `, `^Checkpoints: `, `^$`, `^VERTEX`, `^1 .* CANCELED `, `^2 .* CANCELED `}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runClient(append(tt.args, "--jobmanager", url)...)
			if err != nil {
				t.Fatalf("weir %s: %v\nstderr: %s", strings.Join(tt.args, " "), err, stderr)
			}
			matchLines(t, stdout, tt.want)
		})
	}
}

// matchLines fails unless the lines of out match the expressions.
func matchLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i+1, lines[i], re)
		}
	}
}

func TestClientListEmpty(t *testing.T) {
	addr := serveJM(t, resttest.NewJobManager())
	stdout, _, err := runClient("list", "--jobmanager", addr) // host:port is enough
	if err != nil || stdout != "No jobs.\n" {
		t.Fatalf("list: %q, %v", stdout, err)
	}
}

// TestClientWaitShowsProgress: while a checkpoint is in progress, the
// command reports on stderr (plain lines, as stderr is no terminal).
func TestClientWaitShowsProgress(t *testing.T) {
	checkLeaks(t)
	_, wc, url := clientFixture(t, rest.Options{})
	wc.Hold()
	var o, e syncBuffer
	root := newRootCommand("weir", jobSpecs)
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs([]string{"checkpoint", "wordcount", "--jobmanager", url})
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.String(), "Waiting for the checkpoint of job wordcount…\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress on stderr: %q", e.String())
		}
		time.Sleep(time.Millisecond)
	}
	// The REST server answers 202 and then triggers in the background, so
	// the fake job may register the held checkpoint just after the client
	// printed that it waits.
	for sum, _ := wc.Checkpoints(); sum.InProgress != 1; sum, _ = wc.Checkpoints() {
		if time.Now().After(deadline) {
			t.Fatalf("summary %+v: the checkpoint is not in progress", sum)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the command returned before the checkpoint completed: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	wc.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	matchLines(t, o.String(), []string{`^Checkpoint 3 of job wordcount completed in `})
	if strings.Contains(e.String(), "\r") {
		t.Errorf("terminal control characters on a plain stderr: %q", e.String())
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		name  string
		tty   bool
		ticks []time.Duration // elapsed at each update
		want  string
	}{
		{"terminal", true, []time.Duration{0, 1500 * time.Millisecond, 90 * time.Second},
			"\r\033[KWaiting… 0.0s\r\033[KWaiting… 1.5s\r\033[KWaiting… 1m30s\r\033[K"},
		{"plain", false, []time.Duration{0, 3 * time.Second, 9 * time.Second, 10 * time.Second, 15 * time.Second, 21 * time.Second},
			"Waiting…\nWaiting… 10.0s\nWaiting… 21.0s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			p := &progress{w: &b, tty: tt.tty, label: "Waiting", start: start, next: start, now: func() time.Time { return now }}
			for _, d := range tt.ticks {
				now = start.Add(d)
				p.update()
			}
			p.done()
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

// TestClientErrors: every failure is a non-nil error of one line (main
// prints it after "weir: " and exits 1).
func TestClientErrors(t *testing.T) {
	checkLeaks(t)
	_, wc, url := clientFixture(t, rest.Options{})
	_, _, authURL := clientFixture(t, rest.Options{Token: "s3cret"})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close()

	tests := []struct {
		name  string
		setup func() // before the command
		args  []string
		want  string // the whole message, or a regular expression when it starts with ^
	}{
		{"info of an unknown job", nil, []string{"info", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"cancel an unknown job", nil, []string{"cancel", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"checkpoint an unknown job", nil, []string{"checkpoint", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"savepoint an unknown job", nil, []string{"savepoint", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"stop an unknown job", nil, []string{"stop", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"checkpoints of an unknown job", nil, []string{"checkpoints", "nope", "--jobmanager", url}, `job "nope" not found`},
		{"job id with a slash", nil, []string{"info", "a/b?c", "--jobmanager", url}, `job "a/b?c" not found`},
		{"cancel an ended job", nil, []string{"cancel", "etl", "--jobmanager", url}, `job "etl" has already ended (FINISHED)`},
		{"checkpoint an ended job", nil, []string{"checkpoint", "etl", "--jobmanager", url},
			`job "etl" has ended (FINISHED): a checkpoint needs a running job`},
		{"failing checkpoint", func() { wc.FailOperations(errors.New("task 2-1 declined\nstack")) },
			[]string{"checkpoint", "wordcount", "--jobmanager", url}, "the checkpoint of job wordcount failed: task 2-1 declined (…)"},
		{"no savepoint directory", nil, []string{"savepoint", "nodir", "--jobmanager", url},
			"job nodir has no savepoint directory: pass one with weir savepoint --dir DIR, or start weir run with --savepoint-dir DIR"},
		{"stop, no savepoint directory", nil, []string{"stop", "nodir", "--jobmanager", url},
			"job nodir has no savepoint directory: pass one with weir stop --dir DIR, or start weir run with --savepoint-dir DIR"},
		{"savepoint outside the allowed roots", nil, []string{"savepoint", "wordcount", "--dir", "/etc", "--jobmanager", url},
			`savepoint target refused: "/etc": it is outside the allowed savepoint roots; allowed: /tmp/savepoints`},
		{"stop with drain", nil, []string{"stop", "wordcount", "--drain", "--jobmanager", url},
			`"drain": true is not supported by this job: stop without draining`},
		{"timeout", func() { wc.FailOperations(nil); wc.Hold() }, []string{"checkpoint", "wordcount", "--timeout", "30ms", "--jobmanager", url},
			"gave up waiting (--timeout): the checkpoint of job wordcount may still complete; see weir checkpoints wordcount"},
		{"negative timeout", nil, []string{"savepoint", "wordcount", "--timeout", "-1s", "--jobmanager", url},
			"--timeout is -1s: use 0 (wait until done) or a positive duration such as 5m"},
		{"no JobManager", nil, []string{"list", "--jobmanager", deadURL},
			`^cannot reach the JobManager at http://127\.0\.0\.1:\d+: connect: connection refused \(is it running\? see --jobmanager\)$`},
		{"not a URL", nil, []string{"list", "--jobmanager", "ftp://host"},
			`--jobmanager "ftp://host" is not the URL of a JobManager, such as http://127.0.0.1:8081`},
		{"no token", nil, []string{"list", "--jobmanager", authURL},
			`missing or wrong bearer token: send the header "Authorization: Bearer <token>" (pass --token or set WEIR_REST_TOKEN)`},
		{"wrong token", nil, []string{"checkpoints", "wordcount", "--token", "nope", "--jobmanager", authURL},
			`missing or wrong bearer token: send the header "Authorization: Bearer <token>" (pass --token or set WEIR_REST_TOKEN)`},
		{"no job argument", nil, []string{"checkpoint", "--jobmanager", url}, "weir checkpoint needs the id of a job (JOB): weir list shows the jobs of the JobManager"},
		{"unknown flag", nil, []string{"list", "--jobmanger", url}, "unknown flag: --jobmanger (see weir list --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			stdout, _, err := runClient(tt.args...)
			if err == nil {
				t.Fatalf("no error; stdout %q", stdout)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("the message has several lines: %q", msg)
			}
			if strings.HasPrefix(tt.want, "^") {
				if !regexp.MustCompile(tt.want).MatchString(msg) {
					t.Errorf("error %q does not match %s", msg, tt.want)
				}
			} else if msg != tt.want {
				t.Errorf("error %q\nwant     %q", msg, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q on error", stdout)
			}
		})
	}
	wc.Release()
}

func TestClientEnvironment(t *testing.T) {
	_, _, url := clientFixture(t, rest.Options{Token: "s3cret"})
	t.Setenv("WEIR_JOBMANAGER", url)
	t.Setenv("WEIR_TOKEN", "s3cret")
	stdout, _, err := runClient("checkpoints", "wordcount")
	if err != nil || !strings.HasPrefix(stdout, "Checkpoints of job wordcount: 2 triggered") {
		t.Fatalf("with WEIR_JOBMANAGER and WEIR_TOKEN: %q, %v", stdout, err)
	}
	// Flags win over the environment.
	if _, _, err := runClient("list", "--token", "nope"); err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("--token nope: %v", err)
	}
}

// TestClientExitStatus runs the real binary: an error exits 1 with one line
// on stderr and nothing on stdout.
func TestClientExitStatus(t *testing.T) {
	_, _, url := clientFixture(t, rest.Options{})
	stdout, stderr, code := runWeir(t, "info", "nope", "--jobmanager", url)
	if code != 1 || stderr != "weir: job \"nope\" not found\n" || stdout != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	stdout, _, code = runWeir(t, "checkpoint", "wordcount", "--jobmanager", url)
	if code != 0 || !strings.HasPrefix(stdout, "Checkpoint 3 of job wordcount completed in ") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

// TestClientStopWithDrain: weir stop --drain asks the JobManager for a
// stop with drain, and a job that supports it stops.
func TestClientStopWithDrain(t *testing.T) {
	jm := resttest.NewJobManager()
	job := jm.Add(resttest.NewJob("events", "Events").Drainable())
	addr := serveJM(t, jm)
	stdout, stderr, err := runClient("stop", "events", "--drain", "--dir", "/tmp/savepoints/sp", "--jobmanager", addr)
	if err != nil {
		t.Fatalf("stop --drain: %v\nstderr: %s", err, stderr)
	}
	matchLines(t, stdout, []string{`^Job events stopped with savepoint /tmp/savepoints/sp/savepoint-[0-9a-f]{6}$`})
	if st := job.Status(); st != rest.JobFinished {
		t.Errorf("job status %s after stop --drain, want FINISHED", st)
	}
}
