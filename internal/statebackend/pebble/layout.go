package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/internal/statebackend/format"
)

// Entries are kept in one of two layouts. Both start with the canonical
// entry key, key‖namespace, after the key group and state id:
//
// The single layout (value, reducing and aggregating states) is the
// canonical format itself: one database entry per key and
// namespace, whose value is the canonical entry value ([TTL prefix]
// payload).
//
//	group|id|key‖ns  →  [ttl:8] payload
//
// The grouped layout (maps and lists) splits a canonical entry into
// a header, which holds the TTL timestamp and marks that the key has an
// entry in the namespace, and sub-entries:
//
//	group|id|key‖ns‖0x00       →  [ttl:8]
//	group|id|key‖ns‖0x01‖sub   →  payload
//
// A map has one sub-entry per user key (sub = the user key's bytes, payload
// = the user value's), so that Get, Put and Remove are point operations; a
// list has one sub-entry (sub empty, payload the list's chunks, below), so
// that Add appends with a merge operand without reading the list (with a
// TTL it reads the header only). Codecs delimit their own bytes, so key‖ns is never a prefix of
// another key's or namespace's key‖ns, and the database keeps each group's
// entries together, header first. A group has a header only while it has
// at least one sub-entry.
//
// Snapshots write the canonical entry of each group: the header's TTL
// prefix, then for a map the number of entries and the sub-entries' bytes
// (sub, payload) in the database's order, which is the canonical order of
// user keys; for a list the payload. Restore writes canonical entries, and
// registration converts a grouped kind's restored entries (decoding the map
// entries with the state's codecs to find where each user key ends); the
// meta key 0xff 'g' name marks a state as converted.
const (
	headerMark = 0x00
	subMark    = 0x01
)

// A list's payload in the database is a sequence of chunks, each
//
//	count:uvarint | size:uvarint | the elements' bytes (size bytes)
//
// so that the concatenation of two payloads is the payload of the two
// lists joined: Add writes a chunk with a merge operand, and the database's
// merge operator (listMerger, which concatenates) appends it, with no element
// decoded. Snapshots join the chunks into the canonical list value (count,
// then the elements' bytes).

// listMerger is the merge operator of the backend's databases: it
// concatenates operands oldest first, as list chunks need. It has the name
// and the semantics of pebble's default merger ("pebble.concatenate"), so
// databases and checkpoints written with either open with the other, but it
// runs in linear time: pebble's default copies the whole value for every
// older operand (reads and compactions visit operands newest first), which
// is quadratic in the number of chunks of a list that grows by Add — a hot
// Nexmark auction's list of bids spent most of a run's CPU there.
var listMerger = &pebble.Merger{
	Name: pebble.DefaultMerger.Name,
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &concatMerger{}
		m.older = append(m.older, value...)
		m.ends = append(m.ends, len(m.older))
		return m, nil
	},
}

// concatMerger collects merge operands and joins them once, in Finish.
type concatMerger struct {
	// older holds the first operand and every older one, in the order
	// received (so newest first); ends[i] is where operand i ends.
	older []byte
	ends  []int
	// newer holds the operands newer than the first, oldest first.
	newer []byte
}

// MergeNewer appends an operand newer than all the others.
func (m *concatMerger) MergeNewer(value []byte) error {
	m.newer = append(m.newer, value...)
	return nil
}

// MergeOlder adds an operand older than all the others.
func (m *concatMerger) MergeOlder(value []byte) error {
	m.older = append(m.older, value...)
	m.ends = append(m.ends, len(m.older))
	return nil
}

// Finish returns the operands joined, oldest first.
func (m *concatMerger) Finish(bool) ([]byte, io.Closer, error) {
	if len(m.ends) == 1 {
		return append(m.older, m.newer...), nil, nil
	}
	out := make([]byte, 0, len(m.older)+len(m.newer))
	for i := len(m.ends) - 1; i >= 0; i-- {
		start := 0
		if i > 0 {
			start = m.ends[i-1]
		}
		out = append(out, m.older[start:m.ends[i]]...)
	}
	return append(out, m.newer...), nil, nil
}

// appendChunk appends a chunk of n elements whose bytes are elems.
func appendChunk(dst []byte, n int, elems []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(len(elems)))
	return append(dst, elems...)
}

// forEachChunk calls fn with the count and the elements' bytes of each
// chunk of payload.
func forEachChunk(payload []byte, fn func(n uint64, elems []byte) error) error {
	for len(payload) > 0 {
		n, k := binary.Uvarint(payload)
		if k <= 0 {
			return fmt.Errorf("list chunk count: %w", format.ErrCorrupt)
		}
		size, l := binary.Uvarint(payload[k:])
		if l <= 0 || size > uint64(len(payload)-k-l) {
			return fmt.Errorf("list chunk size: %w", format.ErrCorrupt)
		}
		start := k + l
		if err := fn(n, payload[start:start+int(size)]); err != nil {
			return err
		}
		payload = payload[start+int(size):]
	}
	return nil
}

// joinChunks appends the canonical list encoding of payload: the total
// count, then every element's bytes.
func joinChunks(dst, payload []byte) ([]byte, error) {
	var total uint64
	err := forEachChunk(payload, func(n uint64, _ []byte) error {
		total += n
		return nil
	})
	if err != nil {
		return dst, err
	}
	dst = binary.AppendUvarint(dst, total)
	err = forEachChunk(payload, func(_ uint64, elems []byte) error {
		dst = append(dst, elems...)
		return nil
	})
	return dst, err
}

