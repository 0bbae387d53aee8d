package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/nexmark/queries"
)

func newNexmarkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "nexmark",
		Short: "Generate and run the Nexmark benchmark",
		Long: `Nexmark models an online auction: one stream of Person, Auction and Bid
events, and the queries q0–q22 of the Flink Nexmark project over it.`,
	}
	c.AddCommand(newNexmarkGenCommand(), newNexmarkRunCommand(), newNexmarkReportCommand())
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

// --- weir nexmark run -----------------------------------------------------------

type nexmarkRunFlags struct {
	query       string
	events      int64
	rate        float64
	seed        int64
	input       string
	output      string
	cpuProfile  string
	parallelism int
	interval    time.Duration
	ckptDir     string
	restore     string
	backend     string
	restart     string
	incremental bool
	config      string
}

func newNexmarkRunCommand() *cobra.Command {
	f := new(nexmarkRunFlags)
	c := nexmarkRunCommand(f)
	c.Use = "run --query qN (--events N | --input FILE)"
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyConfig(cmd, f.config); err != nil {
			return err
		}
		return runNexmarkRun(cmd, *f)
	}
	return c
}

// nexmarkRunCommand returns a command of the flags of weir nexmark run,
// which set f, without its RunE: weir nexmark run's, weir run nexmark's
// (the same job, also on a cluster) and the registry's (jobs.go).
func nexmarkRunCommand(f *nexmarkRunFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "nexmark --query qN (--events N | --input FILE)",
		Short: "Run a Nexmark query and report its throughput",
		Long: `Runs one Nexmark query over the generated stream (--events, --rate, --seed,
as weir nexmark gen) or over a file written by weir nexmark gen (--input).
Event time is each record's dateTime; the watermark trails it by 4 s and
jumps to the maximum at the end of the input.

Without --output the rows go to a blackhole that counts them (what the
Nexmark suite measures). With --output DIR they are written as CSV part files:
one row a line, the columns of the query's sink table in order, times in
milliseconds since the epoch, decimals with three digits after the point.
Updating queries (q4, q9, q15-q19) write a changelog: each row starts with
+I, -U, +U or -D, and replaying a key's rows in file order gives its final
row. With checkpointing on, the exactly-once part-file sink writes them.

At the end it prints the events, the wall time, the CPU time (user+sys),
events per second, events per second per CPU core (events / CPU seconds)
and the checkpoints (count, p50 and max duration, size).

Queries: ` + strings.Join(queries.Names(), ", ") + `.`,
		Example: `  weir nexmark run --query q3 --events 1000000
  weir nexmark run --query q15 --events 10000000 --checkpoint-interval 10s --state-backend pebble
  weir nexmark run --query q1 --input events.jsonl --output out/q1`,
		Args: cobra.NoArgs,
	}
	fl := c.Flags()
	fl.StringVar(&f.query, "query", "", "the query to run, e.g. q3 (required)")
	fl.Int64Var(&f.events, "events", 0, "number of events to generate (required unless --input)")
	fl.Float64Var(&f.rate, "rate", nexmark.DefaultRate, "events per second of event time: sets the timestamps, not the speed")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the random draws (as weir nexmark gen)")
	fl.StringVar(&f.input, "input", "", "read the events from this file of JSON lines (written by weir nexmark gen) instead of generating them")
	fl.StringVar(&f.output, "output", "", "directory for the rows as CSV part files (default: a counting blackhole)")
	fl.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file (read it with go tool pprof)")
	addNexmarkJobFlags(fl, f)
	addConfigFlag(c, &f.config)
	return c
}

