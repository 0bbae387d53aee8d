package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/testutil/miniotest"
	"github.com/weirstream/weir/state"
)

var (
	recoveryBytes = flag.Int64("recovery.bytes", 1<<30, "bytes of keyed pebble state (keys × -recovery.value) of BenchmarkRecovery")
	recoveryValue = flag.Int("recovery.value", 1024, "bytes of each key's value in BenchmarkRecovery")
	recoveryModes = flag.String("recovery.modes", "local,download,restore", "what BenchmarkRecovery measures, comma-separated: local (failover with local recovery), download (failover downloading from S3), restore (a new job restoring from S3)")
)

// The recovery benchmark builds a large keyed pebble state, checkpoints it
// into S3 (MinIO on loopback), and measures how long it takes to come back:
//
//   - local: the job fails right after the checkpoint and restarts in the
//     same process with Options.Checkpointing.LocalRecovery, which links
//     the files of its local copy of the checkpoint.
//   - download: the same failover without local recovery: every file is
//     downloaded from S3.
//   - restore: a new job (Options.Restore "latest") restores the checkpoint
//     from S3. Local recovery does not apply to a new job: a job clears its
//     local state directory when it starts.
//
// The recovery time runs from the failure (failover) or from the call to
// ExecuteAsync (restore) until every subtask of the keyed operator has
// processed a record after the restore, reading a restored value and
// checking it. Each key's value is pseudo-random (incompressible) bytes
// derived from the key, so that the checkpoint's size is the state's.

// recoveryJob is the state shared by the benchmark and the functions of one
// job (and its restarts).
type recoveryJob struct {
	keys, value int64
	par         int

	written atomic.Int64 // keys written by the build phase
	fail    atomic.Bool  // the next probe record fails its task
	gen     atomic.Int64 // 0 until the failure (failover) or 1 (restore)

	mu      sync.Mutex
	failed  time.Time
	ready   map[int]time.Time // subtask -> first probe after the restore
	known   map[int]int64     // subtask -> last checkpoint known complete
	readyCh chan struct{}     // closed when every subtask is ready
	ckpt    int64             // the checkpoint of the build phase
}

func newRecoveryJob(keys, value int64, par int) *recoveryJob {
	return &recoveryJob{keys: keys, value: value, par: par, ready: make(map[int]time.Time), known: make(map[int]int64), readyCh: make(chan struct{})}
}

var errInjected = errors.New("bench: injected failure after the checkpoint")

// payload writes the value of key into buf: bytes of a splitmix64 sequence
// seeded by the key.
func payload(key int64, buf []byte) {
	x := uint64(key)*0x9e3779b97f4a7c15 + 1
	var w [8]byte
	for i := 0; i < len(buf); i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		binary.LittleEndian.PutUint64(w[:], z)
		copy(buf[i:], w[:])
	}
}

// loader writes each key's payload in value state when it first sees the
// key (indexes below keys) and reads and checks it for the probe records
// that follow (indexes from keys on).
type loader struct {
	job     *recoveryJob
	v       state.Value[[]byte]
	gen     int64
	subtask int
	want    []byte
}

func (l *loader) Open(ctx *weir.KeyedContext[int64]) error {
	v, err := weir.Value[[]byte](ctx, "payload")
	if err != nil {
		return err
	}
	l.v, l.gen, l.subtask = v, l.job.gen.Load(), ctx.Subtask()
	l.want = make([]byte, l.job.value)
	return nil
}

func (l *loader) ProcessElement(ctx *weir.KeyedContext[int64], i int64, _ weir.Collector[int64]) error {
	j := l.job
	key := ctx.CurrentKey()
	if i < j.keys {
		buf := make([]byte, j.value)
		payload(key, buf)
		l.v.Update(buf)
		j.written.Add(1)
		return nil
	}
	got, ok := l.v.Value()
	payload(key, l.want)
	if !ok || !bytes.Equal(got, l.want) {
		return fmt.Errorf("key %d: value of %d bytes (present %v), want the %d bytes written", key, len(got), ok, len(l.want))
	}
	if j.fail.CompareAndSwap(true, false) {
		j.mu.Lock()
		j.failed = time.Now()
		j.mu.Unlock()
		j.gen.Add(1)
		return errInjected
	}
	if l.gen == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, seen := j.ready[l.subtask]; !seen {
		j.ready[l.subtask] = time.Now()
		if len(j.ready) == j.par {
			close(j.readyCh)
		}
	}
	return nil
}

// NotifyCheckpointComplete counts the subtasks that know the checkpoint
// complete: their keyed state keeps its local copy from then on (a task
// that fails before keeps none), so the failover waits for every subtask.
func (l *loader) NotifyCheckpointComplete(id int64) error {
	l.job.mu.Lock()
	l.job.known[l.subtask] = max(l.job.known[l.subtask], id)
	l.job.mu.Unlock()
	return nil
}

func (l *loader) NotifyCheckpointAborted(int64) error { return nil }

