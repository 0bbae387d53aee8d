package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

var (
	// ErrCorrupt is wrapped by every error about bytes or a handle that no
	// Writer produces: truncated or damaged files, offsets that do not fit.
	ErrCorrupt = errors.New("keyed state snapshot is corrupt")
	// ErrVersion is wrapped when a file has a format version newer than
	// Version: it was written by a newer weir.
	ErrVersion = errors.New("keyed state snapshot has an unsupported format version")
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}

// CheckHandle validates the fields of h that say which key groups it holds
// and where, without reading its bytes: a caller can then decide from
// h.StartGroup and h.EndGroup whether to read it at all.
func CheckHandle(h checkpoint.KeyedStateHandle) error {
	switch {
	case h.StartGroup < 0 || h.EndGroup < h.StartGroup || h.EndGroup > keygroup.UpperBoundMaxParallelism:
		return corrupt("handle key-group range [%d, %d) is invalid", h.StartGroup, h.EndGroup)
	case len(h.Offsets) != h.EndGroup-h.StartGroup:
		return corrupt("handle covers %d key groups but has %d offsets", h.EndGroup-h.StartGroup, len(h.Offsets))
	}
	return nil
}

// File is a file opened by Open: its header and its handle's offsets are
// checked, its blocks are parsed on demand.
type File struct {
	data    []byte
	version int
	groups  keygroup.Range
	offsets []int64
	infos   []StateInfo // sorted by name
}

// Open checks the header of data, the bytes of the file of h, against h. It
// does not read the blocks; File.Block does. data is retained, not copied.
func Open(h checkpoint.KeyedStateHandle, data []byte) (*File, error) {
	if err := CheckHandle(h); err != nil {
		return nil, err
	}
	if h.Size != int64(len(data)) {
		return nil, corrupt("file has %d bytes, its handle says %d", len(data), h.Size)
	}
	if !bytes.HasPrefix(data, []byte(Magic)) {
		return nil, corrupt("file does not start with %q: it is not a keyed state snapshot in the canonical format", Magic)
	}
	r := reader{data: data, pos: len(Magic)}
	version := r.uvarint("format version")
	start := r.uvarint("start key group")
	end := r.uvarint("end key group")
	if r.err != nil {
		return nil, r.err
	}
	if version == 0 || version > Version {
		return nil, fmt.Errorf("file has format version %d; this weir reads versions 1 to %d: %w", version, Version, ErrVersion)
	}
	if start != uint64(h.StartGroup) || end != uint64(h.EndGroup) {
		return nil, corrupt("file covers key groups [%d, %d), its handle says [%d, %d)", start, end, h.StartGroup, h.EndGroup)
	}
	var infos []StateInfo
	if version >= 2 {
		var err error
		if infos, err = r.infos(); err != nil {
			return nil, err
		}
	}
	prev := int64(r.pos)
	for i, off := range h.Offsets {
		// Every block takes at least two bytes (its key group and its
		// state count), so offsets strictly increase.
		if off < prev || off > int64(len(data))-2 {
			return nil, corrupt("offset %d of key group %d is outside the file (%d bytes) or not after the previous block", off, h.StartGroup+i, len(data))
		}
		if i == 0 && off != prev {
			return nil, corrupt("key group %d starts at offset %d, but the header ends at %d", h.StartGroup, off, prev)
		}
		prev = off + 2
	}
	if len(h.Offsets) == 0 && len(data) != r.pos {
		return nil, corrupt("file covers no key groups but has %d bytes after its header", len(data)-r.pos)
	}
	return &File{data: data, version: int(version), groups: keygroup.Range{Start: h.StartGroup, End: h.EndGroup}, offsets: h.Offsets, infos: infos}, nil
}

// infos reads the state descriptions of a version-2 header.
func (r *reader) infos() ([]StateInfo, error) {
	n := r.count("state description count", 3) // a name length, a kind and flags
	if r.err != nil {
		return nil, r.err
	}
	infos := make([]StateInfo, 0, n)
	for i := range n {
		name := string(r.bytes("described state name"))
		kind := r.uvarint("state kind")
		flags := r.uvarint("state flags")
		if r.err != nil {
			return nil, fmt.Errorf("state description %d: %w", i, r.err)
		}
		in := StateInfo{Name: name, Kind: Kind(kind), Namespaced: flags&flagNamespaced != 0, TTL: flags&flagTTL != 0}
		switch {
		case i > 0 && name <= infos[i-1].Name:
			return nil, corrupt("state description %q after %q: descriptions are not sorted by name", name, infos[i-1].Name)
		case kind > 255 || !Kind(kind).valid():
			return nil, corrupt("state %q has unknown kind %d", name, kind)
		case flags&^knownFlags != 0:
			return nil, corrupt("state %q has unknown flags %#x", name, flags)
		case in.Plain():
			return nil, corrupt("state %q is described as a plain value state, which files leave undescribed", name)
		}
		infos = append(infos, in)
	}
	return infos, nil
}

// Version returns the file's format version.
func (f *File) Version() int { return f.version }

// Infos returns the states the file describes, sorted by name: those with
// entries in the file that are not plain. Every other state of the file is
// plain.
func (f *File) Infos() []StateInfo { return slices.Clone(f.infos) }

// Info returns the description of state name: the one in the header, or a
// plain state's.
func (f *File) Info(name string) StateInfo {
	if i, ok := slices.BinarySearchFunc(f.infos, name, func(in StateInfo, name string) int { return strings.Compare(in.Name, name) }); ok {
		return f.infos[i]
	}
	return PlainInfo(name)
}

