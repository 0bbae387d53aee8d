package weir

// IncrementalRestore says how one operator instance restored incremental
// state: handles linked from its local copy, handles downloaded.
type IncrementalRestore struct {
	Job, UID          string
	Subtask           int
	Local, Downloaded int
}

// SetIncrementalRestoreHook makes every incremental restore call f (nil:
// none). f runs on task goroutines.
func SetIncrementalRestoreHook(f func(IncrementalRestore)) {
	if f == nil {
		restoreHook.Store(nil)
		return
	}
	h := func(job, uid string, subtask int, st restoreStats) {
		f(IncrementalRestore{Job: job, UID: uid, Subtask: subtask, Local: st.local, Downloaded: st.downloaded})
	}
	restoreHook.Store(&h)
}

// ChangelogMaterializations returns the number of background
// materializations uploaded in this process so far.
func ChangelogMaterializations() int64 { return bgMaterializations.Load() }
