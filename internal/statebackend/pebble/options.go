package pebble

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/state"
)

// Options configure a Backend. The zero value is not valid: Dir is required.
type Options struct {
	// Dir is the local working directory of the backend. New creates it if
	// needed and opens the database in its subdirectory "db", which must not
	// exist yet; Close removes that subdirectory, and Dir too if nothing else
	// is left in it. Give every backend (every subtask of every keyed
	// operator, and every attempt of the job) a directory of its own, on a
	// local disk. Required.
	Dir string
	// CacheSize is the size in bytes of the backend's block cache: the
	// uncompressed blocks of the database's files that reads keep in
	// memory, and the memtables, which pebble charges to it (up to two of
	// MemTableSize). Ignored when Cache is set. Default: 128 MiB (64 MiB
	// for blocks when both memtables are full).
	CacheSize int64
	// Cache, when set, is a block cache shared with other backends (made
	// with NewCache; each backend takes its own reference, so the creator
	// may release its reference with Cache.Unref once the backends are
	// made). Default: nil, a cache of CacheSize for this backend alone.
	Cache *pebble.Cache
	// WriteCacheSize is the budget in bytes of the write-back cache of
	// keyed state in front of the database (cache.go): the entries of
	// value, map, reducing and aggregating states that were read or
	// written last, so that a hot key is read and written in memory and
	// reaches the database in batches (on eviction, before an iteration of
	// its state, and before every snapshot). Negative disables the cache:
	// every access is a database read or write. Default:
	// DefaultWriteCacheSize (32 MiB).
	WriteCacheSize int64
	// MemTableSize is the size in bytes of the in-memory table that takes
	// writes before they are flushed to a file. Up to two may exist at once
	// (one being flushed), charged to the block cache; pebble starts a
	// database's first memtables small and doubles them up to this size,
	// so a small state does not pay for it. Must be in [64 KiB, 4 GiB).
	// Default: 32 MiB: a larger memtable absorbs more writes before each
	// flush, and fewer flushes mean fewer compactions (with 8 MiB, Nexmark
	// q16 spent 42% of its CPU in compactions; BENCHMARKS.md). Keep two of
	// them well below CacheSize: a cache the memtables fill reads every
	// block from disk (64 MiB memtables in a 64 MiB cache halved q5).
	MemTableSize uint64
	// FS is the file system the backend keeps its files in: the seam for
	// in-memory (vfs.NewMem) and fault-injecting (errorfs) tests.
	// Default: vfs.Default, the operating system's.
	FS vfs.FS
	// OnError is called when a state access (any method of a state) fails:
	// a disk error, a closed backend, or stored bytes the state's codec
	// cannot decode. Those methods have no error result (they implement
	// the state package's interfaces), so the runtime passes a function that fails the task
	// and does not return (runtime.Fail). If OnError returns, the access
	// has no effect and Value reports no value. Default: panic with the
	// error.
	OnError func(error)
	// Logger receives the database's own log messages. Default: discards
	// them.
	Logger *slog.Logger
	// Clock returns the processing time in milliseconds since the Unix
	// epoch. States with a TTL read it on access, and Snapshot reads it once
	// to leave expired entries out. It is called on the task goroutine
	// only. Default: the wall clock, time.Now().UnixMilli().
	Clock func() int64
	// DisableCompactions stops the database from compacting its files in
	// the background (flushes still happen). Only for tests and benchmarks
	// that measure what incremental checkpoints upload apart from
	// compactions: reads slow down as files pile up. Default: false.
	DisableCompactions bool
	// EventListener, when set (tests), is told of the database's flushes,
	// compactions and the tables they create; every database the backend
	// opens gets its own copy. Default: nil.
	EventListener *pebble.EventListener
}

// Option is an optional setting of a state, given to its constructor.
type Option func(*stateOptions)

type stateOptions struct {
	ttl    state.TTLConfig
	hasTTL bool
}

// WithTTL makes the state's entries expire (see state.TTLConfig), as on the
// heap backend: an expired entry is never returned, is removed when it is
// accessed and is left out of snapshots. The constructor fails if c is not
// valid.
func WithTTL(c state.TTLConfig) Option {
	return func(o *stateOptions) { o.ttl, o.hasTTL = c, true }
}

// Defaults of Options.
const (
	DefaultCacheSize    = 128 << 20
	DefaultMemTableSize = 32 << 20

	minMemTableSize = 64 << 10
	maxMemTableSize = 4 << 30
)

