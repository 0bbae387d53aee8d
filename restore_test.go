package weir_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/internal/storage"
)

// spGate is a bounded source of the indexes 0..n-1 (one split, read by
// subtask 0) that emits only the indexes below *allow: a test moves the gate
// to decide exactly which records a checkpoint covers.
type spGate struct {
	n     int64
	allow *atomic.Int64
}

func (g spGate) Boundedness() connector.Boundedness { return connector.Bounded }

func (g spGate) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "gate"}}, nil
}

func (g spGate) NewReader(connector.ReaderContext) (connector.Reader[int64], error) {
	return &spGateReader{g: g}, nil
}

type spGateReader struct {
	g    spGate
	has  bool
	next int64
}

func (r *spGateReader) AddSplits(splits []connector.SplitState) error {
	for _, sp := range splits {
		r.has = true
		switch len(sp.Position) {
		case 0:
		case 8:
			r.next = int64(binary.BigEndian.Uint64(sp.Position))
		default:
			return fmt.Errorf("gate: bad position %x", sp.Position)
		}
	}
	return nil
}

func (r *spGateReader) NoMoreSplits() {}

func (r *spGateReader) Poll(out connector.Emitter[int64]) (connector.Status, error) {
	if !r.has || r.next >= r.g.n {
		return connector.EndOfInput, nil
	}
	limit := min(r.g.allow.Load(), r.g.n)
	for k := 0; r.next < limit && k < 256; k++ {
		out.Emit(r.next)
		r.next++
	}
	switch {
	case r.next >= r.g.n:
		return connector.EndOfInput, nil
	case r.next >= limit:
		return connector.NothingAvailable, nil
	}
	return connector.MoreAvailable, nil
}

// Available polls the gate every millisecond.
func (r *spGateReader) Available() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(time.Millisecond, func() { close(ch) })
	return ch
}

func (r *spGateReader) Snapshot(int64) ([]connector.SplitState, error) {
	if !r.has {
		return nil, nil
	}
	return []connector.SplitState{{ID: "gate", Position: binary.BigEndian.AppendUint64(nil, uint64(r.next))}}, nil
}

func (r *spGateReader) Close() error { return nil }

// TestRestoreLatestContinuesExactly cancels a job that retains its
// checkpoints on cancel, and starts it again with Restore "latest": the new
// run resumes from the newest checkpoint, and the two runs together commit
// every record exactly once.
func TestRestoreLatestContinuesExactly(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 6000
	root := t.TempDir()
	sink := collect.Transactional[string]()
	src := spIndexes(n, 8000)
	opts := weir.Options{Parallelism: 2, JobID: "latest"}
	opts.Checkpointing = weir.CheckpointOptions{Interval: 10 * time.Millisecond, Storage: "file://" + root, RetainOnCancel: true}

	var tap1 atomic.Int64
	env := weir.NewEnvironment(opts)
	spBuild(env, src, 1, sink, &tap1)
	c, err := env.ExecuteAsync(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "3 checkpoints and 1500 records", 10*time.Second, func() bool {
		s, _ := c.Checkpoints()
		return s.Completed >= 3 && tap1.Load() >= 1500
	})
	c.Cancel()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	sum1, _ := c.Checkpoints()
	if sink.Len() == 0 || sink.Len() >= n || sum1.Restarts != 0 {
		t.Fatalf("run 1 committed %d of %d records with %d restarts: want some, not all, no restart", sink.Len(), n, sum1.Restarts)
	}
	if dirs := spCheckpointDirs(t, filepath.Join(root, "latest")); !dirs[sum1.LatestCompleted] {
		t.Fatalf("latest checkpoint %d not retained on cancel: %v", sum1.LatestCompleted, dirs)
	}

	var tap2 atomic.Int64
	opts.Restore = "latest"
	env = weir.NewEnvironment(opts)
	spBuild(env, src, 1, sink, &tap2)
	c, err = env.ExecuteAsync(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, c, 20*time.Second); err != nil {
		t.Fatalf("restored run: %v", err)
	}
	sum2, _ := c.Checkpoints()
	if sum2.Restored != sum1.LatestCompleted || !strings.HasSuffix(sum2.RestorePath, fmt.Sprint("chk-", sum1.LatestCompleted)) {
		t.Fatalf("restored %d from %q, want the latest checkpoint %d", sum2.Restored, sum2.RestorePath, sum1.LatestCompleted)
	}
	if sum2.Restarts != 0 {
		t.Fatalf("restored run restarted %d times", sum2.Restarts)
	}
	spSameMultiset(t, "cancelled run + restore latest", sink.Results(), spWant(n))
}

