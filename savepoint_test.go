package weir_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// TestSavepointIsSelfContainedAndRelocatable takes a savepoint of a running
// unbounded job, moves the savepoint directory elsewhere (deleting the
// original), and resumes from the copy: the committed output of both runs is
// exactly the output of a prefix of the indexes.
func TestSavepointIsSelfContainedAndRelocatable(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	sink := collect.Transactional[string]()
	src := spIndexes(-1, 4000)

	// Run 1: no checkpoints, so nothing is committed but what the savepoint
	// pre-committed; the savepoint does not commit (only stop-with-savepoint
	// does, as in Flink).
	var tap1 atomic.Int64
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, JobID: "relocate"})
	spBuild(env, src, 1, sink, &tap1)
	c, err := env.ExecuteAsync(ctx, "relocate")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "records before the savepoint", 10*time.Second, func() bool { return tap1.Load() >= 300 })
	target := t.TempDir()
	sp, err := c.TriggerSavepoint(ctx, target)
	if err != nil {
		t.Fatalf("TriggerSavepoint: %v", err)
	}
	dir := spFilePath(t, sp)
	if filepath.Dir(dir) != target || !strings.HasPrefix(filepath.Base(dir), "savepoint-") {
		t.Fatalf("savepoint %s is not a savepoint-… directory of %s", dir, target)
	}
	md := spReadMetadata(t, dir)
	if md.Kind != checkpoint.KindSavepoint || md.JobID != "relocate" {
		t.Fatalf("savepoint metadata: kind %v job %q", md.Kind, md.JobID)
	}
	pos := spSourcePositions(t, md)
	if len(pos) != 1 || pos[0] < 300 {
		t.Fatalf("savepoint source positions %v, want one position >= 300", pos)
	}
	count := spOperator(md, "count")
	if count == nil || len(count.Subtasks) != 2 {
		t.Fatalf("savepoint lacks the keyed state of both subtasks of count: %+v", count)
	}
	for _, st := range count.Subtasks {
		for _, h := range st.Keyed {
			if h.Inline == nil {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(h.Path))); err != nil || filepath.IsAbs(h.Path) || strings.Contains(h.Path, "..") {
					t.Fatalf("keyed state handle path %q does not name a file inside the savepoint: %v", h.Path, err)
				}
			}
		}
	}
	if out := spOperator(md, "out"); out == nil {
		t.Fatal("savepoint lacks the sink's pre-committed transactions")
	}
	// Let records flow past the savepoint: they are not committed and must
	// be replayed by the resumed job.
	at := tap1.Load()
	spWait(t, "records after the savepoint", 10*time.Second, func() bool { return tap1.Load() >= at+200 })
	c.Cancel()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: Wait = %v, want context.Canceled", err)
	}
	if n := sink.Len(); n != 0 {
		t.Fatalf("run 1 committed %d records without a completed checkpoint", n)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.MetadataName)); err != nil {
		t.Fatalf("weir deleted the savepoint when the job was cancelled: %v", err)
	}

	// Move the savepoint: copy it somewhere else and delete the original.
	moved := filepath.Join(t.TempDir(), "elsewhere", "my-savepoint")
	if err := os.CopyFS(moved, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	// Run 2 resumes from the copy and is stopped with a savepoint, which
	// commits everything before its position.
	var tap2 atomic.Int64
	opts := weir.Options{Parallelism: 2, JobID: "relocate", Restore: moved}
	env = weir.NewEnvironment(opts)
	spBuild(env, src, 1, sink, &tap2)
	c, err = env.ExecuteAsync(ctx, "relocate")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "records after the restore", 10*time.Second, func() bool { return tap2.Load() >= 300 })
	sp2, err := c.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("StopWithSavepoint after restore: %v", err)
	}
	if err := spWaitJob(t, c, 10*time.Second); err != nil {
		t.Fatalf("stopped job: Wait = %v, want nil", err)
	}
	sum, _ := c.Checkpoints()
	if sum.Restored != md.ID || !strings.Contains(sum.RestorePath, "my-savepoint") || sum.Restarts != 0 {
		t.Fatalf("summary %+v: want restored %d from the moved savepoint, no restart", sum, md.ID)
	}
	if _, err := os.Stat(filepath.Join(moved, storage.MetadataName)); err != nil {
		t.Fatalf("the savepoint restored from was deleted: %v", err)
	}
	md2 := spReadMetadata(t, spFilePath(t, sp2))
	if md2.ID <= md.ID {
		t.Fatalf("savepoint after restoring savepoint %d has id %d: ids must continue above it", md.ID, md2.ID)
	}
	pos2 := spSourcePositions(t, md2)
	if len(pos2) != 1 || pos2[0] <= pos[0] {
		t.Fatalf("second savepoint at position %v, not past the first's %d", pos2, pos[0])
	}
	// Source parallelism 1: the savepoint of run 1 (committed by the
	// restore) and the stop of run 2 commit exactly the indexes before the
	// second savepoint's position.
	spSameMultiset(t, "savepoint + resumed run", sink.Results(), spWant(pos2[0]))
}

