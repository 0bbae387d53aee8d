package heap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
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

// fuzzClock is the fixed time of FuzzRestore's backends.
const fuzzClock = 1_000_000

// fuzzStates registers FuzzRestore's states: plain values "a" and "b", and
// one state of each other layout. Registration may fail (restored bytes
// need not decode); the bytes are then carried unregistered.
type fuzzStates struct {
	a    *ValueState[string, string]
	n    *ValueState[string, int]
	list *ListState[string, string]
	m    *MapState[string, string, int]
	ns   *NamespacedValueState[string, int64, string]
	red  *ReducingState[string, int]
}

func registerFuzzStates(b *Backend[string]) fuzzStates {
	var s fuzzStates
	s.a, _ = NewValueState(b, "a", codec.String())
	s.n, _ = NewValueState(b, "b", codec.Int())
	s.list, _ = NewListState(b, "c", codec.String())
	s.m, _ = NewMapState(b, "d", codec.String(), codec.Int())
	s.ns, _ = NewNamespacedValueState(b, "e", codec.Int64(), codec.String())
	s.red, _ = NewReducingState(b, "f", func(a, v int) int { return a + v }, codec.Int(),
		WithTTL(state.TTLConfig{TTL: 10 * time.Millisecond}))
	return s
}

func fuzzBackend(r keygroup.Range) *Backend[string] {
	return NewWithOptions(r, codec.String(), Options{Clock: func() int64 { return fuzzClock }})
}

func fuzzSeeds(f *testing.F) {
	for _, r := range []keygroup.Range{fuzzRange, {Start: 0, End: 8}, {Start: 4, End: 5}, {Start: 3, End: 3}} {
		b := fuzzBackend(r)
		s := registerFuzzStates(b)
		for i := range 40 {
			k := fmt.Sprint("k", i)
			g := keygroup.Of(codec.String().Append(nil, k), 8)
			if !r.Contains(g) {
				continue
			}
			b.SetCurrentKey(k, g)
			s.a.Update(fmt.Sprint("v", i))
			if i%2 == 0 {
				s.n.Update(i)
			}
			if i%3 == 0 {
				s.list.AddAll([]string{"x", k})
				s.m.Put(k, i)
				s.m.Put("z", -i)
			}
			if i%4 == 0 {
				s.ns.SetCurrentNamespace(int64(i))
				s.ns.Update(k)
				s.ns.SetCurrentNamespace(-1)
				s.ns.Update("minus")
				s.red.Add(i)
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
		b := fuzzBackend(fuzzRange)
		if err := b.Restore([]checkpoint.KeyedStateHandle{h}, func(checkpoint.KeyedStateHandle) ([]byte, error) { return data, nil }); err != nil {
			return
		}
		registerFuzzStates(b)
		first := checkpointTo(t, b, 1)
		b2 := fuzzBackend(fuzzRange)
		if err := b2.Restore([]checkpoint.KeyedStateHandle{first.h}, func(checkpoint.KeyedStateHandle) ([]byte, error) { return first.data, nil }); err != nil {
			t.Fatalf("restoring a snapshot: %v", err)
		}
		registerFuzzStates(b2)
		if second := checkpointTo(t, b2, 2); !bytes.Equal(first.data, second.data) {
			t.Fatalf("restoring a snapshot changed it:\n%x\n%x", first.data, second.data)
		}
	})
}