// TestRestoreLatestWithoutCheckpointStartsEmpty: "latest" with nothing to
// restore starts from scratch.
func TestRestoreLatestWithoutCheckpointStartsEmpty(t *testing.T) {
	t.Parallel()
	opts := weir.Options{Parallelism: 2, JobID: "nothing-yet", Restore: "latest"}
	opts.Checkpointing.Storage = "file://" + t.TempDir()
	sink := collect.Transactional[string]()
	var tap atomic.Int64
	env := weir.NewEnvironment(opts)
	spBuild(env, spIndexes(500, 0), 1, sink, &tap)
	c, err := env.ExecuteAsync(spCtx(t), "nothing-yet")
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if sum, _ := c.Checkpoints(); sum.Restored != 0 {
		t.Fatalf("restored %d with nothing to restore", sum.Restored)
	}
	spSameMultiset(t, "fresh run", sink.Results(), spWant(500))
}

// spBlocker is a checkpoint store (a file store under root with faults)
// whose creations of state files matching pattern block, once armed, until
// released; entered receives the name of each one that blocks. With fail,
// the blocked creations then fail (as they do when the job is cancelled
// under them), so that nothing of them reaches storage.
type spBlocker struct {
	armed   atomic.Bool
	entered chan string
	release chan struct{}
	once    sync.Once
	faults  *storage.Faults
	fail    func() error
}

func spNewBlocker(t *testing.T, root, pattern string, fail bool) (*spBlocker, storage.Store) {
	t.Helper()
	b := &spBlocker{entered: make(chan string, 16), release: make(chan struct{}), faults: storage.NewFaults(1)}
	t.Cleanup(b.Release)
	fs, err := storage.NewFileStore(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	rule := storage.Rule{Ops: storage.OpCreate, Path: pattern, Delay: func(_ storage.Op, name string) {
		if !b.armed.Load() {
			return
		}
		b.entered <- name
		<-b.release
	}}
	if err := b.faults.Add(rule); err != nil {
		t.Fatal(err)
	}
	b.fail = func() error { return b.faults.Add(storage.Rule{Ops: storage.OpCreate, Path: pattern, Probability: 1}) }
	if !fail {
		b.fail = func() error { return nil }
	}
	return b, storage.WithFaults(fs, b.faults)
}

// arm makes matching creations block (and then fail, if so configured).
func (b *spBlocker) arm(t *testing.T) {
	t.Helper()
	if err := b.fail(); err != nil {
		t.Fatal(err)
	}
	b.armed.Store(true)
}

func (b *spBlocker) Release() { b.once.Do(func() { close(b.release) }) }

// TestRestoreCancelDiscardsInFlightCheckpoint cancels a job (RetainOnCancel
// false) while checkpoint 2 is in flight: one keyed subtask wrote its state
// file and acknowledged, the other is busy with a record ahead of the
// barrier (and fails when the job is cancelled). With DiscardOnCancel,
// cancel must leave no chk-* behind, complete or not. Without it, the
// job's sink commits on checkpoints (collect.Transactional), so checkpoint
// 1, whose output is committed, must stay for the next run, and nothing of
// checkpoint 2.
func TestRestoreCancelDiscardsInFlightCheckpoint(t *testing.T) {
	t.Parallel()
	for _, discard := range []bool{true, false} {
		t.Run(fmt.Sprint("DiscardOnCancel=", discard), func(t *testing.T) {
			t.Parallel()
			testRestoreCancelInFlight(t, discard)
		})
	}
}

func testRestoreCancelInFlight(t *testing.T, discard bool) {
	ctx := spCtx(t)
	root := t.TempDir()
	allow := new(atomic.Int64)
	allow.Store(1000)
	opts := weir.Options{Parallelism: 2, JobID: "inflight"}
	opts.Checkpointing.Storage = "file://" + root
	opts.Checkpointing.DiscardOnCancel = discard
	var tap atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	// The keyed subtask of record 1500 blocks on it; the other one takes
	// its part of checkpoint 2.
	counter := &spCounter{onElement: func(i int64) error {
		if i == 1500 {
			close(entered)
			<-release
			return errors.New("cancelled while busy")
		}
		return nil
	}}
	env := weir.NewEnvironment(opts)
	spBuildWith(env, spGate{n: 5000, allow: allow}, 1, collect.Transactional[string](), &tap, counter)
	c, err := env.ExecuteAsync(ctx, "inflight")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "1000 records", 10*time.Second, func() bool { return tap.Load() == 1000 })
	if _, err := c.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	allow.Store(2000)
	<-entered
	go c.TriggerCheckpoint(ctx) // fails when the job is cancelled
	jobDir := filepath.Join(root, "inflight")
	spWait(t, "the other subtask's state file of checkpoint 2", 10*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(jobDir, "chk-2", "count-*.keyed"))
		return len(m) == 1
	})
	c.Cancel()
	unblock()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	dirs := spCheckpointDirs(t, jobDir)
	want := map[int64]bool{1: true}
	if discard {
		want = map[int64]bool{}
	}
	if !maps.Equal(dirs, want) {
		files, _ := filepath.Glob(filepath.Join(jobDir, "chk-*", "*"))
		t.Fatalf("BUG: cancel (DiscardOnCancel %t) left checkpoint directories %v (id: complete?) holding %v, want %v", discard, dirs, files, want)
	}
}

