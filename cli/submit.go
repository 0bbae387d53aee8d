package cli

// weir run NAME --jobmanager HOST:PORT: a job submitted by name,
// with its flags, to a cluster's JobManager over the control plane, and
// followed until it ends (or, --detached, not followed).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/internal/cluster"
)

// submitFlags are weir run's flags of the cluster client.
type submitFlags struct {
	jobmanager             string
	detached               bool
	token                  string
	tlsCert, tlsKey, tlsCA string
	timeout                time.Duration
}

// defaultSubmitTimeout is --jobmanager-timeout's default.
const defaultSubmitTimeout = 10 * time.Second

// clientFlagNames are the flags of submitFlags: they are this process's,
// never the job's.
var clientFlagNames = []string{"jobmanager", "detached", "cluster-token", "tls-cert", "tls-key", "tls-ca", "jobmanager-timeout"}

func (f *submitFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.jobmanager, "jobmanager", "", "host:port of a cluster's JobManager (its --rpc-address): submit the job there, by name with its flags, and follow it until it ends (default: run it in this process)")
	fl.BoolVar(&f.detached, "detached", false, "with --jobmanager: print the submitted job's id and return at once")
	fl.StringVar(&f.token, "cluster-token", "", "with --jobmanager: the cluster token (or set "+clusterTokenEnv+")")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "with --jobmanager: PEM certificate of this client for the control plane's mutual TLS, with --tls-key and --tls-ca")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CA certificates that sign the cluster's certificates")
	fl.DurationVar(&f.timeout, "jobmanager-timeout", defaultSubmitTimeout, "with --jobmanager: give up when the JobManager has not answered for this long, at submission or while following the job")
}

// newRunCommand is weir run: one subcommand per job of specs.
func newRunCommand(specs []jobSpec) *cobra.Command {
	run := &cobra.Command{
		Use:   "run",
		Short: "Run a job in this process, or on a cluster with --jobmanager",
	}
	for _, s := range specs {
		run.AddCommand(newJobCommand(s))
	}
	return run
}

// newJobCommand is weir run NAME: the job in this process, or submitted to
// the JobManager of --jobmanager.
func newJobCommand(spec jobSpec) *cobra.Command {
	c, fn := spec.define()
	var sf submitFlags
	sf.register(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		fl := cmd.Flags()
		if sf.jobmanager == "" && !fl.Changed("jobmanager") {
			for _, name := range clientFlagNames[1:] {
				if fl.Changed(name) {
					return fmt.Errorf("--%s is for a job on a cluster: give the JobManager with --jobmanager HOST:PORT too, or leave it out to run the job here", name)
				}
			}
		}
		// Local mode's own flags, given on the command line, have no
		// meaning on a cluster; --config may set them (a file shared with
		// local runs): they are then left out.
		var localGiven []string
		for _, name := range spec.local {
			if fl.Changed(name) && !(name == "rest-address" && isOff(fl.Lookup(name).Value.String())) {
				localGiven = append(localGiven, name)
			}
		}
		if cfg := fl.Lookup("config"); cfg != nil {
			given := fl.Changed("jobmanager")
			if err := applyConfig(cmd, cfg.Value.String()); err != nil {
				return err
			}
			// Without --jobmanager weir run is local mode, whatever
			// the file says.
			if !given && fl.Changed("jobmanager") {
				return fmt.Errorf("--config %s sets jobmanager.rpc.address or .port: weir run takes the JobManager from --jobmanager only (without it the job runs here); leave the key out of the file, or give --jobmanager", cfg.Value.String())
			}
		}
		if sf.jobmanager == "" {
			if fl.Changed("jobmanager") {
				return errors.New("--jobmanager is empty: give the JobManager's host:port (its --rpc-address), or leave it out to run the job here")
			}
			return fn.run(cmd)
		}
		if len(localGiven) > 0 {
			return fmt.Errorf("--%s is for a job run here, without --jobmanager: on a cluster the JobManager serves the REST API (weir jobmanager --rest-address) and the TaskManagers run the tasks; leave it out", localGiven[0])
		}
		return submitJob(cmd, spec, sf)
	}
	return c
}