// Groups returns the key groups the file covers.
func (f *File) Groups() keygroup.Range { return f.groups }

// BlockBytes returns the bytes of the block of group, a key group of
// f.Groups(), unparsed and aliasing the file's bytes.
func (f *File) BlockBytes(group int) ([]byte, error) {
	if !f.groups.Contains(group) {
		return nil, fmt.Errorf("format: key group %d is not in the file's range %v", group, f.groups)
	}
	i := group - f.groups.Start
	end := int64(len(f.data))
	if i+1 < len(f.offsets) {
		end = f.offsets[i+1]
	}
	return f.data[f.offsets[i]:end], nil
}

// Block returns the parsed block of group (see ParseBlock), with the Info
// of every state set from the file's header.
func (f *File) Block(group int) (Block, error) {
	b, err := f.BlockBytes(group)
	if err != nil {
		return Block{}, err
	}
	blk, err := ParseBlock(b, group)
	if err != nil {
		return Block{}, err
	}
	for i := range blk.States {
		blk.States[i].Info = f.Info(blk.States[i].Name)
	}
	return blk, nil
}

// Block is the state of one key group.
type Block struct {
	Group int
	// States are sorted by name, each with at least one entry.
	States []StateBlock
}

// StateBlock is one state's entries in one key group. Its entries alias the
// bytes given to ParseBlock.
type StateBlock struct {
	Name    string
	Entries int // number of entries, at least one
	// Info describes the state's entries. File.Block sets it from the
	// file's header; ParseBlock, which sees no header, sets a plain
	// state's.
	Info StateInfo
	raw  []byte // the entries, checked by ParseBlock
}

// Clone returns s with its entries copied out of the bytes it was parsed
// from, so that keeping s does not keep those alive.
func (s StateBlock) Clone() StateBlock {
	s.raw = bytes.Clone(s.raw)
	return s
}

// ForEach calls fn with every entry's key and value bytes, in key order, and
// stops at fn's first error, which it returns. The slices alias the block's
// bytes: fn must copy what it keeps.
func (s StateBlock) ForEach(fn func(key, value []byte) error) error {
	r := reader{data: s.raw}
	for range s.Entries {
		k := r.bytes("key")
		v := r.bytes("value")
		if r.err != nil { // ParseBlock checked the entries; only a zero StateBlock gets here
			return r.err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ParseBlock parses and fully checks the block b of key group group: the
// block must say it is group's, hold sorted states with sorted entries and
// end exactly at the end of b. The returned entries alias b.
func ParseBlock(b []byte, group int) (Block, error) {
	blk, err := parseBlock(b, group)
	if err != nil {
		return Block{}, fmt.Errorf("key group %d: %w", group, err)
	}
	return blk, nil
}

func parseBlock(b []byte, group int) (Block, error) {
	r := reader{data: b}
	g := r.uvarint("key group")
	if r.err == nil && g != uint64(group) {
		return Block{}, corrupt("block belongs to key group %d: the handle's offsets are wrong", g)
	}
	n := r.count("state count", 2) // a state takes at least a name length and a count
	if r.err != nil {
		return Block{}, r.err
	}
	blk := Block{Group: group, States: make([]StateBlock, 0, n)}
	for i := range n {
		name := string(r.bytes("state name"))
		entries := r.count("entry count", 2) // an entry takes at least two lengths
		if r.err != nil {
			return Block{}, fmt.Errorf("state %d: %w", i, r.err)
		}
		if i > 0 && name <= blk.States[i-1].Name {
			return Block{}, corrupt("state %q after %q: states are not sorted by name", name, blk.States[i-1].Name)
		}
		if entries == 0 {
			return Block{}, corrupt("state %q has no entries", name)
		}
		start := r.pos
		var prev []byte
		for j := range entries {
			k := r.bytes("key")
			r.bytes("value")
			if r.err != nil {
				return Block{}, fmt.Errorf("state %q, entry %d of %d: %w", name, j, entries, r.err)
			}
			if j > 0 && bytes.Compare(k, prev) <= 0 {
				return Block{}, corrupt("state %q, entry %d: key %x after %x: keys are not sorted or repeat", name, j, k, prev)
			}
			prev = k
		}
		blk.States = append(blk.States, StateBlock{Name: name, Entries: entries, Info: PlainInfo(name), raw: b[start:r.pos]})
	}
	if r.pos != len(b) {
		return Block{}, corrupt("%d bytes after the block's last state", len(b)-r.pos)
	}
	return blk, nil
}

// reader decodes from data; after its first error every call returns zero
// values and err keeps that error.
type reader struct {
	data []byte
	pos  int
	err  error
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.data[r.pos:])
	switch {
	case n == 0:
		r.err = corrupt("truncated %s at offset %d", what, r.pos)
	case n < 0:
		r.err = corrupt("%s at offset %d overflows 64 bits", what, r.pos)
	default:
		r.pos += n
	}
	return v
}

// count reads a count of items that take at least minSize bytes each, and
// checks that the bytes left can hold that many.
func (r *reader) count(what string, minSize int) int {
	at := r.pos
	v := r.uvarint(what)
	if r.err == nil && v > uint64(len(r.data)-r.pos)/uint64(minSize) {
		r.err = corrupt("%s %d at offset %d exceeds the %d bytes left", what, v, at, len(r.data)-r.pos)
		return 0
	}
	return int(v)
}

func (r *reader) bytes(what string) []byte {
	at := r.pos
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.data)-r.pos) {
		r.err = corrupt("%s at offset %d has length %d but only %d bytes are left", what, at, n, len(r.data)-r.pos)
		return nil
	}
	b := r.data[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}
