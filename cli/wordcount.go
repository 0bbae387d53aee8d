package cli

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/examples/wordcount"
	"github.com/weirstream/weir/internal/storage"
)

//go:embed demo.txt
var demoText string

type wordCountFlags struct {
	input       string
	output      string
	parallelism int
	interval    time.Duration
	ckptDir     string
	restore     string
	backend     string
	incremental bool
	changelog   bool
	rest        restFlags
	repeatRate  float64
	watch       time.Duration
	ckpt        checkpointFlags
	config      string
	edge        edgeFlags
}

// edgeFlags are the flags of issue 24 (exactly-once at the edges): kept
// together so that they merge apart from the others.
type edgeFlags struct {
	logLevel       string
	logFormat      string
	restart        string
	retained       int
	keepRolledBack bool
	allowRepeated  bool
}

// defaultRestart is weir run's restart strategy with periodic checkpoints:
// bounded, so that a job that cannot go on (a full disk, a lost output)
// ends, non-zero and with its cause, after about a minute of retries,
// instead of retrying for ever as the API's default does.
const defaultRestart = "exponential-delay:initial-backoff=1s,max-backoff=30s,multiplier=1.5,attempts=8"

func (e *edgeFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&e.logLevel, "log-level", "warn", "least level of the log lines on stderr: debug, info, warn or error (restarts and failed checkpoints are warnings; each cause shows at most once a minute)")
	c.Flags().StringVar(&e.logFormat, "log-format", "text", "format of the log lines on stderr: text or json")
	c.Flags().StringVar(&e.restart, "restart", "", "restart strategy after a failure: none, fixed-delay[:attempts=N,delay=D], exponential-delay[:...], failure-rate[:max=N,interval=D,delay=D] (default: "+defaultRestart+" with --checkpoint-interval, else none)")
	c.Flags().BoolVar(&e.keepRolledBack, "keep-rolled-back", false, "when a restore goes back past checkpoints that committed output (an older checkpoint, or a fallback past a damaged one), move their part files to .rolled-back/ in --output instead of removing them")
	c.Flags().BoolVar(&e.allowRepeated, "allow-repeated-output", false, "restore a checkpoint older than others that completed since even when the --output sink cannot undo their commits (Kafka, NATS): their output is written again")
	c.Flags().IntVar(&e.retained, "retained-checkpoints", 1, "number of completed checkpoints kept (Flink's state.checkpoints.num-retained): with more than one, --restore latest falls back to an older one when the newest is damaged")
}

// wordCountCommand returns a wordcount command whose flags set f, without
// its RunE: weir run wordcount's (newJobCommand gives it its run and the
// cluster client's flags) and the registry's, which parses a cluster job's
// flags with it (jobs.go).
func wordCountCommand(f *wordCountFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "wordcount",
		Short: "Count words: emit word,running-count for every occurrence",
		Long: `Counts the words of a file or a directory of files. Words are the maximal
runs of Unicode letters and digits, lower-cased. For every occurrence of a word
the job emits its running count as a line "word,count" into part files in the
output directory. Without --input it counts a bundled demo text.`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&f.input, "input", "", "file or directory to read (default: a bundled demo text)")
	c.Flags().StringVar(&f.output, "output", "out/wordcount", "directory for the result's part files")
	c.Flags().IntVar(&f.parallelism, "parallelism", 2, "number of subtasks per operator")
	c.Flags().DurationVar(&f.interval, "checkpoint-interval", 0, "take a checkpoint this often (e.g. 1s); 0 disables periodic checkpoints")
	c.Flags().StringVar(&f.ckptDir, "checkpoint-dir", "", "checkpoint storage: a directory, file:///path, s3://bucket/prefix[?endpoint=host:port&secure=false&pathstyle=true] (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or memory://name (default: in memory)")
	c.Flags().StringVar(&f.backend, "state-backend", "heap", `where keyed state lives: "heap" or "pebble"`)
	c.Flags().BoolVar(&f.incremental, "incremental", false, "incremental checkpoints: upload only the state files that earlier checkpoints did not (needs --state-backend pebble)")
	c.Flags().BoolVar(&f.changelog, "changelog", false, "changelog-based incremental checkpoints (Flink's state.changelog): each checkpoint uploads the log of the state's writes since the previous one, and the state is materialized in the background every 10 minutes or when the log outgrows half of it (needs --state-backend pebble; implies --incremental)")
	f.rest.register(c)
	f.edge.register(c)
	c.Flags().Float64Var(&f.repeatRate, "repeat-rate", 0, "read the bundled demo text again and again, this many lines per second: a job that runs until cancelled, to try the REST API and the dashboard (0: read it once)")
	c.Flags().DurationVar(&f.watch, "watch", 0, "follow the --input directory: list it this often (e.g. 1s), read new files and lines appended to files, and run until cancelled")
	c.Flags().StringVar(&f.restore, "restore", "", `resume from "latest" (the newest complete checkpoint in --checkpoint-dir), from a checkpoint or savepoint path, or "none" (start without state)`)
	f.ckpt.register(c)
	addConfigFlag(c, &f.config)
	return c
}

