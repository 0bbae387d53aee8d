package cli

// The public API for a user's own program: cli.Main(jobs...) with jobs of
// type Job, and Bundled, weir's own jobs.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
)

// Job is a job of a program that calls Main: built by name from its flags
// in every process of a cluster, as weir's bundled jobs are.
//
// Main gives the job the command `PROGRAM run NAME`: without --jobmanager
// it runs the job in this process (local mode); with --jobmanager
// HOST:PORT it submits the job's name and flags to a JobManager of the
// same program (PROGRAM jobmanager), which builds the job from them, runs
// its JobMaster and deploys its tasks on the TaskManagers (PROGRAM
// taskmanager), each of which builds the job again from the same name and
// flags. Code never travels: every process must run the same build of the
// program; a TaskManager whose build gives another graph is refused.
//
// Besides the job's own flags (Define), `run NAME` has the common flags
// of a job, applied to the weir.Options that Build receives:
// --parallelism (default 1, Flink's parallelism.default), --max-parallelism,
// --checkpoint-interval, --checkpoint-dir, --restore, --state-backend,
// --incremental, --changelog, --retained-checkpoints, --restart, the
// checkpoint options (--checkpointing-mode, --checkpoint-timeout,
// --checkpoint-min-pause, --max-concurrent-checkpoints,
// --tolerable-failed-checkpoints, --unaligned, --aligned-checkpoint-timeout,
// --savepoint-dir), --allow-repeated-output, --log-level, --log-format,
// --config (a YAML file under Flink's keys) and, in local mode, the REST
// API's (--rest-address, …); and the cluster client's (--jobmanager,
// --detached, …). The job's own flags must not take these names.
type Job struct {
	// Name is the job's name: `PROGRAM run NAME`, and the name the job is
	// submitted, built and known under (its job id). Letters, digits, '-'
	// and '_'; required, unique among the program's jobs.
	Name string
	// Short is the one-line description of `PROGRAM run --help`.
	Short string
	// Long is the description of `PROGRAM run NAME --help` (default:
	// Short).
	Long string
	// Define registers the job's own flags on fs and returns the job's
	// Builder, which reads them once they are parsed. It is called once
	// per build with a new flag set, so the variables behind the flags must
	// be Define's own (fs.String, fs.Int…, or variables declared inside
	// it), never package variables. Required.
	Define func(fs *pflag.FlagSet) Builder
	// Paths names the job's own flags whose values are paths of the file
	// system: `run NAME --jobmanager` makes relative ones absolute before
	// it submits them, since the cluster's processes run in other
	// directories. (The common flags' paths are made absolute anyway.)
	Paths []string

	// bundled is weir's own job of Bundled: Define is not used.
	bundled *jobSpec
}

// Builder are a job's functions over its parsed flags.
type Builder struct {
	// Build checks the job's flags and builds its graph on an environment
	// of opts, which carry the common flags: start with
	// weir.NewEnvironment(opts), changing the fields the job must decide
	// itself first (code wins over flags, as in Flink). Build must have no
	// side effect (write, remove, lock, listen on or start nothing): every
	// process of a cluster builds the job, the JobManager at submission and
	// each TaskManager at each deployment. A bad flag is an error naming
	// it. Required.
	Build func(ctx context.Context, opts weir.Options) (*weir.Environment, error)
	// Prepare, when not nil, does the job's one-time side effects before
	// its first attempt (creating the output directory, clearing an
	// earlier result): once per submission in the JobManager's process,
	// once before the job starts in local mode; never again on a restart,
	// never in a TaskManager (as deploy.Preparer). It is called after Build
	// of the same flags, in the same process.
	Prepare func(ctx context.Context) error
}

// Bundled returns weir's bundled jobs, wordcount and nexmark, as weir's
// own command does: cli.Main(cli.Bundled()...) is weir. A bundled job
// brings the commands that go with it: weir demo comes with wordcount,
// weir nexmark (gen, run, report) with nexmark. A program may give them
// besides its own jobs: cli.Main(append(cli.Bundled(), myJob)...).
func Bundled() []Job {
	out := make([]Job, len(jobSpecs))
	for i := range jobSpecs {
		s := jobSpecs[i]
		c, _ := s.define()
		out[i] = Job{Name: s.name, Short: c.Short, bundled: &s}
	}
	return out
}

