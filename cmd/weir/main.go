// Command weir runs weir's bundled jobs and, in later releases, talks to a
// running JobManager.
//
//	weir run wordcount [--input PATH] [--output DIR] [--parallelism N]
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}
