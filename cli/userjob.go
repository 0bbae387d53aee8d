package cli

// A user's job (Job): the common flags of `run NAME` and local mode.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/storage"
)

// commonFlags are the flags of every user's job, those a Flink user gives
// `flink run` or its configuration (parallelism, checkpointing, state
// backend, restore, restart strategy), applied to the job's weir.Options.
type commonFlags struct {
	parallelism    int
	maxParallelism int
	interval       time.Duration
	ckptDir        string
	restore        string
	backend        string
	incremental    bool
	changelog      bool
	restart        string
	retained       int
	allowRepeated  bool
	logLevel       string
	logFormat      string
	ckpt           checkpointFlags
	config         string
	rest           restFlags
}

func (f *commonFlags) register(c *cobra.Command) {
	fl := c.Flags()
	// A fixed default, not the number of cores: every process of a
	// cluster must build the same graph.
	fl.IntVar(&f.parallelism, "parallelism", 1, "number of subtasks per operator (Flink's parallelism.default)")
	fl.IntVar(&f.maxParallelism, "max-parallelism", 128, "number of key groups of keyed state: the most subtasks a keyed operator can ever be rescaled to")
	fl.DurationVar(&f.interval, "checkpoint-interval", 0, "take a checkpoint this often (e.g. 1s); 0 disables periodic checkpoints")
	fl.StringVar(&f.ckptDir, "checkpoint-dir", "", "checkpoint storage: a directory, file:///path, s3://bucket/prefix[?endpoint=host:port&secure=false&pathstyle=true] or memory://name (default: in memory); on a cluster, storage every process reaches")
	fl.StringVar(&f.restore, "restore", "", `resume from "latest" (the newest complete checkpoint in --checkpoint-dir), from a checkpoint or savepoint path, or "none" (start without state)`)
	fl.StringVar(&f.backend, "state-backend", "heap", `where keyed state lives: "heap" or "pebble"`)
	fl.BoolVar(&f.incremental, "incremental", false, "incremental checkpoints: upload only the state files that earlier checkpoints did not (needs --state-backend pebble)")
	fl.BoolVar(&f.changelog, "changelog", false, "changelog-based incremental checkpoints (Flink's state.changelog; needs --state-backend pebble; implies --incremental)")
	fl.IntVar(&f.retained, "retained-checkpoints", 1, "number of completed checkpoints kept (Flink's state.checkpoints.num-retained)")
	fl.StringVar(&f.restart, "restart", "", "restart strategy after a failure: none, fixed-delay[:attempts=N,delay=D], exponential-delay[:...], failure-rate[:max=N,interval=D,delay=D] (default: "+defaultRestart+" with --checkpoint-interval, else none)")
	fl.BoolVar(&f.allowRepeated, "allow-repeated-output", false, "restore a checkpoint older than others that completed since even when a sink cannot undo their commits: their output is written again")
	fl.StringVar(&f.logLevel, "log-level", "warn", "least level of the log lines on stderr: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "format of the log lines on stderr: text or json")
	f.ckpt.register(c)
	addConfigFlag(c, &f.config)
	f.rest.register(c)
}

// options checks the common flags and returns the options of job name.
func (f *commonFlags) options(name string) (weir.Options, error) {
	switch {
	case f.parallelism < 1 || f.parallelism > 128:
		return weir.Options{}, fmt.Errorf("--parallelism is %d: use a value from 1 to 128", f.parallelism)
	case f.maxParallelism < f.parallelism || f.maxParallelism > 32768:
		return weir.Options{}, fmt.Errorf("--max-parallelism is %d: use a value from --parallelism (%d) to 32768", f.maxParallelism, f.parallelism)
	case f.interval < 0:
		return weir.Options{}, fmt.Errorf("--checkpoint-interval is %v: use 0 (off) or a positive duration such as 1s", f.interval)
	case f.backend != "heap" && f.backend != "pebble":
		return weir.Options{}, fmt.Errorf("--state-backend is %q: use heap or pebble", f.backend)
	case (f.incremental || f.changelog) && f.backend != "pebble":
		return weir.Options{}, fmt.Errorf("--incremental and --changelog need --state-backend pebble: the %s backend takes full snapshots only", f.backend)
	case f.retained < 1:
		return weir.Options{}, fmt.Errorf("--retained-checkpoints is %d: use 1 or more", f.retained)
	case f.restore == "latest" && f.ckptDir == "":
		return weir.Options{}, errors.New("--restore latest needs --checkpoint-dir: the directory that holds the checkpoints")
	}
	restore := f.restore
	if restore == "none" {
		restore = ""
	}
	logger, err := newLogger(os.Stderr, f.logLevel, f.logFormat, time.Minute)
	if err != nil {
		return weir.Options{}, err
	}
	opts := weir.Options{Parallelism: f.parallelism, MaxParallelism: f.maxParallelism, JobID: name,
		Restore: restore, StateBackend: f.backend, Logger: logger, AllowRepeatedOutput: f.allowRepeated}
	if err := f.ckpt.apply(&opts); err != nil {
		return weir.Options{}, err
	}
	if f.ckpt.savepointDir != "" {
		if _, err := storage.Open(f.ckpt.savepointDir); err != nil {
			return weir.Options{}, fmt.Errorf("--savepoint-dir: %w", err)
		}
	}
	c := &opts.Checkpointing
	c.Interval, c.Retained = f.interval, f.retained
	c.Incremental, c.Changelog.Enabled = f.incremental || f.changelog, f.changelog
	if f.ckptDir != "" {
		c.Storage = f.ckptDir
	}
	if opts.Restart = f.restart; opts.Restart == "" && f.interval > 0 {
		opts.Restart = defaultRestart
	}
	ckptDir := f.ckptDir
	opts.OnRestore = func(r weir.RestoreInfo) { printRestore(os.Stderr, name, r, ckptDir) }
	return opts, nil
}

// buildUserJob builds job name with b over the common flags f.
func buildUserJob(ctx context.Context, name string, f *commonFlags, b Builder) (*weir.Environment, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	opts, err := f.options(name)
	if err != nil {
		return nil, err
	}
	env, err := b.Build(ctx, opts)
	if err != nil {
		return nil, err
	}
	if env == nil {
		return nil, fmt.Errorf("job %s: its Build returned no environment and no error", name)
	}
	return env, nil
}

// runUserJob runs job name in this process: `run NAME` without
// --jobmanager. As weir run wordcount: every flag is checked before
// anything is touched, SIGINT and SIGTERM cancel the job (keeping its
// checkpoints) and exit 130 and 143, the REST API serves the job.
func runUserJob(cmd *cobra.Command, name string, f *commonFlags, b Builder) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	env, err := buildUserJob(ctx, name, f, b)
	if err != nil {
		return err
	}
	// A second owner of the checkpoint directory is refused before
	// Prepare touches anything; the job takes the lock for good when it
	// starts.
	owner := &storage.JobLock{}
	if f.ckptDir != "" {
		st, err := storage.Open(f.ckptDir)
		if err == nil {
			err = storage.Probe(ctx, st)
		}
		if err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
		if owner, err = storage.LockJob(st, name); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	defer owner.Release()
	if b.Prepare != nil {
		if err := b.Prepare(ctx); err != nil {
			return fmt.Errorf("job %s: %w", name, err)
		}
	}
	ctx, cancelJob := context.WithCancelCause(ctx)
	defer cancelJob(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var stoppedBy atomic.Value // os.Signal
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			stoppedBy.Store(sig)
			cancelJob(fmt.Errorf("stopped by %v: %w", sig, context.Canceled))
		case <-ctx.Done():
		}
	}()
	rs, err := listenREST(f.rest, os.Stderr)
	if err != nil {
		return err
	}
	owner.Release()
	job, err := env.ExecuteAsync(ctx, name)
	if err != nil {
		rs.close()
		return fmt.Errorf("job %s failed: %w", name, err)
	}
	defer rs.serve(job)()
	reported := reportSavepoints(job, os.Stderr)
	err = job.Wait()
	<-reported
	rs.settle()
	sum, _ := job.Checkpoints()
	if sig, _ := stoppedBy.Load().(os.Signal); sig != nil {
		return userStopError(name, sig, f.ckptDir, sum)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return fmt.Errorf("job %s was cancelled (%s)", name, checkpointFigures(sum))
		}
		if sum.Restarts > 0 {
			return fmt.Errorf("job %s failed after %d restart(s), when the restart strategy gave up; the last cause: %w", name, sum.Restarts, err)
		}
		return fmt.Errorf("job %s failed: %w", name, err)
	}
	if sp := job.StopSavepoint(); sp != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: stopped with savepoint %s; resume with --restore %s\n", name, sp, sp)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: job %s finished (%s)\n", name, name, checkpointFigures(sum))
	return nil
}

