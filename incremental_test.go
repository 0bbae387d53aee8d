package weir_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
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
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// incRun is one segment of a job with incremental pebble checkpoints in a
// file store: it runs the shared job of savepoint_test.go (spBuild) at
// parallelism par, restoring the latest checkpoint of the job, takes
// checkpoints by hand once the tap saw each of at, and is then cancelled
// with its checkpoints retained (stop false: a run to the end).
type incRun struct {
	par      int
	srcPar   int    // 0: par
	root     string // checkpoint storage directory
	stateDir string
	src      connector.Source[int64]
	sink     connector.Sink[string]
	at       []int64 // checkpoint when the tap saw this many records
	retained int
	restore  string // default "latest"
	local    bool   // LocalRecovery
	// changelog turns on changelog checkpoints, materialized at every
	// checkpoint with a log to cover.
	changelog bool
	// allow, when set, is the source's gate: before waiting for at[i] it
	// is opened to allowAt[i], so that each checkpoint has new records
	// before it.
	allow   *atomic.Int64
	allowAt []int64
	// sinkUID, when set, replaces the sink's uid "out": a run with another
	// sink drops the committed transactions of the restored one.
	sinkUID string
	// mats, when set, counts the background changelog materializations.
	mats *atomic.Int64
}

func (r incRun) options() weir.Options {
	opts := weir.Options{Parallelism: r.par, JobID: "inc", Restore: r.restore, StateBackend: "pebble", LocalStateDir: r.stateDir}
	if opts.Restore == "" {
		opts.Restore = "latest"
	}
	opts.Checkpointing.Storage = r.root
	opts.Checkpointing.Incremental = true
	opts.Checkpointing.LocalRecovery = r.local
	if r.changelog {
		opts.Checkpointing.Changelog = weir.ChangelogOptions{Enabled: true, MaterializationInterval: time.Nanosecond}
	}
	opts.Checkpointing.RetainOnCancel = true
	opts.Checkpointing.Retained = max(r.retained, 1)
	opts.AllowNonRestoredState = r.sinkUID != ""
	if r.mats != nil {
		weir.CountChangelogMaterializations(&opts, r.mats)
	}
	if os.Getenv("WEIR_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

func (r incRun) run(t *testing.T, ctx context.Context) (ids []int64, hist []weir.CheckpointStats) {
	t.Helper()
	var tap atomic.Int64
	env := weir.NewEnvironment(r.options())
	if r.sinkUID == "" {
		spBuild(env, r.src, r.srcPar, r.sink, &tap)
	} else {
		s := env.FromSource("src", r.src).UID("src")
		if r.srcPar > 0 {
			s.Parallelism(r.srcPar)
		}
		s.KeyBy(spKey).Process("count", &spCounter{}).UID("count").
			Map("tap", func(v string) string { tap.Add(1); return v }).UID("tap").
			SinkTo("out", r.sink).UID(r.sinkUID)
	}
	c, err := env.ExecuteAsync(ctx, "inc")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.at) == 0 {
		if err := spWaitJob(t, c, 30*time.Second); err != nil {
			t.Fatalf("run at parallelism %d: %v", r.par, err)
		}
		_, hist = c.Checkpoints()
		return nil, hist
	}
	for i, n := range r.at {
		if r.allow != nil {
			r.allow.Store(r.allowAt[i])
		}
		spWait(t, fmt.Sprint(n, " records"), 20*time.Second, func() bool { return tap.Load() >= n })
		id, err := c.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatalf("checkpoint at parallelism %d: %v", r.par, err)
		}
		ids = append(ids, id)
	}
	c.Cancel()
	<-c.Done()
	_, hist = c.Checkpoints()
	return ids, hist
}

// incMetadata reads the metadata of checkpoint id of job "inc" in root.
func incMetadata(t *testing.T, root string, id int64) *checkpoint.Metadata {
	t.Helper()
	return spReadMetadata(t, filepath.Join(root, "inc", fmt.Sprint("chk-", id)))
}

// incHandles returns the keyed handles of operator "count" in md.
func incHandles(t *testing.T, md *checkpoint.Metadata) []checkpoint.KeyedStateHandle {
	t.Helper()
	op := spOperator(md, "count")
	if op == nil {
		t.Fatalf("checkpoint %d has no state of operator count", md.ID)
	}
	var hs []checkpoint.KeyedStateHandle
	for _, st := range op.Subtasks {
		hs = append(hs, st.Keyed...)
	}
	return hs
}

// incShared lists the files under root/inc/shared, as store names.
func incShared(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "inc", storage.SharedDirName))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, "inc/"+storage.SharedDirName+"/"+e.Name())
	}
	return out
}

