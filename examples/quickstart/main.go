// Command quickstart counts words: for every word of the files in -input it
// writes the word's running count, a line "word,count", to part files in
// -output. It is the README's example, complete.
//
//	go run ./examples/quickstart -input README.md -output out/quickstart
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/state"
)

func main() {
	input := flag.String("input", "in/", "file or directory to read")
	output := flag.String("output", "out/", "directory for the part files")
	flag.Parse()
	if err := run(context.Background(), *input, *output); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, input, output string) error {
	env := weir.NewEnvironment(weir.Options{Parallelism: 4})

	lines := env.FromSource("lines", file.Lines(input)) // *weir.Stream[string]
	words := lines.FlatMap("tokenize", func(line string, out weir.Collector[string]) {
		for _, w := range strings.Fields(line) {
			out.Collect(strings.ToLower(w))
		}
	})
	counts := words.
		KeyBy(func(w string) string { return w }). // *weir.KeyedStream[string, string]
		Process("count", &Counter{})               // keyed state inside
	counts.SinkTo("out", file.PartFiles(output, file.Options{}))

	return env.Execute(ctx, "wordcount")
}

// Counter keeps a running count per word in keyed state.
type Counter struct{ count state.Value[int64] }

func (c *Counter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *Counter) ProcessElement(ctx *weir.KeyedContext[string], w string, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	out.Collect(fmt.Sprintf("%s,%d", w, n+1))
	return nil
}
