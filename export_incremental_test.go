package weir

import (
	"sync/atomic"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/statebackend/incremental"
)

// IncrementalRestore says how one operator instance restored incremental
// state: handles linked from its local copy, handles downloaded.
type IncrementalRestore struct {
	Job, UID          string
	Subtask           int
	Local, Downloaded int
}

func testHooksOf(o *Options) *testHooks {
	if o.Checkpointing.test == nil {
		o.Checkpointing.test = &testHooks{}
	}
	return o.Checkpointing.test
}

// SetIncrementalRestoreHook makes every incremental restore of the job of
// o call f (nil: none). f runs on task goroutines.
func SetIncrementalRestoreHook(o *Options, f func(IncrementalRestore)) {
	if f == nil {
		testHooksOf(o).onRestore = nil
		return
	}
	testHooksOf(o).onRestore = func(job, uid string, subtask int, st incremental.RestoreStats) {
		f(IncrementalRestore{Job: job, UID: uid, Subtask: subtask, Local: st.Local, Downloaded: st.Downloaded})
	}
}

// CountChangelogMaterializations makes the job of o count its background
// changelog materializations in n.
func CountChangelogMaterializations(o *Options, n *atomic.Int64) {
	testHooksOf(o).onMaterialized = func(string, int) { n.Add(1) }
}

// DisablePebbleCompactions stops the pebble backends of the job of o from
// compacting.
func DisablePebbleCompactions(o *Options) { testHooksOf(o).noCompactions = true }

// KeyedStateProbe is a view of one keyed operator instance's checkpoint
// lifecycle.
type KeyedStateProbe struct {
	UID     string
	Subtask int
	// Pending returns the number of checkpoints the instance took and does
	// not yet know complete or aborted.
	Pending func() int
}

// OnKeyedOpen makes the job of o call f for every keyed operator instance
// it opens (on the task goroutine).
func OnKeyedOpen(o *Options, f func(KeyedStateProbe)) {
	testHooksOf(o).onKeyedOpen = func(uid string, subtask int, pending func() int) {
		f(KeyedStateProbe{UID: uid, Subtask: subtask, Pending: pending})
	}
}

// SetLocalFS makes the incremental lifecycle of the job of o (native
// checkpoints, changelog, local recovery, restores) reach the local disk
// through fs, to inject local-disk errors.
func SetLocalFS(o *Options, fs vfs.FS) { testHooksOf(o).localFS = fs }

// SetPebbleEvents makes the pebble backend of every keyed operator instance
// of the job of o tell the listener f returns for it (nil: none) of its
// database's flushes, compactions and the tables they create. f runs on
// task goroutines, the listener on pebble's.
func SetPebbleEvents(o *Options, f func(uid string, subtask int) *cpebble.EventListener) {
	testHooksOf(o).pebbleEvents = f
}