// wordCountJob is the wordcount job that buildWordCount built from its
// flags, not started.
type wordCountJob struct {
	// f are the flags, normalized (--restore none is "").
	f   wordCountFlags
	env *weir.Environment
	// input says what the job reads, for its summary line.
	input string
	// exactlyOnce: the job checkpoints, so its sink commits on checkpoints.
	exactlyOnce bool
	// dirOutput: --output is a directory, which prepare makes ready.
	dirOutput bool
}

// buildWordCount checks every flag of f and builds the job's graph. It has
// no side effect: it reads (the input's metadata) but writes, removes,
// locks, listens on and starts nothing, so that every process that builds
// the job from the same flags gets the same graph without disturbing the
// others: weir run in local mode, and on a cluster the JobManager at
// submission and each TaskManager at each deployment. The one-time side
// effects are prepare's.
func buildWordCount(ctx context.Context, f wordCountFlags) (*wordCountJob, error) {
	if f.parallelism < 1 || f.parallelism > 128 {
		return nil, fmt.Errorf("--parallelism is %d: use a value from 1 to 128", f.parallelism)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if f.backend != "heap" && f.backend != "pebble" {
		return nil, fmt.Errorf("--state-backend is %q: use heap or pebble", f.backend)
	}
	if f.incremental && f.backend != "pebble" {
		return nil, fmt.Errorf("--incremental needs --state-backend pebble: the %s backend takes full snapshots only", f.backend)
	}
	if f.changelog && f.backend != "pebble" {
		return nil, fmt.Errorf("--changelog needs --state-backend pebble: the changelog is the pebble backend's")
	}
	if f.restore == "none" {
		f.restore = "" // start without state
	}
	opts := weir.Options{Parallelism: f.parallelism, JobID: "wordcount", Restore: f.restore, StateBackend: f.backend}
	if err := f.ckpt.apply(&opts); err != nil {
		return nil, err
	}
	var src connector.Source[string]
	watched := false
	input := f.input
	if f.repeatRate < 0 || math.IsNaN(f.repeatRate) || math.IsInf(f.repeatRate, 0) {
		return nil, fmt.Errorf("--repeat-rate is %v: use 0 (read the demo text once) or a number of lines per second", f.repeatRate)
	}
	if input == "" {
		lines := strings.Split(strings.TrimSuffix(demoText, "\n"), "\n")
		src = datagen.FromSlice(lines)
		input = "the bundled demo text"
		if f.repeatRate > 0 {
			src = datagen.Generator(-1, func(i int64) string { return lines[i%int64(len(lines))] }).
				WithOptions(datagen.Options{RecordsPerSecond: f.repeatRate})
		}
	} else if f.repeatRate > 0 {
		return nil, fmt.Errorf("--repeat-rate repeats the bundled demo text: leave out --input")
	} else if u, err := endpointURL(f.input, schemes(inputEndpoints)); err != nil {
		return nil, fmt.Errorf("--input %w", err)
	} else if u != nil {
		if src, err = inputEndpoints[u.Scheme](ctx, u, f); err != nil {
			return nil, fmt.Errorf("--input: %w", err)
		}
	} else {
		if _, err := os.Stat(f.input); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("input %q does not exist: pass an existing file or directory with --input", f.input)
			}
			return nil, fmt.Errorf("cannot read input: %w", err)
		}
		src = file.Lines(f.input)
		if f.watch != 0 {
			if info, err := os.Stat(f.input); f.watch < 0 || err != nil || !info.IsDir() {
				return nil, fmt.Errorf("--watch %v: follows a directory every positive interval; %q is not a directory or the interval is not positive", f.watch, f.input)
			}
			src = file.Lines(f.input).WithOptions(file.LinesOptions{Watch: f.watch})
			watched = true
		}
	}
	if f.watch != 0 && !watched {
		return nil, fmt.Errorf("--watch follows a directory: pass the directory with --input")
	}
	if f.interval < 0 {
		return nil, fmt.Errorf("--checkpoint-interval is %v: use 0 (off) or a positive duration such as 1s", f.interval)
	}
	logger, err := newLogger(os.Stderr, f.edge.logLevel, f.edge.logFormat, time.Minute)
	if err != nil {
		return nil, err
	}
	if f.edge.retained < 1 {
		return nil, fmt.Errorf("--retained-checkpoints is %d: use 1 or more", f.edge.retained)
	}
	if f.restore == "latest" && f.ckptDir == "" {
		return nil, fmt.Errorf("--restore latest needs --checkpoint-dir: the directory that holds the checkpoints")
	}
	if f.ckpt.savepointDir != "" {
		if _, err := storage.Open(f.ckpt.savepointDir); err != nil {
			return nil, fmt.Errorf("--savepoint-dir: %w", err)
		}
	}
	// A savepoint directory is for weir stop: the sink commits at the stop's
	// savepoint.
	exactlyOnce := f.interval > 0 || f.ckptDir != "" || f.restore != "" || f.ckpt.savepointDir != ""
	var sink connector.Sink[string]
	u, err := endpointURL(f.output, schemes(outputEndpoints))
	if err != nil {
		return nil, fmt.Errorf("--output %w", err)
	}
	if u != nil {
		if sink, err = outputEndpoints[u.Scheme](ctx, u, exactlyOnce, f); err != nil {
			return nil, fmt.Errorf("--output: %w", err)
		}
	}
	opts.OnRestore = func(r weir.RestoreInfo) { printRestore(os.Stderr, "wordcount", r, f.ckptDir) }
	opts.Checkpointing.Interval = f.interval
	opts.Checkpointing.Retained = f.edge.retained
	if opts.Restart = f.edge.restart; opts.Restart == "" && f.interval > 0 {
		opts.Restart = defaultRestart
	}
	opts.Logger = logger
	opts.AllowRepeatedOutput = f.edge.allowRepeated
	opts.Checkpointing.Incremental = f.incremental || f.changelog
	opts.Checkpointing.Changelog.Enabled = f.changelog
	if f.ckptDir != "" {
		opts.Checkpointing.Storage = f.ckptDir
	}
	env := weir.NewEnvironment(opts)
	lines := env.FromSource("lines", src).UID("lines")
	counts := wordcount.Build(lines)
	if sink != nil {
		counts.SinkTo("out", sink).UID("out")
	} else if exactlyOnce {
		// Output becomes visible only when the checkpoint that covers it
		// completes: exactly once, even if the process is killed.
		counts.SinkTo("out", file.ExactlyOnce(f.output, file.ExactlyOnceOptions{KeepRolledBack: f.edge.keepRolledBack})).UID("out")
	} else {
		counts.SinkTo("out", file.PartFiles(f.output, file.Options{})).UID("out")
	}
	return &wordCountJob{f: f, env: env, input: input, exactlyOnce: exactlyOnce, dirOutput: sink == nil}, nil
}

