package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// roundTrip returns a test that encodes v after a prefix, decodes it from a
// buffer with trailing bytes, and checks that the value, the byte count and
// a second encoding all match.
func roundTrip[T any](v T) func(*testing.T) {
	return func(t *testing.T) {
		t.Helper()
		c, err := Of[T]()
		if err != nil {
			t.Fatalf("Of: %v", err)
		}
		prefix := []byte("prefix")
		buf := c.Append(bytes.Clone(prefix), v)
		if !bytes.HasPrefix(buf, prefix) {
			t.Fatalf("Append overwrote the bytes already in dst: %x", buf)
		}
		enc := buf[len(prefix):]

		got, n, err := c.Decode(append(bytes.Clone(enc), "trailing"...))
		if err != nil {
			t.Fatalf("Decode(%x): %v", enc, err)
		}
		if n != len(enc) {
			t.Errorf("Decode used %d bytes, want %d", n, len(enc))
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip changed the value:\n got %#v\nwant %#v", got, v)
		}
		if again := c.Append(nil, got); !bytes.Equal(again, enc) {
			t.Errorf("re-encoding the decoded value gives %x, want %x", again, enc)
		}
		checkPointerCodec(t, c, v, enc)
	}
}

// checkPointerCodec checks, for a codec Of built by reflection (every type
// without a direct codec), that it is a PointerCodec and that AppendFrom
// and DecodeInto agree with Append and Decode: the same bytes, the same
// value, also decoded into memory that held another value, and on a
// truncated input that Decode refuses, an error and a zero value.
func checkPointerCodec[T any](t *testing.T, c Codec[T], v T, enc []byte) {
	t.Helper()
	if _, reflected := c.(reflectCodec[T]); !reflected {
		return // a direct codec: scalars and strings, passed by value
	}
	pc, ok := c.(PointerCodec[T])
	if !ok {
		t.Fatalf("%T is not a PointerCodec", c)
	}
	if got := pc.AppendFrom([]byte("p"), &v); !bytes.Equal(got[1:], enc) || got[0] != 'p' {
		t.Errorf("AppendFrom gives %x, Append %x", got, enc)
	}
	into := v // memory that holds a value already
	n, err := pc.DecodeInto(append(bytes.Clone(enc), "trailing"...), &into)
	if err != nil || n != len(enc) || !reflect.DeepEqual(into, v) {
		t.Errorf("DecodeInto: %#v, %d bytes, %v; want %#v, %d bytes", into, n, err, v, len(enc))
	}
	if len(enc) == 0 {
		return
	}
	if _, _, err := c.Decode(enc[:len(enc)-1]); err != nil {
		into = v
		var zero T
		if n, err := pc.DecodeInto(enc[:len(enc)-1], &into); err == nil || n != 0 || !reflect.DeepEqual(into, zero) {
			t.Errorf("DecodeInto of a truncated input: %#v, %d bytes, error %v; want zero, 0 and an error", into, n, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	tm := time.Date(2024, 2, 29, 13, 14, 15, 16, time.UTC)
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"bool/false", roundTrip(false)},
		{"bool/true", roundTrip(true)},
		{"int/min", roundTrip(math.MinInt)},
		{"int/max", roundTrip(math.MaxInt)},
		{"int8/min", roundTrip(int8(math.MinInt8))},
		{"int8/max", roundTrip(int8(math.MaxInt8))},
		{"int16/min", roundTrip(int16(math.MinInt16))},
		{"int32/min", roundTrip(int32(math.MinInt32))},
		{"int32/neg", roundTrip(int32(-1))},
		{"int64/min", roundTrip(int64(math.MinInt64))},
		{"int64/max", roundTrip(int64(math.MaxInt64))},
		{"uint/max", roundTrip(uint(math.MaxUint))},
		{"uint8/max", roundTrip(uint8(math.MaxUint8))},
		{"uint16/max", roundTrip(uint16(math.MaxUint16))},
		{"uint32/max", roundTrip(uint32(math.MaxUint32))},
		{"uint64/max", roundTrip(uint64(math.MaxUint64))},
		{"uintptr", roundTrip(uintptr(0xdeadbeef))},
		{"float32/neg", roundTrip(float32(-3.5))},
		{"float32/inf", roundTrip(float32(math.Inf(1)))},
		{"float64/smallest", roundTrip(math.SmallestNonzeroFloat64)},
		{"float64/-max", roundTrip(-math.MaxFloat64)},
		{"float64/-inf", roundTrip(math.Inf(-1))},
		{"complex64", roundTrip(complex64(complex(1, -1)))},
		{"complex128", roundTrip(complex(math.Pi, -math.E))},
		{"string/empty", roundTrip("")},
		{"string/unicode", roundTrip("héllo, 世界")},
		{"string/long", roundTrip(strings.Repeat("x", 300))}, // two-byte length
		{"bytes/nil", roundTrip([]byte(nil))},
		{"bytes/some", roundTrip([]byte{0, 1, 0xff})},
		{"named/string", roundTrip(deviceID("dev-1"))},
		{"named/float", roundTrip(celsius(-40))},
		{"named/uint16", roundTrip(flags(0x8001))},
		{"named/bytes", roundTrip(rawBytes("raw"))},
		{"named/slice", roundTrip(tagList{"x", "y"})},
		{"array/bytes", roundTrip([3]byte{1, 2, 3})},
		{"array/strings", roundTrip([2]string{"a", "bc"})},
		{"array/empty", roundTrip([0]int{})},
		{"array/nested", roundTrip([2][3]int16{{1, -2, 3}, {-4, 5, -6}})},
		{"slice/nil", roundTrip([]int32(nil))},
		{"slice/ints", roundTrip([]int32{-1, 0, 1})},
		{"slice/of-slices", roundTrip([][]string{{"a"}, nil, {"b", "c"}})},
		{"slice/of-empty-structs", roundTrip(make([]struct{}, 5))},
		{"slice/of-many-empty-structs", roundTrip(make([]struct{}, 1<<40))},
		{"slice/of-pointers", roundTrip([]*int64{nil, new(int64)})},
		{"map/nil", roundTrip(map[string]int(nil))},
		{"map/strings", roundTrip(map[string]int{"a": 1, "b": -2, "": 3})},
		{"map/struct-keys", roundTrip(map[point]string{{1, 2}: "a", {-1, 2}: "b"})},
		{"map/set", roundTrip(map[int8]struct{}{-1: {}, 1: {}})},
		{"map/empty-struct-key", roundTrip(map[struct{}]int{{}: 7})},
		{"map/nested", roundTrip(map[string]map[string][]byte{"a": {"b": {1}}})},
		{"pointer/nil", roundTrip((*string)(nil))},
		{"pointer/zero", roundTrip(new(string))},
		{"pointer/pointer", roundTrip(func() **int { p := new(int); *p = 5; return &p }())},
		{"struct/empty", roundTrip(struct{}{})},
		{"struct/unexported", roundTrip(point{x: -5, y: 6})},
		{"struct/nested-unexported", roundTrip(location{Name: "n", pos: point{1, 2}})},
		{"struct/embedded", roundTrip(embedded{location: location{Name: "e"}, point: &point{3, 4}, Extra: "x"})},
		{"struct/everything", roundTrip(sampleReading())},
		{"struct/zero-everything", roundTrip(reading{})},
		{"struct/row", roundTrip(row{Name: "r", Count: -9, Score: 0.5})},
		{"methods/time", roundTrip(tm)},
		{"methods/time-pointer", roundTrip(&tm)},
		{"methods/value-receiver", roundTrip(version{major: 1, minor: 22})},
		{"methods/pointer-receiver", roundTrip(ptrVersion{n: 0x1234})},
		{"methods/in-map", roundTrip(map[version]ptrVersion{{1, 2}: {3}, {0, 0}: {4}})},
		{"methods/promoted-are-ignored", roundTrip(stamped{Time: tm, Name: "kept"})},
		{"methods/promoted-from-pointer-are-ignored", roundTrip(stampedPtr{Time: &tm, Name: "kept"})},
		{"methods/promoted-from-nil-pointer", roundTrip(stampedPtr{Name: "kept"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// encodes returns a test that checks the exact bytes of v's encoding. The
// format is persisted in checkpoints, so these bytes must never change.
func encodes[T any](v T, wantHex string) func(*testing.T) {
	return func(t *testing.T) {
		t.Helper()
		c, err := Of[T]()
		if err != nil {
			t.Fatalf("Of: %v", err)
		}
		if got := hex.EncodeToString(c.Append(nil, v)); got != wantHex {
			t.Errorf("Append(%#v) = %s, want %s", v, got, wantHex)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"bool", encodes(true, "01")},
		{"int8", encodes(int8(-1), "7f")},
		{"int16", encodes(int16(1), "8001")},
		{"int32", encodes(int32(-2), "7ffffffe")},
		{"int64/zero", encodes(int64(0), "8000000000000000")},
		{"int64/min", encodes(int64(math.MinInt64), "0000000000000000")},
		{"int/8-bytes", encodes(1, "8000000000000001")},
		{"uint16", encodes(uint16(0x1234), "1234")},
		{"uint/8-bytes", encodes(uint(1), "0000000000000001")},
		{"float64/one", encodes(1.0, "bff0000000000000")},
		{"float64/minus-one", encodes(-1.0, "400fffffffffffff")},
		{"float64/+0", encodes(0.0, "8000000000000000")},
		{"float64/-0", encodes(math.Copysign(0, -1), "7fffffffffffffff")},
		{"float32/one", encodes(float32(1), "bf800000")},
		{"complex64", encodes(complex64(complex(1, -1)), "bf800000407fffff")},
		{"string", encodes("hi", "026869")},
		{"string/empty", encodes("", "00")},
		{"bytes/nil", encodes([]byte(nil), "00")},
		{"bytes/empty", encodes([]byte{}, "00")},
		{"named-string", encodes(deviceID("a"), "0161")},
		{"array/bytes", encodes([2]byte{1, 2}, "0102")},
		{"slice", encodes([]int16{1, -1}, "0280017fff")},
		{"slice/nil", encodes([]int16(nil), "00")},
		{"slice/empty", encodes([]int16{}, "00")},
		{"pointer/nil", encodes((*int8)(nil), "00")},
		{"pointer", encodes(func() *int8 { v := int8(0); return &v }(), "0180")},
		{"struct/unexported-in-order", encodes(point{x: 1, y: 2}, "8000000180000002")},
		{"struct/blank-and-zero-size-skipped", encodes(struct {
			A int8
			_ int8
			B struct{}
			C int8
		}{A: 1, C: 2}, "8182")},
		{"map/sorted-by-key-bytes", encodes(map[int8]bool{1: true, -1: false, 0: true}, "037f00800181"+"01")},
		{"map/empty", encodes(map[string]int{}, "00")},
		{"methods", encodes(version{1, 2}, "0476312e32")},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

func TestOfReturnsDirectCodecs(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"string", sameCodec(String())},
		{"[]byte", sameCodec(Bytes())},
		{"bool", sameCodec(Bool())},
		{"int", sameCodec(Int())},
		{"int32", sameCodec(Int32())},
		{"int64", sameCodec(Int64())},
		{"uint32", sameCodec(Uint32())},
		{"uint64", sameCodec(Uint64())},
		{"float64", sameCodec(Float64())},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

func sameCodec[T any](want Codec[T]) func(*testing.T) {
	return func(t *testing.T) {
		got, err := Of[T]()
		if err != nil {
			t.Fatalf("Of: %v", err)
		}
		if got != want {
			t.Errorf("Of[%T]() = %T, want the direct codec %T", *new(T), got, want)
		}
	}
}

// TestNilAndEmpty pins down the documented choice: nil and empty slices and
// maps encode alike and decode as nil, while a nil pointer and a pointer to
// a zero value stay distinct.
func TestNilAndEmpty(t *testing.T) {
	type holder struct {
		S []int
		B []byte
		M map[string]int
		P *int
	}
	c, err := Of[holder]()
	if err != nil {
		t.Fatal(err)
	}
	nilEnc := c.Append(nil, holder{})
	emptyEnc := c.Append(nil, holder{S: []int{}, B: []byte{}, M: map[string]int{}})
	if !bytes.Equal(nilEnc, emptyEnc) {
		t.Errorf("nil fields encode as %x, empty ones as %x; want them equal", nilEnc, emptyEnc)
	}
	got, _, err := c.Decode(emptyEnc)
	if err != nil {
		t.Fatal(err)
	}
	if got.S != nil || got.B != nil || got.M != nil {
		t.Errorf("empty slices and maps decode as %#v, want nil ones", got)
	}
	if zeroPtr := c.Append(nil, holder{P: new(int)}); bytes.Equal(zeroPtr, nilEnc) {
		t.Errorf("a pointer to 0 encodes like a nil pointer: %x", zeroPtr)
	}
}

func TestMapEncodingIsDeterministic(t *testing.T) {
	c, err := Of[map[string][]int]()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]int{}
	for i := range 200 {
		m[strings.Repeat("k", i%7)+string(rune('a'+i%26))+string(rune('A'+i/26))] = []int{i, -i}
	}
	want := c.Append(nil, m)
	for run := range 100 {
		if got := c.Append(nil, m); !bytes.Equal(got, want) {
			t.Fatalf("run %d: the same map encoded differently", run)
		}
	}

	// A map with the same entries inserted in another order encodes the same.
	keys := reflect.ValueOf(m).MapKeys()
	rebuilt := map[string][]int{}
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i].String()
		rebuilt[k] = m[k]
	}
	if got := c.Append(nil, rebuilt); !bytes.Equal(got, want) {
		t.Errorf("an equal map built in another order encodes differently")
	}
}

func TestMapWithNaNKeysIsDeterministic(t *testing.T) {
	c, err := Of[map[float64]int]()
	if err != nil {
		t.Fatal(err)
	}
	m := map[float64]int{math.NaN(): 3, math.NaN(): 1, math.NaN(): 2, 0: 0}
	want := c.Append(nil, m)
	for run := range 100 {
		if got := c.Append(nil, m); !bytes.Equal(got, want) {
			t.Fatalf("run %d: a map with NaN keys encoded differently", run)
		}
	}
}

func TestUnsupportedTypes(t *testing.T) {
	tests := []struct {
		name string
		of   func() error
		want []string // substrings of the error
	}{
		{"chan", ofErr[chan int], []string{"codec.Of[chan int]", "channels", "pass a custom Codec[chan int]"}},
		{"func", ofErr[func()], []string{"type func()", "functions"}},
		{"interface", ofErr[any], []string{"interface {}", "which concrete type"}},
		{"error", ofErr[error], []string{"type error"}},
		{"unsafe.Pointer", ofErr[unsafe.Pointer], []string{"unsafe.Pointer"}},
		{"field", ofErr[struct{ F func() }], []string{".F (type func())", "functions"}},
		{"deep field", ofErr[[]map[string]struct{ h chan bool }], []string{"[][value].h (type chan bool)"}},
		{"map key", ofErr[map[any]int], []string{"[key] (type interface {})"}},
		{"recursive pointer", ofErr[node], []string{"codec.node.next (type codec.node)", "refers to itself"}},
		{"recursive slice", ofErr[tree], []string{"codec.tree.children[] (type codec.tree)", "refers to itself"}},
		{"no encoded fields", ofErr[[]onlyBlank], []string{"no encoded fields"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.of()
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got error %v, want one wrapping ErrUnsupported", err)
			}
			for _, want := range append(tc.want, "pass a custom Codec") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func ofErr[T any]() error {
	_, err := Of[T]()
	return err
}

// TestAppendDoesNotAllocate checks that Append allocates nothing beyond the
// growth of dst, for the direct codecs and for struct codecs built by Of.
func TestAppendDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name   string
		append func(dst []byte) []byte
	}{
		{"Of[string]", appender("sensor-42")},
		{"Of[int64]", appender(int64(42))},
		{"Of[deviceID]", appender(deviceID("sensor-42"))},
		{"Of[row]", appender(row{Name: "sensor-42", Count: 7, Score: 0.5})},
		{"Of[location]", appender(location{Name: "hall", pos: point{1, 2}})},
		{"Of[[]int32]", appender([]int32{1, 2, 3})},
		{"Of[*point]", appender(&point{1, 2})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 0, 256)
			if allocs := testing.AllocsPerRun(100, func() { tc.append(dst[:0]) }); allocs != 0 {
				t.Errorf("Append allocates %v times per call, want 0", allocs)
			}
		})
	}
}

func appender[T any](v T) func([]byte) []byte {
	c, err := Of[T]()
	if err != nil {
		panic(err)
	}
	return func(dst []byte) []byte { return c.Append(dst, v) }
}

// TestStackGrowthDuringEncodeAndDecode runs Append and Decode at many stack
// depths in fresh goroutines, so that the runtime grows, and so moves, the
// stack in the middle of them. The codecs hold pointers into the caller's
// frame (see noescape); this checks they follow the move.
func TestStackGrowthDuringEncodeAndDecode(t *testing.T) {
	c, err := Of[reading]()
	if err != nil {
		t.Fatal(err)
	}
	want := sampleReading()
	wantEnc := c.Append(nil, want)
	for depth := range 300 {
		done := make(chan error)
		go func() { done <- atDepth(depth, func() error { return checkReading(c, want, wantEnc) }) }()
		if err := <-done; err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
	}
}

//go:noinline
func atDepth(depth int, f func() error) error {
	var pad [64]byte // use some stack per level
	if depth == 0 {
		return f()
	}
	pad[depth%len(pad)] = byte(depth)
	err := atDepth(depth-1, f)
	_ = pad
	return err
}

func checkReading(c Codec[reading], want reading, wantEnc []byte) error {
	enc := c.Append(nil, want)
	if !bytes.Equal(enc, wantEnc) {
		return errors.New("encoding changed")
	}
	got, _, err := c.Decode(enc)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return errors.New("decoded value differs")
	}
	return nil
}
