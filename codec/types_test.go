package codec

import (
	"errors"
	"fmt"
	"time"
)

// Types shared by the tests, the fuzz target and the benchmarks.

type (
	deviceID string
	celsius  float64
	flags    uint16
	rawBytes []byte
	tagList  []string
)

type point struct{ x, y int32 }

type location struct {
	Name string
	pos  point // unexported, nested
}

type reading struct {
	Device  deviceID
	at      int64
	Temp    celsius
	Loc     location
	tags    tagList
	Attrs   map[string]int
	Prev    *point
	Raw     rawBytes
	Hash    [4]byte
	Grid    [2][2]int8
	ok      bool
	_       int64    // blank: skipped
	marker  struct{} // zero-size: skipped
	noFunc  [0]func()
	Flags   flags
	Ratio   float32
	Z       complex128
	Small   complex64
	Counts  map[point][]uint8
	Ptrs    []*location
	Nested  map[string]map[int16]bool
	When    time.Time
	u8      uint8
	u       uint
	i8      int8
	i16     int16
	uptr    uintptr
	Present *bool
	seen    time.Time // unexported, with binary methods
}

type embedded struct {
	location
	*point
	Extra string
}

// row is the struct of the benchmarks and the allocation tests.
type row struct {
	Name  string
	Count int64
	Score float64
}

// version has AppendBinary on the value and UnmarshalBinary on the pointer,
// like time.Time, and an encoding that differs from its fields'.
type version struct{ major, minor uint8 }

func (v version) AppendBinary(b []byte) ([]byte, error) {
	return fmt.Appendf(b, "v%d.%d", v.major, v.minor), nil
}

func (v *version) UnmarshalBinary(b []byte) error {
	if _, err := fmt.Sscanf(string(b), "v%d.%d", &v.major, &v.minor); err != nil {
		return fmt.Errorf("parse version %q: %w", b, err)
	}
	return nil
}

// ptrVersion has both methods on the pointer.
type ptrVersion struct{ n uint16 }

func (v *ptrVersion) AppendBinary(b []byte) ([]byte, error) {
	return append(b, byte(v.n>>8), byte(v.n), '!'), nil
}

func (v *ptrVersion) UnmarshalBinary(b []byte) error {
	if len(b) != 3 || b[2] != '!' {
		return errors.New("want 3 bytes ending in '!'")
	}
	v.n = uint16(b[0])<<8 | uint16(b[1])
	return nil
}

type node struct {
	value int
	next  *node
}

type tree struct {
	children []tree
}

type onlyBlank struct{ _ int }

// stamped gets AppendBinary and UnmarshalBinary promoted from time.Time;
// using them would drop Name.
type stamped struct {
	time.Time
	Name string
}

// stampedPtr gets them promoted from *time.Time, which is nil in the zero
// value: using them would also panic.
type stampedPtr struct {
	*time.Time
	Name string
}

func sampleReading() reading {
	present := true
	return reading{
		Device:  "sensor-7",
		at:      -1700000000123,
		Temp:    -12.75,
		Loc:     location{Name: "hall", pos: point{x: -3, y: 4}},
		tags:    tagList{"a", "", "ünïcode"},
		Attrs:   map[string]int{"floor": 2, "room": -31, "": 0},
		Prev:    &point{x: 1, y: -1},
		Raw:     rawBytes{0, 1, 2, 0xff},
		Hash:    [4]byte{0xde, 0xad, 0xbe, 0xef},
		Grid:    [2][2]int8{{-128, 127}, {0, -1}},
		ok:      true,
		Flags:   0xbeef,
		Ratio:   0.25,
		Z:       complex(1.5, -2),
		Small:   complex(-0.5, 3),
		Counts:  map[point][]uint8{{1, 2}: {3}, {-1, 0}: nil},
		Ptrs:    []*location{{Name: "x"}, nil, {pos: point{7, 8}}},
		Nested:  map[string]map[int16]bool{"a": {1: true, -2: false}, "b": nil},
		When:    time.Date(2024, 2, 29, 13, 14, 15, 16, time.UTC),
		u8:      200,
		u:       1 << 40,
		i8:      -7,
		i16:     -30000,
		uptr:    0xfeed,
		Present: &present,
		seen:    time.Date(1999, 12, 31, 23, 59, 59, 0, time.FixedZone("", 3*3600+7*60)),
	}
}