// incReferenced returns the shared files the retained checkpoints (those
// with metadata) refer to.
func incReferenced(t *testing.T, root string) (refs []string, ids []int64) {
	t.Helper()
	for id, complete := range spCheckpointDirs(t, filepath.Join(root, "inc")) {
		if !complete {
			continue
		}
		ids = append(ids, id)
		r, err := storage.SharedRefs(fmt.Sprint("inc/chk-", id), incMetadata(t, root, id))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r...)
	}
	slices.Sort(refs)
	slices.Sort(ids)
	return slices.Compact(refs), ids
}

// TestIncrementalCheckpointsRescale runs the keyed count with incremental
// pebble checkpoints at parallelism 4, then 2, then 3, each run restoring
// the previous run's latest (incremental) checkpoint: the committed output
// of the three runs is exactly that of every index once. Checkpoints of one
// run share files, and upload only what is new.
func TestIncrementalCheckpointsRescale(t *testing.T) { incRescale(t, false) }

// TestChangelogCheckpointsRescale is TestIncrementalCheckpointsRescale with
// changelog checkpoints: the handles list log segments (metadata version
// 3), and each restore replays them before keeping its key groups.
func TestChangelogCheckpointsRescale(t *testing.T) { incRescale(t, true) }

func incRescale(t *testing.T, changelog bool) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 6000
	root, stateDir := t.TempDir(), t.TempDir()
	// The gate lets each run read only up to its last checkpoint, so that
	// no run reaches the end early, however slow the machine.
	var allow atomic.Int64
	src := spGate{n: n, allow: &allow}
	sink := collect.Transactional[string]()

	allow.Store(600)
	ids1, hist1 := incRun{par: 4, root: root, stateDir: stateDir, src: src, sink: sink, at: []int64{600, 1000, 1400}, retained: 2, changelog: changelog,
		allow: &allow, allowAt: []int64{600, 1000, 1400}}.run(t, ctx)
	md := incMetadata(t, root, ids1[len(ids1)-1])
	hs := incHandles(t, md)
	if len(hs) != 4 {
		t.Fatalf("checkpoint %d: %d keyed handles, want 4", md.ID, len(hs))
	}
	segments := 0
	for _, h := range hs {
		if !h.Incremental() || h.Base == 0 {
			t.Fatalf("checkpoint %d: handle %+v, want incremental with a base", md.ID, h)
		}
		segments += h.Changelog
	}
	switch {
	case !changelog && (md.Version != 2 || segments != 0):
		t.Errorf("metadata version %d with %d changelog segments, want 2 and none", md.Version, segments)
	case changelog && (md.Version != 3 || segments == 0):
		t.Errorf("metadata version %d with %d changelog segments, want 3 and some: %+v", md.Version, segments, hs)
	}
	for _, h := range hist1 {
		t.Logf("run 1 checkpoint %d: uploaded %d bytes of %d", h.ID, h.CheckpointedSize, h.StateSize)
	}
	after1 := sink.Len()
	allow.Store(2800)
	incRun{par: 2, root: root, stateDir: stateDir, src: src, sink: sink, at: []int64{800, 1400}, retained: 2, changelog: changelog}.run(t, ctx)
	if after2 := sink.Len(); after2 <= after1 || after2 >= n {
		t.Fatalf("committed %d then %d of %d: each run should add some and not finish", after1, after2, n)
	}
	allow.Store(n)
	incRun{par: 3, root: root, stateDir: stateDir, src: src, sink: sink, changelog: changelog}.run(t, ctx)
	spSameMultiset(t, "incremental, rescaled 4 -> 2 -> 3", sink.Results(), spWant(n))
}

