package pebble

import (
	"fmt"
	"slices"
	"strings"
)

// SnapshotIncremental is the synchronous part of an incremental checkpoint:
// it writes the dirty entries of the write-back cache to the database,
// flushes the memtable (there is no write-ahead log to carry it) and
// creates a pebble checkpoint of the database in dir, a directory that must
// not exist yet, on the same file system as Options.Dir: every data file is
// hard-linked, and the small MANIFEST and OPTIONS files are copied. Its cost
// is that of the flush (at most MemTableSize bytes) plus O(number of
// files); no data file is copied.
//
// files are the names, relative to dir and sorted, of its data files
// (sstables, and blob files if value separation is ever enabled). A data
// file is never modified once written and its name (a file number) is never
// reused by the database, so a file of this checkpoint with the same name
// as one of an earlier checkpoint of the same backend is the same file:
// only the new names need uploading. The other files of dir (MANIFEST-*,
// OPTIONS-*, marker.*) change with every checkpoint and are uploaded whole.
// The name↔id map of the states is inside the checkpoint (as meta keys), so
// dir alone is enough to reopen the state.
//
// dir belongs to the caller: it stays valid after the database compacts the
// files away and after Close, until the caller removes it. See the package
// documentation for how the runtime will upload it.
func (b *Backend[K]) SnapshotIncremental(id int64, dir string) (files []string, err error) {
	if b.closed {
		return nil, fmt.Errorf("incremental snapshot %d: %w", id, ErrClosed)
	}
	b.snapshots++
	if err := b.flushCache(); err != nil {
		return nil, fmt.Errorf("incremental snapshot %d: %w", id, err)
	}
	if err := b.db.Flush(); err != nil {
		return nil, fmt.Errorf("pebble backend: incremental snapshot %d: flush: %w", id, err)
	}
	if err := b.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("pebble backend: incremental snapshot %d: checkpoint into %s: %w", id, dir, err)
	}
	names, err := b.opts.FS.List(dir)
	if err != nil {
		return nil, fmt.Errorf("pebble backend: incremental snapshot %d: %w", id, err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") {
			files = append(files, n)
		}
	}
	slices.Sort(files)
	return files, nil
}