// TestRestoreLatestNeverReusesCheckpointIDs cancels a job while checkpoint
// 2 is in flight: the sink pre-committed transaction 2 but no state file of
// checkpoint 2 reached storage. The job restored from checkpoint 1 must not
// hand out id 2 again: a two-phase-commit sink names its transactions by
// checkpoint id (PostgreSQL's PREPARE TRANSACTION refuses a gid in use, the
// collect sink refuses a pre-commit it already saw).
func TestRestoreLatestNeverReusesCheckpointIDs(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 3000
	root := t.TempDir()
	blocker, store := spNewBlocker(t, root, "*.keyed", true)
	sink := collect.Transactional[string]()
	allow := new(atomic.Int64)
	allow.Store(1000)
	opts := weir.Options{Parallelism: 2, JobID: "ids"}
	opts.Checkpointing.RetainOnCancel = true
	weir.SetCheckpointStore(&opts, store)
	var tap1 atomic.Int64
	env := weir.NewEnvironment(opts)
	spBuild(env, spGate{n: n, allow: allow}, 1, sink, &tap1)
	c, err := env.ExecuteAsync(ctx, "ids")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "1000 records", 10*time.Second, func() bool { return tap1.Load() == 1000 })
	id1, err := c.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "the commit of checkpoint 1", 10*time.Second, func() bool { return sink.Len() == 1000 })
	allow.Store(2000)
	spWait(t, "2000 records", 10*time.Second, func() bool { return tap1.Load() == 2000 })
	blocker.arm(t)
	go c.TriggerCheckpoint(ctx) // fails when the job is cancelled
	<-blocker.entered
	<-blocker.entered // both subtasks' files block: nothing of it is stored
	spWait(t, "the sink's pre-commit of checkpoint 2", 10*time.Second, func() bool { return sink.Pending() > 0 })
	c.Cancel()
	blocker.Release()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	_, hist := c.Checkpoints()
	var used []int64
	for _, h := range hist {
		used = append(used, h.ID)
	}

	blocker.faults.Clear()
	var tap2 atomic.Int64
	allow2 := new(atomic.Int64)
	allow2.Store(n)
	opts.Restore = "latest"
	env = weir.NewEnvironment(opts)
	spBuild(env, spGate{n: n, allow: allow2}, 1, sink, &tap2)
	c, err = env.ExecuteAsync(ctx, "ids")
	if err != nil {
		t.Fatal(err)
	}
	err = spWaitJob(t, c, 10*time.Second)
	sum, hist2 := c.Checkpoints()
	var reused []int64
	for _, h := range hist2 {
		if slices.Contains(used, h.ID) {
			reused = append(reused, h.ID)
		}
	}
	if len(reused) > 0 || err != nil {
		t.Fatalf("BUG: the run restored from checkpoint %d (of %v) handed out checkpoint ids %v again (err %v)", sum.Restored, used, reused, err)
	}
	if sum.Restored != id1 {
		t.Fatalf("restored %d, want %d", sum.Restored, id1)
	}
	spSameMultiset(t, "cancelled during a checkpoint + restore latest", sink.Results(), spWant(n))
}