// TestIncrementalNeedsPebble: the heap backend takes full snapshots only;
// asking it for incremental ones (or local recovery without them) fails at
// startup, naming the option.
func TestIncrementalNeedsPebble(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*weir.Options)
		want string
	}{
		{"heap", func(o *weir.Options) { o.Checkpointing.Incremental = true }, "Options.Checkpointing.Incremental needs Options.StateBackend \"pebble\""},
		{"local recovery", func(o *weir.Options) { o.StateBackend = "pebble"; o.Checkpointing.LocalRecovery = true },
			"Options.Checkpointing.LocalRecovery needs Options.Checkpointing.Incremental"},
		{"changelog on heap", func(o *weir.Options) { o.Checkpointing.Incremental = true; o.Checkpointing.Changelog.Enabled = true },
			"Options.Checkpointing.Incremental needs Options.StateBackend \"pebble\""},
		{"changelog without incremental", func(o *weir.Options) { o.StateBackend = "pebble"; o.Checkpointing.Changelog.Enabled = true },
			"Options.Checkpointing.Changelog.Enabled needs Options.StateBackend \"pebble\" (now \"pebble\") with Options.Checkpointing.Incremental (now false)"},
		{"changelog with local recovery", func(o *weir.Options) {
			o.StateBackend = "pebble"
			o.Checkpointing.Incremental, o.Checkpointing.LocalRecovery, o.Checkpointing.Changelog.Enabled = true, true, true
		}, "Options.Checkpointing.Changelog.Enabled does not support Options.Checkpointing.LocalRecovery"},
		{"changelog ratio NaN", func(o *weir.Options) {
			o.StateBackend = "pebble"
			o.Checkpointing.Incremental, o.Checkpointing.Changelog.Enabled = true, true
			o.Checkpointing.Changelog.MaterializationLogRatio = math.NaN()
		}, "Options.Checkpointing.Changelog.MaterializationLogRatio is NaN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := weir.Options{Parallelism: 1, LocalStateDir: t.TempDir()}
			tt.set(&opts)
			env := weir.NewEnvironment(opts)
			var tap atomic.Int64
			spBuild(env, spIndexes(10, 0), 0, collect.Transactional[string](), &tap)
			_, err := env.ExecuteAsync(t.Context(), "bad")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ExecuteAsync = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// incMinus returns the multiset want minus drop.
func incMinus(want, drop []string) []string {
	cnt := map[string]int{}
	for _, d := range drop {
		cnt[d]++
	}
	var out []string
	for _, w := range want {
		if cnt[w] > 0 {
			cnt[w]--
			continue
		}
		out = append(out, w)
	}
	return out
}

// incCheckShared fails unless shared/ holds exactly the files the retained
// checkpoints refer to (nothing leaks, nothing referenced is gone).
func incCheckShared(t *testing.T, root, when string) []int64 {
	t.Helper()
	refs, ids := incReferenced(t, root)
	if got := incShared(t, root); !slices.Equal(got, refs) {
		t.Fatalf("%s: shared/ holds %d files, the retained checkpoints %v refer to %d:\nextra %v\nmissing %v",
			when, len(got), ids, len(refs), incMinus(got, refs), incMinus(refs, got))
	}
	if len(refs) == 0 {
		t.Fatalf("%s: no shared files", when)
	}
	return ids
}

// TestIncrementalSharedStateNoLeak takes 8 incremental checkpoints with 3
// retained, then 3 more in a new process restored from the latest: after
// each run shared/ holds exactly the files the retained checkpoints refer
// to, an orphan upload is swept at the restart, and every retained
// checkpoint restores (the restored run commits exactly the records after
// the checkpoint's source position).
func TestIncrementalSharedStateNoLeak(t *testing.T) { incNoLeak(t, false) }

// TestChangelogSharedStateNoLeak is TestIncrementalSharedStateNoLeak with
// changelog checkpoints, a materialization at every checkpoint with a log
// to cover: materializations and log segments that no retained checkpoint
// lists are deleted (by the registry, by the task when it closes with a
// materialization never referred to, by the sweep at a restart), and
// nothing a retained checkpoint lists is.
func TestChangelogSharedStateNoLeak(t *testing.T) { incNoLeak(t, true) }

func incNoLeak(t *testing.T, changelog bool) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 5000
	root, stateDir := t.TempDir(), t.TempDir()
	var allow atomic.Int64
	src := spGate{n: n, allow: &allow}
	sink := collect.Transactional[string]()
	var at []int64
	for i := range 8 {
		at = append(at, int64(150*(i+1)))
	}
	var mats atomic.Int64
	ids, _ := incRun{par: 2, srcPar: 1, root: root, stateDir: stateDir, src: src, sink: sink, at: at, retained: 3, changelog: changelog,
		allow: &allow, allowAt: at, mats: &mats}.run(t, ctx)
	if changelog && mats.Load() == 0 {
		t.Error("no background materialization happened")
	}
	retained := incCheckShared(t, root, "after 8 checkpoints")
	if !slices.Equal(retained, ids[len(ids)-3:]) {
		t.Fatalf("retained checkpoints %v, want the last 3 of %v", retained, ids)
	}

	// Every retained checkpoint restores, into another store.
	var all atomic.Int64
	all.Store(n)
	for _, id := range retained {
		md := incMetadata(t, root, id)
		pos := spSourcePositions(t, md)
		restored := collect.Transactional[string]()
		incRun{par: 3, srcPar: 1, root: t.TempDir(), stateDir: t.TempDir(), src: spGate{n: n, allow: &all}, sink: restored, sinkUID: "other", changelog: changelog,
			restore: filepath.Join(root, "inc", fmt.Sprint("chk-", id))}.run(t, ctx)
		spSameMultiset(t, fmt.Sprint("restored from checkpoint ", id), restored.Results(), incMinus(spWant(n), spWant(pos[0])))
	}

	// A new process: an upload that an earlier process never acknowledged
	// is swept; the registry, rebuilt from metadata, deletes nothing that
	// the retained checkpoints need.
	orphan := filepath.Join(root, "inc", storage.SharedDirName, "count-0-deadbeef-c99-000001.sst")
	if err := os.WriteFile(orphan, []byte("half an upload"), 0o644); err != nil {
		t.Fatal(err)
	}
	allow.Store(1200 + 450)
	ids2, _ := incRun{par: 2, srcPar: 1, root: root, stateDir: stateDir, src: src, sink: sink, at: []int64{150, 300, 450}, retained: 3, changelog: changelog}.run(t, ctx)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the orphan upload survived the restart: %v", err)
	}
	if got := incCheckShared(t, root, "after the restart"); !slices.Equal(got, ids2) {
		t.Fatalf("retained checkpoints after the restart %v, want %v", got, ids2)
	}
	allow.Store(n)
	incRun{par: 2, srcPar: 1, root: root, stateDir: stateDir, src: src, sink: sink, changelog: changelog}.run(t, ctx)
	incCheckShared(t, root, "at the end")
	spSameMultiset(t, "three runs", sink.Results(), spWant(n))
}

