package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Kind is the kind of a keyed state: what its entry values hold (see the
// package documentation for each kind's value bytes).
type Kind uint8

// The kinds. Their numbers are written to files and must never change.
const (
	KindValue       Kind = 1
	KindList        Kind = 2
	KindMap         Kind = 3
	KindReducing    Kind = 4
	KindAggregating Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindReducing:
		return "reducing"
	case KindAggregating:
		return "aggregating"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

func (k Kind) valid() bool { return k >= KindValue && k <= KindAggregating }

// StateInfo describes how a state's entries are laid out. A plain state (a
// value state with no namespace and no TTL: the only kind of state format
// version 1 holds) is never described in a file; every other state that has
// entries in a file is described in its header.
type StateInfo struct {
	Name string
	Kind Kind
	// Namespaced: entry keys are the key's bytes followed by the
	// namespace's bytes.
	Namespaced bool
	// TTL: entry values start with the 8-byte last-access timestamp.
	TTL bool
}

// Plain reports whether i describes a plain state: a value state with
// neither namespace nor TTL. Plain is what a reader assumes of a state the
// file does not describe.
func (i StateInfo) Plain() bool { return i.Kind == KindValue && !i.Namespaced && !i.TTL }

// PlainInfo returns the info of a plain state named name.
func PlainInfo(name string) StateInfo { return StateInfo{Name: name, Kind: KindValue} }

func (i StateInfo) String() string {
	s := i.Kind.String() + " state"
	if i.Namespaced {
		s = "namespaced " + s
	}
	if i.TTL {
		s += " with TTL"
	}
	return s
}

// Flag bits of a state description.
const (
	flagNamespaced = 1 << 0
	flagTTL        = 1 << 1
	knownFlags     = flagNamespaced | flagTTL
)

func (i StateInfo) flags() uint64 {
	var f uint64
	if i.Namespaced {
		f |= flagNamespaced
	}
	if i.TTL {
		f |= flagTTL
	}
	return f
}

// TTLPrefixLen is the length of the last-access timestamp that starts every
// entry value of a state with a TTL.
const TTLPrefixLen = 8

// AppendTTL appends the last-access timestamp lastAccess (milliseconds since
// the Unix epoch) as the prefix of a TTL state's entry value: 8 bytes,
// big-endian, with the sign bit flipped (codec.Int64's encoding), so that
// the bytes of two timestamps compare as the timestamps do.
func AppendTTL(dst []byte, lastAccess int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(lastAccess)^(1<<63))
}

// SplitTTL splits the entry value of a TTL state into its last-access
// timestamp and the value bytes that follow it.
func SplitTTL(value []byte) (lastAccess int64, rest []byte, err error) {
	if len(value) < TTLPrefixLen {
		return 0, nil, corrupt("TTL entry value has %d bytes, fewer than its %d-byte timestamp", len(value), TTLPrefixLen)
	}
	return int64(binary.BigEndian.Uint64(value) ^ (1 << 63)), value[TTLPrefixLen:], nil
}

// ExpiresAt returns when an entry last accessed at lastAccess expires under
// a TTL of ttl milliseconds (ttl > 0): it is expired at every time at or
// after the returned one. Timestamps near the end of int64 never expire.
func ExpiresAt(lastAccess, ttl int64) int64 {
	if lastAccess > math.MaxInt64-ttl {
		return math.MaxInt64
	}
	return lastAccess + ttl
}
