package pebble

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// NativeCheckpoint is a native pebble checkpoint (what SnapshotIncremental
// wrote, downloaded or kept locally) in a local directory, holding the key
// groups Groups.
type NativeCheckpoint struct {
	// Dir holds every file of the checkpoint. It must be on the backend's
	// file system (Options.FS) and, for the checkpoint adopted as the
	// database, on the same device as Options.Dir: it is moved, not copied.
	Dir    string
	Groups keygroup.Range
}

// RestoreNative restores the backend from native checkpoints instead of
// canonical handles (Restore): it is the restore of an incremental
// checkpoint. Like Restore it must be called once, on a fresh backend,
// before any state is registered or snapshot taken; checkpoints that hold
// none of KeyGroups are ignored, and two that hold the same key group are
// an error.
//
// The checkpoint that holds the most of KeyGroups is adopted as the
// database: its directory is moved into place and opened, and the key
// groups outside KeyGroups are dropped with one range deletion per side (no
// file is rewritten). The key groups of KeyGroups in the other checkpoints
// (after rescaling) are copied entry by entry, with their state ids mapped
// by state name. Restore so costs O(files) when the key-group range did not
// change, as in Flink's RocksDB backend.
//
// base is the index in cps of the adopted checkpoint, -1 when none holds
// any of KeyGroups: the data files of the adopted checkpoint stay the
// database's files under their names, so an incremental checkpoint taken
// next can refer to them where they were uploaded before. The directories
// of the other checkpoints are left to the caller. On error the backend
// is unusable and must be closed.
func (b *Backend[K]) RestoreNative(cps []NativeCheckpoint) (base int, err error) {
	if b.closed {
		return -1, fmt.Errorf("restore: %w", ErrClosed)
	}
	if b.restored || len(b.states) > 0 || b.snapshots > 0 {
		return -1, errors.New("pebble backend: RestoreNative must be called once, before any state is registered or snapshot taken")
	}
	b.restoringCache() // empty already (no state registered): restores start with an empty cache
	base, best := -1, 0
	var covered []int // indexes of cps that hold some of ours
	for i, cp := range cps {
		lo, hi := max(cp.Groups.Start, b.groups.Start), min(cp.Groups.End, b.groups.End)
		if lo >= hi {
			continue
		}
		for _, j := range covered {
			if o := cps[j].Groups; lo < o.End && o.Start < hi {
				return -1, fmt.Errorf("pebble backend: restore: native checkpoints %s (key groups %v) and %s (%v) overlap", cps[j].Dir, o, cp.Dir, cp.Groups)
			}
		}
		covered = append(covered, i)
		if hi-lo > best {
			base, best = i, hi-lo
		}
	}
	if base < 0 {
		return -1, nil
	}
	if err := b.adopt(cps[base]); err != nil {
		return -1, fmt.Errorf("pebble backend: restore key groups %v from %s: %w", b.groups, cps[base].Dir, err)
	}
	for _, i := range covered {
		if i == base {
			continue
		}
		if err := b.copyNative(cps[i]); err != nil {
			return -1, fmt.Errorf("pebble backend: restore key groups %v from %s: %w", b.groups, cps[i].Dir, err)
		}
	}
	b.restored = true
	return base, nil
}

// adopt replaces the backend's empty database by the native checkpoint cp
// and drops the key groups outside the backend's range. On error the
// backend has an empty database again (so that Close works).
func (b *Backend[K]) adopt(cp NativeCheckpoint) error {
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("close the empty database: %w", err)
	}
	db, err := b.openMoved(cp.Dir)
	if err != nil {
		db, oerr := b.openMoved("")
		if oerr != nil {
			// Close must still find a database to close.
			panic(fmt.Sprintf("pebble backend: reopen an empty database after a failed restore: %v", oerr))
		}
		b.db = db
		return err
	}
	b.db = db
	if b.groups.Start > cp.Groups.Start {
		if err := b.dbDeleteRange([]byte{}, appendGroupPrefix(nil, b.groups.Start)); err != nil {
			return fmt.Errorf("drop key groups below %d: %w", b.groups.Start, err)
		}
	}
	if b.groups.End < cp.Groups.End {
		if err := b.dbDeleteRange(appendGroupPrefix(nil, b.groups.End), []byte{metaPrefix}); err != nil {
			return fmt.Errorf("drop key groups from %d: %w", b.groups.End, err)
		}
	}
	states, err := readNativeStates(db)
	if err != nil {
		return err
	}
	for _, st := range states {
		b.states[st.name] = st.meta
		b.names = append(b.names, st.name)
		b.nextID = max(b.nextID, st.meta.id+1)
		b.markRestored(st.name, st.meta)
	}
	slices.Sort(b.names)
	return nil
}