// spDamage damages checkpoint dir: its metadata or one of its state files.
func spDamage(t *testing.T, dir, how string) {
	t.Helper()
	switch how {
	case "flipped metadata byte":
		p := filepath.Join(dir, storage.MetadataName)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x5a
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	case "truncated state file":
		files, _ := filepath.Glob(filepath.Join(dir, "count-*.keyed"))
		if len(files) == 0 {
			t.Fatalf("no state file in %s", dir)
		}
		fi, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(files[0], fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown damage %q", how)
	}
}

// TestDamagedCheckpointFallsBackToPrevious retains two checkpoints, damages
// the newest, and restores "latest": the previous one is restored. The two
// checkpoints cover the same records (the gate is closed between them), so
// the output stays exactly-once across both runs.
func TestDamagedCheckpointFallsBackToPrevious(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"flipped metadata byte", "truncated state file"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := spCtx(t)
			const n = 4000
			root := t.TempDir()
			sink := collect.Transactional[string]()
			allow := new(atomic.Int64)
			allow.Store(1000)
			opts := weir.Options{Parallelism: 2, JobID: "damaged"}
			opts.Checkpointing = weir.CheckpointOptions{Storage: "file://" + root, Retained: 2, RetainOnCancel: true}
			var tap1 atomic.Int64
			c, trigger := spStartGated(t, ctx, opts, spGate{n: n, allow: allow}, sink, &tap1, &spCounter{})
			spWait(t, "1000 records", 10*time.Second, func() bool { return tap1.Load() == 1000 })
			first := trigger()
			allow.Store(2000)
			spWait(t, "2000 records", 10*time.Second, func() bool { return tap1.Load() == 2000 })
			prev, newest := trigger(), trigger()
			spWait(t, "the commits", 10*time.Second, func() bool { return sink.Len() == 2000 })
			c.Cancel()
			if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v, want context.Canceled", err)
			}
			jobDir := filepath.Join(root, "damaged")
			dirs := spCheckpointDirs(t, jobDir)
			if !dirs[prev] || !dirs[newest] || len(dirs) != 2 {
				t.Fatalf("retained %v, want %d and %d (not %d)", dirs, prev, newest, first)
			}
			spDamage(t, filepath.Join(jobDir, fmt.Sprint("chk-", newest)), how)

			// The transactional collect sink cannot undo commits: the
			// restore of a checkpoint older than one that completed is
			// refused, naming how many checkpoints' output may repeat.
			opts.Restore = "latest"
			var tap0 atomic.Int64
			env := weir.NewEnvironment(opts)
			spBuild(env, spGate{n: n, allow: new(atomic.Int64)}, 1, sink, &tap0)
			refused, err := env.ExecuteAsync(ctx, "damaged")
			if err != nil {
				t.Fatal(err)
			}
			if err := spWaitJob(t, refused, 10*time.Second); err == nil || !strings.Contains(err.Error(), "cannot undo what it committed, and 1 checkpoint(s)") || !strings.Contains(err.Error(), "AllowRepeatedOutput") {
				t.Fatalf("restore past a damaged checkpoint with a sink that cannot roll back: %v; want a refusal naming AllowRepeatedOutput", err)
			}
			if got := len(sink.Results()); got != 2000 || tap0.Load() != 0 {
				t.Fatalf("the refused restore changed the output (%d records, want 2000) or ran (%d records)", got, tap0.Load())
			}
			// The gate was closed between the two checkpoints: nothing
			// repeats, and the user may say so.
			opts.AllowRepeatedOutput = true
			var tap2 atomic.Int64
			allow2 := new(atomic.Int64)
			allow2.Store(n)
			c, _ = spStartGated(t, ctx, opts, spGate{n: n, allow: allow2}, sink, &tap2, &spCounter{})
			if err := spWaitJob(t, c, 10*time.Second); err != nil {
				t.Fatalf("restore past a damaged checkpoint: %v", err)
			}
			sum, hist := c.Checkpoints()
			if sum.Restored != prev || !strings.HasSuffix(sum.RestorePath, fmt.Sprint("chk-", prev)) {
				t.Fatalf("restored %d from %q, want %d (the newest, %d, is damaged)", sum.Restored, sum.RestorePath, prev, newest)
			}
			if len(hist) == 0 || hist[0].ID <= newest {
				t.Fatalf("the restored run's first checkpoint is %v, want an id above %d", hist, newest)
			}
			spSameMultiset(t, "restored past a damaged checkpoint", sink.Results(), spWant(n))
		})
	}
}

