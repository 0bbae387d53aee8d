package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir is a stateful stream processor with exactly-once state",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := newRunCommand()
	root.AddCommand(run, newDemoCommand())
	root.AddCommand(newNexmarkCommand())
	root.AddCommand(newClientCommands()...)
	root.AddCommand(newJobManagerCommand(), newTaskManagerCommand(), newClusterCommand())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return flagError{err: err, cmd: c.CommandPath()}
	})
	requireSubcommand(root, "")
	requireSubcommand(run, "a job")
	requireSubcommand(nexmarkCommand(root), "a command")
	return root
}

type flagError struct {
	err error
	cmd string
}

func (e flagError) Error() string { return e.err.Error() + " (see " + e.cmd + " --help)" }

// nexmarkCommand returns root's nexmark command.
func nexmarkCommand(root *cobra.Command) *cobra.Command {
	c, _, err := root.Find([]string{"nexmark"})
	if err != nil || c == root {
		panic("weir: no nexmark command")
	}
	return c
}

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
