package weir_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/print"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// TestUnalignedOptionsValidate: the combinations Flink refuses fail with
// an error naming the options; the good ones pass, over TCP too.
func TestUnalignedOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*weir.CheckpointOptions)
		want string // "" for valid
	}{
		{"unaligned", func(c *weir.CheckpointOptions) { c.Unaligned = true }, ""},
		{"unaligned with a timeout", func(c *weir.CheckpointOptions) { c.Unaligned, c.AlignedTimeout = true, time.Second }, ""},
		{"at-least-once", func(c *weir.CheckpointOptions) { c.Unaligned, c.Mode = true, weir.AtLeastOnce },
			"Options.Checkpointing.Unaligned needs Mode ExactlyOnce"},
		{"two concurrent", func(c *weir.CheckpointOptions) { c.Unaligned, c.MaxConcurrent = true, 2 },
			"Options.Checkpointing.Unaligned needs MaxConcurrent 1 (now 2)"},
		{"negative timeout", func(c *weir.CheckpointOptions) { c.Unaligned, c.AlignedTimeout = true, -time.Second },
			"Options.Checkpointing.AlignedTimeout is -1s; want >= 0"},
		{"timeout without unaligned", func(c *weir.CheckpointOptions) { c.AlignedTimeout = time.Second },
			"Options.Checkpointing.AlignedTimeout is 1s but Unaligned is off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := weir.Options{Exchange: "local"}
			tt.set(&o.Checkpointing)
			o.EnsureDefaults()
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	o := weir.Options{Exchange: "tcp", Checkpointing: weir.CheckpointOptions{Unaligned: true}}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with tcp = %v, want nil (the barrier overtakes the network's queues as a priority event)", err)
	}
}

// TestExactlyOnceHarnessUnaligned runs the exactly-once harness with
// unaligned checkpoints (always unaligned, and with a short aligned timeout
// that switches) under the same random failures: the committed output must
// be exactly the expected multiset, and the checkpoints must have stored
// records in flight (else the harness proved nothing about them).
func TestExactlyOnceHarnessUnaligned(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	if s := os.Getenv("WEIR_UNALIGNED_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for _, mode := range []string{"heap-unaligned", "heap-unaligned-timeout"} {
		t.Run(mode, func(t *testing.T) {
			var persisted, restarts, ckpts int64
			for seed := range seeds {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					r := runHarnessOn(t, uint64(7000+seed), mode)
					persisted += r.persisted
					restarts += int64(r.restarts)
					ckpts += int64(r.ckpts)
				})
			}
			t.Logf("%s, %d seeds: %d checkpoints completed, %d restarts, %d bytes of channel state", mode, seeds, ckpts, restarts, persisted)
			if !t.Failed() && persisted == 0 {
				t.Error("no completed checkpoint stored channel state: the barriers overtook nothing")
			}
		})
	}
}

// backpressuredJob starts an unbounded job whose keyed consumer is about
// 100 times slower than its source, with small batches so that a full
// queue holds a few hundred records, and serves its REST API.
func backpressuredJob(t *testing.T, id string, c weir.CheckpointOptions) (*weir.JobClient, string) {
	t.Helper()
	c.Timeout = time.Minute
	opts := weir.Options{Parallelism: 2, JobID: id, Exchange: "local", BatchSize: 16, QueueSize: 4, Checkpointing: c}
	env := weir.NewEnvironment(opts)
	env.FromSource("numbers", datagen.Generator(-1, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 20000, BatchSize: 16})).
		KeyBy(func(i int64) int64 { return i % 10 }).
		Reduce("slow", func(a, b int64) int64 {
			time.Sleep(5 * time.Millisecond) // about 200 records a second per subtask
			return a + b
		}).
		SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
	ctx, cancel := context.WithCancel(context.Background())
	job, err := env.ExecuteAsync(ctx, id)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		job.Wait()
	})
	return job, serveREST(t, job) + "/jobs/" + id
}

