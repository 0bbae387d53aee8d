package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newRootCommand is the command line of program name (weir, or a user's
// program) with the jobs of specs: run NAME for each, the commands that
// come with them, the roles of a cluster and the REST clients.
func newRootCommand(name string, specs []jobSpec) *cobra.Command {
	root := &cobra.Command{
		Use:           name,
		Short:         name + " runs stream jobs on weir: in this process (run NAME), or on a cluster of its own JobManager and TaskManagers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if name == "weir" {
		root.Short = "weir is a stateful stream processor with exactly-once state"
	}
	reg := jobRegistry{specs: specs}
	run := newRunCommand(specs)
	root.AddCommand(run)
	for _, s := range specs {
		if s.commands != nil {
			root.AddCommand(s.commands()...)
		}
	}
	root.AddCommand(newClientCommands()...)
	root.AddCommand(newJobManagerCommand(reg), newTaskManagerCommand(reg), newClusterCommand())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return flagError{err: err, cmd: c.CommandPath()}
	})
	requireSubcommand(root, "")
	requireSubcommand(run, "a job")
	return root
}

type flagError struct {
	err error
	cmd string
}

func (e flagError) Error() string { return e.err.Error() + " (see " + e.cmd + " --help)" }

// requireSubcommand makes c, a command that only groups subcommands, fail
// on a mistyped subcommand with the nearest one, instead of printing its
// help and exiting 0. Without arguments it prints its help, or, when
// needed names what is missing ("a job"), fails.
func requireSubcommand(c *cobra.Command, needed string) {
	// "weir run wordcnt --input x": the typo, not the flag, is the news.
	c.FParseErrWhitelist.UnknownFlags = true
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			if needed == "" {
				return cmd.Help()
			}
			return fmt.Errorf("%s needs %s: %s (see %s --help)", cmd.CommandPath(), needed, subcommandList(cmd), cmd.CommandPath())
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			return fmt.Errorf("unknown command %q for %q: did you mean %q?", args[0], cmd.CommandPath(), s[0])
		}
		return fmt.Errorf("unknown command %q for %q: use %s (see %s --help)", args[0], cmd.CommandPath(), subcommandList(cmd), cmd.CommandPath())
	}
}

// subcommandList names c's subcommands: "one of a, b" or "b".
func subcommandList(c *cobra.Command) string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() && s.Name() != "help" && s.Name() != "completion" {
			names = append(names, s.Name())
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return "one of " + strings.Join(names, ", ")
}

// jobArg accepts exactly one argument, the job's id, and says what is
// missing otherwise.
func jobArg(c *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%s needs the id of a job (JOB): weir list shows the jobs of the JobManager", c.CommandPath())
	default:
		return fmt.Errorf("%s takes one job, not %d (%s): run it once per job", c.CommandPath(), len(args), strings.Join(args, " "))
	}
}