func isOff(addr string) bool {
	a := strings.TrimSpace(addr)
	return a == "" || strings.EqualFold(a, "off")
}

// jobArgs are the flags the cluster's processes build the job from: each
// of the job's flags that the command line or --config set, in the
// form --name=value, relative paths made absolute; neither the client's
// flags, nor local mode's, nor --config itself (its settings are among the
// flags already).
func jobArgs(fs *pflag.FlagSet, spec jobSpec) ([]string, error) {
	skip := append(append([]string{"config"}, clientFlagNames...), spec.local...)
	var args []string
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if slices.Contains(skip, fl.Name) || err != nil {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			vals := sv.GetSlice()
			if len(vals) == 0 {
				args = append(args, "--"+fl.Name+"=")
			}
			for _, v := range vals {
				args = append(args, "--"+fl.Name+"="+v)
			}
			return
		}
		v := fl.Value.String()
		if slices.Contains(spec.paths, fl.Name) {
			if v, err = absPath(v); err != nil {
				err = fmt.Errorf("--%s: %w", fl.Name, err)
				return
			}
		}
		args = append(args, "--"+fl.Name+"="+v)
	})
	return args, err
}

// absPath makes a relative path absolute; a URL (scheme://…), an empty
// value and the keywords of --restore (latest, none) stay as they are.
func absPath(v string) (string, error) {
	if v == "" || v == "latest" || v == "none" || strings.Contains(v, "://") || filepath.IsAbs(v) {
		return v, nil
	}
	return filepath.Abs(v)
}

// clientOptions are the cluster client's options of the flags.
func (f submitFlags) clientOptions() (cluster.ClientOptions, error) {
	o := cluster.ClientOptions{Token: f.token}
	if o.Token == "" {
		o.Token = os.Getenv(clusterTokenEnv)
	}
	switch countSet(f.tlsCert, f.tlsKey, f.tlsCA) {
	case 0:
	case 3:
		o.TLS = &cluster.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
	default:
		return o, errors.New("--tls-cert, --tls-key and --tls-ca go together: give all three (this client's certificate, its key, the cluster's CA) or none")
	}
	return o, nil
}

// submitJob submits spec's job with the flags of cmd to the JobManager of
// sf and, unless detached, follows it until it ends.
func submitJob(cmd *cobra.Command, spec jobSpec, sf submitFlags) error {
	if sf.timeout <= 0 {
		return fmt.Errorf("--jobmanager-timeout is %v: use a positive duration such as 10s", sf.timeout)
	}
	opts, err := sf.clientOptions()
	if err != nil {
		return err
	}
	args, err := jobArgs(cmd.Flags(), spec)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// SIGINT and SIGTERM stop following the job, which runs on; weir
	// exits 128 plus the signal's number.
	ctx, stopFollowing := context.WithCancelCause(ctx)
	defer stopFollowing(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			stopFollowing(signalCause{sig})
		case <-ctx.Done():
		}
	}()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()

	sctx, cancel := context.WithTimeout(ctx, sf.timeout)
	defer cancel()
	// Dial fails, naming the address, when no JobManager answers by the
	// deadline.
	c, err := cluster.Dial(sctx, sf.jobmanager, opts)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("job %s was not submitted: interrupted", spec.name)
		}
		if sctx.Err() != nil {
			return fmt.Errorf("%w (waited %v: --jobmanager-timeout)", err, sf.timeout)
		}
		return err
	}
	defer c.Close()
	id, err := c.Submit(sctx, spec.name, args)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("job %s was not submitted: interrupted", spec.name)
		}
		return fmt.Errorf("job %s was not submitted: %s", spec.name, flatLine(err.Error()))
	}
	fmt.Fprintf(stderr, "weir: job %s submitted to the JobManager at %s as %s\n", spec.name, sf.jobmanager, id)
	if sf.detached {
		fmt.Fprintln(stdout, id)
		return nil
	}
	st, err := followJob(ctx, c, id, stderr, sf.timeout)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "weir: stopped following job %s (%s), which runs on in the cluster\n", id, spec.name)
			code := 1
			var sc signalCause
			if errors.As(context.Cause(ctx), &sc) {
				if n, ok := sc.sig.(syscall.Signal); ok {
					code = 128 + int(n)
				}
			}
			return exitError{code: code}
		}
		return err
	}
	switch st.State {
	case "FINISHED":
		fmt.Fprintf(stdout, "%s: job %s finished on the cluster (%s)\n", spec.name, id, jobFigures(st))
		return nil
	case "CANCELED":
		return fmt.Errorf("job %s (%s) was cancelled (%s)", id, spec.name, jobFigures(st))
	default:
		msg := st.Error
		if msg == "" {
			msg = "no cause reported"
		}
		return fmt.Errorf("job %s (%s) failed (%s): %s", id, spec.name, jobFigures(st), flatLine(msg))
	}
}