// TestUnalignedUnderBackpressure: with the queues full, unaligned
// checkpoints complete in a fraction of what an aligned barrier needs to
// cross them, hold the records they overtook, and say so in the REST
// statistics (is_unaligned, checkpoint_type, persisted_data per subtask);
// savepoints of the same job stay aligned; with an aligned timeout a
// checkpoint starts aligned and switches, and a long timeout keeps it
// aligned.
func TestUnalignedUnderBackpressure(t *testing.T) {
	t.Parallel()
	// An aligned barrier waits behind 2 full queues of 4x16 records per
	// channel at ~200 records/s: about a second per hop.
	for _, tt := range []struct {
		name      string
		timeout   time.Duration
		unaligned bool // the checkpoint must end up unaligned
	}{
		{"unaligned", 0, true},
		{"timeout switches", 20 * time.Millisecond, true},
		{"timeout not reached", time.Minute, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job, url := backpressuredJob(t, "bp-"+strings.ReplaceAll(tt.name, " ", "-"),
				weir.CheckpointOptions{Unaligned: true, AlignedTimeout: tt.timeout})
			time.Sleep(300 * time.Millisecond) // let the queues fill
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			id, err := job.TriggerCheckpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			det := getJSON[rest.CheckpointStatistics](t, fmt.Sprintf("%s/checkpoints/details/%d", url, id))
			t.Logf("checkpoint %d took %v: is_unaligned=%v type=%s persisted=%d", id, took, det.IsUnaligned, det.CheckpointType, det.PersistedData)
			if det.IsUnaligned != tt.unaligned {
				t.Fatalf("checkpoint %d: is_unaligned %v, want %v", id, det.IsUnaligned, tt.unaligned)
			}
			if !tt.unaligned {
				if det.CheckpointType != "CHECKPOINT" || det.PersistedData != 0 {
					t.Fatalf("aligned checkpoint: type %q, persisted %d; want CHECKPOINT and 0", det.CheckpointType, det.PersistedData)
				}
				return
			}
			if det.CheckpointType != "UNALIGNED_CHECKPOINT" || det.PersistedData <= 0 {
				t.Fatalf("unaligned checkpoint: type %q, persisted %d; want UNALIGNED_CHECKPOINT and > 0", det.CheckpointType, det.PersistedData)
			}
			var persisted int64
			for vid := range det.Tasks {
				sub := getJSON[rest.TaskCheckpointStatisticsWithSubtaskDetails](t, fmt.Sprintf("%s/checkpoints/details/%d/subtasks/%s", url, id, vid))
				for _, s := range sub.Subtasks {
					if s.CompletedSubtaskCheckpoint != nil {
						persisted += s.Alignment.Persisted
					}
				}
			}
			if persisted != det.PersistedData {
				t.Errorf("subtasks persisted %d bytes in all, the checkpoint says %d", persisted, det.PersistedData)
			}
			hist := getJSON[rest.CheckpointingStatistics](t, url+"/checkpoints")
			if len(hist.History) == 0 || !hist.History[0].IsUnaligned || hist.Summary.PersistedData.Max <= 0 {
				t.Errorf("history %+v / summary %+v: want the unaligned checkpoint with its persisted data", hist.History, hist.Summary.PersistedData)
			}
			if tt.timeout > 0 {
				// The source task (vertex 0) has no inputs: an aligned
				// barrier gives it channel state only if it converted its
				// queued barrier at the timeout (producer side).
				st, _ := job.Checkpoint(id)
				var src int64
				for _, s := range st.Subtasks {
					if strings.HasPrefix(s.Task, "0-") {
						src += s.PersistedData
					}
				}
				if src == 0 {
					t.Errorf("checkpoint %d: the source tasks persisted nothing (%+v): their barriers were not converted at the timeout", id, st.Subtasks)
				}
				return
			}
			dir := t.TempDir()
			if _, err := job.TriggerSavepoint(ctx, dir); err != nil {
				t.Fatal(err)
			}
			hist = getJSON[rest.CheckpointingStatistics](t, url+"/checkpoints")
			if sp := hist.History[0]; !sp.IsSavepoint || sp.IsUnaligned || sp.PersistedData != 0 || sp.CheckpointType != "SAVEPOINT" {
				t.Errorf("savepoint %+v: want aligned (is_unaligned false, nothing persisted)", sp)
			}
		})
	}
}