// TestRestoreFromNonCheckpointFails: Restore naming something that is not a
// checkpoint or savepoint fails Execute, saying so.
func TestRestoreFromNonCheckpointFails(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, restore := range []string{"/not/a/checkpoint", empty, file, "ftp://host/x"} {
		opts := weir.Options{Parallelism: 1, JobID: "bad-restore", Restore: restore}
		env := weir.NewEnvironment(opts)
		var tap atomic.Int64
		sink := collect.Transactional[string]()
		spBuild(env, spIndexes(100, 0), 1, sink, &tap)
		err := env.Execute(spCtx(t), "bad-restore")
		if err == nil || !strings.Contains(err.Error(), "is not a weir checkpoint or savepoint") {
			t.Errorf("Restore %q: Execute = %v, want an error saying it is not a weir checkpoint or savepoint", restore, err)
		}
		if tap.Load() != 0 || sink.Len() != 0 {
			t.Errorf("Restore %q: the job ran (%d records) although it cannot restore", restore, tap.Load())
		}
	}
}

// TestInvalidCheckpointOptions: each invalid option fails Execute with an
// error naming the field.
func TestInvalidCheckpointOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		set  func(o *weir.Options)
		want string
	}{
		{func(o *weir.Options) { o.Checkpointing.Interval = -time.Second }, "Options.Checkpointing.Interval"},
		{func(o *weir.Options) { o.Checkpointing.Interval = time.Microsecond }, "Options.Checkpointing.Interval"},
		{func(o *weir.Options) { o.Checkpointing.Timeout = time.Nanosecond }, "Options.Checkpointing.Timeout"},
		{func(o *weir.Options) { o.Checkpointing.MinPause = -1 }, "Options.Checkpointing.MinPause"},
		{func(o *weir.Options) { o.Checkpointing.MaxConcurrent = -1 }, "Options.Checkpointing.MaxConcurrent"},
		{func(o *weir.Options) { o.Checkpointing.Retained = -2 }, "Options.Checkpointing.Retained"},
		{func(o *weir.Options) { o.Checkpointing.TolerableFailures = -5 }, "Options.Checkpointing.TolerableFailures"},
		{func(o *weir.Options) { o.Checkpointing.EveryNRecords = -1 }, "Options.Checkpointing.EveryNRecords"},
		{func(o *weir.Options) { o.Checkpointing.Mode = 7 }, "Options.Checkpointing.Mode"},
		{func(o *weir.Options) { o.Restart = "bogus" }, "Options.Restart"},
		{func(o *weir.Options) { o.Checkpointing.Storage = "ftp://x" }, "Options.Checkpointing.Storage"},
	}
	for _, tt := range tests {
		opts := weir.Options{Parallelism: 1}
		tt.set(&opts)
		env := weir.NewEnvironment(opts)
		var tap atomic.Int64
		spBuild(env, spIndexes(10, 0), 1, collect.New[string](), &tap)
		err := env.Execute(spCtx(t), "invalid")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Execute = %v, want an error naming %s", tt.want, err, tt.want)
		}
		if tap.Load() != 0 {
			t.Errorf("%s: the job ran with invalid options", tt.want)
		}
	}
}