// NewCache returns a block cache of size bytes to share between backends
// through Options.Cache. The caller holds one reference and releases it
// with Unref.
func NewCache(size int64) *pebble.Cache { return pebble.NewCache(size) }

// EnsureDefaults fills the fields left zero with their defaults.
func (o *Options) EnsureDefaults() {
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.WriteCacheSize == 0 {
		o.WriteCacheSize = DefaultWriteCacheSize
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.OnError == nil {
		o.OnError = func(err error) { panic(err) }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = func() int64 { return time.Now().UnixMilli() }
	}
}

// Validate reports the first field that is out of range, after defaults.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("pebble backend: Options.Dir is empty; set it to a local directory of the backend's own")
	case o.CacheSize < 0:
		return fmt.Errorf("pebble backend: Options.CacheSize is %d; it must be positive (0 for the default, %d)", o.CacheSize, DefaultCacheSize)
	case o.MemTableSize < minMemTableSize || o.MemTableSize >= maxMemTableSize:
		return fmt.Errorf("pebble backend: Options.MemTableSize is %d; it must be in [%d, %d) (0 for the default, %d)", o.MemTableSize, minMemTableSize, uint64(maxMemTableSize), DefaultMemTableSize)
	case o.Cache == nil && 2*int64(o.MemTableSize) >= o.CacheSize:
		return fmt.Errorf("pebble backend: Options.MemTableSize is %d and Options.CacheSize %d: two memtables, which pebble charges to the block cache, would leave no room for blocks and every read would go to disk; make CacheSize more than twice MemTableSize", o.MemTableSize, o.CacheSize)
	}
	return nil
}

// dbOptions are the options of every pebble database of a backend: the one
// New opens, a checkpoint adopted by RestoreNative (the merger's name is
// recorded in the database: it must match) and, read-only, the other
// checkpoints RestoreNative copies from. cache is the block cache.
func (o *Options) dbOptions(cache *pebble.Cache, readOnly bool) *pebble.Options {
	opts := &pebble.Options{
		FS:           noSyncFS{o.FS},
		Cache:        cache,
		MemTableSize: o.MemTableSize,
		// The database is a working copy: after a failure the job restores
		// from a checkpoint into a new directory, never from this one, so a
		// write-ahead log would buy nothing. Incremental snapshots flush the
		// memtable instead (SnapshotIncremental).
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Merger:             listMerger,
		Logger:             pebbleLogger{o.Logger},
		ReadOnly:           readOnly,
		// Incremental checkpoints upload the files that are new since the
		// last one: a flush, and every file a compaction wrote. With
		// pebble's defaults (a 64 MiB base level, files of 2 MiB doubling
		// per level) a compaction of L0, whose files span every key group
		// when updates are spread out, rewrites most of a base level of up
		// to 64 MiB. A small base level of small files keeps each
		// compaction, and what the next checkpoint uploads, smaller: with
		// 1M keys of 100 bytes and 1% of them updated between checkpoints,
		// 30 checkpoints uploaded 6.2-6.3% of the state each on average
		// instead of 8.2-9.0%, and 32-36% at worst instead of 49-60%
		// (BenchmarkIncrementalChurn, which measures what
		// incremental_size_test.go does for 5 checkpoints). Leveled
		// compaction of updates spread over every key still rewrites each
		// byte several times: the 5% of issue 4 is not met by every
		// checkpoint. The extra levels cost point reads more files; bloom
		// filters let a read skip the files without the key.
		LBaseMaxBytes:               lBaseMaxBytes,
		DisableAutomaticCompactions: o.DisableCompactions,
	}
	if o.EventListener != nil {
		l := *o.EventListener // pebble fills in the functions left nil
		opts.EventListener = &l
	}
	for i := range opts.TargetFileSizes {
		opts.TargetFileSizes[i] = targetFileSize
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	return opts
}

// The shape of the database's levels (dbOptions).
const (
	lBaseMaxBytes   = 8 << 20
	targetFileSize  = 1 << 20
	bloomBitsPerKey = 10
)

// pebbleLogger sends the database's messages to a slog.Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by the database on an invariant violation it cannot
// continue from. pebble's default logger exits the process; a panic at least
// lets a test or a supervisor see the message.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("pebble: " + msg)
}