// checkpointFigures says how often a job restarted and its last
// checkpoint.
func checkpointFigures(s weir.CheckpointSummary) string {
	out := fmt.Sprintf("%d restart(s)", s.Restarts)
	if s.LatestCompleted > 0 {
		return out + fmt.Sprintf(", last checkpoint %d", s.LatestCompleted)
	}
	return out + ", no checkpoint completed"
}

// userStopError is what a job stopped by sig says, with the conventional
// exit code (128 plus the signal's number).
func userStopError(name string, sig os.Signal, ckptDir string, s weir.CheckpointSummary) error {
	code := 1
	if n, ok := sig.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	sigName := map[os.Signal]string{os.Interrupt: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
	if sigName == "" {
		sigName = sig.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: stopped by %s", name, sigName)
	last := max(s.LatestCompleted, s.Restored)
	switch {
	case last == 0:
		b.WriteString(" before a checkpoint completed: run the same command again to start from the beginning")
	case ckptDir == "":
		fmt.Fprintf(&b, " after checkpoint %d, which was in memory (no --checkpoint-dir): a next run cannot resume after it", last)
	default:
		fmt.Fprintf(&b, " after checkpoint %d: to resume after it, run the same command with --restore latest (checkpoints in %s)", last, ckptDir)
	}
	return exitError{code: code, msg: b.String()}
}
