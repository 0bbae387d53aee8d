package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/deploy"
)

// otherBuildEnv, set to 1 in a child process, gives every bundled job of
// that process another build: one more subtask per operator than its flags
// say, so another graph fingerprint, as a TaskManager of another binary of
// the job would build.
const otherBuildEnv = "WEIR_TEST_OTHER_BUILD"

func otherBuild() {
	for i, s := range jobSpecs {
		define := s.define
		jobSpecs[i].define = func() (*cobra.Command, jobFuncs) {
			c, fn := define()
			build := fn.build
			fn.build = func(ctx context.Context) (*weir.Environment, func(context.Context) error, error) {
				p, err := c.Flags().GetInt("parallelism")
				if err != nil {
					return nil, nil, err
				}
				if err := c.Flags().Set("parallelism", strconv.Itoa(p+1)); err != nil {
					return nil, nil, err
				}
				return build(ctx)
			}
			return c, fn
		}
	}
}

func TestBundledJobsNames(t *testing.T) {
	if got, want := bundledJobs().Names(), []string{"nexmark", "wordcount"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// weir run has a command for each, and nothing else.
	var cmds []string
	for _, c := range newRunCommand(jobSpecs).Commands() {
		cmds = append(cmds, c.Name())
	}
	slices.Sort(cmds)
	if !slices.Equal(cmds, bundledJobs().Names()) {
		t.Fatalf("weir run's commands %v, the registry's jobs %v", cmds, bundledJobs().Names())
	}
}

// TestBundledJobsBadInput: a bad name or bad flags are one-line errors
// naming what was wrong.
func TestBundledJobsBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, job string
		args      []string
		want      string
	}{
		{"unknown job", "wordcnt", nil, `unknown job "wordcnt": the known jobs are nexmark, wordcount`},
		{"unknown flag", "wordcount", []string{"--paralelism=2"}, "job wordcount: unknown flag: --paralelism"},
		{"bad value", "wordcount", []string{"--parallelism=0"}, "job wordcount: --parallelism is 0: use a value from 1 to 128"},
		{"not a flag", "wordcount", []string{"--parallelism=2", "extra"}, `job wordcount takes flags only, not "extra"`},
		{"missing input", "wordcount", []string{"--input=" + filepath.Join(dir, "nope")}, "does not exist"},
		{"nexmark without a query", "nexmark", []string{"--events=10"}, "job nexmark: --query is required"},
		{"nexmark unknown query", "nexmark", []string{"--query=q99", "--events=10"}, "job nexmark: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bundledJobs().Job(tc.job, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Job(%q, %q) = %v, want one line with %q", tc.job, tc.args, err, tc.want)
			}
		})
	}
}

// treeOf lists every file and directory under dir with its size.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+strconv.FormatInt(info.Size(), 10))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWordCountBuildHasNoSideEffects: building wordcount from its flags, as
// the JobManager and every TaskManager do, touches nothing: an earlier
// result stays, no lock is taken. The same flags give the same graph, other
// flags another. Prepare, once per submission, does what weir run does
// before it starts: it clears the earlier result on a fresh start and
// keeps it on a restore.
func TestWordCountBuildHasNoSideEffects(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	os.WriteFile(input, []byte("a b a\n"), 0o644)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	os.MkdirAll(out, 0o755)
	os.MkdirAll(filepath.Join(ck, "wordcount"), 0o755)
	old := filepath.Join(out, "part-0-0")
	os.WriteFile(old, []byte("x,1\n"), 0o644)
	args := []string{"--input=" + input, "--output=" + out, "--checkpoint-dir=" + ck, "--checkpoint-interval=1s", "--parallelism=2"}
	before := treeOf(t, dir)
	a, err := bundledJobs().Job("wordcount", args)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundledJobs().Job("wordcount", args)
	if err != nil {
		t.Fatal(err)
	}
	if after := treeOf(t, dir); !slices.Equal(before, after) {
		t.Fatalf("building the job changed %s:\nbefore %v\nafter  %v", dir, before, after)
	}
	if a.Plan().Fingerprint == "" || a.Plan().Fingerprint != b.Plan().Fingerprint {
		t.Errorf("two builds of the same flags: fingerprints %q and %q", a.Plan().Fingerprint, b.Plan().Fingerprint)
	}
	c, err := bundledJobs().Job("wordcount", append(slices.Clip(args), "--parallelism=3"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Plan().Fingerprint == a.Plan().Fingerprint {
		t.Errorf("parallelism 2 and 3 give the same fingerprint %q", a.Plan().Fingerprint)
	}
	if p := a.Plan(); p.Job != "wordcount" || len(p.Vertices) == 0 {
		t.Errorf("plan %+v", p)
	}

	// Restored: the committed output stays.
	r, err := bundledJobs().Job("wordcount", append(slices.Clip(args), "--restore=latest"))
	if err != nil {
		t.Fatal(err)
	}
	rp, ok := r.(deploy.Preparer)
	if !ok {
		t.Fatal("wordcount is no deploy.Preparer")
	}
	if err := rp.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("Prepare of a restore removed the committed output: %v", err)
	}
	// Fresh: the earlier result goes.
	if err := a.(deploy.Preparer).Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Prepare of a fresh start left the earlier result: %v", err)
	}
	// A directory the output cannot be made in.
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	bad, err := bundledJobs().Job("wordcount", []string{"--input=" + input, "--output=" + filepath.Join(dir, "file", "out")})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.(deploy.Preparer).Prepare(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot create output directory") {
		t.Fatalf("Prepare into a file: %v", err)
	}
}