// prepare does the job's one-time side effects, before its first attempt:
// it refuses a second owner of the checkpoint directory, and makes the
// output directory ready (created, writable, and on a fresh start without
// the part files of an earlier run, which would mix with this run's; a
// restored run continues an earlier one, whose committed output stays).
// The lock on the checkpoint directory is held until release, which may
// be called more than once: the job takes it for good when it starts.
//
// In local mode weir run calls it once, before it starts the job. On a
// cluster the JobManager calls it once per submission (deploy.Preparer),
// never a TaskManager, and never again on a restart, which restores the
// output that checkpoints committed instead.
func (j *wordCountJob) prepare() (release func(), err error) {
	owner := &storage.JobLock{}
	if j.f.ckptDir != "" {
		if st, err := storage.Open(j.f.ckptDir); err == nil {
			if owner, err = storage.LockJob(st, "wordcount"); err != nil {
				return func() {}, fmt.Errorf("--checkpoint-dir: %w", err)
			}
		}
	}
	if j.dirOutput {
		if err := prepareOutput(j.f.output, j.f.restore == ""); err != nil {
			owner.Release()
			return func() {}, err
		}
	}
	return owner.Release, nil
}

// runWordCount runs wordcount in this process (weir run wordcount without
// --jobmanager).
func runWordCount(ctx context.Context, f wordCountFlags, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Every flag is checked before anything is touched (prepare removes
	// an earlier result).
	j, err := buildWordCount(ctx, f)
	if err != nil {
		return err
	}
	f, env, input, exactlyOnce := j.f, j.env, j.input, j.exactlyOnce
	// Refuse a second owner of the checkpoint directory before touching
	// the output (a fresh start removes its part files). The job takes the
	// lock for good when it starts; this one is held until then.
	earlyOwner, err := j.prepare()
	if err != nil {
		return err
	}
	defer earlyOwner()
	// SIGINT and SIGTERM stop the job: cancel it, keeping its checkpoints
	// (the sink committed output on them, so the job's cancel keeps them),
	// and exit 130 or 143. A second signal has its default effect: the
	// process dies at once, which loses nothing either.
	ctx, cancelJob := context.WithCancelCause(ctx)
	defer cancelJob(nil)
	stopSignal := make(chan os.Signal, 1)
	signal.Notify(stopSignal, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stopSignal)
	var stoppedBy atomic.Value // os.Signal
	summary := func() weir.CheckpointSummary { return weir.CheckpointSummary{} }
	go func() {
		select {
		case sig := <-stopSignal:
			signal.Stop(stopSignal)
			stoppedBy.Store(sig)
			cancelJob(fmt.Errorf("stopped by %v: %w", sig, context.Canceled))
		case <-ctx.Done():
		}
	}()
	stopped := func() error {
		sig, _ := stoppedBy.Load().(os.Signal)
		if sig == nil {
			return nil
		}
		return stopError(sig, f, summary())
	}

	if f.ckptDir != "" {
		// A bad URL, a missing bucket or wrong credentials: say so now, not
		// at the first checkpoint.
		st, err := storage.Open(f.ckptDir)
		if err == nil {
			err = storage.Probe(ctx, st)
		}
		if err != nil {
			if err := stopped(); err != nil {
				return err
			}
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	rs, err := listenREST(f.rest, os.Stderr)
	if err != nil {
		return err
	}
	earlyOwner()
	job, err := env.ExecuteAsync(ctx, "wordcount")
	if err != nil {
		rs.close()
		if err := stopped(); err != nil {
			return err
		}
		return fmt.Errorf("wordcount failed: %w", err)
	}
	summary = func() weir.CheckpointSummary { s, _ := job.Checkpoints(); return s }
	defer rs.serve(job)()
	// SIGUSR1 asks for a checkpoint: an external trigger.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-usr1:
				if id, err := job.SignalCheckpoint(ctx); err != nil {
					fmt.Fprintln(os.Stderr, "weir: checkpoint on SIGUSR1 failed:", err)
				} else {
					fmt.Fprintf(os.Stderr, "weir: checkpoint %d taken on SIGUSR1\n", id)
				}
			case <-job.Done():
				return
			}
		}
	}()
	reported := reportSavepoints(job, os.Stderr)
	err = job.Wait()
	<-reported
	rs.settle()
	if err != nil {
		if err := stopped(); err != nil {
			return err
		}
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			// Cancelled through the REST API (weir cancel), not by a signal.
			return canceledError(job, exactlyOnce, f.output)
		}
		if n := summary().Restarts; n > 0 {
			return fmt.Errorf("wordcount failed after %d restart(s), when the restart strategy gave up; the last cause: %w", n, err)
		}
		return fmt.Errorf("wordcount failed: %w", err)
	}
	if sp := job.StopSavepoint(); sp != "" {
		fmt.Fprintf(stdout, "wordcount: stopped with savepoint %s; resume with --restore %s\n", sp, sp)
		return nil
	}
	abs, _ := filepath.Abs(f.output)
	fmt.Fprintf(stdout, "wordcount: counted %s; results (word,count) in %s\n", input, abs)
	return nil
}

