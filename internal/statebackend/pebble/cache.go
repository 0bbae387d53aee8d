package pebble

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// writeCache is a bounded write-back cache of database entries in front of
// the database, shared by the value, map, reducing and aggregating states
// of a backend (lists append with merge operands and bypass it). A state's
// point reads and writes (core.getRaw, core.set, core.delete and the
// staged writes of a map) hit the cache; a write only marks its entry
// dirty, and dirty entries reach the database in a batch when they are
// evicted or flushed. A hot key is then read and written in memory, and
// reaches the database once per flush instead of once per record: the
// cost that left the pebble Nexmark queries below target (BENCHMARKS.md
// §7b) was per-record point reads and writes and the compactions the
// writes caused.
//
// An entry is keyed by the full database key and holds the stored value
// bytes (TTL prefix included), so everything above getRaw — TTL checks,
// renewals, decoding — is unchanged; or it records that the key is absent
// (a negative entry, or a deletion not yet written back: a tombstone).
//
// What keeps reads seeing every write (DESIGN.md §6): anything that opens
// a database iterator over a state's entries first flushes that state's
// dirty entries (flushState), and range deletions forget the cached entries
// they delete (forget); every snapshot, full or incremental, flushes all
// dirty entries before the database's snapshot or checkpoint is taken
// (flushAll); restores start with an empty cache (reset).
//
// Memory: each entry counts its key, its value's capacity and
// entryOverhead; when the total passes the budget, CLOCK eviction (a
// second chance for entries used since the hand last passed) removes
// entries until the total is budget/16 below the budget, writing the dirty
// ones back in one batch.
//
// It is used on the task goroutine only.
type writeCache struct {
	budget int64
	size   int64
	db     func() *pebble.DB // the backend's current database
	// commit commits a batch of write-backs (Backend.commitBatch: the
	// changelog sees them).
	commit  func(*pebble.Batch) error
	entries map[string]*cacheEntry
	ring    []*cacheEntry // CLOCK order; entry.slot is its index
	hand    int
	// dirty lists, per state id, the entries written since the state's
	// last flush; an entry evicted (and written back) stays in the list,
	// clean, until the list is flushed or compacted.
	dirty map[uint64]*dirtyList
	// written holds every key written back, while the database holds
	// nothing else of the cached states (the backend was not restored):
	// a miss on a key it has never seen needs no database read. Nil once
	// a restore starts.
	written *writtenFilter
}

type dirtyList struct {
	entries []*cacheEntry
	n       int // entries of the list still dirty
}

type cacheEntry struct {
	key     string
	value   []byte // nil when absent
	id      uint64 // state id
	slot    int
	present bool // false: the key is absent (or deleted)
	dirty   bool // differs from the database
	ref     bool // used since the CLOCK hand last passed
}

// entryOverhead approximates the bytes an entry costs besides its key and
// value: the struct, the map slot, the ring slot and the dirty list slot.
const entryOverhead = 112

// DefaultWriteCacheSize is the default of Options.WriteCacheSize.
const DefaultWriteCacheSize = 32 << 20

func newWriteCache(budget int64, db func() *pebble.DB, commit func(*pebble.Batch) error) *writeCache {
	return &writeCache{
		budget:  budget,
		db:      db,
		commit:  commit,
		entries: make(map[string]*cacheEntry),
		dirty:   make(map[uint64]*dirtyList),
		written: newWrittenFilter(),
	}
}

// knownAbsent reports whether key is certainly not in the database: the
// database holds only what the cache wrote back, and never key.
func (w *writeCache) knownAbsent(key []byte) bool {
	return w.written != nil && !w.written.mayContain(key)
}

// restoring disables the filter of keys written: the database is about
// to hold entries the cache never wrote.
func (w *writeCache) restoring() { w.written = nil }

func (e *cacheEntry) cost() int64 { return int64(len(e.key) + cap(e.value) + entryOverhead) }

// get returns the cached entry of key: hit is false when the cache does not
// know the key; present is false when the key is known to be absent. value
// is the cache's own memory, valid until the next call.
func (w *writeCache) get(key []byte) (value []byte, present, hit bool) {
	e := w.entries[string(key)]
	if e == nil {
		return nil, false, false
	}
	e.ref = true
	return e.value, e.present, true
}

// fill records what the database holds for key (value, or absent), read
// after a miss. The error is that of a write-back by eviction.
func (w *writeCache) fill(id uint64, key, value []byte, present bool) error {
	e := w.insert(id, key)
	w.assign(e, value, present)
	return w.evictIfFull()
}

// put records a write of value at key (a state's entry).
func (w *writeCache) put(id uint64, key, value []byte) error { return w.write(id, key, value, true) }

// del records a deletion of key.
func (w *writeCache) del(id uint64, key []byte) error { return w.write(id, key, nil, false) }

