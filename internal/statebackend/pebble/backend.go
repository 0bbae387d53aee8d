package pebble

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Kind is the name of the backend, in KeyedStateHandle.Backend and
// KeyedBackend.Kind.
const Kind = "pebble"

// ErrClosed is returned, or given to Options.OnError, when the backend is
// used after Close.
var ErrClosed = errors.New("pebble backend: closed")

// Backend holds the keyed state of one subtask in a pebble database in a
// local directory.
//
// It is not safe for concurrent use: every method, and every method of its
// states, runs on the task goroutine, except Snapshot.WriteState of the
// snapshots it returns.
type Backend[K comparable] struct {
	groups   keygroup.Range
	keyCodec codec.Codec[K]
	opts     Options
	dbDir    string
	db       *pebble.DB
	cache    *writeCache // nil when Options.WriteCacheSize is negative

	// The current key. keyBytes are its codec bytes, encoded at the first
	// state access after SetCurrentKey (keyValid).
	key      K
	group    int
	keyBytes []byte
	keyValid bool

	// State names, registered or restored.
	states     map[string]stateMeta
	names      []string // keys of states, sorted: the order of states in a snapshot
	registered map[string]bool
	unchecked  map[string]bool // restored and not registered yet: sampled at registration
	nextID     uint64
	restored   bool
	snapshots  int // snapshots taken, full or incremental

	// changelog, when attached, logs every write (changelog.go).
	changelog *Changelog

	// mu guards what WriteState, on another goroutine, shares with the task
	// goroutine. closed is written under mu, on the task goroutine only, so
	// the task goroutine may read it without mu.
	mu      sync.Mutex
	closed  bool
	live    map[*snapshot[K]]struct{} // snapshots not yet released
	writing sync.WaitGroup            // WriteState calls running
}

var _ statebackend.KeyedBackend[string] = (*Backend[string])(nil)

// New opens a backend for the key groups in r, with an empty database in
// opts.Dir. keyCodec encodes keys into the database and into snapshots; it
// must be the codec whose bytes pick each key's key group.
//
// New starts the database's background goroutines (flushes and
// compactions); Close stops them. A backend that New returned must be
// closed.
func New[K comparable](r keygroup.Range, keyCodec codec.Codec[K], opts Options) (*Backend[K], error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	switch {
	case r.Start < 0 || r.End < r.Start || r.End > keygroup.UpperBoundMaxParallelism:
		return nil, fmt.Errorf("pebble backend: key-group range %v is invalid: it must lie in [0, %d)", r, keygroup.UpperBoundMaxParallelism)
	case keyCodec == nil:
		return nil, errors.New("pebble backend: nil key codec")
	}
	fs := opts.FS
	dbDir := fs.PathJoin(opts.Dir, "db")
	if _, err := fs.Stat(dbDir); err == nil {
		return nil, fmt.Errorf("pebble backend: %s exists already: Options.Dir %q is used by another backend or was not cleaned up; give every backend a directory of its own and remove stale ones at startup", dbDir, opts.Dir)
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("pebble backend: %w", err)
	}
	if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebble backend: create Options.Dir: %w", err)
	}
	cache := opts.Cache
	if cache == nil {
		cache = pebble.NewCache(opts.CacheSize)
		defer cache.Unref() // the database holds its own reference
	}
	db, err := pebble.Open(dbDir, opts.dbOptions(cache, false))
	if err != nil {
		_ = fs.RemoveAll(dbDir)
		return nil, fmt.Errorf("pebble backend: open database in %s: %w", dbDir, err)
	}
	b := &Backend[K]{
		groups:     r,
		keyCodec:   keyCodec,
		opts:       opts,
		dbDir:      dbDir,
		db:         db,
		states:     make(map[string]stateMeta),
		registered: make(map[string]bool),
		unchecked:  make(map[string]bool),
		nextID:     1,
		live:       make(map[*snapshot[K]]struct{}),
	}
	if opts.WriteCacheSize > 0 {
		b.cache = newWriteCache(opts.WriteCacheSize, func() *pebble.DB { return b.db }, b.commitBatch)
	}
	return b, nil
}

// flushCache writes every dirty entry of the write-back cache to the
// database: before a snapshot or checkpoint of it.
func (b *Backend[K]) flushCache() error {
	if b.cache == nil {
		return nil
	}
	if err := b.cache.flushAll(); err != nil {
		return fmt.Errorf("pebble backend: flush the write cache: %w", err)
	}
	return nil
}

