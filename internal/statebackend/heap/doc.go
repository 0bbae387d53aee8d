// Package heap is the state backend that keeps keyed state in Go maps, one map
// per state and key group, holding typed values (no serialization on access).
// Splitting by key group lets a snapshot or a rescale take whole key groups at
// a time.
//
// # Snapshots: copy-on-write per key group
//
// Backend.Snapshot, on the task goroutine, takes a new version and captures
// the map of every (state, key group) — a slice of map references per state,
// so its cost is O(states × key groups), whatever the number of keys. The
// captured maps are frozen: the first Update or Clear that touches a frozen
// map clones it (maps.Clone) and writes the clone, which is live and not
// frozen. Reads never clone, nor does clearing an absent key. The snapshot's
// WriteState, on another goroutine, then reads maps that nothing writes.
//
// Whether a map is frozen is decided by versions, not by a flag per map: a
// map made at backend version v is captured by every snapshot taken while it
// is live, all of which have versions above v, so it is frozen exactly when
// an unreleased snapshot has a version above v. The backend keeps the
// versions of unreleased snapshots and their maximum; Release drops one
// version and recomputes the maximum. Several snapshots can therefore be in
// flight and be released in any order: releasing an older one never
// unfreezes a map a newer one holds, and the cost of Release does not depend
// on the size of the state.
//
// A clone copies a whole key group of one state (about keys/maxParallelism
// entries); it happens at most once per (state, key group) per snapshot.
//
// Values are stored as they are. A value must not be mutated in place after
// Update — through a pointer, slice or map it holds — since a snapshot may
// be encoding it on another goroutine: build a new value and Update with it.
// (Flink's heap backend has the same rule for mutable objects.)
//
// # Restore: lazy typing
//
// Restore keeps each state's entries as the bytes of the snapshot, per state
// name and key group; NewValueState decodes them with the state's codec when
// the user function registers the state, and reports a decode error with the
// state's name and the key group. A restored state that is never registered
// is written back, byte for byte, into every later snapshot, so that state of
// a function whose Open changed is not lost silently.
//
// Snapshots use the canonical format of package format.
package heap
