// Package incremental owns the checkpoint lifecycle of one operator
// instance's pebble keyed state, below the operators (the task delivers
// snapshot, complete and aborted to every keyed operator's state through
// runtime.KeyedState; the root package's keyedEnv passes them here): Flink's
// RocksIncrementalSnapshotStrategy and ChangelogKeyedStateBackend in one
// place.
//
// Incremental checkpoints (Options.Changelog off), as Flink's incremental
// RocksDB checkpoints:
//
//   - Synchronous part (Snapshot, task goroutine): a native pebble
//     checkpoint of the database into <LocalDir>/chk-<n>, with hard links.
//   - Asynchronous part (Snapshot.Async): the data files (sstables) that the
//     base — the last checkpoint this instance knows complete — uploaded
//     are referred to where they are in <job>/shared/; the others are
//     uploaded there under unique names (<prefix>-<instance>-c<n>-<file>),
//     and the small MANIFEST, OPTIONS and marker files go into chk-<n>/.
//     The handle (checkpoint.IncrementalBackend) lists every file with its
//     size and CRC, and its base.
//   - NotifyComplete(n) makes n's files the base of the next checkpoints;
//     only complete checkpoints' files are reused, so files of an aborted
//     checkpoint are never referred to. The job master's shared-state
//     registry deletes shared files no checkpoint needs. Which checkpoint
//     is the base, which are pending and which local directories go is
//     decided by the pure snapshot.Ledger; this package carries out its
//     answers.
//   - Restore downloads each overlapping handle's files into a local
//     directory (or, with LocalRecovery, links them from the local copy of
//     the same checkpoint when every file matches its size and CRC: a
//     missing or damaged copy falls back to the download) and opens them
//     (pebble.Backend.RestoreNative). The adopted checkpoint's shared files
//     become the base: they are not uploaded again.
//
// Changelog-based checkpoints (Options.Changelog.Enabled; Flink's FLIP-158):
//
//   - The backend appends every write to its database to a local log
//     (pebble.Changelog), from the first materialization on.
//   - A materialization is a native checkpoint taken at a checkpoint's
//     barrier, at the same instant as that checkpoint's cut of the log: the
//     log segments after it replay exactly on top of it. All its files go
//     to <job>/shared/ (its data files that the previous materialization
//     uploaded are referred to, not uploaded again).
//   - The synchronous part of a checkpoint cuts the log; the asynchronous
//     part uploads the new segments to shared/. The handle lists the files
//     of the last materialization and then the segments written since it
//     (KeyedStateHandle.Changelog of them).
//   - Periodically (MaterializationInterval, on Options.Clock) or when the
//     log since the last materialization outgrows MaterializationLogRatio
//     of the state, a checkpoint's synchronous part also takes a
//     materialization, uploaded in the background. The first checkpoint
//     that starts after the upload finished refers to it and to the
//     segments after it only; until a checkpoint referring to it is known
//     complete, only that one checkpoint refers to it: if it aborts, the
//     registry deletes the materialization's new files and the instance
//     drops it. A background materialization reuses the data files of
//     the confirmed checkpoint's materialization; if a checkpoint with a
//     newer one completes while it uploads, that base no longer lists
//     those files and the registry may delete them: it is then dropped,
//     never referred to. Segments are reused only once a checkpoint
//     listing them completed.
//   - The first checkpoint (and the first after a restore) takes a
//     materialization synchronously, uploaded in its own asynchronous part.
//   - A materialization never referred to (the instance closed first) is
//     deleted at Close; if the process dies instead, the job master sweeps
//     shared/ of what no retained checkpoint lists.
//   - Restore downloads the materialization of each handle and its
//     segments (each checked against its size and CRC), replays the
//     segments on it, then restores the native checkpoints as the
//     incremental mode does, rescaling included. Local recovery is not
//     supported in this mode.
//   - Which materialization and segments a checkpoint refers to and which
//     it uploads, when a materialization is taken, when one is dropped
//     and which local segments and directories go is decided by the pure
//     snapshot.ChangelogLedger (events in, actions out; its scripts are the
//     specification); changelog.go carries out its actions.
//
// Every local file operation goes through Options.FS (pebble's vfs.FS), and
// time comes from Options.Clock, so tests inject local-disk errors and
// drive the materialization interval (lint_test.go keeps os and time.Now
// out of the package).
//
// # Usage
//
//	lc, err := incremental.New(ctx, backend, incremental.Options{
//		Groups: groups, LocalDir: dir, Prefix: "count-0"})
//	snap, err := lc.Snapshot(id, incremental.Target{Store: store, Dir: "job/chk-7"})
//	// forward the barrier; on another goroutine:
//	uploaded, err := snap.Async(ctx, &subtaskState)
//	snap.Release() // back on the task goroutine
//	lc.NotifyComplete(id) // or NotifyAborted
//	...
//	lc.Close()
package incremental
