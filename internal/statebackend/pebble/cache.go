package pebble

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// writeCache is a bounded write-back cache of database entries in front of
// the database, shared by every state of a backend. A state's point reads
// and writes (core.getRaw, core.set, core.delete and the staged writes of
// a map or a list) hit the cache; a list's append extends its cached
// value in place (extend), and goes to the database as a merge operand,
// without a read, only when the cache does not know the list. A write only
// marks its entry dirty, and dirty entries reach the database in a batch
// when they are evicted or flushed. A hot key is then read and written in memory, and
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
// Layout: the entries are a flat slice, found through an open-addressing
// table (linear probing, at most half full) of 64-bit slots, each holding
// the high half of the key's hash — which also picks its home slot — and
// the entry's index. A lookup reads a slot, and on a matching hash the
// entry and its key: no Go map of string keys, whose probes and per-entry
// objects cost q16 13% of its time (BENCHMARKS.md §7d). An entry holds its
// key and value in one allocation without pointers; free entries are
// reused. Each state's dirty entries are listed with their position in the
// list, so that an entry leaves the list the moment it is written back.
//
// Write-backs are sorted by key before they are added to a batch: pebble's
// memtable inserts a batch in order, and in key order each insert starts
// from the splice of the previous one instead of searching the skiplist
// from its top (unsorted, the memtable inserts were 9% of q16's time).
//
// Memory: each entry counts its allocation and entryOverhead; when the
// total passes the budget, CLOCK eviction (a second chance for entries
// used since the hand last passed) removes entries until the total is
// budget/16 below the budget, writing the dirty ones back in one batch.
//
// It is used on the task goroutine only.
type writeCache struct {
	budget int64
	size   int64
	db     func() *pebble.DB // the backend's current database
	// commit commits a batch of write-backs (Backend.commitBatch: the
	// changelog sees them).
	commit func(*pebble.Batch) error

	seed maphash.Seed
	// index is the hash table: 0 is an empty slot, otherwise the high 32
	// bits of the key's hash above 1 + the entry's index. Its length is a
	// power of two, mask that length - 1.
	index []uint64
	mask  uint64
	// entries holds the cached entries, and free ones whose indices are
	// in free (live counts the others). The CLOCK hand walks it.
	entries []cacheEntry
	free    []uint32
	hand    int
	// dirty lists, per state id, the entries written since they were last
	// written back (cacheEntry.dpos is an entry's position).
	dirty map[uint64]*dirtyList
	// written holds every key written back, while the database holds
	// nothing else of the cached states (the backend was not restored):
	// a miss on a key it has never seen needs no database read. Nil once
	// a restore starts.
	written *writtenFilter
	// sorting is reused by the write-backs: their keys and values, and
	// the records that sort them.
	sorting writeBackSort
}

type dirtyList struct{ idx []uint32 }

type cacheEntry struct {
	// kv is the key, then the value (when present). A free entry keeps a
	// small buffer for the next entry to use.
	kv      []byte
	hash    uint64
	id      uint64 // state id
	klen    uint32
	dpos    uint32 // position in the state's dirty list, while dirty
	used    bool   // false: free
	present bool   // false: the key is absent (or deleted)
	dirty   bool   // differs from the database
	ref     bool   // used since the CLOCK hand last passed
}

// entryOverhead is what an entry costs besides its allocation of key and
// value: the entry itself, two slots of the table (kept at most half
// full) and a slot of a dirty list.
const entryOverhead = int64(unsafe.Sizeof(cacheEntry{})) + 2*8 + 4

// DefaultWriteCacheSize is the default of Options.WriteCacheSize.
const DefaultWriteCacheSize = 32 << 20

const (
	minIndexSlots = 64
	// maxKeptBuffer is the largest buffer a free entry keeps for reuse.
	maxKeptBuffer = 256
	// writeBackChunk bounds the bytes a write-back batch collects: a flush
	// of a large cache commits several batches.
	writeBackChunk = 16 << 20
	// filterBudgetPerKey is the budget per key of the first layer of the
	// filter of keys written back: about what an entry costs.
	filterBudgetPerKey = 128
)

func newWriteCache(budget int64, db func() *pebble.DB, commit func(*pebble.Batch) error) *writeCache {
	return &writeCache{
		budget:  budget,
		db:      db,
		commit:  commit,
		seed:    maphash.MakeSeed(),
		index:   make([]uint64, minIndexSlots),
		mask:    minIndexSlots - 1,
		dirty:   make(map[uint64]*dirtyList),
		written: newWrittenFilter(int(min(budget/filterBudgetPerKey, 1<<30))),
	}
}