// resetCache empties the write-back cache without writing it back: the
// database was replaced or wiped.
func (b *Backend[K]) resetCache() {
	if b.cache != nil {
		b.cache.reset()
	}
}

// restoringCache empties the write-back cache before a restore, and stops
// it from answering misses without reading the database.
func (b *Backend[K]) restoringCache() {
	if b.cache != nil {
		b.cache.reset()
		b.cache.restoring()
	}
}

// Kind implements statebackend.KeyedBackend.
func (b *Backend[K]) Kind() string { return Kind }

// KeyGroups implements statebackend.KeyedBackend.
func (b *Backend[K]) KeyGroups() keygroup.Range { return b.groups }

// SetCurrentKey implements statebackend.KeyedBackend. The key is encoded at
// the first state access that needs it, once.
func (b *Backend[K]) SetCurrentKey(key K, keyGroup int) {
	b.key, b.group, b.keyValid = key, keyGroup, false
}

// CurrentKey implements statebackend.KeyedBackend.
func (b *Backend[K]) CurrentKey() K { return b.key }

// Dir returns the directory of the database (Options.Dir/db).
func (b *Backend[K]) Dir() string { return b.dbDir }

// currentKeyBytes returns the codec bytes of the current key.
func (b *Backend[K]) currentKeyBytes() ([]byte, error) {
	if !b.keyValid {
		if !b.groups.Contains(b.group) {
			return nil, fmt.Errorf("pebble backend: key %v has key group %d, outside the backend's range %v", b.key, b.group, b.groups)
		}
		b.keyBytes = b.keyCodec.Append(b.keyBytes[:0], b.key)
		b.keyValid = true
	}
	return b.keyBytes, nil
}

// fail reports an error of a state access.
func (b *Backend[K]) fail(err error) { b.opts.OnError(err) }

// stateMeta is what the backend knows of a state name.
type stateMeta struct {
	id   uint64           // in the key layout
	info format.StateInfo // how its entries are laid out in snapshots

	// Set when a typed state registers the name; zero for a restored state
	// not registered (yet), whose entries are the canonical ones, written
	// into snapshots as they are.
	typed   bool
	ttl     int64 // milliseconds; 0 without TTL
	grouped bool  // the entries are in the grouped layout (see layout.go)
}

// addName gives the new state name an id and records it with its info, in
// the database too (batch, when not nil, or directly).
func (b *Backend[K]) addName(info format.StateInfo, batch *pebble.Batch) (uint64, error) {
	name, id := info.Name, b.nextID
	v := appendMetaState(nil, id, info)
	var err error
	if batch != nil {
		err = batch.Set(metaStateKey(name), v, nil)
	} else {
		err = b.dbSet(metaStateKey(name), v)
	}
	if err != nil {
		return 0, fmt.Errorf("pebble backend: record state %q: %w", name, err)
	}
	b.nextID++
	b.states[name] = stateMeta{id: id, info: info}
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
	return id, nil
}

// regSpec is what a typed state gives register besides its info.
type regSpec struct {
	ttl int64 // milliseconds; 0 without TTL
	// grouped says that the kind keeps its entries in the grouped layout
	// (layout.go); explode then splits a canonical entry value (after the
	// TTL prefix) into its sub-entries, decoding them with the state's
	// codecs, to convert restored entries.
	grouped bool
	explode func(rest []byte, emit func(sub, payload []byte) error) error
	// check decodes one restored canonical entry (entry key and value
	// bytes), so that a codec that does not match the restored bytes is
	// caught at registration rather than on the first read of the key.
	check func(key, value []byte) error
}

