package cli_test

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/cli"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
)

// A program with one job, "squares": `./prog run squares --n 100
// --output out/` runs it here; `./prog jobmanager`, `./prog taskmanager`
// and `./prog run squares --jobmanager 127.0.0.1:6123 …` run it on a
// cluster of the program's own processes.
func ExampleMain() {
	squares := cli.Job{
		Name:  "squares",
		Short: "Write the squares of 0..n-1",
		Define: func(fs *pflag.FlagSet) cli.Builder {
			n := fs.Int64("n", 10, "how many squares")
			output := fs.String("output", "out/squares", "directory of the part files")
			return cli.Builder{Build: func(ctx context.Context, opts weir.Options) (*weir.Environment, error) {
				if *n < 0 {
					return nil, fmt.Errorf("--n is %d: use 0 or more", *n)
				}
				env := weir.NewEnvironment(opts) // --parallelism, --checkpoint-interval, … of the command line
				env.FromSource("numbers", datagen.Sequence(0, *n-1)).
					Map("square", func(i int64) string { return fmt.Sprint(i * i) }).
					SinkTo("out", file.PartFiles(*output, file.Options{}))
				return env, nil
			}}
		},
		Paths: []string{"output"},
	}
	cli.Main(squares)
}
