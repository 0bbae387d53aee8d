package weir

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend/incremental"
	"github.com/weirstream/weir/internal/statebackend/pebble"
)

// Incremental checkpoints of the pebble backend (Options.Checkpointing.
// Incremental, Changelog, LocalRecovery), as Flink's incremental RocksDB
// and changelog checkpoints. Their lifecycle — native checkpoints, uploads
// to <job>/shared/, local recovery, the base that the next checkpoint
// refers to, restores — belongs to internal/statebackend/incremental; this
// file gives each keyed operator instance its Lifecycle and passes the
// task's calls on. Savepoints are always full, canonical snapshots.

// newLifecycle returns the incremental lifecycle of the instance whose
// pebble backend is b, with the job's options and test hooks.
func (k *keyedEnv[K]) newLifecycle(b incremental.Backend, changelog bool) (*incremental.Lifecycle, error) {
	env := k.env
	prefix := fmt.Sprintf("%s-%d", unsafeName.ReplaceAllString(env.uid, "_"), env.subtask)
	opts := incremental.Options{
		Groups:        env.keyGroups,
		LocalDir:      filepath.Join(env.stateDir, "local", prefix),
		Prefix:        prefix,
		LocalRecovery: env.localRecovery,
		Logger:        env.logger,
	}
	if changelog {
		opts.Changelog = incremental.ChangelogOptions(env.changelog)
	}
	if t := env.test; t != nil {
		opts.FS, opts.Clock = t.localFS, t.clock
		if t.onMaterialized != nil {
			uid, subtask := env.uid, env.subtask
			opts.OnMaterialized = func() { t.onMaterialized(uid, subtask) }
		}
	}
	return incremental.New(env.ctx, b, opts)
}

// snapshotIncremental is keyedEnv.snapshot for incremental checkpoints.
func (k *keyedEnv[K]) snapshotIncremental(id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	snap, err := k.lc.Snapshot(id, incremental.Target{Store: opts.Store, Dir: opts.Dir})
	if err != nil {
		return runtime.OperatorSnapshot{}, err
	}
	return runtime.OperatorSnapshot{Async: snap.Async, Release: snap.Release}, nil
}

// hasIncremental reports whether the restored state has incremental handles.
func (k *keyedEnv[K]) hasIncremental() bool {
	r := k.env.restored
	return r != nil && slices.ContainsFunc(r.keyed, checkpoint.KeyedStateHandle.Incremental)
}

// restoreIncremental loads incremental handles into the pebble backend.
func (k *keyedEnv[K]) restoreIncremental() error {
	r := k.env.restored
	b, ok := k.backend.(*pebble.Backend[K])
	if !ok || r.from == nil {
		return fmt.Errorf("restore keyed state: checkpoint %s holds incremental pebble state (Options.Checkpointing.Incremental); restore it with Options.StateBackend \"pebble\", or restore a savepoint, which any backend reads", restoreDir(r))
	}
	lc := k.lc
	if lc == nil { // restoring an incremental checkpoint without taking any
		var err error
		if lc, err = k.newLifecycle(b, false); err != nil {
			return fmt.Errorf("restore keyed state: %w", err)
		}
	}
	from := incremental.Source{ID: r.from.Metadata.ID, Savepoint: r.from.Metadata.Kind != checkpoint.KindCheckpoint,
		Store: r.from.Store, Dir: r.from.Dir}
	stats, err := lc.Restore(k.env.ctx, from, r.keyed, filepath.Dir(b.Dir()))
	if err != nil {
		return fmt.Errorf("restore keyed state: %w", err)
	}
	k.restoreStats = stats
	if t := k.env.test; t != nil && t.onRestore != nil {
		t.onRestore(k.env.jobID, k.env.uid, k.env.subtask, stats)
	}
	k.env.logger.Info("restored incremental keyed state", "checkpoint", r.from.Metadata.ID,
		"local", stats.Local, "downloaded", stats.Downloaded, "bytes", stats.Bytes, "changelogSegments", stats.Replayed)
	return nil
}

func restoreDir(r *restoredState) string {
	if r.from != nil {
		return r.from.Dir
	}
	return "(unknown)"
}

// pendingCheckpoints returns the number of checkpoints taken that the
// keyed state does not yet know complete or aborted (tests: it stays
// bounded when notifications arrive).
func (k *keyedEnv[K]) pendingCheckpoints() int {
	if k.lc == nil {
		return 0
	}
	return k.lc.Pending()
}

// NotifyKeyedComplete and NotifyKeyedAborted implement runtime.KeyedState:
// they pass checkpoint notifications to the incremental lifecycle.
func (k *keyedEnv[K]) NotifyKeyedComplete(id int64) error {
	if k.lc != nil {
		k.lc.NotifyComplete(id)
	}
	return nil
}

func (k *keyedEnv[K]) NotifyKeyedAborted(id int64) error {
	if k.lc != nil {
		k.lc.NotifyAborted(id)
	}
	return nil
}
