package network

import (
	"strings"
	"syscall"
	"testing"

	"github.com/weirstream/weir/codec"
)

// BenchmarkDecode: decoding one 32 KiB buffer of records, 100-byte strings
// (each a new allocation: the receiving side cannot reuse memory the
// consumer may keep), the same with object reuse (strings pointing into the
// buffer), [100]byte arrays and 8-byte int64s (no allocation), in CPU
// nanoseconds per record.
func BenchmarkDecode(b *testing.B) {
	b.Run("string-100B", func(b *testing.B) {
		benchDecode(b, codec.String(), strings.Repeat("v", 100), true, false)
	})
	b.Run("string-100B-reuse", func(b *testing.B) {
		benchDecode(b, codec.String(), strings.Repeat("v", 100), true, true)
	})
	b.Run("array-100B", func(b *testing.B) {
		c, err := codec.Of[[100]byte]()
		if err != nil {
			b.Fatal(err)
		}
		benchDecode(b, c, [100]byte{1, 2, 3}, false, false)
	})
	b.Run("int64", func(b *testing.B) {
		benchDecode(b, codec.Int64(), 42, false, false)
	})
}

func benchDecode[T any](b *testing.B, c codec.Codec[T], rec T, clear, reuse bool) {
	enc := newRecordEncoder(c)
	var buf []byte
	for len(buf) < 32<<10-128 {
		buf = append(buf, enc.encode(&rec, NoTimestamp)...)
	}
	d := newRecordDecoder(c, clear)
	d.reuse = reuse
	b.SetBytes(int64(len(buf)))
	cpu0 := processCPU()
	for b.Loop() {
		if err := d.decode(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*len(d.recs)), "cpu-ns/rec")
}

// processCPU is the process's user and system CPU time in nanoseconds: on a
// loaded machine wall time says little.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
