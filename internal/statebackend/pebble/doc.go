// Package pebble is the state backend that keeps keyed state in a pebble
// database (github.com/cockroachdb/pebble/v2, an LSM tree) in a local
// directory: state larger than memory, with only the block cache and the
// memtables in RAM. Values are stored as their codec bytes, so every read
// decodes and every write encodes.
//
// # Usage
//
//	b, err := pebble.New(keygroup.RangeFor(128, 4, 0), codec.String(), pebble.Options{Dir: dir})
//	defer b.Close()
//	count, err := pebble.NewValueState(b, "count", codec.Int())
//	b.SetCurrentKey("alice", keygroup.Of(codec.String().Append(nil, "alice"), 128))
//	n, _ := count.Value()
//	count.Update(n + 1)
//
// # Key layout
//
//	keyGroup:2 big-endian | stateID:uvarint | key | namespace   →   value
//
// The key group comes first, so the key groups of a range are one contiguous
// range of keys: a snapshot reads them with one iterator, and a rescaled
// database can drop the groups it no longer owns with one range deletion.
// State ids are assigned per state name when a name is first registered or
// restored (from 1); the name → (id, kind, flags) map lives in the backend
// and, under meta keys 0xff 's' name (after every entry, since key groups
// are below 1<<15), in the database itself, so that an incremental
// checkpoint carries it.
//
// What follows the state id is the entry key of the canonical format: the
// key codec's bytes, then the namespace codec's bytes for a namespaced
// state. Key codecs delimit their own bytes (Codec.Decode reports how many
// it used), so a key's entries are exactly the keys with prefix
// group|id|key, and the database's order of the entries of one state in
// one key group is the canonical format's order: snapshots stream entries
// without sorting.
//
// # State kinds and layouts
//
// Every kind of keyed state of the heap backend exists here with the same
// constructors and method sets: NewValueState, NewListState, NewMapState,
// NewReducingState, NewAggregatingState, and a Namespaced variant of each
// (SetCurrentNamespace, CurrentNamespace, Namespaces, ClearAllNamespaces,
// Entries; MergeNamespaces for lists, reducing and aggregating states).
// They share one core (store.go) and keep their entries in one of two
// layouts (layout.go):
//
//   - single (value, reducing, aggregating): one database entry per key and
//     namespace whose value is the canonical entry value, so Update is a
//     blind write and Value a point read;
//   - grouped (map, list): a header entry per key and namespace (holding
//     the TTL timestamp) and sub-entries: one per user key for a map, so
//     that Get, Put and Contains are point operations; one for a list,
//     holding chunks that Add appends with a merge operand (pebble's
//     default concatenating merger), so that Add never reads the list.
//
// Snapshots turn grouped entries back into canonical ones (a map's entries
// counted and concatenated, a list's chunks joined), so the files are the
// heap backend's, byte for byte.
//
// # Write-back cache
//
// Point reads and writes of every state kind go through a bounded
// write-back cache of database entries (cache.go;
// Options.WriteCacheSize, 32 MiB by default, negative to disable): an
// entry keyed by the full database key holds the stored value bytes (or
// records that the key is absent), and a write only marks it dirty, so a
// hot key is read and written in memory and reaches the database in
// batches. Dirty entries are written back when CLOCK eviction removes
// them, before any iterator over their state is opened (Namespaces,
// Entries, a map's All, Len and Remove, clears), and all of them in the
// synchronous phase of every snapshot, full or incremental, before the
// database's snapshot or checkpoint is taken; every write-back is one
// batch in key order, which pebble's memtable inserts cheaply. The cache
// is a flat slice of entries (key and value in one allocation) behind an
// open-addressing table of hashes, so a lookup costs a few cache misses
// and no Go map of string keys. Restores start with an empty cache; Close
// drops it with the database. A list's Add extends its cached value in
// place, and appends in the database with a merge operand, without reading
// the list, only when the cache does not know it (neither cached nor ruled
// out by the filter of keys written back): a join that reads the list of
// its key for every record of the other side (Nexmark q9, q20) reads it
// from memory.
//
// # TTL
//
// WithTTL gives a state of any kind a processing-time TTL (Options.Clock),
// with the heap backend's semantics: the timestamp of the last write (or
// access, with state.OnReadAndWrite) is the 8-byte prefix of the entry
// value (of the header, for maps and lists: a map's TTL covers the whole
// map, as on the heap). An expired entry is never returned; it is deleted
// when accessed, and snapshots leave out the entries expired when they were
// taken. pebble/v2 has no compaction filter, so expired entries that are
// never accessed stay in the database until a snapshot's restore (a
// canonical restore writes only live entries); native (incremental)
// checkpoints carry them.
//
// # Full snapshots (canonical)
//
// Backend.Snapshot takes a pebble snapshot (db.NewSnapshot: a sequence
// number, O(1)) and the sorted list of state names. Its WriteState iterates
// the key-group range of the pebble snapshot in order and writes the
// canonical format of package format: the bytes the heap backend writes for
// the same state, so checkpoints and savepoints restore into either backend
// and at another parallelism. Release closes the pebble snapshot, letting
// compactions drop the versions it kept.
//
// # Incremental snapshots (design hook)
//
// Backend.SnapshotIncremental flushes the memtable and creates a pebble
// checkpoint (hard links) in a directory of the caller's, returning the
// names of its data files. The runtime will build incremental checkpoints
// on it (not yet implemented):
//
//  1. Synchronous part, on the barrier: files := SnapshotIncremental(n,
//     <local>/chk-n).
//  2. Asynchronous part: for each name in files that is not in the set of
//     files the backend's previous confirmed checkpoints uploaded, upload it
//     to <job>/shared/<backend-instance-uuid>-<name> (a name is unique per
//     database instance, and a database instance is one backend, so the
//     prefix makes it unique per job); reuse the shared paths of the others.
//     Upload MANIFEST-*, OPTIONS-* and the marker files into chk-n/ as
//     exclusive files. The keyed state handle lists the shared and exclusive
//     files (new fields of checkpoint.KeyedStateHandle with a new Backend
//     kind such as "pebble-incremental"). Then remove <local>/chk-n.
//  3. On NotifyCheckpointComplete(n) the uploaded names become confirmed
//     (only confirmed files are reused, as in Flink, so an aborted
//     checkpoint's uploads are never referenced).
//  4. The job master's shared-state registry counts, for every shared file,
//     the retained checkpoints that reference it, and deletes the file when
//     the count drops to zero (subsumption, discard).
//  5. Restore downloads the files into a new directory, opens the database
//     there (the name↔id map is in its meta keys) and, if the key-group
//     range changed, deletes the groups outside its range with one range
//     deletion per side; state from several old subtasks is merged by
//     scanning their key groups of interest (or from canonical snapshots).
//     The restored backend starts with the downloaded files as confirmed,
//     under their existing shared paths, so it does not upload them again.
//
// Savepoints stay canonical (full snapshots).
//
// # Changelog (FLIP-158)
//
// With a Changelog attached (SetChangelog), every write to the database is
// also appended to a local, segmented log (changelog.go): the backend
// writes only through dbSet, dbDelete, dbDeleteRange and commitBatch (a
// test parses the package to keep it so), and the write-back cache's
// write-backs commit through commitBatch. CutChangelog flushes the cache
// and closes the open segment: the runtime calls it at a checkpoint's
// barrier and uploads the segment; ReplayChangelog applies segments, in
// order, to a native checkpoint (a materialization taken at an earlier
// cut) before RestoreNative. The runtime's side is
// internal/statebackend/incremental.
//
// # Restore and registration
//
// Restore writes the entries of the canonical handles, as bytes, into the
// database in batches; a state that is restored and never registered stays
// there and goes into every later snapshot unchanged (whatever its kind).
// Registering a restored state checks that it was written as the same kind
// of state (as the heap backend does, with the same messages) and decodes
// the first entry of each key group, so that a wrong codec fails at
// registration; other entries are decoded when read. A restored map or list
// is converted to the grouped layout at registration: every entry is
// decoded first (a codec that does not match leaves the bytes as they
// were), then rewritten.
//
// # Errors
//
// The states' methods have no error result (they implement the state
// package's interfaces); a failure (a disk error, bytes the codec cannot decode, use
// after Close) goes to Options.OnError, which the runtime sets to fail the
// task.
//
// # Durability
//
// The database is a working copy: it has no write-ahead log and never
// syncs a file, since after a failure the job restores from a checkpoint
// into a new directory and never reopens this one. Checkpoints (full or
// incremental) are what is durable.
//
// # Goroutines and closing
//
// New opens the database, which runs flushes and compactions on its own
// goroutines; Close waits for running WriteState calls, releases any
// snapshot not yet released, stops those goroutines and removes the
// database directory. Everything else runs on the caller's goroutine (the
// task's), except Snapshot.WriteState.
package pebble
