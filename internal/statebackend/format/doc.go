// Package format is the canonical encoding of a keyed-state snapshot: the
// bytes behind one checkpoint.KeyedStateHandle. It knows nothing of Go types
// or of a backend's data structures — keys and values are opaque byte strings
// produced by the codecs of the state's owner — so that every backend (heap
// today, pebble later) and savepoints write and read the same files, and state
// can move between backends.
//
// # Format (versions 1 and 2)
//
// All integers are unsigned varints (encoding/binary.AppendUvarint); "bytes"
// means a uvarint length followed by that many bytes.
//
//	file   = header block{EndGroup-StartGroup}
//	header = "WKST" version startGroup endGroup [infos]   (infos in version 2 only)
//	infos  = infoCount info{infoCount}
//	info   = name:bytes kind flags
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
// # State descriptions (version 2)
//
// A plain state is a value state without namespace and without TTL: the only
// state version 1 knows. Every other state is described in the header of a
// version-2 file by an info: its name, its kind and its flags. Kinds:
//
//	1 value   2 list   3 map   4 reducing   5 aggregating
//
// Flags are bits: 1 namespaced, 2 TTL; other bits are invalid. Infos are
// sorted by name (strictly increasing), and a file describes exactly the
// states that are not plain and have at least one entry in the file (no
// plain state, no state without entries), so that the description too is
// canonical. A state a file does not describe is plain. A file without any
// description is written as version 1, byte for byte as before version 2
// existed: a job with only plain value states writes the same files as it
// always did, and version-1 files read as they always did.
//
// Writers call Writer.Describe before the first block; readers get a state's
// info from File.Info or StateBlock.Info. A backend checks the info of a
// restored state against the state registered under its name and refuses a
// mismatch (another kind, namespaced or not, TTL or not), naming the state.
//
// # Entry keys
//
// Key bytes are those of the operator's key codec (the bytes whose hash
// picks the key group). For a namespaced state the entry key is the key's
// bytes immediately followed by the namespace codec's bytes; a state without
// namespace has the key's bytes alone. The key codec's bytes must delimit
// themselves (codec.Codec.Decode says how many bytes a key used), which is
// how a reader splits key from namespace. Entries sort by these
// concatenated bytes like any others.
//
// # Entry values
//
// The value bytes of an entry depend on the state's kind, where "codec(x)"
// is the state's codec's bytes for x:
//
//   - value: codec(v).
//   - list: uvarint n, then codec(e) of each of the n elements in list
//     order; n >= 1 (an empty list is no entry). These are the bytes of
//     codec.Of[[]T]() when the element codec is codec.Of[T]().
//   - map: uvarint n, then for each of the n entries codec(userKey)
//     followed by codec(userValue), sorted by the user-key bytes, strictly
//     increasing; n >= 1 (an empty map is no entry). These are the bytes of
//     codec.Of[map[UK]UV]() when the codecs are codec.Of's.
//   - reducing: codec(acc), the reduced value.
//   - aggregating: codec(acc), the accumulator (not the result).
//
// A state with a TTL prefixes each value with its last-access time: 8 bytes
// (TTLPrefixLen), the milliseconds since the Unix epoch, big-endian with the
// sign bit flipped (codec.Int64's bytes; AppendTTL and SplitTTL). The TTL
// itself is not recorded: the reader's configuration decides it, so that a
// TTL can change across a restore. An entry last accessed at t is expired at
// every time >= t + TTL (ExpiresAt). A writer leaves out the entries that
// are expired at the time the snapshot was taken; a reader drops entries
// that are expired when it loads them. The TTL covers the whole entry: a
// list or map expires as a whole.
//
// The format does not record the codecs: the reader must register each
// state with codecs for the types that wrote it.
//
// # Errors
//
// Reading never panics and never allocates in proportion to a length or count
// it has not checked against the bytes present. Malformed input gives an
// error wrapping ErrCorrupt (or ErrVersion for a file written by a newer
// format) that says where the problem is.
package format