// rescaleJob is backpressuredJob's pipeline at parallelism par, its
// checkpoints in storage, restoring restore.
func rescaleJob(t *testing.T, par int, storage, restore string) (*weir.JobClient, context.CancelFunc) {
	t.Helper()
	opts := weir.Options{Parallelism: par, JobID: "unaligned-rescale", Exchange: "local", BatchSize: 16, QueueSize: 4, Restore: restore,
		Checkpointing: weir.CheckpointOptions{Unaligned: true, Storage: storage, RetainOnCancel: true, Timeout: time.Minute}}
	env := weir.NewEnvironment(opts)
	env.FromSource("numbers", datagen.Generator(-1, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 20000, BatchSize: 16})).
		KeyBy(func(i int64) int64 { return i % 10 }).
		Reduce("slow", func(a, b int64) int64 {
			time.Sleep(5 * time.Millisecond)
			return a + b
		}).
		SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
	ctx, cancel := context.WithCancel(context.Background())
	job, err := env.ExecuteAsync(ctx, "unaligned-rescale")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return job, cancel
}

// TestUnalignedRestoreRescaled: a checkpoint holding records in flight on
// a keyed edge restores at the same parallelism and at another one (its
// records dealt to the new subtasks by key group); a restore that would
// chain the edge is refused naming it, and loses nothing (the checkpoint
// still restores afterwards).
func TestUnalignedRestoreRescaled(t *testing.T) {
	t.Parallel()
	store := "file://" + t.TempDir()
	job, cancel := rescaleJob(t, 2, store, "")
	time.Sleep(300 * time.Millisecond)
	ctx, cancelCtx := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelCtx()
	id, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := job.Checkpoint(id); !ok || !st.Unaligned || st.PersistedData == 0 {
		t.Fatalf("checkpoint %d: %+v; want unaligned with persisted data", id, st)
	}
	cancel()
	job.Wait()

	for _, par := range []int{3, 2} {
		job, cancel = rescaleJob(t, par, store, "latest")
		id2, err := job.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatalf("restore at parallelism %d, then a checkpoint: %v", par, err)
		}
		if sum, _ := job.Checkpoints(); sum.Restored != id || id2 <= id {
			t.Fatalf("parallelism %d: restored %d (want %d), next checkpoint %d", par, sum.Restored, id, id2)
		}
		cancel()
		job.Wait()
		id = id2
	}
}

// TestUnalignedRestoreNowChainedRefused: records in flight on an edge that
// the restored job chains (both ends now at the same parallelism) have no
// channel to be replayed into: the restore is refused naming the edge,
// even with AllowNonRestoredState, and the checkpoint still restores at a
// parallelism that keeps the edge.
func TestUnalignedRestoreNowChainedRefused(t *testing.T) {
	t.Parallel()
	store := "file://" + t.TempDir()
	start := func(par int, restore string) (*weir.JobClient, context.CancelFunc) {
		opts := weir.Options{Parallelism: par, JobID: "unaligned-chain", Exchange: "local", BatchSize: 16, QueueSize: 4, Restore: restore,
			AllowNonRestoredState: true,
			Checkpointing:         weir.CheckpointOptions{Unaligned: true, Storage: store, RetainOnCancel: true, Timeout: time.Minute}}
		env := weir.NewEnvironment(opts)
		env.FromSource("numbers", datagen.Generator(-1, func(i int64) int64 { return i }).
			WithOptions(datagen.Options{RecordsPerSecond: 20000, BatchSize: 16})).
			Map("slow", func(i int64) int64 {
				time.Sleep(2 * time.Millisecond)
				return i
			}).Parallelism(1).
			SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
		ctx, cancel := context.WithCancel(context.Background())
		job, err := env.ExecuteAsync(ctx, "unaligned-chain")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return job, cancel
	}
	job, cancel := start(2, "")
	time.Sleep(300 * time.Millisecond)
	ctx, cancelCtx := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelCtx()
	id, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := job.Checkpoint(id); !ok || st.PersistedData == 0 {
		t.Fatalf("checkpoint %d: %+v; want persisted data", id, st)
	}
	cancel()
	job.Wait()

	job, cancel = start(1, "latest")
	err = job.Wait()
	cancel()
	if err == nil || !strings.Contains(err.Error(), "the edge is chained") || !strings.Contains(err.Error(), `"numbers" -> "slow"`) {
		t.Fatalf("restore at parallelism 1: %v; want a refusal naming the chained edge numbers -> slow", err)
	}
	job, cancel = start(3, "latest")
	defer func() {
		cancel()
		job.Wait()
	}()
	if _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatalf("restore at parallelism 3 after the refusal: %v", err)
	}
	if sum, _ := job.Checkpoints(); sum.Restored != id {
		t.Fatalf("restored %d, want %d", sum.Restored, id)
	}
}

