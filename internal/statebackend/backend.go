package statebackend

import (
	"io"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

// KeyedBackend is the part of a keyed backend that does not depend on the
// type of a state's values. State handles are created by each backend's own
// typed constructors.
//
// Every method runs on the task goroutine that owns the backend; only
// Snapshot.WriteState runs elsewhere.
type KeyedBackend[K comparable] interface {
	// Kind names the backend: "heap" or "pebble".
	Kind() string
	// KeyGroups is the range of key groups the backend holds.
	KeyGroups() keygroup.Range
	// SetCurrentKey scopes every state handle of the backend to key, whose key
	// group is keyGroup (which must lie in KeyGroups).
	SetCurrentKey(key K, keyGroup int)
	// CurrentKey returns the key set last.
	CurrentKey() K

	// Snapshot runs the synchronous part of checkpoint id on the task
	// goroutine: it freezes a view of the state as it is now, in time that
	// depends on the number of key groups and states but not on the number
	// of keys (no state is copied). The task then keeps processing and
	// writing state; the view does not change.
	//
	// The returned Snapshot must be released (Snapshot.Release) on the task
	// goroutine, whether or not its WriteState ran or succeeded. Several
	// snapshots may be in flight at once (maxConcurrent > 1) and be released
	// in any order.
	Snapshot(id int64) (Snapshot, error)

	// Restore loads keyed state into a fresh backend: it must be called at
	// most once, before any state is registered or snapshot taken.
	//
	// Every key group of KeyGroups found in handles is loaded; handles may
	// cover other key groups too (after rescaling), and those are skipped
	// without being read: a handle that covers none of KeyGroups is not even
	// opened. open returns the bytes of a handle; the runtime reads the file
	// (or Inline) and checks its CRC. The backend does not modify the bytes
	// open returns, nor keep them after Restore returns.
	//
	// Restored state is kept as bytes and decoded when the state is
	// registered with its codec, so decode errors surface at registration
	// and name the state and the key group. A restored state that is never
	// registered is written unchanged into every later snapshot. A key group
	// found in no handle starts empty; one found in two handles is an error.
	// Malformed bytes give an error wrapping format.ErrCorrupt.
	Restore(handles []checkpoint.KeyedStateHandle, open func(h checkpoint.KeyedStateHandle) ([]byte, error)) error
}

// Snapshot is the frozen view of a backend's state taken by
// KeyedBackend.Snapshot: the asynchronous part of a checkpoint.
//
// WriteState and Release are the only methods, and their goroutines differ:
//
//   - WriteState may run on any goroutine, at most once, concurrently with
//     the task goroutine's use of the backend (reads, writes, further
//     snapshots and releases of other snapshots).
//   - Release runs on the task goroutine, exactly once, after WriteState has
//     returned — or without WriteState ever being called, when the
//     checkpoint is aborted first. Calling Release while WriteState runs is
//     a bug (a heap snapshot panics, as the frozen maps would otherwise be
//     written under the writer): to abandon a slow write, make w fail (for
//     example on context cancellation), wait for WriteState to return, then
//     Release. A second Release is a no-op.
type Snapshot interface {
	// WriteState streams the frozen state to w in the canonical format of
	// package format and returns the handle of what it wrote, with Backend,
	// StartGroup, EndGroup, Offsets, Size and CRC set; the caller sets Path
	// or Inline. It stops at w's first error and returns it, wrapped.
	//
	// (Not named WriteTo: that name promises io.WriterTo's signature.)
	WriteState(w io.Writer) (checkpoint.KeyedStateHandle, error)
	// Release unfreezes what the snapshot held, so that later writes no
	// longer copy on write for its sake.
	Release()
}
