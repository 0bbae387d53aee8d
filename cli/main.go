package cli

import (
	"errors"
	"fmt"
	"os"
)

// Main runs weir's command line on os.Args and exits the process with
// the command's status: 0, or the code of a failure (1 unless the failure
// says otherwise, such as 143 after SIGTERM), its message on stderr.
func Main() {
	if err := newRootCommand().Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}