// flagSet is the part of pflag.FlagSet the job flags use.
type flagSet interface {
	IntVar(p *int, name string, value int, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
	StringVar(p *string, name string, value string, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
}

func addNexmarkJobFlags(fl flagSet, f *nexmarkRunFlags) {
	fl.IntVar(&f.parallelism, "parallelism", 2, "number of subtasks per operator")
	fl.DurationVar(&f.interval, "checkpoint-interval", 0, "take a checkpoint this often (e.g. 10s); 0 disables periodic checkpoints")
	fl.StringVar(&f.ckptDir, "checkpoint-dir", "", "checkpoint storage: a directory, file:///path or memory://name (default: in memory)")
	fl.StringVar(&f.backend, "state-backend", "heap", `where keyed state lives: "heap" or "pebble"`)
	fl.StringVar(&f.restore, "restore", "", `resume from "latest" (the newest complete checkpoint in --checkpoint-dir) or from a checkpoint or savepoint path`)
	fl.StringVar(&f.restart, "restart", "fixed-delay:attempts=3,delay=100ms", `restart strategy after a failure: none, fixed-delay[:attempts=N,delay=D], exponential-delay, failure-rate`)
	fl.BoolVar(&f.incremental, "incremental", false, "incremental checkpoints of the pebble backend: upload only the state files that earlier checkpoints did not")
}

// jobOptions checks the job flags and returns the job's options.
func (f *nexmarkRunFlags) jobOptions() (weir.Options, error) {
	switch {
	case f.parallelism < 1 || f.parallelism > 128:
		return weir.Options{}, fmt.Errorf("--parallelism is %d: use a value from 1 to 128", f.parallelism)
	case f.interval < 0:
		return weir.Options{}, fmt.Errorf("--checkpoint-interval is %v: use 0 (off) or a positive duration such as 10s", f.interval)
	case f.restore == "latest" && f.ckptDir == "":
		return weir.Options{}, errors.New("--restore latest needs --checkpoint-dir: the directory that holds the checkpoints")
	case f.backend != "heap" && f.backend != "pebble":
		return weir.Options{}, fmt.Errorf("--state-backend is %q: use heap or pebble", f.backend)
	}
	opts := weir.Options{Parallelism: f.parallelism, Restore: f.restore, StateBackend: f.backend, Restart: f.restart}
	opts.Checkpointing.Interval = f.interval
	// A report runs heap and pebble with the same flags: only pebble
	// checkpoints incrementally.
	opts.Checkpointing.Incremental = f.incremental && f.backend == "pebble"
	if f.ckptDir != "" {
		opts.Checkpointing.Storage = f.ckptDir
	}
	return opts, nil
}

func (f *nexmarkRunFlags) exactlyOnce() bool {
	return f.interval > 0 || f.ckptDir != "" || f.restore != ""
}

// nexmarkSource checks the source flags and returns the event table and its
// number of events.
func nexmarkSource(cmd *cobra.Command, f *nexmarkRunFlags) (connector.Source[nexmark.Event], int64, error) {
	eventsSet := cmd.Flags().Changed("events")
	switch {
	case f.input != "" && eventsSet:
		return nil, 0, errors.New("give either --events (generate the events) or --input (read them from a file), not both")
	case f.input != "":
		n, err := countEvents(f.input)
		if err != nil {
			return nil, 0, err
		}
		return nexmark.JSONFile(f.input), n, nil
	case !eventsSet:
		return nil, 0, errors.New("--events is required: the number of events to generate, e.g. --events 1000000 (or read a file with --input)")
	case f.events < 1:
		return nil, 0, fmt.Errorf("--events is %d: use a number of events >= 1", f.events)
	case math.IsNaN(f.rate) || math.IsInf(f.rate, 0) || f.rate < nexmark.MinRate:
		return nil, 0, fmt.Errorf("--rate is %v: use a number of events per second >= %v, e.g. --rate 10000", f.rate, nexmark.MinRate)
	}
	return nexmark.Source(nexmark.Config{Events: f.events, Rate: f.rate, Seed: f.seed}), f.events, nil
}

// countEvents counts the non-blank lines of a file of events (the source
// skips blank lines), so that the report can give rates.
func countEvents(path string) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("--input %q does not exist: write one with weir nexmark gen", path)
		}
		return 0, fmt.Errorf("cannot read --input: %w", err)
	}
	defer fh.Close()
	var n int64
	blank := true
	buf := make([]byte, 1<<20)
	for {
		k, err := fh.Read(buf)
		for _, c := range buf[:k] {
			switch c {
			case '\n':
				if !blank {
					n++
				}
				blank = true
			case ' ', '\t', '\r':
			default:
				blank = false
			}
		}
		if err == io.EOF {
			if !blank {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("cannot read --input: %w", err)
		}
	}
}

