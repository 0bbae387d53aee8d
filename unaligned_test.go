package weir_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/print"
	"github.com/weirstream/weir/internal/rest"
)

// TestUnalignedOptionsValidate: the combinations Flink refuses (and the one
// weir cannot do yet) fail with an error naming the options; the good ones
// pass.
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
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `Unaligned is not supported with Options.Exchange "tcp"`) {
		t.Fatalf("Validate with tcp = %v, want the unsupported error", err)
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

// TestUnalignedRestoreRescaleRefused: a checkpoint holding records in
// flight restores at the same parallelism; at another one the job is
// refused with a message naming the edge, rather than losing the records.
func TestUnalignedRestoreRescaleRefused(t *testing.T) {
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

	job, cancel = rescaleJob(t, 3, store, "latest")
	err = job.Wait()
	cancel()
	if err == nil || !strings.Contains(err.Error(), "cannot redistribute channel state") || !strings.Contains(err.Error(), `"numbers" -> "slow"`) {
		t.Fatalf("restore at parallelism 3: %v; want a refusal naming the edge numbers -> slow", err)
	}

	job, cancel = rescaleJob(t, 2, store, "latest")
	defer func() {
		cancel()
		job.Wait()
	}()
	id2, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatalf("restore at the same parallelism, then a checkpoint: %v", err)
	}
	if sum, _ := job.Checkpoints(); sum.Restored != id || id2 <= id {
		t.Fatalf("restored %d (want %d), next checkpoint %d", sum.Restored, id, id2)
	}
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
	const rounds = 12
	pct := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	for _, mode := range []string{"aligned", "unaligned"} {
		job, _ := backpressuredJob(t, "bench-bp-"+mode, weir.CheckpointOptions{Unaligned: mode == "unaligned"})
		time.Sleep(300 * time.Millisecond)
		var durs []time.Duration
		var persisted int64
		for range rounds {
			id, err := job.TriggerCheckpoint(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			st, _ := job.Checkpoint(id)
			durs = append(durs, st.Duration)
			persisted += st.PersistedData
		}
		t.Logf("backpressure, %s: %d checkpoints, duration p50 %v p99 %v, %d bytes persisted per checkpoint",
			mode, rounds, pct(durs, 0.5), pct(durs, 0.99), persisted/rounds)
	}
	const records = 2_000_000
	run := func(unaligned bool) float64 {
		opts := weir.Options{Parallelism: 2, Exchange: "local",
			Checkpointing: weir.CheckpointOptions{Interval: 20 * time.Millisecond, Unaligned: unaligned}}
		env := weir.NewEnvironment(opts)
		env.FromSource("numbers", datagen.Generator(records, func(i int64) int64 { return i })).
			KeyBy(func(i int64) int64 { return i % 1000 }).
			Reduce("sum", func(a, b int64) int64 { return a + b }).
			SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
		start := time.Now()
		job, err := env.ExecuteAsync(t.Context(), "bench-throughput")
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		return records / time.Since(start).Seconds()
	}
	var al, un []float64
	for range 3 {
		al, un = append(al, run(false)), append(un, run(true))
	}
	slices.Sort(al)
	slices.Sort(un)
	t.Logf("no backpressure, checkpoint every 20ms, %d records, median of 3 interleaved runs: aligned %.0f rec/s, unaligned %.0f rec/s (%.1f%%)",
		records, al[1], un[1], 100*(un[1]-al[1])/al[1])
}
