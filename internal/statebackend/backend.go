package statebackend

import "github.com/weirstream/weir/internal/keygroup"

// KeyedBackend is the part of a keyed backend that does not depend on the
// type of a state's values. State handles are created by each backend's own
// typed constructors.
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
}