// allKnowCheckpoint reports whether every subtask knows the build phase's
// checkpoint complete.
func (j *recoveryJob) allKnowCheckpoint() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, id := range j.known {
		if id >= j.ckpt {
			n++
		}
	}
	return j.ckpt > 0 && n == j.par
}

// readyAt is when the last subtask processed its first record after the
// restore.
func (j *recoveryJob) readyAt() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	var last time.Time
	for _, t := range j.ready {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// recoveryBatch is the batch size of the source and of the channels of the
// recovery job: small, so that the slow probe records that mark the end of a
// recovery reach the keyed operator within a few milliseconds (a batch is
// sent when full or when its sender is idle; a source that emits is never
// idle).
const recoveryBatch = 16

// start starts the job: an unbounded source of indexes (the build phase's
// 0..keys-1 at full speed, then probe records at a slow pace, so that the
// job idles while the checkpoint uploads), keyed by IntKey.
func (j *recoveryJob) start(ctx context.Context, opts weir.Options) (*weir.JobClient, error) {
	env := weir.NewEnvironment(opts)
	keys := j.keys
	src := datagen.Generator(-1, func(i int64) int64 {
		if i >= keys {
			time.Sleep(200 * time.Microsecond)
		}
		return i
	}).WithOptions(datagen.Options{BatchSize: recoveryBatch})
	env.FromSource("indexes", src).
		KeyBy(func(i int64) int64 { return IntKey(i, keys) }).
		Process("state", &loader{job: j}).
		SinkTo("sum", new(SumSink))
	return env.ExecuteAsync(ctx, "recovery")
}

// restoreLog counts, from the runtime's logs, how the keyed subtasks
// restored their incremental state: from the local copy or downloaded.
type restoreLog struct {
	slog.Handler // discards; only the message below is looked at
	mu           *sync.Mutex
	local, down  *int64
	bytes        *int64
}

func newRestoreLog() *restoreLog {
	return &restoreLog{Handler: slog.DiscardHandler, mu: new(sync.Mutex), local: new(int64), down: new(int64), bytes: new(int64)}
}

func (h *restoreLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *restoreLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "restored incremental keyed state" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "local":
			*h.local += a.Value.Int64()
		case "downloaded":
			*h.down += a.Value.Int64()
		case "bytes":
			*h.bytes += a.Value.Int64()
		}
		return true
	})
	return nil
}

func (h *restoreLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *restoreLog) WithGroup(string) slog.Handler      { return h }

// counts returns the handles restored locally and downloaded, and the bytes
// downloaded, and starts counting again.
func (h *restoreLog) counts() (local, down, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	local, down, bytes = *h.local, *h.down, *h.bytes
	*h.local, *h.down, *h.bytes = 0, 0, 0
	return local, down, bytes
}

// recoveryFigures are the results of one build and its recovery.
type recoveryFigures struct {
	build, checkpoint, recovery time.Duration
	stateSize                   int64
}

// waitFor polls cond every 10 ms until it holds, the job ends or ctx ends.
func waitFor(ctx context.Context, job *weir.JobClient, what string, cond func() bool) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-job.Done():
			return fmt.Errorf("job ended while waiting for %s: %v", what, job.Wait())
		case <-tick.C:
		}
	}
	return nil
}

// buildAndCheckpoint runs the build phase of job j with opts and takes a
// checkpoint; it returns the running job.
func buildAndCheckpoint(ctx context.Context, b *testing.B, j *recoveryJob, opts weir.Options, f *recoveryFigures) *weir.JobClient {
	b.Helper()
	start := time.Now()
	job, err := j.start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := waitFor(ctx, job, "the state to be built", func() bool { return j.written.Load() >= j.keys }); err != nil {
		job.Cancel()
		<-job.Done()
		b.Fatal(err)
	}
	f.build = time.Since(start)
	id, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		job.Cancel()
		<-job.Done()
		b.Fatalf("checkpoint: %v", err)
	}
	j.mu.Lock()
	j.ckpt = id
	j.mu.Unlock()
	st, _ := job.Checkpoint(id)
	f.checkpoint, f.stateSize = st.Duration, st.StateSize
	b.Logf("checkpoint %d: %d bytes in %v at %s (build: %v)", id, st.StateSize, st.Duration, st.Path, f.build)
	return job
}

// failover fails the running job and measures its recovery.
func failover(ctx context.Context, b *testing.B, j *recoveryJob, job *weir.JobClient, f *recoveryFigures) {
	b.Helper()
	defer func() {
		job.Cancel()
		<-job.Done()
	}()
	if err := waitFor(ctx, job, "every subtask to know the checkpoint complete", j.allKnowCheckpoint); err != nil {
		b.Fatal(err)
	}
	j.fail.Store(true)
	select {
	case <-j.readyCh:
	case <-job.Done():
		b.Fatalf("job ended during the failover: %v", job.Wait())
	case <-ctx.Done():
		b.Fatalf("failover: %v", context.Cause(ctx))
	}
	j.mu.Lock()
	failed := j.failed
	j.mu.Unlock()
	f.recovery = j.readyAt().Sub(failed)
	if sum, _ := job.Checkpoints(); sum.Restarts != 1 {
		b.Fatalf("%d restarts, want 1", sum.Restarts)
	}
}

