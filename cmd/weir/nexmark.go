package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/nexmark"
)

func newNexmarkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "nexmark",
		Short: "Generate and run the Nexmark benchmark",
		Long: `Nexmark models an online auction: one stream of Person, Auction and Bid
events, and the queries q0–q22 of the Flink Nexmark project over it.`,
	}
	c.AddCommand(newNexmarkGenCommand())
	return c
}

type nexmarkGenFlags struct {
	events int64
	rate   float64
	seed   int64
	output string
}

func newNexmarkGenCommand() *cobra.Command {
	var f nexmarkGenFlags
	c := &cobra.Command{
		Use:   "gen --events N --output FILE",
		Short: "Write Nexmark events as JSON lines",
		Long: `Writes the first N events of the Nexmark stream, one JSON object a line, with
the field names of the Flink Nexmark DDL: event_type (0 person, 1 auction,
2 bid) and the one of person, auction and bid that the event holds; dateTime
and expires are milliseconds since the Unix epoch. Event times start at
2015-07-15T00:00:00Z and advance at --rate events per second. The same flags
give the same file, byte for byte.`,
		Example: `  weir nexmark gen --events 1000000 --output events.jsonl
  weir nexmark gen --events 100 --rate 1000 --seed 7 --output -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNexmarkGen(cmd, f)
		},
	}
	c.Flags().Int64Var(&f.events, "events", 0, "number of events to write (required)")
	c.Flags().Float64Var(&f.rate, "rate", nexmark.DefaultRate, "events per second of event time: sets the timestamps, not the speed of writing")
	c.Flags().Int64Var(&f.seed, "seed", 0, "seed of the random draws; 0 seeds each event with its id, as Beam's generator does")
	c.Flags().StringVar(&f.output, "output", "", `file to write, replaced if it exists; "-" writes to standard output (required)`)
	return c
}

func runNexmarkGen(cmd *cobra.Command, f nexmarkGenFlags) error {
	switch {
	case !cmd.Flags().Changed("events"):
		return errors.New("--events is required: the number of events to write, e.g. --events 1000000")
	case f.events < 0:
		return fmt.Errorf("--events is %d: use a number of events >= 0", f.events)
	case f.output == "":
		return errors.New(`--output is required: the file to write, or "-" for standard output`)
	case math.IsNaN(f.rate) || math.IsInf(f.rate, 0) || f.rate < nexmark.MinRate:
		return fmt.Errorf("--rate is %v: use a number of events per second >= %v, e.g. --rate 10000", f.rate, nexmark.MinRate)
	}
	cfg := nexmark.Config{Rate: f.rate, Seed: f.seed}
	if f.output == "-" {
		w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<20)
		counts, err := nexmark.WriteJSON(w, cfg, f.events)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return fmt.Errorf("nexmark gen: writing to standard output: %w", err)
		}
		printGenSummary(cmd.ErrOrStderr(), counts, "standard output")
		return nil
	}
	counts, err := nexmark.WriteJSONFile(f.output, cfg, f.events)
	if err != nil {
		// The error wraps its cause (no such directory, permission denied,
		// no space left…), which says what to fix.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return fmt.Errorf("cannot write --output %q: %w: choose a writable file", f.output, err)
	}
	abs, _ := filepath.Abs(f.output)
	printGenSummary(cmd.OutOrStdout(), counts, abs)
	return nil
}

func printGenSummary(w io.Writer, c nexmark.Counts, where string) {
	fmt.Fprintf(w, "nexmark gen: wrote %d events (persons %d, auctions %d, bids %d) to %s\n",
		c.Total(), c.Persons, c.Auctions, c.Bids, where)
}
