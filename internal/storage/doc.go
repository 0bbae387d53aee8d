// Package storage is weir's checkpoint storage (DESIGN.md §7): where
// snapshots are persisted, behind one small object-store interface, Store,
// with memory, file and S3 (minio-go; any S3-compatible store) implementations.
//
// Three layers:
//
//   - Store: immutable objects with slash-separated names, created through
//     an ObjectWriter that publishes them atomically and durably at Commit.
//     Open(url) picks the implementation from a URL: memory://NAME (shared
//     within the process by NAME), memory:// (private), file:///abs/path or
//     a plain path.
//   - The seams for failure testing: the file store reaches the disk only
//     through FS (OSFS in production), and a Faults — rules that fail or
//     delay the Nth matching operation, or operations at random from a seed
//     — can be put under the file store (NewFaultFS) or around any Store
//     (WithFaults).
//   - CheckpointStorage: the layout of one job's checkpoints in a Store
//     (<job>/chk-<n>/_metadata and its files, shared/, taskowned/), the
//     atomic _metadata write that is the commit point of a checkpoint,
//     state files with size and CRC-32C checks, Latest (the newest intact
//     checkpoint, skipping and reporting damaged ones), MaxCheckpointID,
//     and ResolveRestore for `--restore PATH`.
//
// Savepoints live in a store of their own (the savepoint target), in a
// directory SavepointDir names; they hold only files inside that directory,
// so they can be moved as a whole.
//
// # Usage
//
// Writing checkpoint n (the shell of the checkpoint coordinator):
//
//	store, err := storage.Open("file:///var/lib/weir/checkpoints")
//	cs := storage.CheckpointStorage{Store: store, JobID: jobID}
//	dir := cs.CheckpointDir(n)
//	size, crc, err := cs.WriteStateFile(ctx, dir, "count-0.state", snapshot.WriteTo)
//	// … every task acknowledged with its handles …
//	err = cs.WriteMetadata(ctx, dir, &checkpoint.Metadata{ID: n, …}) // the commit point
//
// Recovering:
//
//	dir, m, skipped, err := cs.Latest(ctx)
//	for _, why := range skipped {
//		logger.Warn("skipping damaged checkpoint", "reason", why)
//	}
//	next, err := cs.MaxCheckpointID(ctx) // number new checkpoints above it
//
// Injecting faults in a test:
//
//	faults := storage.NewFaults(seed)
//	_ = faults.Add(storage.Rule{Ops: storage.OpCommit, Path: "_metadata", Nth: 2})
//	_ = faults.Add(storage.Rule{Ops: storage.OpWrite, Probability: 0.01})
//	store := storage.WithFaults(storage.NewMemoryStore(), faults)
package storage
