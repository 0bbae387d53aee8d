package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Main runs the command line of a program whose jobs are jobs, on os.Args,
// and exits the process with the command's status: 0, or the code of a
// failure (1 unless the failure says otherwise, such as 143 after
// SIGTERM), its message on stderr.
//
// The program gets weir's commands, with its own jobs: run NAME (in this
// process, or on a cluster with --jobmanager), jobmanager, taskmanager,
// cluster start|stop (whose processes are this program's binary), and the
// REST clients list, info, cancel, checkpoint, savepoint, stop and
// checkpoints. weir's bundled jobs are not among them unless given:
// weir's own command is cli.Main(cli.Bundled()...). The root command is
// named after the program (os.Args[0]).
//
// jobs that cannot work (none, a name given twice, a flag of a job that a
// common flag already has) end the process with status 2 and a message
// naming the job.
func Main(jobs ...Job) {
	name := filepath.Base(os.Args[0])
	specs, err := specsOf(jobs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := newRootCommand(name, specs).Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
