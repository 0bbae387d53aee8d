package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// The _metadata file format (versions 1 and 2), all integers big-endian:
//
//	offset  size  field
//	0       8     magic "WEIRCKPT"
//	8       4     format version (1; 2 with incremental handles; 3 with
//	              changelog segments in them; 4 with channel state)
//	12      4     payload length n
//	16      n     payload: Metadata as JSON
//	16+n    4     CRC-32C (Castagnoli) of bytes [0, 16+n)
//
// The header and the trailing checksum make a torn or bit-flipped file
// detectable before any of it is trusted; JSON keeps the payload readable by
// people and tools (`tail -c +17 _metadata | head -c -4 | jq`). The version
// comes before everything it governs: a later version may change the framing
// after it, so it is checked before the length and the checksum.
const (
	metadataMagic      = "WEIRCKPT"
	metadataHeaderSize = 16
	metadataCRCSize    = 4
)

var (
	// ErrCorruptMetadata is wrapped by every DecodeMetadata error that means
	// the bytes were damaged after they were written: truncation, a length
	// that does not match, a checksum mismatch, a payload that is not the
	// JSON of a Metadata. A checkpoint whose metadata is corrupt is skipped
	// for the previous one on recovery (DESIGN.md §8).
	ErrCorruptMetadata = errors.New("corrupt checkpoint metadata")

	// ErrNotMetadata is wrapped by DecodeMetadata when the bytes do not start
	// with the magic: not a weir _metadata file at all.
	ErrNotMetadata = errors.New("not a weir checkpoint metadata file")

	// ErrUnsupportedMetadataVersion is wrapped by DecodeMetadata when the
	// file has a format version this code does not read.
	ErrUnsupportedMetadataVersion = errors.New("unsupported checkpoint metadata version")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeMetadata returns the bytes of the _metadata file of m, in the
// oldest format version that holds it (1, or 2 when m has incremental keyed
// state handles), so that older weirs read what they can. m.Version must be
// 0 or a version this code writes (1..MetadataVersion); it is ignored, and
// m is not modified.
func EncodeMetadata(m *Metadata) ([]byte, error) {
	if m == nil {
		return nil, errors.New("encode checkpoint metadata: nil metadata")
	}
	if m.Version != 0 && (m.Version < MinMetadataVersion || m.Version > MetadataVersion) {
		return nil, fmt.Errorf("encode checkpoint metadata: Version is %d, this weir writes only versions %d to %d (or 0 for the oldest that holds the metadata)",
			m.Version, MinMetadataVersion, MetadataVersion)
	}
	c := *m
	c.Version = versionFor(m)
	payload, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint metadata %d: %w", m.ID, err)
	}
	if uint64(len(payload)) > 1<<32-1 {
		return nil, fmt.Errorf("encode checkpoint metadata %d: payload of %d bytes exceeds the 4 GiB limit of the format",
			m.ID, len(payload))
	}
	b := make([]byte, 0, metadataHeaderSize+len(payload)+metadataCRCSize)
	b = append(b, metadataMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return b, nil
}

// DecodeMetadata parses the bytes of a _metadata file. Errors wrap
// ErrNotMetadata (wrong magic), ErrUnsupportedMetadataVersion, or
// ErrCorruptMetadata (truncated, length mismatch, checksum mismatch, invalid
// JSON), each with the detail.
func DecodeMetadata(b []byte) (*Metadata, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrCorruptMetadata)
	}
	n := min(len(b), len(metadataMagic))
	if !bytes.Equal(b[:n], []byte(metadataMagic[:n])) {
		return nil, fmt.Errorf("%w (it does not start with %q)", ErrNotMetadata, metadataMagic)
	}
	if len(b) < metadataHeaderSize {
		return nil, fmt.Errorf("%w: truncated: %d bytes, shorter than the %d-byte header",
			ErrCorruptMetadata, len(b), metadataHeaderSize)
	}
	version := binary.BigEndian.Uint32(b[8:12])
	if version < MinMetadataVersion || version > MetadataVersion {
		return nil, fmt.Errorf("%w: the file has format version %d, this weir reads versions %d to %d (written by another weir version, or damaged)",
			ErrUnsupportedMetadataVersion, version, MinMetadataVersion, MetadataVersion)
	}
	payloadLen := uint64(binary.BigEndian.Uint32(b[12:16]))
	want := uint64(metadataHeaderSize) + payloadLen + metadataCRCSize
	switch {
	case uint64(len(b)) < want:
		return nil, fmt.Errorf("%w: truncated: %d bytes, the header announces %d",
			ErrCorruptMetadata, len(b), want)
	case uint64(len(b)) > want:
		return nil, fmt.Errorf("%w: length mismatch: %d bytes, the header announces %d",
			ErrCorruptMetadata, len(b), want)
	}
	end := metadataHeaderSize + int(payloadLen)
	if got, stored := crc32.Checksum(b[:end], castagnoli), binary.BigEndian.Uint32(b[end:]); got != stored {
		return nil, fmt.Errorf("%w: checksum mismatch: computed %08x, stored %08x",
			ErrCorruptMetadata, got, stored)
	}
	var m Metadata
	if err := json.Unmarshal(b[metadataHeaderSize:end], &m); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrCorruptMetadata, err)
	}
	if m.Version != int(version) {
		return nil, fmt.Errorf("%w: payload version %d differs from the header's %d",
			ErrCorruptMetadata, m.Version, version)
	}
	if v := versionFor(&m); v > m.Version {
		return nil, fmt.Errorf("%w: version %d metadata holds incremental state handles, changelog segments or channel state, which need version %d",
			ErrCorruptMetadata, m.Version, v)
	}
	return &m, nil
}