// signalCause is the cause of a context cancelled by a signal.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "stopped by " + s.sig.String() }

// jobFigures says how often a job restarted and its last checkpoint.
func jobFigures(st cluster.JobStatus) string {
	s := fmt.Sprintf("%d restart(s)", st.Restarts)
	if st.LastCheckpoint > 0 {
		s += fmt.Sprintf(", last checkpoint %d", st.LastCheckpoint)
	} else {
		s += ", no checkpoint completed"
	}
	return s
}

// flatLine is s on one line: its runs of white space (line breaks too)
// made one space.
func flatLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// followPoll is how often weir run asks for a submitted job's status.
var followPoll = 100 * time.Millisecond

// statusSource is the part of *cluster.Client that followJob uses.
type statusSource interface {
	Status(ctx context.Context, jobID string) (cluster.JobStatus, error)
}

// followJob polls the job's status until it ends, printing to w each
// change of state, each restart and each completed checkpoint. It fails
// once the JobManager has not reported the job for timeout.
func followJob(ctx context.Context, c statusSource, id string, w io.Writer, timeout time.Duration) (cluster.JobStatus, error) {
	var last cluster.JobStatus
	var silentSince time.Time
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := c.Status(pctx, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return last, ctx.Err()
		case err != nil:
			// A JobManager that does not answer, or answers with an
			// error, for timeout: it is gone, or it lost the job.
			if silentSince.IsZero() {
				silentSince = time.Now()
			}
			if time.Since(silentSince) >= timeout {
				return last, fmt.Errorf("lost job %s: the JobManager has not reported it for %v (%s); the job may run on", id, timeout, flatLine(err.Error()))
			}
		default:
			silentSince = time.Time{}
			reportProgress(w, last, st)
			last = st
			if st.Terminal() {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-tick.C:
		}
	}
}

// reportProgress prints what changed from prev to st: a restart (with its
// cause), a new state, what the job waits for, a new completed checkpoint.
func reportProgress(w io.Writer, prev, st cluster.JobStatus) {
	if st.Restarts > prev.Restarts {
		cause := ""
		if st.Error != "" {
			cause = ": " + flatLine(st.Error)
		}
		fmt.Fprintf(w, "weir: job %s restarted (restart %d)%s\n", st.ID, st.Restarts, cause)
	}
	if st.State != prev.State || st.Attempt != prev.Attempt {
		fmt.Fprintf(w, "weir: job %s is %s (attempt %d)\n", st.ID, st.State, st.Attempt)
	}
	if st.Note != prev.Note && st.Note != "" {
		fmt.Fprintf(w, "weir: job %s: %s\n", st.ID, st.Note)
	}
	if st.LastCheckpoint > prev.LastCheckpoint {
		fmt.Fprintf(w, "weir: job %s completed checkpoint %d\n", st.ID, st.LastCheckpoint)
	}
}
