package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir is a stateful stream processor with exactly-once state",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run a bundled job in this process",
	}
	run.AddCommand(newWordCountCommand())
	root.AddCommand(run, newDemoCommand())
	root.AddCommand(newNexmarkCommand())
	root.AddCommand(newClientCommands()...)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return flagError{err: err, cmd: c.CommandPath()}
	})
	return root
}

type flagError struct {
	err error
	cmd string
}

func (e flagError) Error() string { return e.err.Error() + " (see " + e.cmd + " --help)" }
