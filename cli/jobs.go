package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/nexmark/queries"
)

// The bundled jobs. weir's binary builds each of them by name from its
// flags: `weir run NAME` in local mode (the whole job in this process),
// and on a cluster every process, the JobManager when the job is submitted
// (weir run NAME --jobmanager) and each TaskManager when a part of it is
// deployed there. Code never travels, only the name and the flags, so
// building a job has no side effect; a job's one-time side effects (such
// as clearing an earlier result from the output directory) are its
// prepare function's, which the JobManager calls once per submission
// (deploy.Preparer) and weir run in local mode once before it starts.

// jobSpec is one bundled job.
type jobSpec struct {
	name string
	// define returns a new command of the job, carrying its flags (those
	// of weir run NAME), and, bound to the same flags, the job's functions.
	define func() (*cobra.Command, jobFuncs)
	// paths are the flags whose values may be paths of the file system:
	// weir run --jobmanager makes relative ones absolute before it submits
	// them, since the cluster's processes run in other directories.
	paths []string
	// local are the flags of local mode only (its REST API): they have no
	// meaning for a job on a cluster, whose REST API is the JobManager's.
	local []string
	// commands, when set, returns the commands that come with the job
	// besides weir run NAME (weir demo with wordcount, weir nexmark with
	// nexmark).
	commands func() []*cobra.Command
}

// jobFuncs are a bundled job's functions over the flags of its command,
// called once the flags are parsed.
type jobFuncs struct {
	// run runs the job in this process (weir run NAME without
	// --jobmanager).
	run func(cmd *cobra.Command) error
	// build checks the flags and builds the job's graph, without side
	// effects. prepare, when not nil, does the job's one-time side effects.
	build func(ctx context.Context) (env *weir.Environment, prepare func(context.Context) error, err error)
}

// jobSpecs are the bundled jobs (Bundled), sorted by name. A variable, so that a
// test's child process can give one of them another build (another graph
// fingerprint), as a TaskManager of another binary would have.
var jobSpecs = []jobSpec{nexmarkSpec(), wordCountSpec()}

// restLocalFlags are the flags of restFlags: local mode's REST API.
var restLocalFlags = []string{"rest-address", "rest-token", "savepoint-allowed-roots", "rest-trusted-origins", "rest-tls-cert", "rest-tls-key"}

func wordCountSpec() jobSpec {
	return jobSpec{
		name: "wordcount",
		define: func() (*cobra.Command, jobFuncs) {
			f := new(wordCountFlags)
			c := wordCountCommand(f)
			return c, jobFuncs{
				run: func(cmd *cobra.Command) error { return runWordCount(cmd.Context(), *f, cmd.OutOrStdout()) },
				build: func(ctx context.Context) (*weir.Environment, func(context.Context) error, error) {
					j, err := buildWordCount(ctx, *f)
					if err != nil {
						return nil, nil, err
					}
					prepare := func(context.Context) error {
						release, err := j.prepare()
						release()
						return err
					}
					return j.env, prepare, nil
				},
			}
		},
		paths:    []string{"input", "output", "checkpoint-dir", "savepoint-dir", "restore"},
		local:    restLocalFlags,
		commands: func() []*cobra.Command { return []*cobra.Command{newDemoCommand()} },
	}
}

func nexmarkSpec() jobSpec {
	return jobSpec{
		name: "nexmark",
		define: func() (*cobra.Command, jobFuncs) {
			f := new(nexmarkRunFlags)
			c := nexmarkRunCommand(f)
			return c, jobFuncs{
				run: func(cmd *cobra.Command) error { return runNexmarkRun(cmd, *f) },
				build: func(context.Context) (*weir.Environment, func(context.Context) error, error) {
					return buildNexmark(c, f)
				},
			}
		},
		paths: []string{"input", "output", "checkpoint-dir", "restore"},
		// A profile of this process: the cluster's processes are others.
		local: []string{"cpu-profile"},
		commands: func() []*cobra.Command {
			c := newNexmarkCommand()
			requireSubcommand(c, "a command")
			return []*cobra.Command{c}
		},
	}
}

// buildNexmark builds the Nexmark query of f's flags (weir nexmark run's)
// as a job, its rows into a blackhole or, with --output, into part files.
// Without side effects: prepare clears --output on a fresh start, as weir
// nexmark run does.
func buildNexmark(cmd *cobra.Command, f *nexmarkRunFlags) (*weir.Environment, func(context.Context) error, error) {
	q, src, _, opts, err := checkNexmarkRun(cmd, f)
	if err != nil {
		return nil, nil, err
	}
	if opts.JobID == "" {
		opts.JobID = "nexmark-" + q.Name // as queries.Run
	}
	env := weir.NewEnvironment(opts)
	var out queries.Output
	switch {
	case f.output != "" && f.exactlyOnce():
		out.Sink = file.ExactlyOnce(f.output, file.ExactlyOnceOptions{})
	case f.output != "":
		out.Sink = file.PartFiles(f.output, file.Options{})
	}
	q.Build(queries.Events(env, src), out)
	var prepare func(context.Context) error
	if f.output != "" {
		output, clean := f.output, f.restore == ""
		prepare = func(context.Context) error { return prepareOutput(output, clean) }
	}
	return env, prepare, nil
}

// bundledJobs is the registry of the bundled jobs.
func bundledJobs() deploy.Registry { return jobRegistry{specs: jobSpecs} }

// jobRegistry is a deploy.Registry over job specs, the jobs given to Main,
// that every process of a cluster holds: weir jobmanager builds a
// submitted job from it, weir taskmanager the parts deployed on it.
type jobRegistry struct{ specs []jobSpec }

func (r jobRegistry) Names() []string {
	names := make([]string, len(r.specs))
	for i, s := range r.specs {
		names[i] = s.name
	}
	slices.Sort(names)
	return names
}

func (r jobRegistry) lookup(name string) (jobSpec, error) {
	for _, s := range r.specs {
		if s.name == name {
			return s, nil
		}
	}
	return jobSpec{}, fmt.Errorf("unknown job %q: the known jobs are %s", name, strings.Join(r.Names(), ", "))
}

// Job parses args with the job's own flags (as weir run NAME does), checks
// them and builds the job. The same name and args give the same graph in
// every process.
func (r jobRegistry) Job(name string, args []string) (deploy.Job, error) {
	spec, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	c, fn := spec.define()
	if err := c.ParseFlags(args); err != nil {
		return nil, fmt.Errorf("job %s: %w", name, err)
	}
	if rest := c.Flags().Args(); len(rest) > 0 {
		return nil, fmt.Errorf("job %s takes flags only, not %q", name, strings.Join(rest, " "))
	}
	if fl := c.Flags().Lookup("config"); fl != nil {
		if err := applyConfig(c, fl.Value.String()); err != nil {
			return nil, fmt.Errorf("job %s: %w", name, err)
		}
	}
	env, prepare, err := fn.build(context.Background())
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", name, err)
	}
	job, err := env.Deployable(name)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", name, err)
	}
	if prepare == nil {
		return job, nil
	}
	return preparedJob{Job: job, prepare: prepare}, nil
}

// preparedJob is a deploy.Job with one-time side effects: a
// deploy.Preparer.
type preparedJob struct {
	deploy.Job
	prepare func(context.Context) error
}

func (j preparedJob) Prepare(ctx context.Context) error { return j.prepare(ctx) }

var _ deploy.Preparer = preparedJob{}