// restoring disables the filter of keys written: the database is about
// to hold entries the cache never wrote.
func (w *writeCache) restoring() { w.written = nil }

// live returns the number of entries in use.
func (w *writeCache) live() int { return len(w.entries) - len(w.free) }

func (e *cacheEntry) key() []byte   { return e.kv[:e.klen] }
func (e *cacheEntry) value() []byte { return e.kv[e.klen:] }
func (e *cacheEntry) cost() int64   { return int64(cap(e.kv)) + entryOverhead }

// lookup finds key: the index of its entry, or -1 and the empty slot where
// it would go. h is the key's hash.
func (w *writeCache) lookup(key []byte) (i int, slot uint64, h uint64) {
	h = maphash.Bytes(w.seed, key)
	tag := h >> 32
	for s := tag & w.mask; ; s = (s + 1) & w.mask {
		v := w.index[s]
		if v == 0 {
			return -1, s, h
		}
		if v>>32 == tag {
			if e := &w.entries[uint32(v)-1]; string(e.key()) == string(key) {
				return int(uint32(v) - 1), s, h
			}
		}
	}
}

// read returns the cached value of key, read by state id: hit is false
// when the cache does not know the key; present is false when the key is
// known to be absent. value is the cache's own memory, valid until the
// next call. A miss on a key the database certainly lacks — it holds only
// what the cache wrote back (the backend was not restored), and the filter
// of the keys written back never saw this one — is cached as absent and is
// a hit. The error is that of a write-back by eviction.
func (w *writeCache) read(id uint64, key []byte) (value []byte, present, hit bool, err error) {
	i, slot, h := w.lookup(key)
	if i >= 0 {
		e := &w.entries[i]
		e.ref = true
		return e.value(), e.present, true, nil
	}
	if w.written == nil || w.written.mayContain(h) {
		return nil, false, false, nil
	}
	w.insert(id, key, slot, h)
	return nil, false, true, w.evictIfFull()
}

// fill records what the database holds for key (value, or absent), read
// after a miss. The error is that of a write-back by eviction.
func (w *writeCache) fill(id uint64, key, value []byte, present bool) error {
	i, slot, h := w.lookup(key)
	if i >= 0 {
		return nil // cached already, and newer than the database
	}
	i = w.insert(id, key, slot, h)
	w.assign(&w.entries[i], value, present)
	return w.evictIfFull()
}

// put records a write of value at key (a state's entry).
func (w *writeCache) put(id uint64, key, value []byte) error { return w.write(id, key, value, true) }

// del records a deletion of key.
func (w *writeCache) del(id uint64, key []byte) error { return w.write(id, key, nil, false) }

// write records that key now holds value (present) or is deleted.
func (w *writeCache) write(id uint64, key, value []byte, present bool) error {
	i, slot, h := w.lookup(key)
	if i >= 0 {
		if e := &w.entries[i]; present == e.present && (!present || string(e.value()) == string(value)) {
			// What the entry holds already (a map's header on every put,
			// the deletion of a key known absent): dirty or not, there is
			// nothing new to write back.
			e.ref = true
			return nil
		}
	} else {
		i = w.insert(id, key, slot, h)
	}
	e := &w.entries[i]
	e.ref = true
	w.assign(e, value, present)
	w.markDirty(uint32(i))
	return w.evictIfFull()
}

// extend appends tail to the value of key (a list's chunks, which the
// database's merge operator would concatenate) when the cache knows the
// key: it is cached (absent: tail becomes its value), or the filter of the
// keys written back says the database lacks it. ok is false when the cache
// does not know the key: the caller then merges tail in the database. The
// value grows in place, so appending to a cached list costs its tail, not
// its length. The error is that of a write-back by eviction.
func (w *writeCache) extend(id uint64, key, tail []byte) (ok bool, err error) {
	i, slot, h := w.lookup(key)
	if i < 0 {
		if w.written == nil || w.written.mayContain(h) {
			return false, nil
		}
		i = w.insert(id, key, slot, h)
	}
	e := &w.entries[i]
	e.ref = true
	if !e.present {
		w.assign(e, tail, true)
	} else {
		w.size -= int64(cap(e.kv))
		e.kv = append(e.kv, tail...)
		w.size += int64(cap(e.kv))
	}
	w.markDirty(uint32(i))
	return true, w.evictIfFull()
}

