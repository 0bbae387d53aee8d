package codec

import "testing"

// The benchmarks append into a reused buffer and decode from a fixed one,
// so that they measure the codec and not buffer growth.

func benchmarkCodec[T any](b *testing.B, c Codec[T], v T) {
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = c.Append(buf[:0], v)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		enc := c.Append(nil, v)
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			if _, _, err := c.Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkOfString(b *testing.B) {
	benchmarkCodec(b, mustOf[string](), "sensor-0042")
}

func BenchmarkOfInt64(b *testing.B) {
	benchmarkCodec(b, mustOf[int64](), -1700000000123)
}

func BenchmarkOfNamedString(b *testing.B) {
	benchmarkCodec(b, mustOf[deviceID](), "sensor-0042")
}

func BenchmarkOfStruct(b *testing.B) {
	benchmarkCodec(b, mustOf[row](), row{Name: "sensor-0042", Count: 1700000000123, Score: 21.5})
}

func BenchmarkOfMap(b *testing.B) {
	benchmarkCodec(b, mustOf[map[string]int64](), map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4})
}