// TestExactlyOnceHarnessUnalignedRescaled runs the exactly-once harness's
// keyed count (with a rebalance edge in front of the keyed one) with
// unaligned checkpoints and random failures, cancels it once a checkpoint
// holding records in flight completed, and runs it to the end restored at
// another parallelism (restarts included): the committed output must be
// exactly the expected multiset, and some restores must have carried
// channel state.
func TestExactlyOnceHarnessUnalignedRescaled(t *testing.T) {
	pars := [][2]int{{2, 3}, {3, 1}, {1, 2}, {2, 4}, {4, 2}, {3, 2}}
	if testing.Short() {
		pars = pars[:2]
	}
	var carried, total int64
	for i, p := range pars {
		t.Run(fmt.Sprintf("seed%d-%dto%d", i, p[0], p[1]), func(t *testing.T) {
			persisted := runRescaleHarness(t, uint64(8000+i), p[0], p[1])
			total++
			if persisted > 0 {
				carried++
			}
		})
	}
	t.Logf("%d of %d rescaled restores carried channel state", carried, total)
	if !t.Failed() && carried == 0 {
		t.Error("no rescaled restore carried channel state: the redistribution was not exercised")
	}
}

// runRescaleHarness runs the harness job at parallelism par1 until a
// checkpoint with channel state completed, cancels it, and runs it to the
// end restored at par2. It returns the channel state bytes of the
// checkpoint the second run restored first.
func runRescaleHarness(t *testing.T, seed uint64, par1, par2 int) int64 {
	t.Helper()
	const records, keys = 6000, 61
	plan := newFaultPlan(seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	base := storage.NewMemoryStore()
	sink := flakySink[string]{collect.Transactional[string](), plan}
	var slowDown atomic.Int64
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	var logs syncBuffer
	run := func(par int, restore string, restored *atomic.Int64) *weir.JobClient {
		opts := weir.Options{Parallelism: par, JobID: fmt.Sprint("rescale-", seed), Restart: "fixed-delay:attempts=100,delay=0",
			StateBackend: "heap", Restore: restore, BatchSize: 32} // Exchange: WEIR_EXCHANGE (make test's TCP slice runs it over TCP)
		opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		opts.Checkpointing = weir.CheckpointOptions{Unaligned: true, Interval: time.Duration(2+rng.IntN(8)) * time.Millisecond,
			TolerableFailures: -1, MaxConcurrent: 1, RetainOnCancel: true}
		opts.OnRestore = func(r weir.RestoreInfo) { restored.CompareAndSwap(0, r.ID) }
		injectFaults(t, &opts, seed, plan, base)
		env := weir.NewEnvironment(opts)
		src := datagen.Generator(records, func(i int64) string { return fmt.Sprint("k", (i*7919)%keys) }).
			WithOptions(datagen.Options{RecordsPerSecond: 20_000, BatchSize: 64})
		env.FromSource("src", connector.Source[string](flakySource[string]{src, plan})).
			Rebalance().
			Map("maybe-panic", func(s string) string {
				if plan.maybe("operator-panic", 0.001) {
					panic("injected operator panic")
				}
				return s
			}).
			KeyBy(func(s string) string { return s }).
			Process("count", &runningCount{}).
			Map("slow", func(s string) string {
				if slowDown.Add(1)%16 == 0 {
					time.Sleep(200 * time.Microsecond)
				}
				return s
			}).
			SinkTo("out", connector.Sink[string](sink))
		job, err := env.ExecuteAsync(ctx, "harness-rescale")
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	var r1, r2 atomic.Int64
	job := run(par1, "", &r1)
	for {
		_, hist := job.Checkpoints()
		if slices.ContainsFunc(hist, func(c weir.CheckpointStats) bool { return c.Status == weir.CheckpointCompleted && c.PersistedData > 0 }) {
			break
		}
		select {
		case <-job.Done():
		case <-time.After(time.Millisecond):
			continue
		}
		break
	}
	job.Cancel()
	if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("seed %d: first run failed: %v (faults fired: %v); the job's warnings:\n%s", seed, err, plan.fired, logs.String())
	}
	_, hist1 := job.Checkpoints()
	job = run(par2, "latest", &r2)
	if err := job.Wait(); err != nil {
		t.Fatalf("seed %d: run restored at parallelism %d failed: %v (faults fired: %v); the job's warnings:\n%s", seed, par2, err, plan.fired, logs.String())
	}
	counts := map[string]int{}
	var want []string
	for i := range int64(records) {
		k := fmt.Sprint("k", (i*7919)%keys)
		counts[k]++
		want = append(want, fmt.Sprintf("%s,%d", k, counts[k]))
	}
	got := sink.Results()
	if lost, dup := multiset.Diff(want, got); len(lost)+len(dup) > 0 {
		t.Fatalf("seed %d (%d -> %d): exactly-once violated: %d lost (e.g. %v), %d duplicated (e.g. %v); faults fired: %v",
			seed, par1, par2, len(lost), lost[:min(5, len(lost))], len(dup), dup[:min(5, len(dup))], plan.fired)
	}
	var persisted int64
	for _, c := range hist1 {
		if c.ID == r2.Load() {
			persisted = c.PersistedData
		}
	}
	t.Logf("seed %d: %d -> %d, restored checkpoint %d with %d bytes of channel state; faults fired: %v", seed, par1, par2, r2.Load(), persisted, plan.fired)
	return persisted
}

// TestUnalignedBenchmark measures, in one run, (1) checkpoint durations
// under heavy backpressure (a consumer ~100x slower than its source),
// aligned against unaligned, and (2) the throughput of a job without
// backpressure, checkpointing every 20ms, aligned against unaligned. It is
// opt-in (WEIR_UNALIGNED_BENCH=1): it takes about a minute and its figures
// go into BENCHMARKS.md.
func TestUnalignedBenchmark(t *testing.T) {
	if os.Getenv("WEIR_UNALIGNED_BENCH") == "" {
		t.Skip("set WEIR_UNALIGNED_BENCH=1 to run the unaligned checkpoint benchmark")
	}
	rounds := 12 // WEIR_UNALIGNED_BENCH_ROUNDS: checkpoints per mode under backpressure
	if v := os.Getenv("WEIR_UNALIGNED_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_UNALIGNED_BENCH_ROUNDS=%q: want a positive number of checkpoints", v)
		}
		rounds = n
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	part := os.Getenv("WEIR_UNALIGNED_BENCH") // "1": both parts; "backpressure" or "throughput": one
	for _, mode := range []string{"aligned", "unaligned", "timeout-50ms"} {
		if part == "throughput" {
			break
		}
		c := weir.CheckpointOptions{Unaligned: mode != "aligned"}
		if mode == "timeout-50ms" {
			c.AlignedTimeout = 50 * time.Millisecond
		}
		job, _ := backpressuredJob(t, "bench-bp-"+mode, c)
		time.Sleep(300 * time.Millisecond)
		var durs []time.Duration
		var persisted int64
		unaligned := 0
		for range rounds {
			id, err := job.TriggerCheckpoint(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			st, _ := job.Checkpoint(id)
			durs = append(durs, st.Duration)
			if os.Getenv("WEIR_UNALIGNED_BENCH_TIMELINE") != "" {
				// Where the time goes: trigger -> first barrier at each
				// task (start delay) -> ack (sync, alignment, async).
				var line []string
				for _, s := range st.Subtasks {
					line = append(line, fmt.Sprintf("%s: barrier +%v, align %v, sync %v, async %v, ack +%v",
						s.Task, s.StartDelay, s.Alignment, s.Sync.Round(time.Microsecond), s.Async.Round(time.Microsecond), s.AckTime.Sub(st.TriggerTime).Round(time.Millisecond)))
				}
				t.Logf("%s checkpoint %d, %v: %s", mode, id, st.Duration, strings.Join(line, "; "))
			}
			persisted += st.PersistedData
			if st.Unaligned {
				unaligned++
			}
		}
		t.Logf("backpressure, %s: %d checkpoints (%d unaligned), duration p50 %v p99 %v, %d bytes persisted per checkpoint",
			mode, rounds, unaligned, pct(durs, 0.5), pct(durs, 0.99), persisted/int64(rounds))
	}
	if part == "backpressure" {
		return
	}
	// WEIR_UNALIGNED_BENCH_RECORDS and _RUNS make the throughput half
	// longer: at the defaults each run takes well under a second, and the
	// spread from run to run on a 2-core machine is larger than the target.
	records, runs := int64(2_000_000), 5
	if v := os.Getenv("WEIR_UNALIGNED_BENCH_RECORDS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_UNALIGNED_BENCH_RECORDS=%q: want a positive number of records", v)
		}
		records = n
	}
	if v := os.Getenv("WEIR_UNALIGNED_BENCH_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_UNALIGNED_BENCH_RUNS=%q: want a positive number of runs of each mode", v)
		}
		runs = n
	}
	// WEIR_UNALIGNED_BENCH_STORAGE=file writes the checkpoints to files
	// (default: in memory, whose retained checkpoints, channel state
	// included, live on the heap).
	var storageURL string
	switch v := os.Getenv("WEIR_UNALIGNED_BENCH_STORAGE"); v {
	case "", "memory":
	case "file":
		storageURL = "file://" + t.TempDir()
	default:
		t.Fatalf("WEIR_UNALIGNED_BENCH_STORAGE=%q: want memory or file", v)
	}
	type result struct {
		rate, cpuRate    float64 // records per wall second, per CPU second of the process
		ckpts, persisted int64
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	run := func(unaligned bool) result {
		opts := weir.Options{Parallelism: 2, Exchange: "local",
			Checkpointing: weir.CheckpointOptions{Interval: 20 * time.Millisecond, Unaligned: unaligned, Storage: storageURL}}
		env := weir.NewEnvironment(opts)
		env.FromSource("numbers", datagen.Generator(records, func(i int64) int64 { return i })).
			KeyBy(func(i int64) int64 { return i % 1000 }).
			Reduce("sum", func(a, b int64) int64 { return a + b }).
			SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
		runtime.GC() // the garbage of the run before is not this run's CPU
		start, cpu0 := time.Now(), cpu()
		job, err := env.ExecuteAsync(t.Context(), "bench-throughput")
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		r := result{rate: float64(records) / time.Since(start).Seconds(), cpuRate: float64(records) / (cpu() - cpu0).Seconds()}
		sum, hist := job.Checkpoints()
		r.ckpts = int64(sum.Completed)
		for _, c := range hist { // the history kept: the last checkpoints
			if c.Status == weir.CheckpointCompleted {
				r.persisted = max(r.persisted, c.PersistedData)
			}
		}
		return r
	}
	// The runs carry a pprof label (mode), inherited by the job's
	// goroutines, so that -cpuprofile tells them apart (pprof -tagfocus).
	labelled := func(unaligned bool) (r result) {
		pprof.Do(t.Context(), pprof.Labels("mode", map[bool]string{false: "aligned", true: "unaligned"}[unaligned]), func(context.Context) {
			r = run(unaligned)
		})
		return r
	}
	// ABBA: aligned, unaligned, unaligned, aligned, ... so that neither
	// mode always runs first.
	var al, un []result
	for i := range runs {
		if i%2 == 0 {
			al, un = append(al, labelled(false)), append(un, labelled(true))
		} else {
			un, al = append(un, labelled(true)), append(al, labelled(false))
		}
	}
	median := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rate := func(r result) float64 { return r.rate }
	cpuRate := func(r result) float64 { return r.cpuRate }
	ckpts := func(r result) float64 { return float64(r.ckpts) }
	pers := func(r result) float64 { return float64(r.persisted) }
	t.Logf("no backpressure, checkpoint every 20ms, %d records, medians of %d runs of each (ABBA): aligned %.0f rec/s, %.0f rec per CPU-s, %.0f checkpoints; unaligned %.0f rec/s, %.0f rec per CPU-s, %.0f checkpoints, at most %.0f bytes persisted in the last ones; unaligned vs aligned: %.1f%% wall, %.1f%% per CPU-s",
		records, runs, median(al, rate), median(al, cpuRate), median(al, ckpts), median(un, rate), median(un, cpuRate), median(un, ckpts), median(un, pers),
		100*(median(un, rate)-median(al, rate))/median(al, rate), 100*(median(un, cpuRate)-median(al, cpuRate))/median(al, cpuRate))
}