// write records that key now holds value (present) or is deleted.
func (w *writeCache) write(id uint64, key, value []byte, present bool) error {
	e := w.entries[string(key)]
	if e == nil {
		e = w.insert(id, key)
	}
	e.ref = true
	w.assign(e, value, present)
	w.markDirty(e)
	return w.evictIfFull()
}

// forget drops the entry of key, if cached, without writing it back: the
// caller deleted the key from the database after flushing the state.
func (w *writeCache) forget(key []byte) {
	if e := w.entries[string(key)]; e != nil {
		w.remove(e)
	}
}

func (w *writeCache) insert(id uint64, key []byte) *cacheEntry {
	e := &cacheEntry{key: string(key), id: id, slot: len(w.ring), ref: true}
	w.entries[e.key] = e
	w.ring = append(w.ring, e)
	w.size += e.cost()
	return e
}

// assign sets e's value, reusing its memory when the new value fits.
func (w *writeCache) assign(e *cacheEntry, value []byte, present bool) {
	w.size -= int64(cap(e.value))
	if present {
		e.value = append(e.value[:0], value...)
	} else {
		e.value = nil
	}
	e.present = present
	w.size += int64(cap(e.value))
}

func (w *writeCache) markDirty(e *cacheEntry) {
	if e.dirty {
		return
	}
	e.dirty = true
	l := w.dirty[e.id]
	if l == nil {
		l = &dirtyList{}
		w.dirty[e.id] = l
	}
	if len(l.entries) >= 1024 && len(l.entries) > 2*l.n {
		// Mostly entries evicted since the last flush: drop them, so that
		// a state that is never flushed between checkpoints does not keep
		// a pointer per write.
		l.entries = compactDirty(l.entries)
	}
	l.entries = append(l.entries, e)
	l.n++
}

// compactDirty keeps the entries that are still dirty.
func compactDirty(es []*cacheEntry) []*cacheEntry {
	kept := es[:0]
	for _, e := range es {
		if e.dirty {
			kept = append(kept, e)
		}
	}
	clear(es[len(kept):])
	return kept
}

// remove drops e from the cache (its dirty list may still point at it:
// only clean entries are removed, or entries whose write-back the caller
// did).
func (w *writeCache) remove(e *cacheEntry) {
	if e.dirty {
		e.dirty = false
		w.dirty[e.id].n--
	}
	delete(w.entries, e.key)
	last := w.ring[len(w.ring)-1]
	w.ring[e.slot] = last
	last.slot = e.slot
	w.ring[len(w.ring)-1] = nil
	w.ring = w.ring[:len(w.ring)-1]
	w.size -= e.cost()
}

// evictIfFull evicts entries, CLOCK order, while the cache is over budget,
// down to budget - budget/16, writing the dirty ones back in one batch.
func (w *writeCache) evictIfFull() error {
	if w.size <= w.budget {
		return nil
	}
	target := w.budget - w.budget/16
	var batch *pebble.Batch
	for w.size > target && len(w.ring) > 0 {
		if w.hand >= len(w.ring) {
			w.hand = 0
		}
		e := w.ring[w.hand]
		if e.ref {
			e.ref = false
			w.hand++
			continue
		}
		if e.dirty {
			if batch == nil {
				batch = w.db().NewBatch()
			}
			w.stage(batch, e)
		}
		w.remove(e) // the last entry moves to w.hand: it is looked at next
	}
	if batch == nil {
		return nil
	}
	defer batch.Close()
	return w.commit(batch)
}

// stage adds e's write-back to batch.
func (w *writeCache) stage(batch *pebble.Batch, e *cacheEntry) {
	// A batch's Set and Delete fail only when it is read-only.
	if e.present {
		if w.written != nil {
			w.written.add([]byte(e.key))
		}
		_ = batch.Set([]byte(e.key), e.value, nil)
	} else {
		_ = batch.Delete([]byte(e.key), nil)
	}
}

// flushState writes the dirty entries of state id to the database in one
// batch; they stay cached, clean.
func (w *writeCache) flushState(id uint64) error {
	l := w.dirty[id]
	if l == nil || l.n == 0 {
		if l != nil {
			clear(l.entries)
			l.entries = l.entries[:0]
		}
		return nil
	}
	batch := w.db().NewBatch()
	defer batch.Close()
	for _, e := range l.entries {
		if e.dirty {
			w.stage(batch, e)
			e.dirty = false
		}
	}
	clear(l.entries)
	l.entries, l.n = l.entries[:0], 0
	return w.commit(batch)
}

// flushAll writes every dirty entry to the database.
func (w *writeCache) flushAll() error {
	var errs []error
	for id := range w.dirty {
		errs = append(errs, w.flushState(id))
	}
	return errors.Join(errs...)
}

// reset empties the cache without writing anything back: the database was
// replaced or wiped (restore), or is being removed (Close).
func (w *writeCache) reset() {
	clear(w.entries)
	clear(w.ring)
	w.ring, w.hand, w.size = w.ring[:0], 0, 0
	clear(w.dirty)
}
