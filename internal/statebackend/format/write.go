package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

const (
	// Magic starts every file.
	Magic = "WKST"
	// Version is the newest format version: this package reads versions 1
	// to Version. A Writer writes version 1 when no state needs a
	// description (see Writer.Describe), byte for byte what the version-1
	// writer wrote, and version 2 otherwise.
	Version = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer streams one file. Call Describe first if any state of the file is
// not plain (see StateInfo), then, for every key group of the range in
// order, StartGroup, then for each of its states StartState followed by that
// many Entry calls (or CopyState), then EndGroup; finally Finish. The Writer
// checks the order and the counts, so a bug in a backend gives an error
// instead of a file that cannot be read back.
//
// Each block is written to the underlying writer with a single Write at
// EndGroup (the header goes with the first block). The first error, from the
// underlying writer or from a misuse, is returned by every later call.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	groups  keygroup.Range
	buf     []byte // the current block, and the header before the first
	size    int64  // bytes written to w so far
	crc     uint32
	offsets []int64
	err     error

	next        int  // next key group expected by StartGroup
	inGroup     bool // between StartGroup and EndGroup
	statesLeft  int  // states the current block still needs
	entriesLeft int  // entries the current state still needs
	hasName     bool // lastName is set: a state was started in this block
	lastName    string
	// The previous key of the current state, where Entry copied it:
	// buf[lastKey:lastKeyEnd]. Entries of a state are in one block, so
	// the key is still in buf when the next entry is checked against it.
	lastKey, lastKeyEnd int
	hasKey              bool

	described map[string]bool // names given to Describe (non-plain): whether StartState saw them
}

// NewWriter returns a Writer of a file covering the key groups in groups to
// w. It writes nothing yet.
func NewWriter(w io.Writer, groups keygroup.Range) *Writer {
	fw := &Writer{w: w, groups: groups, next: groups.Start, offsets: make([]int64, 0, max(groups.Len(), 0))}
	if groups.Start < 0 || groups.End < groups.Start {
		fw.err = fmt.Errorf("format: invalid key-group range %v", groups)
		return fw
	}
	fw.buf = fw.appendHeader(fw.buf[:0], 1, nil)
	return fw
}

func (fw *Writer) appendHeader(dst []byte, version uint64, infos []StateInfo) []byte {
	dst = append(dst, Magic...)
	dst = binary.AppendUvarint(dst, version)
	dst = binary.AppendUvarint(dst, uint64(fw.groups.Start))
	dst = binary.AppendUvarint(dst, uint64(fw.groups.End))
	if version == 1 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(infos)))
	for _, in := range infos {
		dst = binary.AppendUvarint(dst, uint64(len(in.Name)))
		dst = append(dst, in.Name...)
		dst = binary.AppendUvarint(dst, uint64(in.Kind))
		dst = binary.AppendUvarint(dst, in.flags())
	}
	return dst
}

// Describe declares how the states of the file lay out their entries. Call
// it at most once, before the first StartGroup, with infos sorted by name
// (strictly increasing). Plain states may be included and are left out, so
// a caller can pass every state it writes; if none is left, the file is a
// version-1 file. Every state described must then get entries in some
// block of the file (Finish checks it): a file describes exactly the states
// that are not plain and have entries in it, so that the same state always
// encodes to the same bytes.
func (fw *Writer) Describe(infos ...StateInfo) error {
	switch {
	case fw.err != nil:
		return fw.err
	case fw.described != nil || fw.inGroup || len(fw.offsets) > 0:
		return fw.fail("Describe after StartGroup or twice")
	}
	var keep []StateInfo
	for i, in := range infos {
		switch {
		case i > 0 && in.Name <= infos[i-1].Name:
			return fw.fail("Describe: state %q after %q: infos must be sorted by name, each once", in.Name, infos[i-1].Name)
		case !in.Kind.valid():
			return fw.fail("Describe: state %q has unknown %v", in.Name, in.Kind)
		case !in.Plain():
			keep = append(keep, in)
		}
	}
	fw.described = make(map[string]bool, len(keep))
	if len(keep) == 0 {
		return nil
	}
	for _, in := range keep {
		fw.described[in.Name] = false
	}
	fw.buf = fw.appendHeader(fw.buf[:0], 2, keep)
	return nil
}

func (fw *Writer) fail(format string, args ...any) error {
	if fw.err == nil {
		fw.err = fmt.Errorf("format: "+format, args...)
	}
	return fw.err
}

// StartGroup starts the block of key group group, which holds states states
// (those with at least one entry in the group).
func (fw *Writer) StartGroup(group, states int) error {
	switch {
	case fw.err != nil:
		return fw.err
	case fw.inGroup:
		return fw.fail("StartGroup(%d) before EndGroup of key group %d", group, fw.next)
	case group != fw.next || group >= fw.groups.End:
		return fw.fail("StartGroup(%d): expected key group %d of %v", group, fw.next, fw.groups)
	case states < 0:
		return fw.fail("StartGroup(%d): negative state count %d", group, states)
	}
	fw.offsets = append(fw.offsets, fw.size+int64(len(fw.buf)))
	fw.buf = binary.AppendUvarint(fw.buf, uint64(group))
	fw.buf = binary.AppendUvarint(fw.buf, uint64(states))
	fw.inGroup, fw.statesLeft, fw.entriesLeft, fw.hasName = true, states, 0, false
	return nil
}