// TestSavepointsAreNeverDeletedCheckpointsAreRetained runs periodic
// checkpoints with Retained 2 and takes savepoints in between: only the two
// newest checkpoints stay; savepoints outlive the job whether or not
// checkpoints are kept on cancel.
func TestSavepointsAreNeverDeletedCheckpointsAreRetained(t *testing.T) {
	t.Parallel()
	for _, retainOnCancel := range []bool{true, false} {
		t.Run(fmt.Sprint("RetainOnCancel=", retainOnCancel), func(t *testing.T) {
			t.Parallel()
			ctx := spCtx(t)
			ckRoot, spRoot := t.TempDir(), t.TempDir()
			opts := weir.Options{Parallelism: 2, JobID: "retention"}
			opts.Checkpointing = weir.CheckpointOptions{
				Interval: 5 * time.Millisecond, Retained: 2, Storage: "file://" + ckRoot,
				SavepointDir: spRoot, RetainOnCancel: retainOnCancel,
			}
			var tap atomic.Int64
			env := weir.NewEnvironment(opts)
			spBuild(env, spIndexes(-1, 4000), 1, collect.New[string](), &tap)
			c, err := env.ExecuteAsync(ctx, "retention")
			if err != nil {
				t.Fatal(err)
			}
			completed := func(n int) func() bool {
				return func() bool { s, _ := c.Checkpoints(); return s.Completed >= n }
			}
			spWait(t, "3 checkpoints", 10*time.Second, completed(3))
			sp1, err := c.TriggerSavepoint(ctx, "") // the default directory
			if err != nil {
				t.Fatalf("TriggerSavepoint into the default directory: %v", err)
			}
			spWait(t, "6 checkpoints", 10*time.Second, completed(6))
			sp2, err := c.TriggerSavepoint(ctx, spRoot)
			if err != nil {
				t.Fatal(err)
			}
			spWait(t, "10 checkpoints", 10*time.Second, completed(10))
			c.Cancel()
			if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v, want context.Canceled", err)
			}
			sum, hist := c.Checkpoints()
			var done []int64
			for _, h := range hist {
				if h.Status == "COMPLETED" && !h.Savepoint {
					done = append(done, h.ID)
				}
			}
			if len(done) < 4 || sum.LatestCompleted != done[len(done)-1] {
				t.Fatalf("completed checkpoints %v, latest %d", done, sum.LatestCompleted)
			}
			dirs := spCheckpointDirs(t, filepath.Join(ckRoot, "retention"))
			var complete []int64
			for id, hasMeta := range dirs {
				if hasMeta {
					complete = append(complete, id)
				}
			}
			slices.Sort(complete)
			if retainOnCancel {
				if want := done[len(done)-2:]; !slices.Equal(complete, want) {
					t.Fatalf("checkpoints on disk after cancel: %v (all dirs %v), want the 2 newest %v of %v", complete, dirs, want, done)
				}
			} else if len(dirs) != 0 {
				t.Fatalf("cancel with RetainOnCancel false left checkpoint directories %v (id: has _metadata)", dirs)
			}
			for _, sp := range []string{sp1, sp2} {
				dir := spFilePath(t, sp)
				if filepath.Dir(dir) != spRoot {
					t.Fatalf("savepoint %s not in %s", dir, spRoot)
				}
				if md := spReadMetadata(t, dir); md.Kind != checkpoint.KindSavepoint {
					t.Fatalf("%s: kind %v", dir, md.Kind)
				}
			}
		})
	}
}

