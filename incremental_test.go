package weir_test

import (
	"context"
	"fmt"
	"log/slog"
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
	root     string // checkpoint storage directory
	stateDir string
	src      connector.Source[int64]
	sink     connector.Sink[string]
	at       []int64 // checkpoint when the tap saw this many records
	retained int
	restore  string // default "latest"
	local    bool   // LocalRecovery
}

func (r incRun) options() weir.Options {
	opts := weir.Options{Parallelism: r.par, JobID: "inc", Restore: r.restore, StateBackend: "pebble", LocalStateDir: r.stateDir}
	if opts.Restore == "" {
		opts.Restore = "latest"
	}
	opts.Checkpointing.Storage = r.root
	opts.Checkpointing.Incremental = true
	opts.Checkpointing.LocalRecovery = r.local
	opts.Checkpointing.RetainOnCancel = true
	opts.Checkpointing.Retained = max(r.retained, 1)
	if os.Getenv("WEIR_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

func (r incRun) run(t *testing.T, ctx context.Context) (ids []int64, hist []weir.CheckpointStats) {
	t.Helper()
	var tap atomic.Int64
	env := weir.NewEnvironment(r.options())
	spBuild(env, r.src, 0, r.sink, &tap)
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
	for _, n := range r.at {
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
func TestIncrementalCheckpointsRescale(t *testing.T) {
	t.Parallel()
	ctx := spCtx(t)
	const n = 6000
	root, stateDir := t.TempDir(), t.TempDir()
	src := spIndexes(n, 3000)
	sink := collect.Transactional[string]()

	ids1, hist1 := incRun{par: 4, root: root, stateDir: stateDir, src: src, sink: sink, at: []int64{600, 1000, 1400}, retained: 2}.run(t, ctx)
	md := incMetadata(t, root, ids1[len(ids1)-1])
	hs := incHandles(t, md)
	if len(hs) != 4 {
		t.Fatalf("checkpoint %d: %d keyed handles, want 4", md.ID, len(hs))
	}
	for _, h := range hs {
		if !h.Incremental() || h.Base == 0 {
			t.Fatalf("checkpoint %d: handle %+v, want incremental with a base", md.ID, h)
		}
	}
	if md.Version != 2 {
		t.Errorf("metadata version %d, want 2", md.Version)
	}
	for _, h := range hist1 {
		t.Logf("run 1 checkpoint %d: uploaded %d bytes", h.ID, h.StateSize)
	}
	after1 := sink.Len()
	incRun{par: 2, root: root, stateDir: stateDir, src: src, sink: sink, at: []int64{800, 1400}, retained: 2}.run(t, ctx)
	if after2 := sink.Len(); after2 <= after1 || after2 >= n {
		t.Fatalf("committed %d then %d of %d: each run should add some and not finish", after1, after2, n)
	}
	incRun{par: 3, root: root, stateDir: stateDir, src: src, sink: sink}.run(t, ctx)
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
