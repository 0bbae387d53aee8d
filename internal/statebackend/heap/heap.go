package heap

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

// Backend holds the keyed state of one subtask. It is not safe for
// concurrent use: every method, and every method of its states, runs on the
// task goroutine, except Snapshot.WriteState of the snapshots it returns.
type Backend[K comparable] struct {
	groups   keygroup.Range
	keyCodec codec.Codec[K]
	key      K
	slot     int            // current key group minus groups.Start
	hash     func(K) uint64 // of the flat tables (see hasherFor)
	clock    func() int64

	states map[string]*namedState
	names  []string // keys of states, sorted: the order of states in a snapshot

	restored bool // Restore was called

	// Copy-on-write bookkeeping (see the package documentation).
	version     uint64   // version of the latest snapshot; 0 before the first
	live        []uint64 // versions of the snapshots not yet released
	frozenBelow uint64   // max(live), 0 when none: maps made before it are frozen

	layouts uint64 // the last flatTable.layout handed out
}

// newLayout returns a layout identifier never returned before (see
// flatTable.layout); 0 is never one.
func (b *Backend[K]) newLayout() uint64 {
	b.layouts++
	return b.layouts
}

// Options configure a Backend. The zero value gives the defaults.
type Options struct {
	// Clock returns the processing time in milliseconds since the Unix
	// epoch. States with a TTL read it on access, Snapshot reads it once to
	// leave expired entries out, and registration reads it to drop restored
	// entries that expired. It is called on the task goroutine only.
	// Default: the wall clock, time.Now().UnixMilli().
	Clock func() int64
}

// namedState is a state name's entry: a registered state, or bytes restored
// for a name no state has registered (yet).
type namedState struct {
	typed registered          // nil until registered
	raw   []format.StateBlock // by slot, when restored and not registered; Entries == 0 where absent
	info  format.StateInfo    // of raw: how the restored entries are laid out
}

// registered is what a snapshot needs of a typed state.
type registered interface {
	// capture freezes the state's tables for a snapshot taken at time now
	// (for TTL: entries expired at now are left out).
	capture(now int64) captured
}

// captured is one state's part of a snapshot: immutable once captured, read
// by WriteState on its own goroutine.
type captured interface {
	// stateInfo describes the state.
	stateInfo() format.StateInfo
	// entries returns the number of entries the snapshot writes for the key
	// group at slot.
	entries(slot int) int
	// write writes the state's n entries in the key group at slot; n is
	// what entries returned, at least one.
	write(w *format.Writer, slot, n int, sc *scratch) error
}

var _ statebackend.KeyedBackend[string] = (*Backend[string])(nil)

// New returns an empty backend for the key groups in r, with default
// Options. keyCodec encodes keys in snapshots and decodes restored ones; it
// must be the codec whose bytes pick each key's key group.
func New[K comparable](r keygroup.Range, keyCodec codec.Codec[K]) *Backend[K] {
	return NewWithOptions(r, keyCodec, Options{})
}

// NewWithOptions is New with options.
func NewWithOptions[K comparable](r keygroup.Range, keyCodec codec.Codec[K], opts Options) *Backend[K] {
	clock := opts.Clock
	if clock == nil {
		clock = func() int64 { return time.Now().UnixMilli() }
	}
	return &Backend[K]{groups: r, keyCodec: keyCodec, clock: clock, hash: hasherFor[K](), states: make(map[string]*namedState)}
}

// Kind implements statebackend.KeyedBackend.
func (b *Backend[K]) Kind() string { return "heap" }

// KeyGroups implements statebackend.KeyedBackend.
func (b *Backend[K]) KeyGroups() keygroup.Range { return b.groups }

// SetCurrentKey implements statebackend.KeyedBackend.
func (b *Backend[K]) SetCurrentKey(key K, keyGroup int) {
	b.key = key
	b.slot = keyGroup - b.groups.Start
}

// CurrentKey implements statebackend.KeyedBackend.
func (b *Backend[K]) CurrentKey() K { return b.key }

// now returns the processing time in milliseconds.
func (b *Backend[K]) now() int64 { return b.clock() }

// lookupForRegister returns the entry of name for a new typed state, or an
// error if a state of that name is registered already.
func (b *Backend[K]) lookupForRegister(name string) (*namedState, error) {
	st := b.states[name]
	if st != nil && st.typed != nil {
		return nil, fmt.Errorf("state %q is registered twice: state names must be unique per operator", name)
	}
	return st, nil
}

// register records s as the state named name, replacing restored bytes.
func (b *Backend[K]) register(name string, s registered) {
	if st := b.states[name]; st != nil {
		st.typed, st.raw = s, nil
		return
	}
	b.states[name] = &namedState{typed: s}
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
}

// writable reports whether a map made when the backend was at version ver
// may be written in place: no unreleased snapshot froze it.
//
// A map made at version ver (that is, after snapshot ver and before snapshot
// ver+1) is captured by every snapshot taken while it is the live map, and
// only by those, whose versions are all above ver. So it is frozen exactly
// when some unreleased snapshot has a version above ver, that is when ver <
// max(live). Releasing a snapshot lowers the maximum only past versions no
// other unreleased snapshot needs.
func (b *Backend[K]) writable(ver uint64) bool { return ver >= b.frozenBelow }