// forget drops the entry of key, if cached, without writing it back: the
// caller deleted the key from the database after flushing the state.
func (w *writeCache) forget(key []byte) {
	if i, _, _ := w.lookup(key); i >= 0 {
		w.remove(uint32(i))
	}
}

// insert adds an entry for key, absent, at slot of the table (where
// lookup found none); h is the key's hash. It returns the entry's index.
func (w *writeCache) insert(id uint64, key []byte, slot, h uint64) int {
	if 2*(w.live()+1) > len(w.index) {
		w.grow()
		slot = w.emptySlot(h >> 32)
	}
	var i uint32
	if n := len(w.free); n > 0 {
		i = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		i = uint32(len(w.entries))
		w.entries = append(w.entries, cacheEntry{})
	}
	e := &w.entries[i]
	*e = cacheEntry{kv: append(e.kv[:0], key...), hash: h, id: id, klen: uint32(len(key)), used: true, ref: true}
	w.index[slot] = h>>32<<32 | uint64(i+1)
	w.size += e.cost()
	return int(i)
}

// emptySlot returns the first empty slot from the home of tag.
func (w *writeCache) emptySlot(tag uint64) uint64 {
	s := tag & w.mask
	for w.index[s] != 0 {
		s = (s + 1) & w.mask
	}
	return s
}

// grow doubles the table.
func (w *writeCache) grow() {
	old := w.index
	w.index = make([]uint64, 2*len(old))
	w.mask = uint64(len(w.index) - 1)
	for _, v := range old {
		if v != 0 {
			w.index[w.emptySlot(v>>32)] = v
		}
	}
}

// assign sets e's value, reusing its memory when the new value fits.
func (w *writeCache) assign(e *cacheEntry, value []byte, present bool) {
	w.size -= int64(cap(e.kv))
	e.kv = append(e.kv[:e.klen], value...) // nothing when absent
	e.present = present
	w.size += int64(cap(e.kv))
}

func (w *writeCache) markDirty(i uint32) {
	e := &w.entries[i]
	if e.dirty {
		return
	}
	e.dirty = true
	l := w.dirty[e.id]
	if l == nil {
		l = &dirtyList{}
		w.dirty[e.id] = l
	}
	e.dpos = uint32(len(l.idx))
	l.idx = append(l.idx, i)
}

// clean takes entry i off its state's dirty list: it was written back, or
// its key deleted from the database.
func (w *writeCache) clean(i uint32) {
	e := &w.entries[i]
	if !e.dirty {
		return
	}
	e.dirty = false
	l := w.dirty[e.id]
	last := l.idx[len(l.idx)-1]
	l.idx[e.dpos] = last
	w.entries[last].dpos = e.dpos
	l.idx = l.idx[:len(l.idx)-1]
}

// remove drops entry i from the cache without writing it back.
func (w *writeCache) remove(i uint32) {
	w.clean(i)
	e := &w.entries[i]
	w.unindex(e.hash>>32, i)
	w.size -= e.cost()
	kv := e.kv[:0]
	if cap(kv) > maxKeptBuffer {
		kv = nil
	}
	*e = cacheEntry{kv: kv}
	w.free = append(w.free, i)
}

// unindex removes the slot of entry i, whose hash has the high half tag,
// shifting back the slots after it that may move closer to their home.
func (w *writeCache) unindex(tag uint64, i uint32) {
	s := tag & w.mask
	for uint32(w.index[s]) != i+1 {
		s = (s + 1) & w.mask
	}
	for j := s; ; {
		j = (j + 1) & w.mask
		v := w.index[j]
		if v == 0 {
			break
		}
		home := v >> 32 & w.mask
		// The slot at j may move to s unless its home is cyclically in
		// (s, j].
		if s <= j && s < home && home <= j || s > j && (s < home || home <= j) {
			continue
		}
		w.index[s] = v
		s = j
	}
	w.index[s] = 0
}

