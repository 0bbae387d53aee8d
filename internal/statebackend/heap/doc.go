// Package heap is the state backend that keeps keyed state in Go maps, one map
// per state and key group, holding typed values (no serialization on access).
// Splitting by key group lets a snapshot or a rescale take whole key groups at
// a time.
//
// # Usage
//
//	b := heap.New(keygroup.RangeFor(128, 4, 0), codec.String())
//	count, err := heap.NewValueState(b, "count", codec.Int())
//	seen, err := heap.NewListState(b, "seen", codec.String(),
//		heap.WithTTL(state.TTLConfig{TTL: time.Hour}))
//	perWindow, err := heap.NewNamespacedReducingState(b, "sum", add, windowCodec, codec.Int())
//
//	// per record, on the task goroutine:
//	b.SetCurrentKey(key, keyGroup)
//	n, _ := count.Value()
//	count.Update(n + 1)
//	seen.Add(item)
//	perWindow.SetCurrentNamespace(w)
//	perWindow.Add(v)
//
// # Kinds
//
// Every kind has a constructor (NewValueState, NewListState, NewMapState,
// NewReducingState, NewAggregatingState) and a namespaced variant
// (NewNamespacedValueState, ...) that also takes the namespace codec. Each
// implements the matching handle of package state. Constructors take
// Options: WithTTL. Registering a name twice fails.
//
// # Namespaces
//
// A namespaced state scopes its entries to the current key and the current
// namespace, which the state holds: SetCurrentNamespace sets it (an
// assignment, so the caller — a window operator — sets it per record or per
// window at no cost), and it stays when the key changes. A namespaced
// state's table maps each key to a table of its namespaces, so Namespaces
// (the namespaces the current key has entries in, for window merging) and
// ClearAllNamespaces touch that key alone. List, reducing and aggregating
// states also have MergeNamespaces(target, sources...), which merges the
// sources' entries into the target's (concatenation, the reduce function,
// AggregateFunction.Merge) and removes them. States without namespaces keep
// a flat table per key group (see below): they pay nothing for namespaces.
//
// # TTL
//
// A state registered WithTTL keeps, next to each entry, the processing time
// of its last write (or access, with OnReadAndWrite), in milliseconds from
// the backend's clock (Options.Clock, time.Now by default). Every read checks
// it: an expired entry is never returned, and the read that finds it
// removes it. Snapshot reads the clock once; WriteState leaves out the
// entries expired at that time. Registration after a restore drops the
// entries expired by then. The TTL covers an entry as a whole: one key's
// (and namespace's) whole list or map.
//
// # Snapshots: copy-on-write per key group
//
// Backend.Snapshot, on the task goroutine, takes a new version and captures
// the table of every (state, key group) — slice and map references, so its
// cost is O(states × key groups), whatever the number of keys. The captured
// tables are frozen: the first write that touches a frozen table copies it
// and writes the copy, which is live and not frozen. Reads never copy
// (except a TTL state's reads that remove an expired entry or renew one),
// nor does clearing an absent key.
//
// A state without namespaces keeps each key group in a flatTable, an
// open-addressing hash table of its own (linear probing, a bitmap of used
// slots, keys next to their entries), rather than a Go map: copying it is a
// memmove of its slots, where maps.Clone re-inserts every entry, and the
// snapshot reads it as a plain slice. Namespaced states keep Go maps (a map
// of keys to per-key namespace maps), cloned with maps.Clone.
//
// The snapshot's WriteState, on another goroutine, then reads tables that
// nothing writes. It encodes one
// key group of one state at a time into a reused buffer and puts the entries
// in the format's key order with a radix sort over 8-byte chunks of the key
// bytes (keySorter; a comparison sort of byte slices cost four times as
// much CPU per entry), so a snapshot's cost is linear in the entries.
//
// Whether a map (or flat table) is frozen is decided by versions, not by a
// flag per map: a map made at backend version v is captured by every
// snapshot taken while it is live, all of which have versions above v, so
// it is frozen exactly when an unreleased snapshot has a version above v.
// The backend keeps the versions of unreleased snapshots and their
// maximum; Release drops one
// version and recomputes the maximum. Several snapshots can therefore be in
// flight and be released in any order: releasing an older one never
// unfreezes a map a newer one holds, and the cost of Release does not depend
// on the size of the state.
//
// A copy takes a whole key group of one state (about keys/maxParallelism
// entries); it happens at most once per (state, key group) per snapshot. The
// maps inside entries are versioned the same way, each on its own: a
// namespaced state's namespaces of one key, a map state's map of one key. A
// write to a frozen one copies that one map (once per snapshot), not its
// key group. List entries need no version: a list only grows in place (Add
// appends; Update stores a new slice; Clear drops it), and a snapshot reads
// a list only below the length it captured, so Add appends in amortized
// constant time even while a snapshot is in flight. Reducing and
// aggregating accumulators carry a version too: the user's reduce function
// or AggregateFunction may modify the accumulator it is given, so while a
// snapshot holds one, the state hands out a copy made through the codec
// (only for types that can share memory; see ReducingState).
//
// Values are stored as they are. A value — of a value state, a list
// element, a map value — must not be mutated in place after it was stored,
// through a pointer, slice or map it holds, since a snapshot may be encoding
// it on another goroutine: build a new value and store it. (Flink's heap
// backend has the same rule for mutable objects.)
//
// # Restore: lazy typing
//
// Restore keeps each state's entries as the bytes of the snapshot, per state
// name and key group, with the state's description from the file (kind,
// namespaces, TTL; see package format). A constructor checks that
// description against its own, refusing another kind or a change of
// namespaces or TTL with an error naming the state, and then decodes the
// entries with the state's codecs, reporting a decode error with the
// state's name and the key group. A restored state that is never registered
// is written back, byte for byte, into every later snapshot, so that state
// of a function whose Open changed is not lost silently.
//
// Snapshots use the canonical format of package format. A backend whose
// states are all plain value states (no namespace, no TTL) writes format
// version 1, byte for byte as before the other kinds existed.
package heap