func (fw *Writer) startState(name string, entries int) error {
	switch {
	case fw.err != nil:
		return fw.err
	case !fw.inGroup:
		return fw.fail("state %q outside a key group", name)
	case fw.entriesLeft > 0:
		return fw.fail("key group %d: state %q started with %d entries of state %q missing", fw.next, name, fw.entriesLeft, fw.lastName)
	case fw.statesLeft == 0:
		return fw.fail("key group %d: more states than announced", fw.next)
	case fw.hasName && name <= fw.lastName:
		return fw.fail("key group %d: state %q after %q: states must be sorted by name, each once", fw.next, name, fw.lastName)
	case entries <= 0:
		return fw.fail("key group %d: state %q has %d entries; leave out states without entries", fw.next, name, entries)
	}
	fw.statesLeft--
	fw.hasName, fw.lastName, fw.hasKey = true, name, false
	if _, ok := fw.described[name]; ok {
		fw.described[name] = true
	}
	fw.buf = binary.AppendUvarint(fw.buf, uint64(len(name)))
	fw.buf = append(fw.buf, name...)
	fw.buf = binary.AppendUvarint(fw.buf, uint64(entries))
	return nil
}

// StartState starts state name in the current block, with entries entries
// (at least one) that the next Entry calls give.
func (fw *Writer) StartState(name string, entries int) error {
	if err := fw.startState(name, entries); err != nil {
		return err
	}
	fw.entriesLeft = entries
	return nil
}

// Entry appends one entry of the current state. Keys must come in strictly
// increasing bytes.Compare order. Neither slice is retained.
func (fw *Writer) Entry(key, value []byte) error {
	// One test on the path every entry takes: a snapshot of a large state
	// makes millions of calls.
	if fw.err != nil || fw.entriesLeft == 0 || (fw.hasKey && !keyAfter(key, fw.buf[fw.lastKey:fw.lastKeyEnd])) {
		return fw.entryError(key)
	}
	fw.entriesLeft--
	// A local buf, stored back once: each store of the slice into fw runs
	// a GC write barrier while a collection is marking.
	buf := binary.AppendUvarint(fw.buf, uint64(len(key)))
	fw.lastKey = len(buf)
	buf = append(buf, key...)
	fw.lastKeyEnd, fw.hasKey = len(buf), true
	buf = binary.AppendUvarint(buf, uint64(len(value)))
	fw.buf = append(buf, value...)
	return nil
}

// entryError returns the error of an Entry call that may not append key.
func (fw *Writer) entryError(key []byte) error {
	if fw.err != nil {
		return fw.err
	}
	if fw.entriesLeft == 0 {
		return fw.fail("key group %d: entry beyond the count of state %q", fw.next, fw.lastName)
	}
	prev := fw.buf[fw.lastKey:fw.lastKeyEnd]
	return fw.fail("key group %d, state %q: keys out of order or repeated (%x after %x): two keys may encode to the same bytes", fw.next, fw.lastName, key, prev)
}

// keyAfter reports whether key sorts strictly after prev in bytes.Compare
// order, comparing keys of 8 bytes (an int64 or a float64 key) as
// integers.
func keyAfter(key, prev []byte) bool {
	if len(key) == 8 && len(prev) == 8 {
		return binary.BigEndian.Uint64(key) > binary.BigEndian.Uint64(prev)
	}
	return bytes.Compare(key, prev) > 0
}

// CopyState appends a state read by ParseBlock unchanged: the way a backend
// carries state it restored but was never asked to decode.
func (fw *Writer) CopyState(s StateBlock) error {
	if err := fw.startState(s.Name, s.Entries); err != nil {
		return err
	}
	fw.buf = append(fw.buf, s.raw...)
	return nil
}

// EndGroup ends the current block and writes it.
func (fw *Writer) EndGroup() error {
	switch {
	case fw.err != nil:
		return fw.err
	case !fw.inGroup:
		return fw.fail("EndGroup without StartGroup")
	case fw.entriesLeft > 0 || fw.statesLeft > 0:
		return fw.fail("key group %d ended with %d states and %d entries missing", fw.next, fw.statesLeft, fw.entriesLeft)
	}
	fw.inGroup = false
	fw.next++
	return fw.flush()
}

func (fw *Writer) flush() error {
	n, err := fw.w.Write(fw.buf)
	fw.crc = crc32.Update(fw.crc, castagnoli, fw.buf[:n])
	fw.size += int64(n)
	if err == nil && n < len(fw.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		fw.err = fmt.Errorf("format: write key group %d: %w", fw.next-1, err)
		return fw.err
	}
	fw.buf = fw.buf[:0]
	return nil
}

// Finish checks that every key group was written and returns the handle of
// the file with StartGroup, EndGroup, Offsets, Size and CRC (Castagnoli, of
// every byte written) set; the caller fills in Backend and Path or Inline.
func (fw *Writer) Finish() (checkpoint.KeyedStateHandle, error) {
	switch {
	case fw.err != nil:
		return checkpoint.KeyedStateHandle{}, fw.err
	case fw.inGroup || fw.next != fw.groups.End:
		return checkpoint.KeyedStateHandle{}, fw.fail("Finish after key group %d of %v", fw.next-1, fw.groups)
	}
	for _, name := range slices.Sorted(maps.Keys(fw.described)) {
		if !fw.described[name] {
			return checkpoint.KeyedStateHandle{}, fw.fail("state %q is described but has no entries in %v: describe only the states written", name, fw.groups)
		}
	}
	if len(fw.buf) > 0 { // an empty range: the header alone
		if err := fw.flush(); err != nil {
			return checkpoint.KeyedStateHandle{}, err
		}
	}
	return checkpoint.KeyedStateHandle{
		Size:       fw.size,
		CRC:        fw.crc,
		StartGroup: fw.groups.Start,
		EndGroup:   fw.groups.End,
		Offsets:    fw.offsets,
	}, nil
}