// spRun describes one segment of a chain of runs of the shared job.
type spRun struct {
	par, srcPar int // parallelism of the job and of the source (0: par)
	src         connector.Source[int64]
	sink        connector.Sink[string]
	restore     string        // savepoint to start from, none if empty
	stopAfter   int64         // stop with a savepoint once the tap saw this many records; 0: run to the end
	interval    time.Duration // periodic checkpoints
	counter     *spCounter    // nil: a plain one
	beforeStop  func()        // runs just before StopWithSavepoint
	afterStop   func()        // runs when StopWithSavepoint returned
}

// spRunResult is what a segment leaves.
type spRunResult struct {
	savepoint string // the stop's savepoint path, "" for a run to the end
	summary   weir.CheckpointSummary
	history   []weir.CheckpointStats
}

// run runs the segment and checks that it ends without error.
func (r spRun) run(t *testing.T, ctx context.Context) spRunResult {
	t.Helper()
	var tap atomic.Int64
	opts := weir.Options{Parallelism: r.par, JobID: "stop", Restore: r.restore}
	opts.Checkpointing.Interval = r.interval
	env := weir.NewEnvironment(opts)
	counter := r.counter
	if counter == nil {
		counter = &spCounter{}
	}
	spBuildWith(env, r.src, r.srcPar, r.sink, &tap, counter)
	c, err := env.ExecuteAsync(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	var res spRunResult
	if r.stopAfter == 0 {
		if err := spWaitJob(t, c, 20*time.Second); err != nil {
			t.Fatalf("run at parallelism %d from %s: %v", r.par, r.restore, err)
		}
		res.summary, res.history = c.Checkpoints()
		return res
	}
	spWait(t, fmt.Sprint(r.stopAfter, " records"), 10*time.Second, func() bool { return tap.Load() >= r.stopAfter })
	if r.beforeStop != nil {
		r.beforeStop()
	}
	res.savepoint, err = c.StopWithSavepoint(ctx, t.TempDir())
	if r.afterStop != nil {
		r.afterStop()
	}
	if err != nil {
		t.Fatalf("StopWithSavepoint at parallelism %d: %v", r.par, err)
	}
	if err := spWaitJob(t, c, 10*time.Second); err != nil {
		t.Fatalf("job stopped with a savepoint: Wait = %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(spFilePath(t, res.savepoint), storage.MetadataName)); err != nil {
		t.Fatalf("savepoint gone after stop: %v", err)
	}
	res.summary, res.history = c.Checkpoints()
	return res
}

// TestStopWithSavepointResumesExactly stops a job with a savepoint midway
// through a bounded input and resumes it in a new Environment: the stopped
// run commits exactly what precedes the savepoint, and the two runs
// together commit every record exactly once.
//
// With periodic checkpoints, the savepoint is made slower than the interval
// (a snapshot hook sleeps), so that a periodic checkpoint is due when it
// completes: none may start once the stop's savepoint completed, since the
// tasks are about to stop.
func TestStopWithSavepointResumesExactly(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{0, 2 * time.Millisecond} {
		t.Run(fmt.Sprint("interval=", interval), func(t *testing.T) {
			t.Parallel()
			ctx := spCtx(t)
			const n = 6000
			src := spIndexes(n, 8000)
			sink := collect.Transactional[string]()
			var slow atomic.Bool
			counter := &spCounter{onSnapshot: func(int64) {
				if slow.Load() {
					time.Sleep(20 * time.Millisecond)
				}
			}}
			r1 := spRun{par: 2, srcPar: 1, src: src, sink: sink, stopAfter: 1500, interval: interval,
				counter: counter, beforeStop: func() { slow.Store(true) }, afterStop: func() { slow.Store(false) }}.run(t, ctx)
			md := spReadMetadata(t, spFilePath(t, r1.savepoint))
			var after []string
			for _, h := range r1.history {
				if h.ID > md.ID {
					after = append(after, fmt.Sprintf("%d (%s %s)", h.ID, h.Status, h.FailureReason))
				}
			}
			if len(after) > 0 {
				t.Errorf("BUG: %d checkpoint(s) were triggered after the stop's savepoint %d completed, first %v", len(after), md.ID, after[:min(2, len(after))])
			}
			if r1.summary.Restarts != 0 {
				t.Errorf("BUG: the job stopped with savepoint %d was restarted %d time(s), from %q, and ran on", md.ID, r1.summary.Restarts, r1.summary.RestorePath)
			}
			// The stop commits what the savepoint pre-committed: exactly the
			// records before the savepoint's source position.
			if pos := spSourcePositions(t, md); len(pos) != 1 || pos[0] >= n {
				t.Errorf("savepoint source positions %v: not stopped midway through %d records", pos, n)
			} else {
				spSameMultisetErr(t, "committed by the stopped run", sink.Results(), spWant(pos[0]))
			}
			if t.Failed() {
				t.FailNow()
			}
			r2 := spRun{par: 2, srcPar: 1, src: src, sink: sink, restore: r1.savepoint, interval: interval}.run(t, ctx)
			if r2.summary.Restored != md.ID || r2.summary.Restarts != 0 {
				t.Fatalf("run 2 restored %d (want %d) with %d restarts (want none)", r2.summary.Restored, md.ID, r2.summary.Restarts)
			}
			spSameMultiset(t, "stop with savepoint + resume", sink.Results(), spWant(n))
		})
	}
}

// TestRescaleThroughSavepoints moves keyed state between parallelisms
// 4 -> 2 -> 3 through stop-with-savepoint; the sources (same parallelism)
// redistribute their splits too.
func TestRescaleThroughSavepoints(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 9000
	src := spIndexes(n, 12000)
	sink := collect.Transactional[string]()
	r1 := spRun{par: 4, src: src, sink: sink, stopAfter: 2000}.run(t, ctx)
	md1 := spReadMetadata(t, spFilePath(t, r1.savepoint))
	if p := spOperator(md1, "count").Parallelism; p != 4 {
		t.Fatalf("savepoint 1: count at parallelism %d, want 4", p)
	}
	after1 := sink.Len()
	r2 := spRun{par: 2, src: src, sink: sink, restore: r1.savepoint, stopAfter: 2000}.run(t, ctx)
	md2 := spReadMetadata(t, spFilePath(t, r2.savepoint))
	if p := spOperator(md2, "count").Parallelism; p != 2 || r2.summary.Restored != md1.ID {
		t.Fatalf("savepoint 2: count at parallelism %d, want 2; restored %d, want %d", p, r2.summary.Restored, md1.ID)
	}
	if after2 := sink.Len(); after2 <= after1 || after2 >= n {
		t.Fatalf("committed %d then %d of %d: each run should add some and not finish", after1, after2, n)
	}
	r3 := spRun{par: 3, src: src, sink: sink, restore: r2.savepoint}.run(t, ctx)
	if r3.summary.Restored != md2.ID {
		t.Fatalf("run 3 restored %d, want %d", r3.summary.Restored, md2.ID)
	}
	for i, r := range []spRunResult{r1, r2, r3} {
		if r.summary.Restarts != 0 {
			t.Fatalf("run %d restarted %d times", i+1, r.summary.Restarts)
		}
	}
	spSameMultiset(t, "rescaled 4 -> 2 -> 3", sink.Results(), spWant(n))
}

// TestStopWithSavepointUnderBackpressure stops a job whose source is
// blocked sending to a slow keyed operator (small batches, a queue of one):
// the downstream tasks stop, and the source, waiting to send to them, must
// stop too; the job ends without error.
func TestStopWithSavepointUnderBackpressure(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	opts := weir.Options{Parallelism: 2, JobID: "backpressure", BatchSize: 8, QueueSize: 1}
	env := weir.NewEnvironment(opts)
	var tap atomic.Int64
	slow := &spCounter{onElement: func(int64) error { time.Sleep(100 * time.Microsecond); return nil }}
	sink := collect.Transactional[string]()
	spBuildWith(env, datagen.Generator(-1, func(i int64) int64 { return i }), 1, sink, &tap, slow)
	c, err := env.ExecuteAsync(ctx, "backpressure")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "records", 10*time.Second, func() bool { return tap.Load() >= 500 })
	sp, err := c.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("StopWithSavepoint: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		c.Cancel()
		<-c.Done()
		t.Fatalf("BUG: the job stopped with savepoint %s did not end within 5s (a task blocked sending to a stopped task?)", sp)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	md := spReadMetadata(t, spFilePath(t, sp))
	spSameMultiset(t, "committed by the stop", sink.Results(), spWant(spSourcePositions(t, md)[0]))
}
