package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/internal/deploy"
)

// userJobFixture is a user's job "evens": the even numbers below --n into
// part files in --output, with a Prepare that counts its calls. seen
// receives the options each Build got.
func userJobFixture(prepared *atomic.Int32, seen func(weir.Options)) Job {
	return Job{
		Name:  "evens",
		Short: "Write the even numbers below --n",
		Define: func(fs *pflag.FlagSet) Builder {
			n := fs.Int64("n", 100, "numbers to look at")
			output := fs.StringP("output", "o", "out/evens", "directory of the part files")
			return Builder{
				Build: func(_ context.Context, opts weir.Options) (*weir.Environment, error) {
					if *n < 1 {
						return nil, fmt.Errorf("--n is %d: use 1 or more", *n)
					}
					if seen != nil {
						seen(opts)
					}
					env := weir.NewEnvironment(opts)
					env.FromSource("numbers", datagen.Sequence(0, *n-1)).UID("numbers").
						Filter("even", func(i int64) bool { return i%2 == 0 }).
						Map("format", func(i int64) string { return fmt.Sprint(i) }).
						SinkTo("out", file.PartFiles(*output, file.Options{})).UID("out")
					return env, nil
				},
				Prepare: func(context.Context) error {
					prepared.Add(1)
					return os.MkdirAll(*output, 0o755)
				},
			}
		},
		Paths: []string{"output"},
	}
}

// TestUserJobRegistry: a user's job is built by name from its flags and
// the common ones, the same flags giving the same graph in every process,
// and prepared only through deploy.Preparer.
func TestUserJobRegistry(t *testing.T) {
	var prepared atomic.Int32
	var last weir.Options
	specs, err := specsOf([]Job{userJobFixture(&prepared, func(o weir.Options) { last = o })})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobRegistry{specs: specs}
	if got := reg.Names(); !slices.Equal(got, []string{"evens"}) {
		t.Fatalf("Names() = %v", got)
	}
	dir := t.TempDir()
	args := []string{"--n=50", "--output=" + filepath.Join(dir, "out"), "--parallelism=3", "--checkpoint-interval=250ms",
		"--checkpoint-dir=" + filepath.Join(dir, "ck"), "--state-backend=pebble", "--incremental", "--max-parallelism=64"}
	a, err := reg.Job("evens", args)
	if err != nil {
		t.Fatal(err)
	}
	o := last
	if o.Parallelism != 3 || o.MaxParallelism != 64 || o.JobID != "evens" || o.StateBackend != "pebble" ||
		o.Checkpointing.Interval != 250*time.Millisecond || !o.Checkpointing.Incremental ||
		o.Checkpointing.Storage != filepath.Join(dir, "ck") || o.Restart != defaultRestart {
		t.Errorf("Build got options %+v: not those of the flags", o)
	}
	b, err := reg.Job("evens", args)
	if err != nil {
		t.Fatal(err)
	}
	if a.Plan().Fingerprint != b.Plan().Fingerprint {
		t.Error("two builds of the same flags give two graphs")
	}
	for _, v := range a.Plan().Vertices {
		if v.Parallelism != 3 {
			t.Errorf("vertex %s has parallelism %d, want 3 (--parallelism)", v.Name, v.Parallelism)
		}
	}
	c, err := reg.Job("evens", append(slices.Clip(args), "--parallelism=2"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Plan().Fingerprint == a.Plan().Fingerprint {
		t.Error("another --parallelism gives the same graph")
	}
	if prepared.Load() != 0 {
		t.Errorf("building prepared the job %d times: building must have no side effects", prepared.Load())
	}
	p, ok := a.(deploy.Preparer)
	if !ok {
		t.Fatal("a job with Prepare is not a deploy.Preparer")
	}
	if err := p.Prepare(context.Background()); err != nil || prepared.Load() != 1 {
		t.Fatalf("Prepare: %v, %d calls", err, prepared.Load())
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
		t.Errorf("Prepare did not create the output: %v", err)
	}

	// --config applies Flink's keys to the common flags; flags override.
	cfg := filepath.Join(dir, "weir.yaml")
	os.WriteFile(cfg, []byte("parallelism.default: 4\nexecution.checkpointing.interval: 2s\n"), 0o644)
	if _, err := reg.Job("evens", []string{"--config=" + cfg, "--checkpoint-interval=1s"}); err != nil {
		t.Fatal(err)
	}
	if last.Parallelism != 4 || last.Checkpointing.Interval != time.Second {
		t.Errorf("with --config: parallelism %d, interval %v; want 4 (the file) and 1s (the flag)", last.Parallelism, last.Checkpointing.Interval)
	}

	// Bad input: one line naming what was wrong.
	for _, tc := range []struct {
		name string
		job  string
		args []string
		want string
	}{
		{"unknown job", "odds", nil, `unknown job "odds": the known jobs are evens`},
		{"the job's own flag", "evens", []string{"--n=0"}, "job evens: --n is 0: use 1 or more"},
		{"a common flag", "evens", []string{"--parallelism=0"}, "job evens: --parallelism is 0: use a value from 1 to 128"},
		{"max parallelism below parallelism", "evens", []string{"--parallelism=8", "--max-parallelism=4"}, "--max-parallelism is 4: use a value from --parallelism (8) to 32768"},
		{"a backend", "evens", []string{"--state-backend=rocks"}, `--state-backend is "rocks": use heap or pebble`},
		{"incremental on heap", "evens", []string{"--incremental"}, "--incremental and --changelog need --state-backend pebble"},
		{"restore latest without a directory", "evens", []string{"--restore=latest"}, "--restore latest needs --checkpoint-dir"},
		{"an unknown flag", "evens", []string{"--nope=1"}, "job evens: unknown flag: --nope"},
		{"arguments", "evens", []string{"extra"}, `job evens takes flags only, not "extra"`},
		{"a bad log level", "evens", []string{"--log-level=loud"}, "loud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reg.Job(tc.job, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Job(%s, %v) = %v, want one line with %q", tc.job, tc.args, err, tc.want)
			}
		})
	}
}