// evictIfFull evicts entries, CLOCK order, while the cache is over budget,
// down to budget - budget/16, writing the dirty ones back in one batch.
func (w *writeCache) evictIfFull() error {
	if w.size <= w.budget {
		return nil
	}
	target := w.budget - w.budget/16
	ws := &w.sorting
	for w.size > target && w.live() > 0 {
		if w.hand >= len(w.entries) {
			w.hand = 0
		}
		i := w.hand
		w.hand++
		e := &w.entries[i]
		switch {
		case !e.used:
		case e.ref:
			e.ref = false
		default:
			dirty := e.dirty
			if dirty {
				ws.add(e)
			}
			w.remove(uint32(i))
			if dirty && len(ws.buf) >= writeBackChunk {
				if err := w.writeBack(); err != nil {
					return err
				}
			}
		}
	}
	return w.writeBack()
}

// flushState writes the dirty entries of state id to the database in one
// batch; they stay cached, clean.
func (w *writeCache) flushState(id uint64) error {
	if l := w.dirty[id]; l != nil {
		if err := w.drain(l); err != nil {
			return err
		}
	}
	return w.writeBack()
}

// flushAll writes every dirty entry to the database (in one batch unless
// they are many).
func (w *writeCache) flushAll() error {
	for _, l := range w.dirty {
		if err := w.drain(l); err != nil {
			return err
		}
	}
	return w.writeBack()
}

// drain adds the write-backs of the entries of l to w.sorting, marking them
// clean, and commits a batch whenever a chunk's worth is collected. The
// list stays exact if a commit fails.
func (w *writeCache) drain(l *dirtyList) error {
	for n := len(l.idx); n > 0; n = len(l.idx) {
		e := &w.entries[l.idx[n-1]]
		l.idx = l.idx[:n-1]
		e.dirty = false
		w.sorting.add(e)
		if len(w.sorting.buf) >= writeBackChunk {
			if err := w.writeBack(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeBack commits the write-backs added to w.sorting, in key order, in
// one batch.
func (w *writeCache) writeBack() error {
	ws := &w.sorting
	if len(ws.recs) == 0 {
		return nil
	}
	ws.sort()
	batch := w.db().NewBatch()
	defer batch.Close()
	for _, r := range ws.recs {
		key := ws.buf[r.off : r.off+r.klen]
		// A batch's Set and Delete fail only when it is read-only.
		if r.present {
			if w.written != nil {
				w.written.add(r.hash)
			}
			_ = batch.Set(key, ws.buf[r.off+r.klen:r.end], nil)
		} else {
			_ = batch.Delete(key, nil)
		}
	}
	ws.reset()
	return w.commit(batch)
}

// writeBackSort collects write-backs and sorts them by key. Keys and values
// are copied into one buffer, and each record holds the key's first 16
// bytes, so that most comparisons read the records alone: a flush of the
// whole cache sorts some 10^5 keys, and comparing them in place would
// cost a cache miss or two each.
type writeBackSort struct {
	buf  []byte
	recs []writeBackRec
}

type writeBackRec struct {
	pfx            [2]uint64 // the key's first 16 bytes, big-endian, zero-padded
	hash           uint64    // of the key
	off, klen, end uint32    // key at buf[off:off+klen], value up to end
	present        bool
}

func (ws *writeBackSort) add(e *cacheEntry) {
	off := uint32(len(ws.buf))
	ws.buf = append(ws.buf, e.kv...)
	var p [16]byte
	copy(p[:], e.key())
	ws.recs = append(ws.recs, writeBackRec{
		pfx:  [2]uint64{binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])},
		hash: e.hash, off: off, klen: e.klen, end: uint32(len(ws.buf)), present: e.present,
	})
}

func (ws *writeBackSort) sort() {
	buf := ws.buf
	slices.SortFunc(ws.recs, func(a, b writeBackRec) int {
		if c := cmp.Compare(a.pfx[0], b.pfx[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pfx[1], b.pfx[1]); c != 0 {
			return c
		}
		return bytes.Compare(buf[a.off:a.off+a.klen], buf[b.off:b.off+b.klen])
	})
}

// reset empties ws, keeping its memory unless a flush of the whole cache
// made it large.
func (ws *writeBackSort) reset() {
	if cap(ws.buf) > 4<<20 {
		*ws = writeBackSort{}
		return
	}
	ws.buf, ws.recs = ws.buf[:0], ws.recs[:0]
}

// reset empties the cache without writing anything back: the database was
// replaced or wiped (restore), or is being removed (Close).
func (w *writeCache) reset() {
	clear(w.index)
	clear(w.entries)
	w.entries, w.free = w.entries[:0], w.free[:0]
	w.hand, w.size = 0, 0
	clear(w.dirty)
	w.sorting.reset()
}