// openMoved opens the database directory after moving dir there (an empty
// database when dir is empty).
func (b *Backend[K]) openMoved(dir string) (*pebble.DB, error) {
	fs := b.opts.FS
	if err := fs.RemoveAll(b.dbDir); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := fs.Rename(dir, b.dbDir); err != nil {
			return nil, fmt.Errorf("move the checkpoint into place: %w", err)
		}
	}
	cache := b.opts.Cache
	if cache == nil {
		cache = pebble.NewCache(b.opts.CacheSize)
		defer cache.Unref() // the database holds its own reference
	}
	db, err := pebble.Open(b.dbDir, b.opts.dbOptions(cache, false))
	if err != nil {
		return nil, fmt.Errorf("open the checkpoint as the database: %w", err)
	}
	return db, nil
}

// markRestored lets registration check a restored state against its
// typed registration. A state in the grouped layout is already in the
// layout of its registered kind: it is not converted again.
func (b *Backend[K]) markRestored(name string, st stateMeta) {
	if !st.grouped {
		b.unchecked[name] = true
	}
}

// copyNative copies the entries of the backend's key groups from the
// native checkpoint cp, mapping its state ids to the backend's by name.
func (b *Backend[K]) copyNative(cp NativeCheckpoint) (err error) {
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	src, err := pebble.Open(cp.Dir, b.opts.dbOptions(cache, true))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	states, err := readNativeStates(src)
	if err != nil {
		return err
	}
	batch := b.db.NewBatch()
	defer batch.Close()
	ids := make(map[uint64]uint64, len(states)) // cp's id -> ours
	for _, st := range states {
		ours, ok := b.states[st.name]
		switch {
		case !ok:
			id, err := b.addName(st.meta.info, batch)
			if err != nil {
				return err
			}
			if st.meta.grouped {
				if err := batch.Set(metaGroupedKey(st.name), nil, nil); err != nil {
					return err
				}
			}
			ours = b.states[st.name]
			ours.grouped = st.meta.grouped
			b.states[st.name] = ours
			b.markRestored(st.name, ours)
			ids[st.meta.id] = id
		case ours.info != st.meta.info || ours.grouped != st.meta.grouped:
			return fmt.Errorf("state %q is a %v (grouped %t) here but a %v (grouped %t) in another subtask's checkpoint: %w",
				st.name, st.meta.info, st.meta.grouped, ours.info, ours.grouped, format.ErrCorrupt)
		default:
			ids[st.meta.id] = ours.id
		}
	}
	lo, hi := max(cp.Groups.Start, b.groups.Start), min(cp.Groups.End, b.groups.End)
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: appendGroupPrefix(nil, lo), UpperBound: appendGroupPrefix(nil, hi)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var key []byte
	for it.First(); it.Valid(); it.Next() {
		g, id, ek, err := splitEntryKey(it.Key())
		if err != nil {
			return err
		}
		ours, ok := ids[id]
		if !ok {
			return fmt.Errorf("key group %d: an entry of state id %d, which has no name: %w", g, id, errBadKey)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		key = appendEntryKey(key[:0], g, ours, ek)
		if err := batch.Set(key, v, nil); err != nil {
			return err
		}
		if batch.Len() >= restoreBatchSize {
			if err := b.commitBatch(batch); err != nil {
				return err
			}
			batch.Reset()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return b.commitBatch(batch)
}

type nativeState struct {
	name string
	meta stateMeta
}

// readNativeStates reads the state names a database records in its meta
// keys, with their ids, kinds and layouts.
func readNativeStates(db *pebble.DB) (_ []nativeState, err error) {
	var out []nativeState
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: metaStatePrefix, UpperBound: prefixEnd(metaStatePrefix)})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(metaStatePrefix):])
		id, info, err := parseMetaState(name, it.Value())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		out = append(out, nativeState{name: name, meta: stateMeta{id: id, info: info}})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	for i := range out {
		_, closer, err := db.Get(metaGroupedKey(out[i].name))
		switch {
		case err == nil:
			out[i].meta.grouped = true
			if err := closer.Close(); err != nil {
				return nil, err
			}
		case !errors.Is(err, pebble.ErrNotFound):
			return nil, err
		}
	}
	seen := map[uint64]string{}
	for _, st := range out {
		if other, dup := seen[st.meta.id]; dup {
			return nil, fmt.Errorf("states %q and %q have the same id %d: %w", other, st.name, st.meta.id, errBadKey)
		}
		seen[st.meta.id] = st.name
	}
	return out, nil
}
