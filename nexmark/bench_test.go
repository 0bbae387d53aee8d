package nexmark

import (
	"io"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used, user and system, over all
// its threads: benchmarks report events per CPU second too, which a busy
// machine does not distort as it does the wall-clock rate.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates reports events/s (wall clock) and events/cpu-s since the CPU
// time start.
func reportRates(b *testing.B, events float64, start time.Duration) {
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	if cpu := cpuTime(b) - start; cpu > 0 {
		b.ReportMetric(events/cpu.Seconds(), "events/cpu-s")
	}
}

// BenchmarkGenerator measures how fast one generator makes events (the
// default mix: 2% persons, 6% auctions, 92% bids).
func BenchmarkGenerator(b *testing.B) {
	g, err := NewGenerator(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var sink int64
	n := int64(0)
	start := cpuTime(b)
	for b.Loop() {
		ev := g.Event(n)
		sink += ev.DateTime()
		n++
	}
	reportRates(b, float64(b.N), start)
	_ = sink
}

// countEmitter counts what a reader emits.
type countEmitter struct{ n int64 }

func (e *countEmitter) Emit(Event)          { e.n++ }
func (e *countEmitter) EmitAt(Event, int64) { e.n++ }

// BenchmarkSourceReader measures a reader of the source, one Poll (a batch
// of 1024 events) at a time.
func BenchmarkSourceReader(b *testing.B) {
	src := Source(Config{})
	splits, err := src.Splits(b.Context(), 1)
	if err != nil {
		b.Fatal(err)
	}
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.AddSplits(splits); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var e countEmitter
	start := cpuTime(b)
	for b.Loop() {
		if _, err := r.Poll(&e); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, float64(e.n), start)
}

// BenchmarkWriteJSON measures generating and encoding events as JSON lines.
func BenchmarkWriteJSON(b *testing.B) {
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		if _, err := WriteJSON(io.Discard, Config{}, 100_000); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, float64(b.N)*100_000, start)
}

// BenchmarkParseJSON measures decoding JSON lines.
func BenchmarkParseJSON(b *testing.B) {
	events := generate(b, Config{}, 0, 10_000)
	lines := make([][]byte, len(events))
	size := 0
	for i := range events {
		lines[i] = AppendJSON(nil, &events[i])
		size += len(lines[i]) + 1
	}
	var p jsonParser
	b.SetBytes(int64(size) / int64(len(lines)))
	b.ReportAllocs()
	i := 0
	start := cpuTime(b)
	for b.Loop() {
		if _, err := p.parse(lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportRates(b, float64(b.N), start)
}
