package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/internal/statebackend/format"
)

// The key layout (see the package documentation):
//
//	entry key = keyGroup:2 (big-endian) | stateID:uvarint | key | namespace
//	meta key  = 0xff 's' | state name  →  stateID:uvarint kind:uvarint flags:uvarint
//	            0xff 'g' | state name  →  (empty: the state is in the grouped layout, layout.go)
//
// key | namespace is the entry key of the canonical format: the key codec's
// bytes followed by the namespace codec's (nothing for a state without
// namespaces). Key groups are below 1<<15, so the first byte of an entry key
// is at most 0x7f and meta keys sort after every entry.

const (
	groupPrefixLen = 2
	metaPrefix     = 0xff
	metaStateName  = 's'
	metaGrouped    = 'g'
)

// errBadKey is wrapped when a key or meta entry in the database does not
// follow the layout: a bug or a damaged database.
var errBadKey = errors.New("malformed key in the database")

// appendGroupPrefix appends the prefix of every entry of key group g.
func appendGroupPrefix(dst []byte, g int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(g))
}

// appendStatePrefix appends the prefix of every entry of state id in key
// group g. The uvarint is prefix-free, so the prefix of one id is never the
// prefix of another's.
func appendStatePrefix(dst []byte, g int, id uint64) []byte {
	return binary.AppendUvarint(appendGroupPrefix(dst, g), id)
}

// appendEntryKey appends the database key of the canonical entry key ek in
// state id and key group g.
func appendEntryKey(dst []byte, g int, id uint64, ek []byte) []byte {
	return append(appendStatePrefix(dst, g, id), ek...)
}

// splitEntryKey is the inverse of appendEntryKey; ek aliases k.
func splitEntryKey(k []byte) (g int, id uint64, ek []byte, err error) {
	if len(k) < groupPrefixLen+1 {
		return 0, 0, nil, fmt.Errorf("%w: %x is too short", errBadKey, k)
	}
	g = int(binary.BigEndian.Uint16(k))
	id, n := binary.Uvarint(k[groupPrefixLen:])
	if n <= 0 || id == 0 {
		return 0, 0, nil, fmt.Errorf("%w: %x has no state id", errBadKey, k)
	}
	return g, id, k[groupPrefixLen+n:], nil
}

// prefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// metaStateKey is the key under which the id and description of state name
// are kept.
func metaStateKey(name string) []byte {
	return append([]byte{metaPrefix, metaStateName}, name...)
}

// metaGroupedKey is the key, with an empty value, that marks state name as
// kept in the grouped layout (layout.go) rather than as canonical entries.
func metaGroupedKey(name string) []byte {
	return append([]byte{metaPrefix, metaGrouped}, name...)
}

// metaStatePrefix is the prefix of every metaStateKey.
var metaStatePrefix = []byte{metaPrefix, metaStateName}

// appendMetaState appends the meta value of a state: its id and how its
// entries are laid out.
func appendMetaState(dst []byte, id uint64, info format.StateInfo) []byte {
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(info.Kind))
	var flags uint64
	if info.Namespaced {
		flags |= 1
	}
	if info.TTL {
		flags |= 2
	}
	return binary.AppendUvarint(dst, flags)
}

// parseMetaState is the inverse of appendMetaState, for state name.
func parseMetaState(name string, v []byte) (uint64, format.StateInfo, error) {
	id, n := binary.Uvarint(v)
	kind, m := binary.Uvarint(v[max(n, 0):])
	if n <= 0 || m <= 0 || id == 0 {
		return 0, format.StateInfo{}, fmt.Errorf("%w: meta entry of state %q: %x", errBadKey, name, v)
	}
	flags, l := binary.Uvarint(v[n+m:])
	if l <= 0 || n+m+l != len(v) || kind > 255 || flags > 3 {
		return 0, format.StateInfo{}, fmt.Errorf("%w: meta entry of state %q: %x", errBadKey, name, v)
	}
	return id, format.StateInfo{Name: name, Kind: format.Kind(kind), Namespaced: flags&1 != 0, TTL: flags&2 != 0}, nil
}