// TestIncrementalLocalRecovery fails a task after an incremental checkpoint:
// the restart in the same process restores each subtask from its local copy
// of the checkpoint, without downloading; a local copy that no longer
// matches the metadata (damaged here) is not used, its files are
// downloaded. Either way the output is exactly once.
func TestIncrementalLocalRecovery(t *testing.T) {
	for _, damage := range []bool{false, true} {
		t.Run(fmt.Sprint("damaged=", damage), func(t *testing.T) {
			ctx := spCtx(t)
			const n = 3000
			job := fmt.Sprint("inc-local-", damage)
			stateDir := t.TempDir()
			var mu sync.Mutex
			var restores []weir.IncrementalRestore
			opts := weir.Options{Parallelism: 2, JobID: job, StateBackend: "pebble", LocalStateDir: stateDir,
				Restart: "fixed-delay:attempts=2,delay=0"}
			weir.SetIncrementalRestoreHook(&opts, func(r weir.IncrementalRestore) {
				mu.Lock()
				restores = append(restores, r)
				mu.Unlock()
			})
			opts.Checkpointing.Storage = t.TempDir()
			opts.Checkpointing.Incremental, opts.Checkpointing.LocalRecovery = true, true
			var fail atomic.Bool
			var tap atomic.Int64
			counter := &spCounter{onElement: func(int64) error {
				if fail.CompareAndSwap(true, false) {
					return errors.New("injected failure after the checkpoint")
				}
				return nil
			}}
			sink := collect.Transactional[string]()
			env := weir.NewEnvironment(opts)
			spBuildWith(env, spIndexes(n, 3000), 1, sink, &tap, counter)
			c, err := env.ExecuteAsync(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			spWait(t, "300 records", 10*time.Second, func() bool { return tap.Load() >= 300 })
			id, err := c.TriggerCheckpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if damage {
				// Under this process's own directory: proc-<pid>-<random>.
				procs, _ := filepath.Glob(filepath.Join(stateDir, job, "proc-*"))
				if len(procs) != 1 {
					t.Fatalf("local state directories of the job: %v, want one", procs)
				}
				local := filepath.Join(procs[0], "local", "count-0", fmt.Sprint("chk-", id))
				entries, err := os.ReadDir(local)
				if err != nil {
					t.Fatal(err)
				}
				damaged := false
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), "OPTIONS-") { // a copy, not a link to the live database's file
						f, err := os.OpenFile(filepath.Join(local, e.Name()), os.O_APPEND|os.O_WRONLY, 0)
						if err != nil {
							t.Fatal(err)
						}
						f.WriteString("\n")
						f.Close()
						damaged = true
					}
				}
				if !damaged {
					t.Fatalf("no OPTIONS file in %s: %v", local, entries)
				}
			}
			fail.Store(true)
			if err := spWaitJob(t, c, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			if sum, _ := c.Checkpoints(); sum.Restarts != 1 || sum.Restored != id {
				t.Fatalf("summary %+v: want one restart, from checkpoint %d", sum, id)
			}
			spSameMultiset(t, "output", sink.Results(), spWant(n))
			mu.Lock()
			defer mu.Unlock()
			slices.SortFunc(restores, func(a, b weir.IncrementalRestore) int { return a.Subtask - b.Subtask })
			want := []weir.IncrementalRestore{{Job: job, UID: "count", Subtask: 0, Local: 1}, {Job: job, UID: "count", Subtask: 1, Local: 1}}
			if damage {
				want[0].Local, want[0].Downloaded = 0, 1
			}
			if !slices.Equal(restores, want) {
				t.Fatalf("restores %+v, want %+v", restores, want)
			}
		})
	}
}