// listExplode converts a canonical list value (after the TTL prefix) to
// one sub-entry, a single chunk.
func listExplode(rest []byte, emit func(sub, payload []byte) error) error {
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 {
		return fmt.Errorf("list length: %w", format.ErrCorrupt)
	}
	return emit(nil, appendChunk(nil, int(n), rest[k:]))
}

// convertRestored converts the restored canonical entries of state name
// (id) to the grouped layout. It decodes every entry first, so that a codec
// that does not match leaves the restored entries as they were.
func (b *Backend[K]) convertRestored(name string, id uint64, spec regSpec) error {
	ttl := b.states[name].info.TTL
	for _, write := range []bool{false, true} {
		var batch *pebble.Batch
		if write {
			batch = b.db.NewBatch()
		}
		err := b.forEachRestored(id, func(g int, k, v []byte) error {
			hdr, rest := v[:0], v
			if ttl {
				var err error
				if _, rest, err = format.SplitTTL(v); err != nil {
					return fmt.Errorf("key group %d, entry %x: %w", g, k, err)
				}
				hdr = v[:format.TTLPrefixLen]
			}
			if write {
				_ = batch.Delete(k, nil)
				_ = batch.Set(append(append([]byte(nil), k...), headerMark), hdr, nil)
			}
			var sk []byte
			err := spec.explode(rest, func(sub, payload []byte) error {
				if write {
					sk = append(append(append(sk[:0], k...), subMark), sub...)
					return batch.Set(sk, payload, nil)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("restore state %q, key group %d, entry key %x: %w", name, g, k, err)
			}
			if write && batch.Len() >= restoreBatchSize {
				if err := b.commitBatch(batch); err != nil {
					return err
				}
				batch.Reset()
			}
			return nil
		})
		if err == nil && write {
			_ = batch.Set(metaGroupedKey(name), nil, nil)
			err = b.commitBatch(batch)
		}
		if batch != nil {
			batch.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// forEachRestored calls fn with every entry of state id in the backend's
// key groups: its key group, database key and value. The scan reads a view
// as of its start: fn may write.
func (b *Backend[K]) forEachRestored(id uint64, fn func(g int, k, v []byte) error) (err error) {
	lo := appendStatePrefix(nil, b.groups.Start, id)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendGroupPrefix(nil, b.groups.End)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var prefix []byte
	for g := b.groups.Start; g < b.groups.End; g++ {
		prefix = appendStatePrefix(prefix[:0], g, id)
		for valid := it.SeekGE(prefix); valid && hasPrefix(it.Key(), prefix); valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if err := fn(g, it.Key(), v); err != nil {
				return err
			}
		}
	}
	return it.Error()
}

// grouper turns a state's entries in the grouped layout, as a snapshot's
// iterator reads them, back into canonical entries.
type grouper struct {
	kind  format.Kind
	ttl   int64
	now   int64
	open  bool   // a group is pending
	key   []byte // its canonical entry key
	hdr   []byte // its header's value (the TTL prefix)
	live  bool
	n     int
	body  []byte // sub‖payload of each map entry, or the list payload
	value []byte // the canonical value built by flush
}

// add takes the next entry of the state (ek: the entry key after group|id)
// and returns the canonical entry completed by it, if any, as flush does.
func (gr *grouper) add(ek, v []byte) (key, value []byte, done bool, err error) {
	if gr.open && len(ek) > len(gr.key) && ek[len(gr.key)] == subMark && hasPrefix(ek, gr.key) {
		gr.n++
		if gr.kind == format.KindMap {
			gr.body = append(gr.body, ek[len(gr.key)+1:]...)
		}
		gr.body = append(gr.body, v...)
		return nil, nil, false, nil
	}
	key, value, done, err = gr.flush()
	if err != nil {
		return nil, nil, false, err
	}
	if len(ek) == 0 || ek[len(ek)-1] != headerMark {
		return nil, nil, false, fmt.Errorf("%w: entry %x is neither a header nor under the previous header", errBadKey, ek)
	}
	// flush's key and value stay valid: add uses other buffers until the
	// next flush, after the caller consumed them.
	gr.open, gr.n, gr.body = true, 0, gr.body[:0]
	gr.key = append(gr.key[len(gr.key):], ek[:len(ek)-1]...)
	gr.hdr = append(gr.hdr[:0], v...)
	gr.live = true
	if gr.ttl > 0 {
		last, _, err := format.SplitTTL(v)
		if err != nil {
			return nil, nil, false, err
		}
		gr.live = gr.now < format.ExpiresAt(last, gr.ttl)
	}
	return key, value, done, nil
}

// flush ends the pending group and returns its canonical entry, unless it
// expired or has no entry.
func (gr *grouper) flush() (key, value []byte, done bool, err error) {
	if !gr.open {
		return nil, nil, false, nil
	}
	gr.open = false
	if !gr.live || gr.n == 0 {
		return nil, nil, false, nil
	}
	gr.value = append(gr.value[:0], gr.hdr...)
	if gr.kind == format.KindMap {
		gr.value = binary.AppendUvarint(gr.value, uint64(gr.n))
		gr.value = append(gr.value, gr.body...)
	} else {
		gr.value, err = joinChunks(gr.value, gr.body)
	}
	return gr.key, gr.value, true, err
}