// checkNexmarkRun checks the flags of a Nexmark run and returns its
// query, its source, the number of events and the job's options, touching
// nothing.
func checkNexmarkRun(cmd *cobra.Command, f *nexmarkRunFlags) (queries.Query, connector.Source[nexmark.Event], int64, weir.Options, error) {
	if f.query == "" {
		return queries.Query{}, nil, 0, weir.Options{}, errors.New("--query is required: one of " + strings.Join(queries.Names(), ", "))
	}
	q, err := queries.Lookup(f.query)
	if err != nil {
		return queries.Query{}, nil, 0, weir.Options{}, err
	}
	src, events, err := nexmarkSource(cmd, f)
	if err != nil {
		return queries.Query{}, nil, 0, weir.Options{}, err
	}
	if f.incremental && f.backend != "pebble" {
		return queries.Query{}, nil, 0, weir.Options{}, fmt.Errorf("--incremental needs --state-backend pebble: the %s backend takes full snapshots only", f.backend)
	}
	opts, err := f.jobOptions()
	if err != nil {
		return queries.Query{}, nil, 0, weir.Options{}, err
	}
	return q, src, events, opts, nil
}

func runNexmarkRun(cmd *cobra.Command, f nexmarkRunFlags) error {
	q, src, events, opts, err := checkNexmarkRun(cmd, &f)
	if err != nil {
		return err
	}
	if f.output != "" {
		// A restored run continues an earlier one: its committed rows stay.
		if err := prepareOutput(f.output, f.restore == ""); err != nil {
			return err
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.cpuProfile != "" {
		stopProfile, err := startProfile(filepath.Dir(f.cpuProfile), filepath.Base(f.cpuProfile))
		if err != nil {
			return fmt.Errorf("cannot write --cpu-profile: %w", err)
		}
		defer stopProfile()
	}
	res, err := queries.Run(ctx, queries.RunOptions{
		Query: q, Source: src, Events: events, OutputDir: f.output, ExactlyOnce: f.exactlyOnce(), Env: opts,
	})
	if err != nil {
		return fmt.Errorf("nexmark %s failed: %w", q.Name, err)
	}
	printNexmarkResult(cmd.OutOrStdout(), res, f)
	return nil
}

func printNexmarkResult(w io.Writer, r queries.Result, f nexmarkRunFlags) {
	where := "generated"
	if f.input != "" {
		where = "from " + f.input
	}
	backend := f.backend + " state backend"
	if f.incremental {
		backend += ", incremental checkpoints"
	}
	fmt.Fprintf(w, "nexmark %s: %d events (%s), parallelism %d, %s\n", r.Query, r.Events, where, f.parallelism, backend)
	if r.Rows >= 0 {
		fmt.Fprintf(w, "  rows         %d (blackhole)\n", r.Rows)
	} else {
		abs, _ := filepath.Abs(f.output)
		fmt.Fprintf(w, "  rows         in %s\n", abs)
	}
	fmt.Fprintf(w, "  wall time    %v\n", r.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "  CPU time     %v (user+sys)\n", r.CPU.Round(time.Millisecond))
	fmt.Fprintf(w, "  events/s     %.0f\n", r.EventsPerSecond())
	fmt.Fprintf(w, "  events/s per CPU core  %.0f\n", r.EventsPerCore())
	p50, pmax := r.CheckpointDurations()
	last, smax := r.CheckpointSizes()
	umean, umax := r.CheckpointedSizes()
	fmt.Fprintf(w, "  checkpoints  %d completed, %d failed, %d restarts; duration p50 %v, max %v; state size last %s, max %s; checkpointed size mean %s, max %s\n",
		r.Checkpoints.Completed, r.Checkpoints.Failed, r.Checkpoints.Restarts,
		p50.Round(time.Microsecond), pmax.Round(time.Microsecond), byteSize(last), byteSize(smax), byteSize(umean), byteSize(umax))
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// --- weir nexmark report --------------------------------------------------------

// flinkPerCore are Flink's published events/s per core (NEXMARK.md): the V1
// guide (RocksDB) and the V2 guide (ForSt on HDFS).
var flinkPerCore = map[string][2]float64{
	"q0": {155e3, 379e3}, "q1": {158e3, 395e3}, "q2": {175e3, 414e3}, "q3": {152e3, 219e3},
	"q4": {34e3, 28e3}, "q5": {22e3, 75e3}, "q7": {12e3, 23e3}, "q8": {146e3, 162e3},
	"q9": {14e3, 14e3}, "q10": {58e3, 133e3}, "q11": {40e3, 46e3}, "q12": {76e3, 194e3},
	"q13": {131e3, 188e3}, "q14": {161e3, 259e3}, "q15": {72e3, 168e3}, "q16": {19e3, 45e3},
	"q17": {117e3, 161e3}, "q18": {54e3, 65e3}, "q19": {44e3, 43e3}, "q20": {19e3, 18e3},
	"q21": {98e3, 147e3}, "q22": {130e3, 212e3},
}

type nexmarkReportFlags struct {
	nexmarkRunFlags
	queries    string
	backends   string
	profileDir string
	cluster    int
	runs       int
}

func newNexmarkReportCommand() *cobra.Command {
	var f nexmarkReportFlags
	c := &cobra.Command{
		Use:   "report --events N",
		Short: "Run Nexmark queries one after the other and print a markdown table",
		Long: `Runs each query of --queries on each state backend of --state-backends over
the same generated stream, in this process, one after the other, each into a
counting blackhole, and prints a markdown table of events/s and events/s per
CPU core beside Flink's published per-core figures, with the checkpoints
taken. With --checkpoint-interval, checkpoints are exactly-once and written
to a temporary directory (or under --checkpoint-dir), removed after each run.
A run that fails gets a row saying why, the others go on, and the command
exits with an error at the end. With --runs N, each query runs N times on
each backend and its row is the median run by events/s per core (for an
even N the lower of the two middle runs), with every run's figure in a last
column: single runs of the stateful queries spread by 20% and more.`,
		Example: `  weir nexmark report --events 10000000 --checkpoint-interval 10s --state-backends heap,pebble
  weir nexmark report --events 1000000 --queries q0,q1,q3
  weir nexmark report --events 10000000 --queries q15,q16 --runs 5 --cluster 2 --state-backends pebble`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNexmarkReport(cmd, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.queries, "queries", "all", `comma-separated queries, or "all"`)
	fl.StringVar(&f.backends, "state-backends", "heap", `comma-separated state backends: heap, pebble`)
	fl.StringVar(&f.profileDir, "cpu-profile-dir", "", "write a CPU profile of each run to DIR/QUERY-BACKEND.prof (QUERY-BACKEND-N.prof with --runs; read them with go tool pprof); with --cluster, one of each process over the whole report instead, DIR/jobmanager.prof and DIR/taskmanager-N.prof, written when the cluster stops")
	fl.Int64Var(&f.events, "events", 0, "number of events to generate for each run (required)")
	fl.Float64Var(&f.rate, "rate", nexmark.DefaultRate, "events per second of event time")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the random draws")
	fl.IntVar(&f.cluster, "cluster", 0, "run each query on a local cluster of this many TaskManagers (child processes, with a JobManager; weir cluster start's), submitted as weir run nexmark --jobmanager, and count the CPU of every process (default 0: in this process)")
	fl.IntVar(&f.runs, "runs", 1, "run each query this many times on each backend and report the median run by events/s per core, with every run's figure")
	addNexmarkJobFlags(fl, &f.nexmarkRunFlags)
	fl.Lookup("state-backend").Hidden = true
	fl.Lookup("restore").Hidden = true
	return c
}

func runNexmarkReport(cmd *cobra.Command, f nexmarkReportFlags) error {
	var qs []queries.Query
	if f.queries == "all" {
		qs = queries.All()
	} else {
		for _, name := range strings.Split(f.queries, ",") {
			q, err := queries.Lookup(name)
			if err != nil {
				return err
			}
			qs = append(qs, q)
		}
	}
	backends := strings.Split(f.backends, ",")
	for _, b := range backends {
		if b != "heap" && b != "pebble" {
			return fmt.Errorf("--state-backends has %q: use heap, pebble or heap,pebble", b)
		}
	}
	if cmd.Flags().Changed("restore") {
		return errors.New("--restore does not apply to a report: each run starts empty")
	}
	if _, _, err := nexmarkSource(cmd, &f.nexmarkRunFlags); err != nil {
		return err
	}
	for _, b := range backends {
		// A bad job flag is one error before any run, not
		// a failed row for every query.
		run := f.nexmarkRunFlags
		run.backend = b
		if _, err := run.jobOptions(); err != nil {
			return err
		}
	}
	if _, err := restart.Parse(f.restart); f.restart != "" && err != nil {
		return fmt.Errorf("--restart: %w", err)
	}
	if f.runs < 1 || f.runs > 100 {
		return fmt.Errorf("--runs is %d: use 1 to 100 runs per query", f.runs)
	}
	if f.cluster < 0 || f.cluster > 64 {
		return fmt.Errorf("--cluster is %d: use 1 to 64 TaskManagers, or 0 to run in this process", f.cluster)
	}
	if f.profileDir != "" {
		if err := os.MkdirAll(f.profileDir, 0o755); err != nil {
			return fmt.Errorf("cannot create --cpu-profile-dir: %w", err)
		}
	}
	if f.ckptDir != "" {
		// Each run's storage is a new directory under it.
		if err := os.MkdirAll(f.ckptDir, 0o755); err != nil {
			return fmt.Errorf("cannot create --checkpoint-dir: %w", err)
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	w := cmd.OutOrStdout()
	ckpt := "none"
	if f.interval > 0 {
		ckpt = "exactly-once every " + f.interval.String()
		if f.incremental {
			ckpt += " (incremental on pebble)"
		}
	}
	var lc *localCluster
	if f.cluster > 0 {
		var err error
		if lc, err = startLocalCluster(f.cluster, (f.parallelism+f.cluster-1)/f.cluster, f.profileDir); err != nil {
			return err
		}
		defer lc.stop()
	}
	fmt.Fprintf(w, "Nexmark, %d events (rate %v/s of event time, seed %d), parallelism %d, checkpoints: %s; blackhole sinks.\n",
		f.events, f.rate, f.seed, f.parallelism, ckpt)
	if lc != nil {
		fmt.Fprintf(w, "On a local cluster: a JobManager and %d TaskManagers of %d slots; CPU is every process's (the JobManager's, the TaskManagers', this one's); rows are not counted.\n",
			f.cluster, lc.slots)
	}
	fmt.Fprintln(w)
	header, rule := "| query | state | events/s | events/s per core | Flink V1 per core | Flink V2 per core | weir / Flink V2 | wall | CPU | rows | checkpoints (n, p50, max, size) |",
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	if f.runs > 1 {
		fmt.Fprintf(w, "Each query ran %d times; its row is the median run by events/s per core, the last column every run's events/s per core in the order they ran.\n\n", f.runs)
		header, rule = header+" runs: events/s per core |", rule+"---|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	var failed []string
	for _, q := range qs {
		for _, backend := range backends {
			var results []queries.Result
			var err error
			for i := range f.runs {
				var res queries.Result
				if res, err = runReportQuery(ctx, cmd, f, lc, q, backend, i); err != nil {
					break
				}
				results = append(results, res)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("nexmark report interrupted during %s on %s", q.Name, backend)
			}
			if err != nil {
				// The table goes on: one run failing (a state kind the
				// backend lacks, say) says so in its row.
				failed = append(failed, q.Name+" on "+backend)
				fmt.Fprintf(w, "| %s | %s | failed: %s |\n", q.Name, backend, strings.ReplaceAll(err.Error(), "|", "/"))
				continue
			}
			row := reportRow(medianRun(results), backend)
			if f.runs > 1 {
				var each []string
				for _, r := range results {
					each = append(each, kilo(r.EventsPerCore()))
				}
				row += " " + strings.Join(each, ", ") + " |"
			}
			fmt.Fprintln(w, row)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("nexmark report: %d runs failed (%s); their rows say why", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

// runReportQuery runs query q once on backend for weir nexmark report: on
// the local cluster lc when there is one, in this process otherwise, with
// its checkpoints in a new directory that is removed after the run. Its
// profile, in this process, is QUERY-BACKEND.prof, or QUERY-BACKEND-N.prof
// for run N (from 1) of several.
func runReportQuery(ctx context.Context, cmd *cobra.Command, f nexmarkReportFlags, lc *localCluster, q queries.Query, backend string, i int) (queries.Result, error) {
	run := f.nexmarkRunFlags
	run.backend = backend
	opts, err := run.jobOptions()
	if err != nil {
		return queries.Result{}, err
	}
	dir, err := os.MkdirTemp(f.ckptDir, "weir-nexmark-report-")
	if err != nil {
		return queries.Result{}, fmt.Errorf("cannot create a checkpoint directory: %w", err)
	}
	defer os.RemoveAll(dir)
	opts.Checkpointing.Storage = dir
	if lc != nil {
		return lc.run(ctx, q.Name, run, dir)
	}
	src, events, _ := nexmarkSource(cmd, &run)
	name := q.Name + "-" + backend
	if f.runs > 1 {
		name += fmt.Sprintf("-%d", i+1)
	}
	stopProfile, err := startProfile(f.profileDir, name+".prof")
	if err != nil {
		return queries.Result{}, err
	}
	defer stopProfile()
	return queries.Run(ctx, queries.RunOptions{Query: q, Source: src, Events: events, Env: opts})
}

// medianRun is the run of rs with the median events/s per core; of an even
// number of runs, the lower of the two middle ones.
func medianRun(rs []queries.Result) queries.Result {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b queries.Result) int { return cmp.Compare(a.EventsPerCore(), b.EventsPerCore()) })
	return sorted[(len(sorted)-1)/2]
}

// startProfile starts a CPU profile into dir/name, when dir is set, and
// returns the function that stops it.
func startProfile(dir, name string) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	pf, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("cannot write a CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("cannot start a CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

func reportRow(r queries.Result, backend string) string {
	flink, ok := flinkPerCore[r.Query]
	v1, v2, ratio := "–", "–", "–"
	if ok {
		v1, v2 = kilo(flink[0]), kilo(flink[1])
		ratio = fmt.Sprintf("%.2f", r.EventsPerCore()/flink[1])
	}
	p50, pmax := r.CheckpointDurations()
	_, smax := r.CheckpointSizes()
	rows := "–"
	if r.Rows >= 0 {
		rows = strconv.FormatInt(r.Rows, 10)
	}
	ckpts := fmt.Sprintf("%d, %v, %v, %s", r.Checkpoints.Completed, p50.Round(time.Millisecond), pmax.Round(time.Millisecond), byteSize(smax))
	if r.Completed == nil && r.Checkpoints.LatestCompleted > 0 {
		// A cluster's: the JobManager reports the latest one only.
		ckpts = fmt.Sprintf("latest id %d", r.Checkpoints.LatestCompleted)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %.2fs | %.2fs | %s | %s |",
		r.Query, backend, kilo(r.EventsPerSecond()), kilo(r.EventsPerCore()), v1, v2, ratio,
		r.Wall.Seconds(), r.CPU.Seconds(), rows, ckpts)
}

// kilo writes a rate in thousands, as the Nexmark tables do.
func kilo(v float64) string { return fmt.Sprintf("%.0f K", v/1000) }

// --- weir nexmark report --cluster --------------------------------------------

// localCluster is the local cluster of weir nexmark report --cluster: a
// JobManager and TaskManagers, child processes started as weir cluster
// start does, in a state directory of their own.
type localCluster struct {
	dir   string
	st    clusterState
	slots int
}

func startLocalCluster(tms, slots int, profileDir string) (*localCluster, error) {
	dir, err := os.MkdirTemp("", "weir-nexmark-cluster-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the local cluster's state directory: %w", err)
	}
	if err := clusterStart(dir, "127.0.0.1:0", "127.0.0.1:0", "", profileDir, tms, slots, 30*time.Second); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	st, err := readClusterState(filepath.Join(dir, clusterPidFile))
	if err != nil {
		clusterStop(dir)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	return &localCluster{dir: dir, st: st, slots: slots}, nil
}

func (lc *localCluster) stop() {
	clusterStop(lc.dir)
	os.RemoveAll(lc.dir)
}

// cpu is the CPU time that this process and the cluster's have used.
func (lc *localCluster) cpu() (time.Duration, error) {
	total, err := processCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	for _, p := range append([]clusterProc{lc.st.JobManager}, lc.st.TaskManagers...) {
		d, err := processCPU(p.Pid)
		if err != nil {
			return 0, fmt.Errorf("a process of the local cluster is gone (logs in %s): %w", lc.dir, err)
		}
		total += d
	}
	return total, nil
}

// run submits query q with the job flags of f (weir run nexmark's) and
// checkpoints under ckpt, follows it to its end, and measures it.
func (lc *localCluster) run(ctx context.Context, q string, f nexmarkRunFlags, ckpt string) (queries.Result, error) {
	args := []string{"--query=" + q, "--events=" + strconv.FormatInt(f.events, 10), "--rate=" + strconv.FormatFloat(f.rate, 'g', -1, 64),
		"--seed=" + strconv.FormatInt(f.seed, 10), "--parallelism=" + strconv.Itoa(f.parallelism), "--state-backend=" + f.backend,
		"--checkpoint-interval=" + f.interval.String(), "--checkpoint-dir=" + ckpt, "--restart=" + f.restart}
	if f.incremental && f.backend == "pebble" {
		args = append(args, "--incremental")
	}
	c, err := cluster.Dial(ctx, lc.st.RPCAddress, cluster.ClientOptions{})
	if err != nil {
		return queries.Result{}, err
	}
	defer c.Close()
	cpu0, err := lc.cpu()
	if err != nil {
		return queries.Result{}, err
	}
	start := time.Now()
	id, err := c.Submit(ctx, "nexmark", args)
	if err != nil {
		return queries.Result{}, err
	}
	st, err := followJob(ctx, c, id, io.Discard, time.Minute)
	wall := time.Since(start)
	if err != nil {
		return queries.Result{}, err
	}
	cpu1, err := lc.cpu()
	if err != nil {
		return queries.Result{}, err
	}
	if st.State != "FINISHED" {
		return queries.Result{}, fmt.Errorf("job %s ended %s: %s", id, st.State, flatLine(st.Error))
	}
	res := queries.Result{Query: q, Events: f.events, Rows: -1, Wall: wall, CPU: cpu1 - cpu0}
	res.Checkpoints.LatestCompleted = st.LastCheckpoint
	res.Checkpoints.Restarts = st.Restarts
	return res, nil
}

// processCPU is the user and system CPU time that process pid has used,
// from /proc/PID/stat (Linux; in clock ticks of 1/100 s, USER_HZ).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command's name, in parentheses, may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}