// jobName is what a Job's Name may be.
var jobName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// specsOf turns Main's jobs into job specs, refusing what would not work:
// no job, a bad or repeated name, no Define or Build, a flag of a job
// that another flag of the command already has.
func specsOf(jobs []Job) ([]jobSpec, error) {
	if len(jobs) == 0 {
		return nil, errors.New("cli.Main needs at least one job: cli.Main(cli.Job{Name: …, Define: …}), or cli.Main(cli.Bundled()...) for weir's own")
	}
	var specs []jobSpec
	for i, j := range jobs {
		if j.bundled != nil {
			specs = append(specs, *j.bundled)
			continue
		}
		switch {
		case !jobName.MatchString(j.Name):
			return nil, fmt.Errorf("cli.Main: job %d is named %q: use letters, digits, '-' and '_', such as \"counts\"", i, j.Name)
		case j.Define == nil:
			return nil, fmt.Errorf("cli.Main: job %s has no Define: give it one that registers its flags and returns its Builder", j.Name)
		}
		if _, _, _, err := newUserCommand(j); err != nil {
			return nil, fmt.Errorf("cli.Main: %w", err)
		}
		specs = append(specs, userSpec(j))
	}
	for i, s := range specs {
		if slices.ContainsFunc(specs[:i], func(o jobSpec) bool { return o.name == s.name }) {
			return nil, fmt.Errorf("cli.Main: two jobs are named %q: give each job a name of its own", s.name)
		}
	}
	return specs, nil
}

// commonPaths are the common flags whose values are paths.
var commonPaths = []string{"checkpoint-dir", "savepoint-dir", "restore"}

// userSpec is the job spec of a user's job.
func userSpec(j Job) jobSpec {
	return jobSpec{
		name: j.Name,
		define: func() (*cobra.Command, jobFuncs) {
			c, cf, b, err := newUserCommand(j)
			if err != nil { // specsOf checked it: Define registers other flags each time
				fail := func() error { return fmt.Errorf("job %s: %w", j.Name, err) }
				return c, jobFuncs{
					run: func(*cobra.Command) error { return fail() },
					build: func(context.Context) (*weir.Environment, func(context.Context) error, error) {
						return nil, nil, fail()
					},
				}
			}
			return c, jobFuncs{
				run: func(cmd *cobra.Command) error { return runUserJob(cmd, j.Name, cf, b) },
				build: func(ctx context.Context) (*weir.Environment, func(context.Context) error, error) {
					env, err := buildUserJob(ctx, j.Name, cf, b)
					return env, b.Prepare, err
				},
			}
		},
		paths: append(slices.Clone(commonPaths), j.Paths...),
		local: restLocalFlags,
	}
}

// newUserCommand is the command of j, without its RunE: the common flags,
// then j's own, which must not take the name or shorthand of another flag
// of `run NAME`.
func newUserCommand(j Job) (*cobra.Command, *commonFlags, Builder, error) {
	c := &cobra.Command{Use: j.Name, Short: j.Short, Long: j.Long, Args: cobra.NoArgs}
	if c.Long == "" {
		c.Long = j.Short
	}
	cf := new(commonFlags)
	cf.register(c)
	own := pflag.NewFlagSet(j.Name, pflag.ContinueOnError)
	b := j.Define(own)
	if b.Build == nil {
		return c, cf, b, fmt.Errorf("job %s: Define returned a Builder without Build", j.Name)
	}
	var err error
	own.VisitAll(func(fl *pflag.Flag) {
		switch {
		case err != nil:
		case c.Flags().Lookup(fl.Name) != nil || slices.Contains(clientFlagNames, fl.Name) || fl.Name == "help":
			err = fmt.Errorf("job %s: its flag --%s is one of the common flags of run %s (see run %s --help): give the job's flag another name", j.Name, fl.Name, j.Name, j.Name)
		case fl.Shorthand == "h" || (fl.Shorthand != "" && c.Flags().ShorthandLookup(fl.Shorthand) != nil):
			err = fmt.Errorf("job %s: the shorthand -%s of its flag --%s is taken: give it another", j.Name, fl.Shorthand, fl.Name)
		default:
			c.Flags().AddFlag(fl)
		}
	})
	return c, cf, b, err
}
