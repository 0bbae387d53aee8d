package heap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

// fuzzRange is the backend's range in FuzzRestore; handles may cover more.
var fuzzRange = keygroup.Range{Start: 2, End: 6}

// encodeOffsets and decodeOffsets carry a handle's offsets in one fuzzed
// []byte.
func encodeOffsets(offs []int64) []byte {
	var b []byte
	for _, o := range offs {
		b = binary.AppendUvarint(b, uint64(o))
	}
	return b
}

func decodeOffsets(b []byte) []int64 {
	var offs []int64
	for len(b) > 0 && len(offs) < 64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		offs = append(offs, int64(v))
		b = b[n:]
	}
	return offs
}

func fuzzSeeds(f *testing.F) {
	for _, r := range []keygroup.Range{fuzzRange, {Start: 0, End: 8}, {Start: 4, End: 5}, {Start: 3, End: 3}} {
		b := New(r, codec.String())
		s, _ := NewValueState(b, "a", codec.String())
		n, _ := NewValueState(b, "b", codec.Int())
		for i := range 40 {
			k := fmt.Sprint("k", i)
			g := keygroup.Of(codec.String().Append(nil, k), 8)
			if !r.Contains(g) {
				continue
			}
			b.SetCurrentKey(k, g)
			s.Update(fmt.Sprint("v", i))
			if i%2 == 0 {
				n.Update(i)
			}
		}
		snap, _ := b.Snapshot(1)
		var buf bytes.Buffer
		h, err := snap.WriteState(&buf)
		snap.Release()
		if err != nil {
			f.Fatal(err)
		}
		data := buf.Bytes()
		offs := encodeOffsets(h.Offsets)
		f.Add(data, uint8(h.StartGroup), uint8(h.EndGroup), offs)
		for _, cut := range []int{1, 5, len(data) / 2, len(data) - 1} {
			if cut < len(data) {
				f.Add(data[:cut], uint8(h.StartGroup), uint8(h.EndGroup), offs)
			}
		}
		flipped := bytes.Clone(data)
		flipped[len(flipped)/2] ^= 0x40
		f.Add(flipped, uint8(h.StartGroup), uint8(h.EndGroup), offs)
	}
}

// FuzzRestore feeds arbitrary files and handles to Restore. Nothing may
// panic; whatever restores, registered or not, must snapshot, and that
// snapshot must restore to a state that snapshots to the same bytes.
func FuzzRestore(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, start, end uint8, offs []byte) {
		h := checkpoint.KeyedStateHandle{
			Backend:    "heap",
			Path:       "f",
			Size:       int64(len(data)),
			StartGroup: int(start),
			EndGroup:   int(end),
			Offsets:    decodeOffsets(offs),
		}
		b := New(fuzzRange, codec.String())
		if err := b.Restore([]checkpoint.KeyedStateHandle{h}, func(checkpoint.KeyedStateHandle) ([]byte, error) { return data, nil }); err != nil {
			return
		}
		// Registration may fail (the values need not decode); the bytes are
		// then carried unregistered.
		NewValueState(b, "a", codec.String())
		NewValueState(b, "b", codec.Int())
		first := checkpointTo(t, b, 1)
		b2, _ := restore(t, fuzzRange, codec.String(), []file{first})
		NewValueState(b2, "a", codec.String())
		NewValueState(b2, "b", codec.Int())
		if second := checkpointTo(t, b2, 2); !bytes.Equal(first.data, second.data) {
			t.Fatalf("restoring a snapshot changed it:\n%x\n%x", first.data, second.data)
		}
	})
}
