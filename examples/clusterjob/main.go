// Command clusterjob is a program of its own with weir's cluster roles:
// one call of cli.Main in its main gives it weir's command line with its
// job, "counts" (a running count per key of generated events, into
// exactly-once part files). The same binary runs the job in one process,
// or is the JobManager and the TaskManagers of a cluster, to which the job
// is submitted by name with its flags:
//
//	go build -o clusterjob ./examples/clusterjob
//	./clusterjob run counts --output out/counts --checkpoint-interval 1s
//	./clusterjob jobmanager &
//	./clusterjob taskmanager --slots 2 &
//	./clusterjob run counts --jobmanager 127.0.0.1:6123 --parallelism 2 \
//	    --checkpoint-interval 1s --checkpoint-dir /tmp/ck --output out/counts
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/cli"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/file"
	"github.com/weirstream/weir/state"
)

func main() { cli.Main(counts) }

// counts is the program's job. Every process builds it from the same
// flags; Build has no side effect, Prepare runs once per submission.
var counts = cli.Job{
	Name:  "counts",
	Short: "Count generated events per key: lines key,count into exactly-once part files",
	Define: func(fs *pflag.FlagSet) cli.Builder {
		events := fs.Int64("events", 10_000, "number of generated events")
		keys := fs.Int("keys", 16, "number of distinct keys")
		output := fs.String("output", "out/counts", "directory of the committed part files")
		return cli.Builder{
			Build: func(ctx context.Context, opts weir.Options) (*weir.Environment, error) {
				if *events < 0 || *keys < 1 {
					return nil, fmt.Errorf("--events is %d and --keys %d: use 0 or more events and 1 or more keys", *events, *keys)
				}
				env := weir.NewEnvironment(opts) // opts: --parallelism, --checkpoint-interval, …
				n := int64(*keys)
				src := env.FromSource("events", datagen.Generator(*events, func(i int64) string {
					return fmt.Sprintf("key-%02d", i%n)
				})).UID("events")
				src.KeyBy(func(k string) string { return k }).
					Process("count", &Counter{}).UID("count").
					SinkTo("out", file.ExactlyOnce(*output, file.ExactlyOnceOptions{})).UID("out")
				return env, nil
			},
			Prepare: func(context.Context) error { return os.MkdirAll(*output, 0o755) },
		}
	},
	Paths: []string{"output"}, // made absolute before submission
}

// Counter keeps a running count per key in keyed state.
type Counter struct{ count state.Value[int64] }

func (c *Counter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *Counter) ProcessElement(ctx *weir.KeyedContext[string], k string, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	out.Collect(fmt.Sprintf("%s,%d", k, n+1))
	return nil
}
