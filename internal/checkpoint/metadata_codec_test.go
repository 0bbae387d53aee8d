package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

func sampleMetadata() *Metadata {
	return &Metadata{
		JobID:          "job-1",
		ID:             7,
		Kind:           KindCheckpoint,
		Timestamp:      1_700_000_000_000,
		MaxParallelism: 128,
		Operators: []OperatorState{
			{
				UID: "count", Name: "count", Parallelism: 2,
				Subtasks: []SubtaskState{
					{Subtask: 0, Keyed: []KeyedStateHandle{{
						Backend: "heap", Path: "count-0.state", Size: 42, CRC: 0xdeadbeef,
						StartGroup: 0, EndGroup: 64, Offsets: []int64{0, 10, 20},
					}}},
					{Subtask: 1, Keyed: []KeyedStateHandle{{
						Backend: "heap", Inline: []byte("small"), Size: 5, CRC: 1, StartGroup: 64, EndGroup: 128,
					}}},
				},
			},
			{
				UID: "source", Name: "lines", Parallelism: 1,
				Subtasks: []SubtaskState{{
					Subtask:      0,
					Splits:       []SplitState{{ID: "in/a.txt", Position: []byte{0, 0, 1}}},
					Committables: []Committable{{CheckpointID: 7, Subtask: 0, Data: []byte("txn")}},
					Lists:        []ListState{{Name: "offsets", Union: true, Entries: [][]byte{[]byte("x")}}},
					Broadcast:    []BroadcastState{{Name: "rules", Entries: []MapEntry{{Key: []byte("r1"), Value: []byte("v")}}}},
				}},
			},
		},
	}
}