// savepointPoll is how often weir run looks for savepoints to report.
const savepointPoll = 200 * time.Millisecond

// reportSavepoints prints each savepoint the job completes (weir savepoint,
// weir stop), with its path, until the job ends; the channel is closed
// once it has printed the last one.
func reportSavepoints(job *weir.JobClient, w io.Writer) <-chan struct{} {
	done := make(chan struct{})
	seen := map[int64]bool{}
	report := func() {
		_, history := job.Checkpoints()
		for _, c := range history {
			if c.Savepoint && c.Status == weir.CheckpointCompleted && !seen[c.ID] {
				seen[c.ID] = true
				fmt.Fprintf(w, "weir: savepoint %d completed: %s\n", c.ID, c.Path)
			}
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(savepointPoll)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				report()
			case <-job.Done():
				report()
				return
			}
		}
	}()
	return done
}

// canceledError says what a job cancelled through the REST API left in its
// output.
func canceledError(job *weir.JobClient, checkpointed bool, output string) error {
	sum, _ := job.Checkpoints()
	switch {
	case !checkpointed:
		return fmt.Errorf("job wordcount was cancelled: it ran without checkpoints, so %s holds what it wrote until then, uncommitted and incomplete", output)
	case sum.LatestCompleted == 0:
		return fmt.Errorf("job wordcount was cancelled before a checkpoint completed: nothing was committed to %s", output)
	default:
		return fmt.Errorf("job wordcount was cancelled: %s holds what its checkpoints committed, up to checkpoint %d", output, sum.LatestCompleted)
	}
}