// TestNexmarkJobBuilds: the nexmark job builds by name with --query, as
// weir nexmark report --cluster needs it.
func TestNexmarkJobBuilds(t *testing.T) {
	j, err := bundledJobs().Job("nexmark", []string{"--query=q3", "--events=1000", "--parallelism=2"})
	if err != nil {
		t.Fatal(err)
	}
	if p := j.Plan(); p.Job != "nexmark" || len(p.Vertices) < 2 || p.Fingerprint == "" {
		t.Fatalf("plan %+v", p)
	}
	if _, ok := j.(deploy.Preparer); ok {
		t.Error("a nexmark job into a blackhole has nothing to prepare")
	}
}

// TestJobArgs: what weir run --jobmanager submits: the job's flags as set
// (on the command line or by --config), relative paths made absolute,
// without the client's flags, local mode's or --config.
func TestJobArgs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "weir.yaml")
	os.WriteFile(cfg, []byte("parallelism.default: 3\n"), 0o644)
	spec := wordCountSpec()
	c := newJobCommand(spec)
	err := c.ParseFlags([]string{"--input", "in.txt", "--output=/abs/out", "--checkpoint-dir", "memory://x", "--restore", "latest",
		"--jobmanager", "127.0.0.1:1", "--cluster-token", "t", "--detached", "--rest-address=off", "--config", cfg, "--log-level", "info"})
	if err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(c, cfg); err != nil {
		t.Fatal(err)
	}
	got, err := jobArgs(c.Flags(), spec)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	want := []string{"--checkpoint-dir=memory://x", "--input=" + filepath.Join(wd, "in.txt"), "--log-level=info", "--output=/abs/out", "--parallelism=3", "--restore=latest"}
	if !slices.Equal(got, want) {
		t.Fatalf("jobArgs = %q\nwant      %q", got, want)
	}
	// The registry builds them back into the same flags.
	c2, _ := spec.define()
	if err := c2.ParseFlags(got); err != nil {
		t.Fatal(err)
	}
	if p, _ := c2.Flags().GetInt("parallelism"); p != 3 {
		t.Errorf("parallelism %d after the round trip", p)
	}
}

// fakeStatus answers Status from a script: each call takes the next entry.
type fakeStatus struct {
	script []any // cluster.JobStatus or error
	calls  int
}

func (f *fakeStatus) Status(ctx context.Context, id string) (cluster.JobStatus, error) {
	e := f.script[min(f.calls, len(f.script)-1)]
	f.calls++
	if err, ok := e.(error); ok {
		return cluster.JobStatus{}, err
	}
	return e.(cluster.JobStatus), nil
}

func TestFollowJob(t *testing.T) {
	defer func(d time.Duration) { followPoll = d }(followPoll)
	followPoll = time.Millisecond
	unavailable := errors.New("JobManager 127.0.0.1:1: connection refused")
	st := func(state string, attempt, restarts int, ckpt int64, e string) cluster.JobStatus {
		return cluster.JobStatus{ID: "j1", Name: "wordcount", State: state, Attempt: attempt, Restarts: restarts, LastCheckpoint: ckpt, Error: e}
	}
	t.Run("progress to the end", func(t *testing.T) {
		f := &fakeStatus{script: []any{
			st("CREATED", 0, 0, 0, ""), st("RUNNING", 1, 0, 0, ""), st("RUNNING", 1, 0, 2, ""),
			unavailable, // one lost answer is no failure
			st("RESTARTING", 1, 1, 2, "TaskManager tm-1 lost"), st("RUNNING", 2, 1, 2, ""), st("RUNNING", 2, 1, 3, ""),
			st("FINISHED", 2, 1, 4, ""),
		}}
		var w bytes.Buffer
		got, err := followJob(context.Background(), f, "j1", &w, time.Minute)
		if err != nil || got.State != "FINISHED" {
			t.Fatalf("followJob = %+v, %v", got, err)
		}
		want := `weir: job j1 is CREATED (attempt 0)
weir: job j1 is RUNNING (attempt 1)
weir: job j1 completed checkpoint 2
weir: job j1 restarted (restart 1): TaskManager tm-1 lost
weir: job j1 is RESTARTING (attempt 1)
weir: job j1 is RUNNING (attempt 2)
weir: job j1 completed checkpoint 3
weir: job j1 is FINISHED (attempt 2)
weir: job j1 completed checkpoint 4
`
		if w.String() != want {
			t.Errorf("printed:\n%s\nwant:\n%s", w.String(), want)
		}
	})
	t.Run("JobManager lost", func(t *testing.T) {
		f := &fakeStatus{script: []any{st("RUNNING", 1, 0, 0, ""), unavailable}}
		_, err := followJob(context.Background(), f, "j1", &bytes.Buffer{}, 50*time.Millisecond)
		if err == nil || err.Error() != "lost job j1: the JobManager has not reported it for 50ms (JobManager 127.0.0.1:1: connection refused); the job may run on" {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestRunClientFlagsNeedJobManager: the cluster client's flags without
// --jobmanager are a mistake, not silently ignored.
func TestRunClientFlagsNeedJobManager(t *testing.T) {
	for _, args := range [][]string{
		{"run", "wordcount", "--detached"},
		{"run", "wordcount", "--cluster-token", "x"},
	} {
		_, stderr, code := runWeir(t, args...)
		if code == 0 || !strings.Contains(stderr, "is for a job on a cluster: give the JobManager with --jobmanager HOST:PORT too") {
			t.Errorf("%q: exit %d, stderr %s", args, code, stderr)
		}
	}
}
