// Package format is the canonical encoding of a keyed-state snapshot: the
// bytes behind one checkpoint.KeyedStateHandle. It knows nothing of Go types
// or of a backend's data structures — keys and values are opaque byte strings
// produced by the codecs of the state's owner — so that every backend (heap
// today, pebble later) and savepoints write and read the same files, and state
// can move between backends.
//
// # Format (version 1)
//
// All integers are unsigned varints (encoding/binary.AppendUvarint); "bytes"
// means a uvarint length followed by that many bytes.
//
//	file   = header block{EndGroup-StartGroup}
//	header = "WKST" version startGroup endGroup
//	block  = keyGroup stateCount state{stateCount}
//	state  = name:bytes entryCount entry{entryCount}
//	entry  = key:bytes value:bytes
//
// A file covers the key groups [startGroup, endGroup) and holds exactly one
// block per key group, in increasing order; the handle's Offsets[i] is the
// byte offset of the block of key group startGroup+i, so that a rescaled
// subtask reads only the blocks of the key groups it owns. A block repeats
// its key group, so that a wrong offset is caught rather than loading the
// state of another group.
//
// Within a block, states are sorted by name (strictly increasing bytes) and a
// state with no entries in the group is left out. Within a state, entries are
// sorted by key bytes (strictly increasing: no key twice). The same state
// therefore always encodes to the same bytes, whichever backend wrote it and
// in whatever order its keys were inserted.
//
// Key bytes are those of the operator's key codec (the bytes whose hash picks
// the key group); value bytes are those of the state's value codec. The
// format does not record the codecs: the reader must register each state with
// a codec for the type that wrote it.
//
// # Errors
//
// Reading never panics and never allocates in proportion to a length or count
// it has not checked against the bytes present. Malformed input gives an
// error wrapping ErrCorrupt (or ErrVersion for a file written by a newer
// format) that says where the problem is.
package format
