package codec

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// decodeFails returns a test that decodes src with T's codec and wants an
// error wrapping sentinel whose text contains every one of want.
func decodeFails[T any](src string, sentinel error, want ...string) func(*testing.T) {
	return func(t *testing.T) {
		t.Helper()
		c, err := Of[T]()
		if err != nil {
			t.Fatalf("Of: %v", err)
		}
		v, n, err := c.Decode([]byte(src))
		if !errors.Is(err, sentinel) {
			t.Fatalf("Decode(%x) = %#v, %d, %v; want an error wrapping %v", src, v, n, err, sentinel)
		}
		if n != 0 {
			t.Errorf("Decode reported %d bytes used alongside an error, want 0", n)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	varintOverflow := strings.Repeat("\xff", 10) + "\x01"
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"bool/empty", decodeFails[bool]("", ErrTruncated, "decode bool: need 1 bytes, have 0")},
		{"bool/2", decodeFails[bool]("\x02", ErrMalformed, "neither 0 nor 1")},
		{"int64/short", decodeFails[int64]("\x80\x00", ErrTruncated, "decode int64: need 8 bytes, have 2")},
		{"int32/short", decodeFails[int32]("\x80", ErrTruncated, "int32")},
		{"int/short", decodeFails[int]("", ErrTruncated, "int")},
		{"int16/short", decodeFails[int16]("\x80", ErrTruncated, "int16")},
		{"int8/short", decodeFails[int8]("", ErrTruncated, "int8")},
		{"uint/short", decodeFails[uint]("\x00", ErrTruncated, "uint")},
		{"uint64/short", decodeFails[uint64]("", ErrTruncated, "uint64")},
		{"uint32/short", decodeFails[uint32]("\x00\x00\x00", ErrTruncated, "uint32")},
		{"uint16/short", decodeFails[uint16]("\x00", ErrTruncated, "uint16")},
		{"uint8/short", decodeFails[uint8]("", ErrTruncated, "uint8")},
		{"uintptr/short", decodeFails[uintptr]("", ErrTruncated, "uintptr")},
		{"float64/short", decodeFails[float64]("\xbf", ErrTruncated, "float64")},
		{"float32/short", decodeFails[float32]("\xbf", ErrTruncated, "float32")},
		{"complex128/short", decodeFails[complex128]("\xbf", ErrTruncated, "complex128")},
		{"complex64/short", decodeFails[complex64]("\xbf", ErrTruncated, "complex64")},
		{"string/no-length", decodeFails[string]("", ErrTruncated, "decode string: length prefix cut short")},
		{"string/length-cut", decodeFails[string]("\x80", ErrTruncated, "length prefix cut short")},
		{"string/short", decodeFails[string]("\x05abc", ErrTruncated, "length 5 exceeds the 3 bytes left")},
		{"string/huge-length", decodeFails[string]("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", ErrTruncated, "exceeds")},
		{"string/length-overflow", decodeFails[string](varintOverflow, ErrMalformed, "overflows 64 bits")},
		{"bytes/short", decodeFails[[]byte]("\x02a", ErrTruncated, "decode []byte: length 2")},
		{"named-string/short", decodeFails[deviceID]("\x02a", ErrTruncated, "decode codec.deviceID: decode string")},
		{"byte-array/short", decodeFails[[4]byte]("abc", ErrTruncated, "decode [4]byte: need 4 bytes, have 3")},
		{"array/short", decodeFails[[2]int16]("\x80\x00\x80", ErrTruncated, "element 1: decode int16")},
		{"slice/no-length", decodeFails[[]int16]("", ErrTruncated, "[]int16")},
		{"slice/too-many", decodeFails[[]int64]("\x03"+strings.Repeat("\x00", 16), ErrTruncated,
			"length 3 exceeds the 16 bytes left (elements take at least 8 bytes each)")},
		{"slice/huge-count", decodeFails[[]string]("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", ErrTruncated, "exceed")},
		{"slice/bad-element", decodeFails[[]bool]("\x02\x01\x07", ErrMalformed, "element 1: decode bool")},
		{"slice/length-overflow", decodeFails[[]int8](varintOverflow, ErrMalformed, "overflows")},
		{"pointer/empty", decodeFails[*int8]("", ErrTruncated, "decode *int8")},
		{"pointer/bad-flag", decodeFails[*int8]("\x02", ErrMalformed, "nil flag 0x2")},
		{"pointer/short", decodeFails[*int16]("\x01\x80", ErrTruncated, "int16")},
		{"map/no-length", decodeFails[map[string]int8]("", ErrTruncated, "map[string]int8")},
		{"map/too-many", decodeFails[map[string]int8]("\x05\x00\x80", ErrTruncated, "length 5 exceeds the 2 bytes left")},
		{"map/short-value", decodeFails[map[string]int16]("\x01\x01a\x80", ErrTruncated, "value 0: decode int16")},
		{"map/short-key", decodeFails[map[string]int16]("\x01\x05a\x80\x00", ErrTruncated, "key 0: decode string")},
		{"slice/of-empty-structs/length-overflow", decodeFails[[]struct{}]("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", ErrMalformed,
			"length 18446744073709551615 does not fit in int")},
		{"map/zero-width-keys", decodeFails[map[struct{}]bool]("\x02\x01\x00", ErrMalformed, "only one value")},
		{"struct/short-field", decodeFails[point]("\x80\x00\x00\x01\x80", ErrTruncated,
			"codec: decode codec.point: field y: decode int32: need 4 bytes, have 1")},
		{"struct/nested", decodeFails[location]("\x01n\x80\x00\x00\x01", ErrTruncated, "field pos: field y: decode int32")},
		{"methods/short", decodeFails[version]("\x05v1", ErrTruncated, "codec.version")},
		{"methods/rejected", decodeFails[ptrVersion]("\x03abc", ErrMalformed, "UnmarshalBinary: ", "want 3 bytes ending in '!'")},
		{"time/rejected", decodeFails[struct{ T [1]time.Time }]("\x01\x09", ErrMalformed, "field T: element 0: decode time.Time: UnmarshalBinary")},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// TestEveryPrefixIsTruncated cuts valid encodings at every length and wants
// ErrTruncated each time: a prefix of a value is never a value.
func TestEveryPrefixIsTruncated(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"reading", prefixesAreTruncated(sampleReading())},
		{"string", prefixesAreTruncated(strings.Repeat("s", 200))},
		{"map", prefixesAreTruncated(map[string][]int8{"a": {1}, "bb": {2, 3}})},
		{"float64", prefixesAreTruncated(math.Pi)},
		{"pointers", prefixesAreTruncated([]*row{{Name: "x"}, {Count: 3}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

func prefixesAreTruncated[T any](v T) func(*testing.T) {
	return func(t *testing.T) {
		c, err := Of[T]()
		if err != nil {
			t.Fatalf("Of: %v", err)
		}
		enc := c.Append(nil, v)
		for cut := range len(enc) {
			if _, _, err := c.Decode(bytes.Clone(enc[:cut])); !errors.Is(err, ErrTruncated) {
				t.Errorf("Decode of the first %d of %d bytes: got %v, want ErrTruncated", cut, len(enc), err)
			}
		}
	}
}
