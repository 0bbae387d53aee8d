package codec

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzRecord holds every kind that Of supports. Unlike reading it has no
// time.Time: a time decoded from arbitrary bytes can have a zone offset that
// its own AppendBinary refuses, which would stop the re-encoding check.
type fuzzRecord struct {
	Name   deviceID
	n      int64
	f      float32
	small  [3]int8
	Tags   []string
	Attrs  map[string]uint16
	Next   *point
	Raw    []byte
	Grid   [2][]bool
	Ver    version
	PV     *ptrVersion
	Nested map[point][]*location
	C      complex64
	U      uint
	Set    map[int32]struct{}
	Empty  []struct{}
}

func fuzzSeeds() [][]byte {
	rec := mustOf[fuzzRecord]()
	full := rec.Append(nil, fuzzRecord{
		Name:   "n",
		n:      -5,
		f:      1.5,
		small:  [3]int8{-1, 0, 1},
		Tags:   []string{"a", ""},
		Attrs:  map[string]uint16{"x": 1, "y": 2},
		Next:   &point{1, 2},
		Raw:    []byte{0xff},
		Grid:   [2][]bool{{true}, nil},
		Ver:    version{1, 2},
		PV:     &ptrVersion{7},
		Nested: map[point][]*location{{0, 1}: {{Name: "l"}, nil}},
		C:      complex(1, 2),
		U:      3,
		Set:    map[int32]struct{}{-1: {}, 4: {}},
		Empty:  make([]struct{}, 3),
	})
	seeds := [][]byte{
		nil,
		full,
		rec.Append(nil, fuzzRecord{}),
		mustOf[reading]().Append(nil, sampleReading()),
		String().Append(nil, "hello"),
		Int64().Append(nil, -1),
		[]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), // uvarint overflow
		[]byte("\xff\xff\xff\xff\xff\xff\xff\x7f"),             // huge length
		[]byte("\x02\x02\x02\x02"),                             // bad bool and nil flags
	}
	for cut := 0; cut < len(full); cut += 7 {
		seeds = append(seeds, full[:cut])
	}
	return seeds
}

// FuzzDecode feeds arbitrary bytes to several codecs. Decode must return an
// error wrapping ErrTruncated or ErrMalformed, or a value whose encoding
// decodes back to a value with the same encoding; it must never panic. The
// seeds run with every go test.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	var (
		rec      = mustOf[fuzzRecord]()
		withTime = mustOf[reading]()
		nested   = mustOf[map[string][][2]*int16]()
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReencodes(t, rec, data)
		checkReencodes(t, nested, data)
		checkReencodes(t, String(), data)
		checkReencodes(t, Bytes(), data)
		checkReencodes(t, Bool(), data)
		checkReencodes(t, Int(), data)
		checkReencodes(t, Int32(), data)
		checkReencodes(t, Int64(), data)
		checkReencodes(t, Uint32(), data)
		checkReencodes(t, Uint64(), data)
		checkReencodes(t, Float64(), data)
		checkDecodes(t, withTime, data)
	})
}

// checkDecodes decodes data and checks the error and the byte count.
func checkDecodes[T any](t *testing.T, c Codec[T], data []byte) (T, bool) {
	t.Helper()
	v, n, err := c.Decode(data)
	if err != nil {
		if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode(%x) = %v, want an error wrapping ErrTruncated or ErrMalformed", data, err)
		}
		return v, false
	}
	if n < 0 || n > len(data) {
		t.Fatalf("Decode(%x) used %d bytes of %d", data, n, len(data))
	}
	return v, true
}

// checkReencodes also checks that a decoded value survives a round trip.
// The encoding may differ from data, which can spell a value in several ways
// (long uvarints, unsorted or repeated map keys).
func checkReencodes[T any](t *testing.T, c Codec[T], data []byte) {
	t.Helper()
	v, ok := checkDecodes(t, c, data)
	if !ok {
		return
	}
	enc := c.Append(nil, v)
	v2, n, err := c.Decode(enc)
	if err != nil || n != len(enc) {
		t.Fatalf("re-decoding %x: used %d of %d bytes, err %v", enc, n, len(enc), err)
	}
	if enc2 := c.Append(nil, v2); !bytes.Equal(enc2, enc) {
		t.Fatalf("re-encoding is unstable:\n first %x\nsecond %x", enc, enc2)
	}
}