// TestAsyncSnapshotDoesNotBlockProcessing makes the keyed state files of a
// checkpoint take 2 s to write: records keep flowing through the keyed
// operator meanwhile, and the checkpoint completes afterwards.
func TestAsyncSnapshotDoesNotBlockProcessing(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const slowWrite = 2 * time.Second
	var tap atomic.Int64
	type window struct{ start, end int64 }
	windows := make(chan window, 8)
	var slow atomic.Bool
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	faults := storage.NewFaults(1)
	err := faults.Add(storage.Rule{Ops: storage.OpCreate | storage.OpWrite, Path: "*.keyed", Delay: func(op storage.Op, _ string) {
		if op != storage.OpCreate || !slow.Load() {
			return
		}
		w := window{start: tap.Load()}
		select {
		case <-time.After(slowWrite):
		case <-done:
		}
		w.end = tap.Load()
		windows <- w
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := weir.Options{Parallelism: 2, JobID: "async"}
	weir.SetCheckpointStore(&opts, storage.WithFaults(storage.NewMemoryStore(), faults))
	env := weir.NewEnvironment(opts)
	spBuild(env, spIndexes(-1, 5000), 1, collect.New[string](), &tap)
	c, err := env.ExecuteAsync(ctx, "async")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Cancel()
		spWaitJob(t, c, 10*time.Second)
	}()
	spWait(t, "records", 10*time.Second, func() bool { return tap.Load() >= 500 })
	slow.Store(true)
	type result struct {
		id  int64
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	start := time.Now()
	go func() {
		id, err := c.TriggerCheckpoint(ctx)
		res <- result{id, err, time.Now()}
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(15 * time.Second):
		t.Fatal("the checkpoint did not complete")
	}
	if r.err != nil {
		t.Fatalf("checkpoint with slow state writes: %v", r.err)
	}
	if took := r.at.Sub(start); took < slowWrite {
		t.Fatalf("the checkpoint completed after %v, before its slow state writes (%v) ended", took, slowWrite)
	}
	for range 2 { // one state file per keyed subtask
		w := <-windows
		if flowed := w.end - w.start; flowed < 1000 {
			t.Fatalf("only %d records went through the keyed operator during a %v state write: processing waited for the snapshot", flowed, slowWrite)
		}
	}
	st, ok := spStats(c, r.id)
	if !ok || st.Status != "COMPLETED" {
		t.Fatalf("checkpoint %d: %+v", r.id, st)
	}
	var keyedTasks int
	for _, s := range st.Subtasks {
		if s.Async >= slowWrite {
			keyedTasks++
			if s.Sync >= slowWrite/4 {
				t.Errorf("task %s: synchronous part took %v: the slow write was not asynchronous", s.Task, s.Sync)
			}
		}
	}
	if keyedTasks != 2 {
		t.Fatalf("checkpoint %d: %d tasks report an asynchronous part >= %v, want the 2 keyed ones: %+v", r.id, keyedTasks, slowWrite, st.Subtasks)
	}
}

// spStats returns the statistics of checkpoint id.
func spStats(c *weir.JobClient, id int64) (weir.CheckpointStats, bool) {
	_, hist := c.Checkpoints()
	for _, h := range hist {
		if h.ID == id {
			return h, true
		}
	}
	return weir.CheckpointStats{}, false
}

// spCheckSummary checks that the summary counts agree with the history.
func spCheckSummary(t *testing.T, sum weir.CheckpointSummary, hist []weir.CheckpointStats) {
	t.Helper()
	var completed, failed, inProgress int
	var latest int64
	for _, h := range hist {
		switch h.Status {
		case "COMPLETED":
			completed++
			if !h.Savepoint {
				latest = max(latest, h.ID)
			}
		case "FAILED":
			failed++
		case "IN_PROGRESS":
			inProgress++
		default:
			t.Errorf("checkpoint %d: status %q", h.ID, h.Status)
		}
	}
	if sum.Completed != completed || sum.Failed != failed || sum.InProgress != inProgress || sum.LatestCompleted != latest {
		t.Errorf("summary %+v disagrees with the history: %d completed, %d failed, %d in progress, latest %d",
			sum, completed, failed, inProgress, latest)
	}
}

// TestCheckpointStatistics checks the figures of completed checkpoints of a
// keyed job on file storage, and that the summary counts agree.
func TestCheckpointStatistics(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const par = 2
	opts := weir.Options{Parallelism: par, JobID: "stats"}
	opts.Checkpointing = weir.CheckpointOptions{Interval: 10 * time.Millisecond, Storage: "file://" + t.TempDir()}
	var tap atomic.Int64
	env := weir.NewEnvironment(opts)
	spBuild(env, spIndexes(-1, 5000), 0, collect.Transactional[string](), &tap)
	c, err := env.ExecuteAsync(ctx, "stats")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "4 checkpoints", 10*time.Second, func() bool { s, _ := c.Checkpoints(); return s.Completed >= 4 })
	manual, err := c.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum, hist := c.Checkpoints()
	c.Cancel()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v", err)
	}
	spCheckSummary(t, sum, hist)
	if sum.Failed != 0 || sum.Completed < 5 {
		t.Fatalf("summary %+v: want >= 5 completed, none failed", sum)
	}
	if sum.LatestCompleted < manual {
		t.Fatalf("latest completed %d, but %d completed", sum.LatestCompleted, manual)
	}
	// Tasks: the sources, and the keyed operator chained with tap and sink.
	const tasks = 2 * par
	for _, h := range hist {
		if h.Status != "COMPLETED" {
			continue
		}
		if h.Savepoint || h.Duration <= 0 || h.StateSize <= 0 || h.CheckpointedSize <= 0 ||
			h.EndTime.Before(h.TriggerTime) || h.EndTime.Sub(h.TriggerTime) != h.Duration ||
			h.NumTasks != tasks || len(h.Subtasks) != tasks || !strings.Contains(h.Path, fmt.Sprint("chk-", h.ID)) {
			t.Fatalf("checkpoint %d: %+v", h.ID, h)
		}
		seen := map[string]bool{}
		var taskSizes int64
		for _, s := range h.Subtasks {
			if seen[s.Task] {
				t.Fatalf("checkpoint %d: task %s acknowledged twice", h.ID, s.Task)
			}
			seen[s.Task] = true
			if s.Sync <= 0 || s.Async <= 0 || s.AckTime.Before(h.TriggerTime) || s.AckTime.After(h.EndTime.Add(time.Millisecond)) {
				t.Fatalf("checkpoint %d task %s: sync %v async %v ack %v (trigger %v, end %v)", h.ID, s.Task, s.Sync, s.Async, s.AckTime, h.TriggerTime, h.EndTime)
			}
			taskSizes += s.StateSize
		}
		if taskSizes != h.StateSize {
			t.Fatalf("checkpoint %d: state size %d, its tasks report %d", h.ID, h.StateSize, taskSizes)
		}
	}
}

// TestCheckpointStatsBoundedJobEndsWithoutFailedCheckpoints runs a bounded
// job with periodic checkpoints to its end, its final checkpoint slower
// than the interval: no checkpoint may start once the final one completed
// (the tasks are finishing), so none fails and the job ends cleanly. The
// restart strategy is "none" so that a failure at the end shows at once
// (with the default, such a job fails and restarts forever).
func TestCheckpointStatsBoundedJobEndsWithoutFailedCheckpoints(t *testing.T) {
	t.Parallel()
	const n = 3000
	opts := weir.Options{Parallelism: 2, JobID: "final", Restart: "none"}
	opts.Checkpointing = weir.CheckpointOptions{Interval: 2 * time.Millisecond}
	var tap atomic.Int64
	counter := &spCounter{onSnapshot: func(int64) {
		if tap.Load() == n { // the final checkpoint, or one just before it
			time.Sleep(20 * time.Millisecond)
		}
	}}
	sink := collect.Transactional[string]()
	env := weir.NewEnvironment(opts)
	spBuildWith(env, spIndexes(n, 10000), 1, sink, &tap, counter)
	c, err := env.ExecuteAsync(spCtx(t), "final")
	if err != nil {
		t.Fatal(err)
	}
	err = spWaitJob(t, c, 20*time.Second)
	sum, hist := c.Checkpoints()
	if err != nil {
		var last []string
		for _, h := range hist[max(0, len(hist)-3):] {
			last = append(last, fmt.Sprintf("%d: %s %s", h.ID, h.Status, h.FailureReason))
		}
		t.Fatalf("BUG: a bounded job with periodic checkpoints failed at its end: %v; last checkpoints %v", err, last)
	}
	spCheckSummary(t, sum, hist)
	var failed []string
	for _, h := range hist {
		if h.Status != "COMPLETED" {
			failed = append(failed, fmt.Sprintf("%d: %s %s", h.ID, h.Status, h.FailureReason))
		}
	}
	if len(failed) > 0 || sum.Restarts != 0 {
		t.Errorf("BUG: a bounded job that ended normally has checkpoints %v not completed, %d restarts", failed, sum.Restarts)
	}
	spSameMultiset(t, "bounded job", sink.Results(), spWant(n))
}

// TestEveryNRecordsAndManualTrigger: with no interval, checkpoints come
// every 1000 source records; a manual trigger gets an id above all before.
func TestEveryNRecordsAndManualTrigger(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 10000
	opts := weir.Options{Parallelism: 2, JobID: "every-n"}
	opts.Checkpointing = weir.CheckpointOptions{EveryNRecords: 1000}
	sink := collect.Transactional[string]()
	var tap atomic.Int64
	env := weir.NewEnvironment(opts)
	spBuild(env, spIndexes(n, 12000), 1, sink, &tap)
	c, err := env.ExecuteAsync(ctx, "every-n")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "2 checkpoints", 10*time.Second, func() bool { s, _ := c.Checkpoints(); return s.Completed >= 2 })
	_, before := c.Checkpoints()
	id, err := c.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatalf("manual checkpoint on a running job: %v", err)
	}
	for _, h := range before {
		if h.ID >= id {
			t.Fatalf("manual checkpoint got id %d, not above checkpoint %d taken before", id, h.ID)
		}
	}
	if st, ok := spStats(c, id); !ok || st.Status != "COMPLETED" {
		t.Fatalf("manual checkpoint %d: %+v", id, st)
	}
	if err := spWaitJob(t, c, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	sum, hist := c.Checkpoints()
	spCheckSummary(t, sum, hist)
	// 10,000 records: up to 10 by count, one manual, one final. Records
	// read while a checkpoint is in progress count for none (the count
	// restarts when the next one starts), so slow checkpoints mean fewer.
	if sum.Completed < 4 || sum.Restarts != 0 {
		t.Fatalf("%d checkpoints completed (%d restarts) for %d records every 1000", sum.Completed, sum.Restarts, n)
	}
	spSameMultiset(t, "checkpoints every 1000 records", sink.Results(), spWant(n))
}

