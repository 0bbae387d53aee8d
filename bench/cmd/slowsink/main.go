// Command slowsink runs the backpressure workload of package bench once — a
// fast source feeding a deliberately slow sink — and prints what it measured
// as one line of JSON, with the process's peak resident set size (VmHWM)
// read at the end. Run it with growing -records: the peak must stay flat.
//
// Usage:
//
//	go run ./bench/cmd/slowsink -records 1000000
//	go run ./bench/cmd/slowsink -records 10000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/weirstream/weir/bench"
)

func main() {
	var cfg bench.SlowSinkConfig
	flag.Int64Var(&cfg.Records, "records", 1_000_000, "records to generate")
	flag.DurationVar(&cfg.Delay, "delay", 0, "busy-wait per record in the sink (0: 1µs)")
	flag.IntVar(&cfg.Payload, "payload", 0, "bytes allocated per record (0: 256)")
	flag.IntVar(&cfg.Options.Parallelism, "parallelism", 1, "parallelism of source and sink")
	flag.IntVar(&cfg.Options.BatchSize, "batch", 0, "weir Options.BatchSize (0: default)")
	flag.IntVar(&cfg.Options.QueueSize, "queue", 0, "weir Options.QueueSize (0: default)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "slowsink:", err)
		os.Exit(1)
	}
}

func run(cfg bench.SlowSinkConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := bench.RunSlowSink(ctx, cfg)
	if err != nil {
		return err
	}
	if r.PeakRSSBytes, err = bench.PeakRSS(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}