// register records the typed state described by info and returns its id.
// If the state was restored, it must have been written as info says: check
// is given one restored entry of each key group in which the state was
// restored, and a grouped kind's restored entries are all decoded and
// converted to the grouped layout now.
func (b *Backend[K]) register(info format.StateInfo, spec regSpec) (uint64, error) {
	name := info.Name
	if err := b.checkNewName(name); err != nil {
		return 0, err
	}
	st, known := b.states[name]
	if b.unchecked[name] {
		if err := checkRestoredInfo(st.info, info); err != nil {
			return 0, err
		}
		if err := b.sample(name, st.id, spec.check); err != nil {
			return 0, err // the bytes stay, so the state is not lost
		}
		if spec.grouped {
			if err := b.convertRestored(name, st.id, spec); err != nil {
				return 0, err
			}
		}
		delete(b.unchecked, name)
	}
	id := st.id
	if !known {
		var err error
		if id, err = b.addName(info, nil); err != nil {
			return 0, err
		}
		if spec.grouped {
			if err := b.dbSet(metaGroupedKey(name), nil); err != nil {
				return 0, fmt.Errorf("pebble backend: record state %q: %w", name, err)
			}
		}
	}
	st = b.states[name]
	st.typed, st.ttl, st.grouped = true, spec.ttl, spec.grouped
	b.states[name] = st
	b.registered[name] = true
	return id, nil
}

// checkNewName returns an error if a typed state cannot be registered as
// name now.
func (b *Backend[K]) checkNewName(name string) error {
	if b.closed {
		return fmt.Errorf("state %q: %w", name, ErrClosed)
	}
	if b.registered[name] {
		return fmt.Errorf("state %q is registered twice: state names must be unique per operator", name)
	}
	return nil
}

// sample calls check with the first entry of state id in every key group.
// It costs one seek per key group, whatever the size of the state.
func (b *Backend[K]) sample(name string, id uint64, check func(key, value []byte) error) (err error) {
	it, err := b.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("restore state %q: %w", name, err)
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var prefix []byte
	for g := b.groups.Start; g < b.groups.End; g++ {
		prefix = appendStatePrefix(prefix[:0], g, id)
		if !it.SeekGE(prefix) || !hasPrefix(it.Key(), prefix) {
			continue
		}
		_, _, key, err := splitEntryKey(it.Key())
		if err != nil {
			return fmt.Errorf("restore state %q, key group %d: %w", name, g, err)
		}
		value, err := it.ValueAndErr()
		if err == nil {
			err = check(key, value)
		}
		if err != nil {
			return fmt.Errorf("restore state %q, key group %d: %w", name, g, err)
		}
	}
	return it.Error()
}

// checkRestoredInfo refuses to register a state over restored entries laid
// out differently. (The heap backend's messages, word for word.)
func checkRestoredInfo(restored, registered format.StateInfo) error {
	name := registered.Name
	switch {
	case restored.Kind != registered.Kind:
		return fmt.Errorf("state %q was written as a %v state and is registered as a %v state: register it as a %v state, or give the new state another name",
			name, restored.Kind, registered.Kind, restored.Kind)
	case restored.Namespaced && !registered.Namespaced:
		return fmt.Errorf("state %q was written with namespaces and is registered without: register it with a namespace codec", name)
	case !restored.Namespaced && registered.Namespaced:
		return fmt.Errorf("state %q was written without namespaces and is registered with a namespace codec: register it without, or give the new state another name", name)
	case restored.TTL && !registered.TTL:
		return fmt.Errorf("state %q was written with a TTL and is registered without one: register it with a state.TTLConfig, or give the new state another name", name)
	case !restored.TTL && registered.TTL:
		return fmt.Errorf("state %q was written without a TTL and is registered with one: register it without a TTL, or give the new state another name", name)
	}
	return nil
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

// Close releases the snapshots not yet released, closes the database
// (stopping its goroutines) and removes its directory, and Options.Dir if
// nothing else is left in it. It first waits for the WriteState calls that
// are running to return: make their writers fail to cut that short.
//
// What a snapshot needs outlives Close: a WriteState that ran has written
// everything, and the files of an incremental snapshot are hard links (or
// copies) in a directory of the caller's, which Close never touches.
//
// Close is idempotent; the backend and its states must not be used after it
// (they report ErrClosed).
func (b *Backend[K]) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.writing.Wait() // no WriteState starts once closed is set

	b.mu.Lock()
	for s := range b.live {
		s.closeLocked()
	}
	b.mu.Unlock()

	// The database is removed below: writing the cache back would be wasted.
	b.resetCache()
	err := b.db.Close()
	if rerr := b.opts.FS.RemoveAll(b.dbDir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	_ = b.opts.FS.Remove(b.opts.Dir) // fails, as it should, if anything else is there
	if err != nil {
		return fmt.Errorf("pebble backend: close: %w", err)
	}
	return nil
}