// spStartGated starts the shared job (spBuildWith, a source of parallelism
// 1) as opts.JobID and returns its client and a function that triggers a
// checkpoint and returns its id.
func spStartGated(t *testing.T, ctx context.Context, opts weir.Options, src spGate, sink connector.Sink[string], tap *atomic.Int64, counter *spCounter) (*weir.JobClient, func() int64) {
	t.Helper()
	env := weir.NewEnvironment(opts)
	spBuildWith(env, src, 1, sink, tap, counter)
	c, err := env.ExecuteAsync(ctx, opts.JobID)
	if err != nil {
		t.Fatal(err)
	}
	return c, func() int64 {
		t.Helper()
		id, err := c.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
}

// TestRestartSkipsCheckpointThatFailsToRestore: a restart after an attempt
// that completed checkpoints checks the restart point shallowly, so a state
// file damaged without a change of size is found only when the restore
// reads it. That attempt fails; the next restart checks deeply, skips the
// damaged checkpoint and restores the one before, instead of failing on the
// same checkpoint until the restart strategy gives up. The two newest
// checkpoints cover the same records, so the output stays exactly-once.
func TestRestartSkipsCheckpointThatFailsToRestore(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n, failAt = 4000, 2500
	root := t.TempDir()
	sink := collect.Transactional[string]()
	allow := new(atomic.Int64)
	allow.Store(1000)
	// The two newest checkpoints cover the same records: going back to the
	// older repeats nothing, which the transactional collect sink (it
	// cannot roll back) must be told.
	opts := weir.Options{Parallelism: 2, JobID: "restartdamaged", Restart: "fixed-delay:attempts=5,delay=10ms", AllowRepeatedOutput: true}
	opts.Checkpointing = weir.CheckpointOptions{Storage: "file://" + root, Retained: 2}
	var tap atomic.Int64
	var failed atomic.Bool
	counter := &spCounter{onElement: func(i int64) error {
		if i == failAt && failed.CompareAndSwap(false, true) {
			return errors.New("injected failure")
		}
		return nil
	}}
	c, trigger := spStartGated(t, ctx, opts, spGate{n: n, allow: allow}, sink, &tap, counter)
	spWait(t, "1000 records", 10*time.Second, func() bool { return tap.Load() == 1000 })
	trigger()
	allow.Store(2000)
	spWait(t, "2000 records", 10*time.Second, func() bool { return tap.Load() == 2000 })
	prev, newest := trigger(), trigger()
	spWait(t, "the commits", 10*time.Second, func() bool { return sink.Len() == 2000 })

	// Flip a byte in the middle of one of the newest checkpoint's keyed
	// state files: same size, wrong checksum.
	files, _ := filepath.Glob(filepath.Join(root, "restartdamaged", fmt.Sprint("chk-", newest), "count-*.keyed"))
	if len(files) == 0 {
		t.Fatalf("no keyed state file in chk-%d", newest)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	allow.Store(n) // record failAt fails the attempt
	if err := spWaitJob(t, c, 20*time.Second); err != nil {
		t.Fatalf("the job did not get past the damaged checkpoint: %v", err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure did not happen")
	}
	if sum, _ := c.Checkpoints(); sum.Restored != prev {
		t.Fatalf("restored %d, want %d (the newest, %d, is damaged)", sum.Restored, prev, newest)
	}
	spSameMultiset(t, "restarted past a damaged checkpoint", sink.Results(), spWant(n))
}