// TestSpecsOfRefuses: jobs that cannot work are refused when the program
// starts, with the job and the fix named.
func TestSpecsOfRefuses(t *testing.T) {
	var n atomic.Int32
	ok := userJobFixture(&n, nil)
	withFlag := func(name, short string) Job {
		j := ok
		define := j.Define
		j.Define = func(fs *pflag.FlagSet) Builder {
			fs.StringP(name, short, "", "clashes")
			return define(fs)
		}
		return j
	}
	noBuild := ok
	noBuild.Define = func(*pflag.FlagSet) Builder { return Builder{} }
	named := func(name string) Job { j := ok; j.Name = name; return j }
	for _, tc := range []struct {
		name string
		jobs []Job
		want string
	}{
		{"no job", nil, "cli.Main needs at least one job"},
		{"an empty name", []Job{named("")}, `cli.Main: job 0 is named "": use letters, digits`},
		{"a name with a space", []Job{named("my job")}, `job 0 is named "my job"`},
		{"no Define", []Job{{Name: "x"}}, "cli.Main: job x has no Define"},
		{"no Build", []Job{noBuild}, "job evens: Define returned a Builder without Build"},
		{"a common flag", []Job{withFlag("parallelism", "")}, "job evens: its flag --parallelism is one of the common flags of run evens"},
		{"a client flag", []Job{withFlag("jobmanager", "")}, "its flag --jobmanager is one of the common flags"},
		{"help", []Job{withFlag("help", "")}, "its flag --help is one of the common flags"},
		{"shorthand h", []Job{withFlag("hosts", "h")}, "the shorthand -h of its flag --hosts is taken"},
		{"twice the same name", []Job{ok, ok}, `cli.Main: two jobs are named "evens"`},
		{"a bundled job's name", append(Bundled(), named("wordcount")), `two jobs are named "wordcount"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := specsOf(tc.jobs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("specsOf = %v, want %q", err, tc.want)
			}
		})
	}
	// Bundled and a job of one's own go together.
	specs, err := specsOf(append(Bundled(), ok))
	if err != nil {
		t.Fatal(err)
	}
	if got := (jobRegistry{specs: specs}).Names(); !slices.Equal(got, []string{"evens", "nexmark", "wordcount"}) {
		t.Errorf("Names() = %v", got)
	}
}

// TestUserJobRunsHere: `PROGRAM run evens` in local mode runs the job in
// this process, prepared once, with its output; the program's commands are
// weir's roles and clients without weir's own demo and nexmark.
func TestUserJobRunsHere(t *testing.T) {
	checkLeaks(t)
	var prepared atomic.Int32
	specs, err := specsOf([]Job{userJobFixture(&prepared, nil)})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	var o, e syncBuffer
	root := newRootCommand("evens-prog", specs)
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs([]string{"run", "evens", "--n", "20", "-o", out, "--parallelism", "2", "--rest-address", "off"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("run evens: %v\n%s", err, e.String())
	}
	if !strings.Contains(o.String(), "evens: job evens finished (0 restart(s)") || prepared.Load() != 1 {
		t.Errorf("stdout %q, prepared %d times", o.String(), prepared.Load())
	}
	var got []string
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, p := range parts {
		b, _ := os.ReadFile(p)
		got = append(got, strings.Fields(string(b))...)
	}
	slices.Sort(got)
	want := []string{"0", "10", "12", "14", "16", "18", "2", "4", "6", "8"}
	if !slices.Equal(got, want) {
		t.Errorf("output %v, want %v", got, want)
	}
	var cmds []string
	for _, c := range root.Commands() {
		cmds = append(cmds, c.Name())
	}
	for _, c := range []string{"run", "jobmanager", "taskmanager", "cluster", "list", "info", "cancel", "checkpoint", "savepoint", "stop", "checkpoints"} {
		if !slices.Contains(cmds, c) {
			t.Errorf("the program has no %s command: %v", c, cmds)
		}
	}
	if slices.Contains(cmds, "demo") || slices.Contains(cmds, "nexmark") {
		t.Errorf("a program without weir's bundled jobs has weir's demo or nexmark: %v", cmds)
	}
}
