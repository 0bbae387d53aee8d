package codec

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// orderPreserved returns a test that sorts vals by compare and checks that
// bytes.Compare of neighbouring encodings agrees with compare. By
// transitivity the encoding then preserves the order of all of vals.
func orderPreserved[T any](c Codec[T], vals []T, compare func(a, b T) int) func(*testing.T) {
	return func(t *testing.T) {
		vals := slices.Clone(vals)
		slices.SortFunc(vals, compare)
		for i := 1; i < len(vals); i++ {
			a, b := vals[i-1], vals[i]
			if got, want := bytes.Compare(c.Append(nil, a), c.Append(nil, b)), compare(a, b); got != want {
				t.Errorf("bytes.Compare(enc(%v), enc(%v)) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func mustOf[T any]() Codec[T] {
	c, err := Of[T]()
	if err != nil {
		panic(err)
	}
	return c
}

// randomInt64s returns the edge cases and n random values spread over all
// magnitudes.
func randomInt64s(n int) []int64 {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{
		math.MinInt64, math.MinInt64 + 1, -1 << 32, -256, -255, -1,
		0, 1, 255, 256, 1 << 32, math.MaxInt64 - 1, math.MaxInt64,
	}
	for range n {
		vals = append(vals, int64(r.Uint64())>>r.IntN(64))
	}
	return vals
}

func convert[From, To any](vals []From, conv func(From) To) []To {
	out := make([]To, len(vals))
	for i, v := range vals {
		out[i] = conv(v)
	}
	return out
}

func allInt16s() []int16 {
	vals := make([]int16, 0, 1<<16)
	for v := math.MinInt16; v <= math.MaxInt16; v++ {
		vals = append(vals, int16(v))
	}
	return vals
}

// randomFloat64s returns the edge cases and n random non-NaN bit patterns.
func randomFloat64s(n int) []float64 {
	r := rand.New(rand.NewPCG(3, 4))
	vals := []float64{
		math.Inf(-1), -math.MaxFloat64, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1),
		0, math.SmallestNonzeroFloat64, 1, math.MaxFloat64, math.Inf(1),
	}
	for len(vals) < n {
		if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) {
			vals = append(vals, f)
		}
	}
	return vals
}

// floatOrder is numeric order with -0 before +0, the order the encoding
// promises.
func floatOrder[F ~float32 | ~float64](a, b F) int {
	if c := cmp.Compare(a, b); c != 0 {
		return c
	}
	return -compareBool(math.Signbit(float64(a)), math.Signbit(float64(b)))
}

func compareBool(a, b bool) int {
	return cmp.Compare(boolToInt(a), boolToInt(b))
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type sortKey struct {
	Shard int16
	When  int64
	Score float32
	Live  bool
	ID    [2]uint8
}

func compareSortKeys(a, b sortKey) int {
	return cmp.Or(
		cmp.Compare(a.Shard, b.Shard),
		cmp.Compare(a.When, b.When),
		floatOrder(a.Score, b.Score),
		compareBool(a.Live, b.Live),
		cmp.Compare(a.ID[0], b.ID[0]),
		cmp.Compare(a.ID[1], b.ID[1]),
	)
}

func randomSortKeys(n int) []sortKey {
	r := rand.New(rand.NewPCG(5, 6))
	keys := make([]sortKey, n)
	for i := range keys {
		// Few distinct values per field, so that ties reach later fields.
		keys[i] = sortKey{
			Shard: int16(r.IntN(5) - 2),
			When:  int64(r.IntN(5)-2) << 40,
			Score: float32(r.IntN(5) - 2),
			Live:  r.IntN(2) == 1,
			ID:    [2]uint8{uint8(r.IntN(3)), uint8(r.IntN(256))},
		}
	}
	return keys
}

func TestOrderPreserved(t *testing.T) {
	ints := randomInt64s(2000)
	floats := randomFloat64s(2000)
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"bool", orderPreserved(Bool(), []bool{true, false}, compareBool)},
		{"int8/all", orderPreserved(mustOf[int8](), convert(allInt16s(), func(v int16) int8 { return int8(v) }), cmp.Compare[int8])},
		{"int16/all", orderPreserved(mustOf[int16](), allInt16s(), cmp.Compare[int16])},
		{"int32", orderPreserved(Int32(), convert(ints, func(v int64) int32 { return int32(v) }), cmp.Compare[int32])},
		{"int64", orderPreserved(Int64(), ints, cmp.Compare[int64])},
		{"int", orderPreserved(Int(), convert(ints, func(v int64) int { return int(v) }), cmp.Compare[int])},
		{"uint8/all", orderPreserved(mustOf[uint8](), convert(allInt16s(), func(v int16) uint8 { return uint8(v) }), cmp.Compare[uint8])},
		{"uint16/all", orderPreserved(mustOf[uint16](), convert(allInt16s(), func(v int16) uint16 { return uint16(v) }), cmp.Compare[uint16])},
		{"uint32", orderPreserved(Uint32(), convert(ints, func(v int64) uint32 { return uint32(v) }), cmp.Compare[uint32])},
		{"uint64", orderPreserved(Uint64(), convert(ints, func(v int64) uint64 { return uint64(v) }), cmp.Compare[uint64])},
		{"uint", orderPreserved(mustOf[uint](), convert(ints, func(v int64) uint { return uint(v) }), cmp.Compare[uint])},
		{"float64", orderPreserved(Float64(), floats, floatOrder[float64])},
		{"float32", orderPreserved(mustOf[float32](), convert(floats, func(v float64) float32 { return float32(v) }), floatOrder[float32])},
		{"named-float", orderPreserved(mustOf[celsius](), convert(floats, func(v float64) celsius { return celsius(v) }), floatOrder[celsius])},
		{"struct-lexicographic", orderPreserved(mustOf[sortKey](), randomSortKeys(3000), compareSortKeys)},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// TestNaNsSortOutsideInfinities pins down where NaNs land, as documented.
func TestNaNsSortOutsideInfinities(t *testing.T) {
	c := Float64()
	negNaN := math.Copysign(math.NaN(), -1)
	posNaN := math.Copysign(math.NaN(), 1)
	order := [][]byte{
		c.Append(nil, negNaN),
		c.Append(nil, math.Inf(-1)),
		c.Append(nil, math.Inf(1)),
		c.Append(nil, posNaN),
	}
	if !slices.IsSortedFunc(order, bytes.Compare) {
		t.Errorf("encodings of -NaN, -Inf, +Inf, +NaN are not in that order: %x", order)
	}
	got, _, err := c.Decode(c.Append(nil, negNaN))
	if err != nil || math.Float64bits(got) != math.Float64bits(negNaN) {
		t.Errorf("-NaN decodes as %v (bits %#x), %v; want bits %#x", got, math.Float64bits(got), err, math.Float64bits(negNaN))
	}
}