// restoreFresh starts a new job restoring the latest checkpoint and
// measures the time until it has restored.
func restoreFresh(ctx context.Context, b *testing.B, j *recoveryJob, opts weir.Options, f *recoveryFigures) {
	b.Helper()
	j.gen.Store(1)
	opts.Restore = "latest"
	start := time.Now()
	job, err := j.start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		job.Cancel()
		<-job.Done()
	}()
	select {
	case <-j.readyCh:
	case <-job.Done():
		b.Fatalf("restored job ended: %v", job.Wait())
	case <-ctx.Done():
		b.Fatalf("restore: %v", context.Cause(ctx))
	}
	f.recovery = j.readyAt().Sub(start)
	if j.written.Load() != 0 {
		b.Fatalf("the restored job wrote %d keys: it did not resume after the build phase", j.written.Load())
	}
}

// BenchmarkRecovery measures the recovery of -recovery.bytes of keyed
// pebble state (default 1 GiB: 1M keys of 1 KiB values) at parallelism 2,
// checkpointed incrementally into S3 served by MinIO on loopback: by
// failover with local recovery ("local"), by failover downloading from S3
// ("download"), and by a new job restoring from S3 ("restore"). It reports
// each one's recovery time and rate, and the build time, checkpoint
// duration and size. It needs a MinIO binary (see package miniotest).
func BenchmarkRecovery(b *testing.B) {
	if *recoveryValue < 8 || *recoveryValue%8 != 0 {
		b.Fatalf("-recovery.value is %d; want a positive multiple of 8", *recoveryValue)
	}
	keys := *recoveryBytes / int64(*recoveryValue)
	if keys < 1 {
		b.Fatalf("-recovery.bytes is %d; want at least -recovery.value (%d)", *recoveryBytes, *recoveryValue)
	}
	modes := map[string]bool{}
	for m := range strings.SplitSeq(*recoveryModes, ",") {
		m = strings.TrimSpace(m)
		if m != "local" && m != "download" && m != "restore" {
			b.Fatalf("-recovery.modes: unknown mode %q; want local, download or restore", m)
		}
		modes[m] = true
	}
	srv := miniotest.Start(b)
	b.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const par = 2
	logs := newRestoreLog()
	options := func(local bool) weir.Options {
		opts := backendOptions(par, "pebble", b.TempDir())
		opts.BatchSize = recoveryBatch
		opts.JobID = "recovery"
		opts.Checkpointing.Storage = fmt.Sprintf("s3://%s/ck?endpoint=%s&secure=false&pathstyle=true", srv.NewBucket(b), srv.Endpoint)
		opts.Checkpointing.Incremental = true
		opts.Checkpointing.LocalRecovery = local
		opts.Checkpointing.RetainOnCancel = true
		opts.Restart = "fixed-delay:attempts=1,delay=1ms"
		opts.Logger = slog.New(logs)
		return opts
	}
	report := func(name string, f recoveryFigures) {
		local, down, bytes := logs.counts()
		b.Logf("%s: %v; %d handles restored from the local copy, %d downloaded (%d bytes)", name, f.recovery, local, down, bytes)
		if name == "local" && local == 0 || name != "local" && (local != 0 || down == 0) {
			b.Fatalf("%s: %d handles restored from the local copy, %d downloaded: not the recovery meant", name, local, down)
		}
		// Local recovery falls back to downloading a subtask's files when
		// its local copy does not match the checkpoint: reported, as the
		// handles downloaded and their size.
		b.ReportMetric(float64(down), name+"-downloaded-handles")
		b.ReportMetric(float64(bytes)/(1<<20), name+"-downloaded-MiB")
		b.ReportMetric(f.recovery.Seconds(), name+"-s")
		b.ReportMetric(float64(f.stateSize)/(1<<20)/f.recovery.Seconds(), name+"-MiB/s")
	}
	var built recoveryFigures
	for range b.N {
		if modes["local"] {
			j := newRecoveryJob(keys, int64(*recoveryValue), par)
			var f recoveryFigures
			job := buildAndCheckpoint(ctx, b, j, options(true), &f)
			failover(ctx, b, j, job, &f)
			report("local", f)
			built = f
		}
		if modes["download"] || modes["restore"] {
			opts := options(false)
			j := newRecoveryJob(keys, int64(*recoveryValue), par)
			var f recoveryFigures
			job := buildAndCheckpoint(ctx, b, j, opts, &f)
			built = f
			if modes["download"] {
				failover(ctx, b, j, job, &f)
				report("download", f)
			} else {
				job.Cancel()
				<-job.Done()
			}
			if modes["restore"] {
				// The failover's job took no checkpoint after the one
				// built: "latest" is that one.
				j := newRecoveryJob(keys, int64(*recoveryValue), par)
				restoreFresh(ctx, b, j, opts, &f)
				report("restore", f)
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(built.stateSize)/(1<<20), "state-MiB")
	b.ReportMetric(built.build.Seconds(), "build-s")
	b.ReportMetric(built.checkpoint.Seconds(), "checkpoint-s")
}