// frame builds a file by hand, so that tests can damage any part of it.
func frame(magic string, version uint32, payload []byte, lengthDelta int) []byte {
	b := []byte(magic)
	b = binary.BigEndian.AppendUint32(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)+lengthDelta))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func TestMetadataRoundTrip(t *testing.T) {
	m := sampleMetadata()
	b, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 0 {
		t.Fatalf("EncodeMetadata modified its argument: Version = %d", m.Version)
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.Version = 1 // no incremental handles: the oldest version
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	if !bytes.HasPrefix(b, []byte("WEIRCKPT\x00\x00\x00\x01")) {
		t.Fatalf("header = %q, want magic and version 1", b[:12])
	}
}

func TestEncodeMetadataRejects(t *testing.T) {
	tests := []struct {
		name    string
		m       *Metadata
		wantErr string
	}{
		{"nil", nil, "nil metadata"},
		{"future version", &Metadata{Version: MetadataVersion + 1}, "Version is 5, this weir writes only versions 1 to 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeMetadata(tt.m)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("EncodeMetadata() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodeMetadataRejects(t *testing.T) {
	good, err := EncodeMetadata(sampleMetadata())
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff

	tests := []struct {
		name     string
		in       []byte
		sentinel error
		wantErr  string
	}{
		{"empty", nil, ErrCorruptMetadata, "empty file"},
		{"wrong magic", []byte("PK\x03\x04 a zip file, not metadata"), ErrNotMetadata, "not a weir checkpoint metadata file"},
		{"wrong magic, short", []byte("{}"), ErrNotMetadata, "not a weir checkpoint metadata file"},
		{"truncated magic", []byte("WEIR"), ErrCorruptMetadata, "truncated: 4 bytes"},
		{"truncated header", good[:12], ErrCorruptMetadata, "truncated: 12 bytes"},
		{"unknown version", frame("WEIRCKPT", 9, []byte(`{"version":9}`), 0), ErrUnsupportedMetadataVersion, "format version 9, this weir reads versions 1 to 4"},
		{"version zero", frame("WEIRCKPT", 0, []byte(`{}`), 0), ErrUnsupportedMetadataVersion, "format version 0"},
		{"truncated payload", good[:len(good)-10], ErrCorruptMetadata, "truncated"},
		{"truncated checksum", good[:len(good)-1], ErrCorruptMetadata, "truncated"},
		{"trailing bytes", append(bytes.Clone(good), 0), ErrCorruptMetadata, "length mismatch"},
		{"length field too small", frame("WEIRCKPT", 1, []byte(`{"version":1}`), -1), ErrCorruptMetadata, "length mismatch"},
		{"length field too large", frame("WEIRCKPT", 1, []byte(`{"version":1}`), 1), ErrCorruptMetadata, "truncated"},
		{"bit flip in payload", flipped, ErrCorruptMetadata, "checksum mismatch"},
		{"bad stored checksum", badCRC, ErrCorruptMetadata, "checksum mismatch"},
		{"invalid json", frame("WEIRCKPT", 1, []byte(`{"version":1`), 0), ErrCorruptMetadata, "payload"},
		{"json of another type", frame("WEIRCKPT", 1, []byte(`[1,2]`), 0), ErrCorruptMetadata, "payload"},
		{"wrong field type", frame("WEIRCKPT", 1, []byte(`{"version":1,"id":"seven"}`), 0), ErrCorruptMetadata, "payload"},
		{"payload version differs", frame("WEIRCKPT", 1, []byte(`{"version":2}`), 0), ErrCorruptMetadata, "payload version 2"},
		{"payload without version", frame("WEIRCKPT", 1, []byte(`{"id":3}`), 0), ErrCorruptMetadata, "payload version 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeMetadata(tt.in)
			switch {
			case err == nil:
				t.Fatalf("DecodeMetadata() = %+v, want an error", m)
			case !errors.Is(err, tt.sentinel):
				t.Fatalf("DecodeMetadata() = %v, want it to wrap %v", err, tt.sentinel)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("DecodeMetadata() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzDecodeMetadata checks that no input makes DecodeMetadata panic, that
// every error wraps one of the three sentinels, and that whatever decodes
// re-encodes stably.
func FuzzDecodeMetadata(f *testing.F) {
	good, err := EncodeMetadata(sampleMetadata())
	if err != nil {
		f.Fatal(err)
	}
	empty, err := EncodeMetadata(&Metadata{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(empty)
	f.Add(good[:20])
	f.Add([]byte{})
	f.Add([]byte("WEIRCKPT"))
	f.Add(frame("WEIRCKPT", 1, []byte(`{"version":1,"operators":null}`), 0))
	f.Add(frame("WEIRCKPT", 2, nil, 0))
	f.Add(frame("WEIRCKPT", 1, []byte(`{"version":1,"operators":[{"subtasks":[{"keyed":[{"inline":"AAE="}]}]}]}`), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptMetadata) && !errors.Is(err, ErrNotMetadata) && !errors.Is(err, ErrUnsupportedMetadataVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		again, err := EncodeMetadata(m)
		if err != nil {
			t.Fatalf("re-encode of decoded metadata: %v", err)
		}
		checkStable(t, again)
	})
}

// FuzzDecodeMetadataPayload frames arbitrary payloads with a valid header and
// checksum, so that the fuzzer explores the JSON decoding behind them.
func FuzzDecodeMetadataPayload(f *testing.F) {
	good, err := EncodeMetadata(sampleMetadata())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[metadataHeaderSize : len(good)-metadataCRCSize])
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"kind":300}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMetadata(frame(metadataMagic, MetadataVersion, payload, 0))
		if err != nil {
			if !errors.Is(err, ErrCorruptMetadata) {
				t.Fatalf("a well-framed payload gave an error that is not ErrCorruptMetadata: %v", err)
			}
			return
		}
		again, err := EncodeMetadata(m)
		if err != nil {
			t.Fatalf("re-encode of decoded metadata: %v", err)
		}
		checkStable(t, again)
	})
}

// checkStable checks that the encoding b of decoded metadata is a fixed
// point: decoding and encoding it again gives the same bytes. (Comparing
// the decoded values instead would trip on JSON's `[]` versus an omitted
// field: an empty and a nil slice mean the same.)
func checkStable(t *testing.T, b []byte) {
	t.Helper()
	m, err := DecodeMetadata(b)
	if err != nil {
		t.Fatalf("decode of re-encoded metadata: %v", err)
	}
	again, err := EncodeMetadata(m)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(b, again) {
		t.Fatalf("unstable encoding:\n%q\n%q", b, again)
	}
}

// TestMetadataIncrementalVersion checks that incremental keyed state handles
// are written as format version 2 (older weirs refuse the file instead of
// misreading it), read back whole, and refused in a version 1 file.
func TestMetadataIncrementalVersion(t *testing.T) {
	m := sampleMetadata()
	m.Operators[0].Subtasks[0].Keyed = append(m.Operators[0].Subtasks[0].Keyed, KeyedStateHandle{
		Backend: IncrementalBackend, Size: 30, StartGroup: 0, EndGroup: 64, Base: 4,
		Files: []StateFile{
			{Name: "000012.sst", Path: "../shared/op-0-ab12-000012.sst", Size: 20, CRC: 7, Shared: true},
			{Name: "MANIFEST-000008", Path: "op-0-MANIFEST-000008", Size: 10, CRC: 9},
		},
	})
	b, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("WEIRCKPT\x00\x00\x00\x02")) {
		t.Fatalf("header = %q, want magic and version 2", b[:12])
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.Version = 2
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	if !got.Operators[0].Subtasks[0].Keyed[len(got.Operators[0].Subtasks[0].Keyed)-1].Incremental() {
		t.Fatal("the incremental handle lost its kind")
	}

	payload := b[metadataHeaderSize : len(b)-metadataCRCSize]
	v1 := bytes.Replace(payload, []byte(`"version":2`), []byte(`"version":1`), 1)
	_, err = DecodeMetadata(frame(metadataMagic, 1, v1, 0))
	if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), "need version 2") {
		t.Fatalf("version 1 file with incremental handles: %v", err)
	}
}

// TestMetadataChangelogVersion checks that a handle with changelog segments
// is written as format version 3 (a version-2 weir would ignore the
// segments and restore a stale state: it must refuse the file), read back
// whole, and refused in a version 2 file.
func TestMetadataChangelogVersion(t *testing.T) {
	m := sampleMetadata()
	m.Operators[0].Subtasks[0].Keyed = append(m.Operators[0].Subtasks[0].Keyed, KeyedStateHandle{
		Backend: IncrementalBackend, Size: 35, StartGroup: 0, EndGroup: 64, Base: 4, Changelog: 1,
		Files: []StateFile{
			{Name: "000012.sst", Path: "../shared/op-0-ab12-m3-000012.sst", Size: 20, CRC: 7, Shared: true},
			{Name: "MANIFEST-000008", Path: "../shared/op-0-ab12-m3-MANIFEST-000008", Size: 10, CRC: 9, Shared: true},
			{Name: "changelog-000000000004", Path: "../shared/op-0-ab12-c5-changelog-000000000004", Size: 5, CRC: 1, Shared: true},
		},
	})
	b, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("WEIRCKPT\x00\x00\x00\x03")) {
		t.Fatalf("header = %q, want magic and version 3", b[:12])
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.Version = 3
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	payload := b[metadataHeaderSize : len(b)-metadataCRCSize]
	v2 := bytes.Replace(payload, []byte(`"version":3`), []byte(`"version":2`), 1)
	_, err = DecodeMetadata(frame(metadataMagic, 2, v2, 0))
	if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), "need version 3") {
		t.Fatalf("version 2 file with changelog segments: %v", err)
	}
}

// TestMetadataChannelStateVersion checks that channel state (unaligned
// checkpoints) is written as format version 4 (a version-3 weir would
// ignore it and lose the in-flight records: it must refuse the file), read
// back whole, refused in a version 3 file, and that metadata without it is
// still written in an older version that this weir reads as before.
func TestMetadataChannelStateVersion(t *testing.T) {
	old, err := EncodeMetadata(sampleMetadata())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(old, []byte("WEIRCKPT\x00\x00\x00\x04")) {
		t.Fatal("metadata without channel state written as version 4")
	}
	if _, err := DecodeMetadata(old); err != nil {
		t.Fatalf("older version: %v", err)
	}
	m := sampleMetadata()
	m.Operators[0].Subtasks[0].Channels = &ChannelState{Path: "op-0.channels", Size: 30, CRC: 5, Channels: []ChannelStateHandle{
		{Output: true, Edge: "src->map/0", Producer: 0, Consumer: 1, Offset: 0, Length: 20, Records: 4},
		{Edge: "other->map/1", Producer: 2, Consumer: 0, Offset: 20, Length: 10, Records: 1},
	}}
	b, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("WEIRCKPT\x00\x00\x00\x04")) {
		t.Fatalf("header = %q, want magic and version 4", b[:12])
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.Version = 4
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
	}
	if full, inline := got.Operators[0].Subtasks[0].Sizes(); full < 30 || inline >= full {
		t.Fatalf("Sizes = %d, %d: the channel state file counts in full, not inline", full, inline)
	}
	payload := b[metadataHeaderSize : len(b)-metadataCRCSize]
	v3 := bytes.Replace(payload, []byte(`"version":4`), []byte(`"version":3`), 1)
	_, err = DecodeMetadata(frame(metadataMagic, 3, v3, 0))
	if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), "need version 4") {
		t.Fatalf("version 3 file with channel state: %v", err)
	}
}
