// Command wordcount counts the words of a file or directory and writes the
// running counts to part files: go run ./examples/wordcount/cmd/wordcount IN OUTDIR
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/examples/wordcount"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: wordcount INPUT OUTPUT_DIR")
		os.Exit(2)
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	lines := env.FromSource("lines", file.Lines(os.Args[1]))
	wordcount.Build(lines).SinkTo("out", file.PartFiles(os.Args[2], file.Options{}))
	if err := env.Execute(context.Background(), "wordcount"); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}