// prepareOutput makes sure dir is a writable directory and, when clean is
// set, removes the part files of earlier runs, which would otherwise mix with
// this run's result.
func prepareOutput(dir string, clean bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create output directory %q: %v: choose a writable --output", dir, unwrapPath(err))
	}
	probe, err := os.CreateTemp(dir, ".weir-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write to output directory %q: %v: choose a writable --output", dir, unwrapPath(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	if !clean {
		return nil
	}
	old, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("cannot remove the earlier result %q: %v", p, unwrapPath(err))
		}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// exitError ends the process with code after printing msg (if any) to
// stderr, without the "weir:" prefix of errors.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// stopError is what a job stopped by sig says: that it stopped, what its
// sink committed, how to resume; and the conventional exit code, 128 plus
// the signal's number (130 for SIGINT, 143 for SIGTERM).
func stopError(sig os.Signal, f wordCountFlags, s weir.CheckpointSummary) error {
	code := 1
	if n, ok := sig.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	name := map[os.Signal]string{os.Interrupt: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
	if name == "" {
		name = sig.String()
	}
	out := f.output
	if abs, err := filepath.Abs(out); err == nil && !strings.Contains(out, "://") {
		out = abs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "wordcount: stopped by %s", name)
	last := max(s.LatestCompleted, s.Restored)
	switch {
	case f.ckptDir == "" && f.restore == "" && f.interval == 0:
		fmt.Fprintf(&b, ", before the end of its input: the part files in %s hold a partial result; run the same command again to count from the beginning", out)
	case last == 0:
		fmt.Fprintf(&b, " before its first checkpoint completed: nothing was committed to %s; run the same command again to start from the beginning", out)
	case f.ckptDir == "":
		fmt.Fprintf(&b, ": the output committed by checkpoint %d is in %s, but its checkpoints were in memory (no --checkpoint-dir): a next run cannot resume after it", last, out)
	default:
		fmt.Fprintf(&b, ": the output committed by checkpoint %d is in %s; to resume after it, run the same command with --restore latest (checkpoints in %s)", last, out, f.ckptDir)
	}
	return exitError{code: code, msg: b.String()}
}

// printRestore says which checkpoint or savepoint job starts from, as
// a path the user can pass to --restore, or that there is none.
func printRestore(w io.Writer, job string, r weir.RestoreInfo, ckptDir string) {
	if r.ID == 0 {
		fmt.Fprintf(w, "%s: no checkpoint under %s: starting from the beginning\n", job, ckptDir)
		return
	}
	kind := "checkpoint"
	if r.Savepoint {
		kind = "savepoint"
	}
	where := r.URL
	if p, ok := strings.CutPrefix(where, "file://"); ok {
		where = p
	}
	verb := "restored"
	if r.Restart {
		verb = "restarting from"
	}
	fmt.Fprintf(w, "%s: %s %s %d: %s\n", job, verb, kind, r.ID, where)
}
