package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/datagen"
)

// SlowSinkConfig configures RunSlowSink.
type SlowSinkConfig struct {
	// Records is the number of records the source generates. Default: 1M.
	Records int64
	// Delay is how long the sink busy-waits per record. It must exceed the
	// source's cost per record, so that the sink is the bottleneck. Default:
	// 1µs.
	Delay time.Duration
	// Payload is the size in bytes of the buffer each record carries, freshly
	// allocated by the source: if records piled up in front of the sink, the
	// heap would grow by at least Payload bytes per record. Default: 256.
	Payload int
	// Options configure the job; Parallelism defaults to 1 here, not to
	// GOMAXPROCS.
	Options weir.Options
}

// EnsureDefaults fills every zero field with its default.
func (c *SlowSinkConfig) EnsureDefaults() {
	if c.Records == 0 {
		c.Records = 1_000_000
	}
	if c.Delay == 0 {
		c.Delay = time.Microsecond
	}
	if c.Payload == 0 {
		c.Payload = 256
	}
	if c.Options.Parallelism == 0 {
		c.Options.Parallelism = 1
	}
}

// Validate reports the first invalid field.
func (c *SlowSinkConfig) Validate() error {
	switch {
	case c.Records < 1:
		return fmt.Errorf("bench: SlowSinkConfig.Records is %d; want >= 1", c.Records)
	case c.Delay < 0:
		return fmt.Errorf("bench: SlowSinkConfig.Delay is %v; want >= 0", c.Delay)
	case c.Payload < 1:
		return fmt.Errorf("bench: SlowSinkConfig.Payload is %d; want >= 1", c.Payload)
	}
	return nil
}

// SlowSinkReport is what RunSlowSink measured.
type SlowSinkReport struct {
	Records      int64   `json:"records"`
	DelayNanos   int64   `json:"delay_ns"`
	PayloadBytes int     `json:"payload_bytes"`
	Parallelism  int     `json:"parallelism"`
	BatchSize    int     `json:"batch_size"`
	QueueSize    int     `json:"queue_size"`
	Seconds      float64 `json:"seconds"`
	// Consumed is the number of records the sink received.
	Consumed int64 `json:"consumed"`
	// MaxInFlight is the largest number of records generated but not yet
	// consumed, sampled by the source at every record: bounded by the
	// channels' capacity when backpressure works, growing with Records when
	// it does not.
	MaxInFlight int64 `json:"max_in_flight"`
	// PeakHeapBytes is the largest heap (live objects and garbage not yet
	// swept) seen by a sampler every 5ms. It rises with the GC's lag, not
	// only with what the job retains.
	PeakHeapBytes uint64 `json:"peak_heap_bytes"`
	// PeakLiveHeapBytes is the largest live heap that a garbage collection
	// marked during the run: what the job actually retained.
	PeakLiveHeapBytes uint64 `json:"peak_live_heap_bytes"`
	// PeakRSSBytes is the process's peak resident set size (VmHWM), filled
	// by the caller at the end of the process (see PeakRSS).
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
}

// RunSlowSink runs source → sink with the sink in a task of its own that
// busy-waits cfg.Delay per record, so that the source is held back by
// backpressure, and reports how much was in flight and how large the heap
// grew.
func RunSlowSink(ctx context.Context, cfg SlowSinkConfig) (SlowSinkReport, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return SlowSinkReport{}, err
	}
	var generated, maxInFlight atomic.Int64
	sink := &slowSink{delay: cfg.Delay}
	payload := cfg.Payload
	src := datagen.Generator(cfg.Records, func(i int64) Event {
		inFlight := generated.Add(1) - sink.consumed.Load()
		for {
			m := maxInFlight.Load()
			if inFlight <= m || maxInFlight.CompareAndSwap(m, inFlight) {
				break
			}
		}
		return Event{Seq: i, Payload: make([]byte, payload)}
	})

	env := weir.NewEnvironment(cfg.Options)
	env.FromSource("events", src).
		SinkTo("slow", sink).DisableChaining()

	stopSampler := sampleHeap()
	start := time.Now()
	err := env.Execute(ctx, "bench-slowsink")
	elapsed := time.Since(start)
	peak := stopSampler()
	if err != nil {
		return SlowSinkReport{}, err
	}
	opts := env.Options()
	r := SlowSinkReport{
		Records: cfg.Records, DelayNanos: int64(cfg.Delay), PayloadBytes: cfg.Payload,
		Parallelism: opts.Parallelism, BatchSize: opts.BatchSize, QueueSize: opts.QueueSize,
		Seconds: elapsed.Seconds(), Consumed: sink.consumed.Load(),
		MaxInFlight: maxInFlight.Load(), PeakHeapBytes: peak.heap, PeakLiveHeapBytes: peak.live,
	}
	if r.Consumed != r.Records {
		return r, fmt.Errorf("bench: slow sink consumed %d records, want %d", r.Consumed, r.Records)
	}
	return r, nil
}

// Event is the record of the backpressure workload.
type Event struct {
	Seq     int64
	Payload []byte
}

var (
	_ connector.Sink[Event]   = (*slowSink)(nil)
	_ connector.Writer[Event] = (*slowWriter)(nil)
)

// slowSink busy-waits delay per record: sleeping would wait at least the
// timer resolution (tens of microseconds), far more than asked.
type slowSink struct {
	delay    time.Duration
	consumed atomic.Int64
}

func (s *slowSink) NewWriter(connector.WriterContext) (connector.Writer[Event], error) {
	return &slowWriter{s: s}, nil
}

type slowWriter struct {
	s      *slowSink
	bytes  int64
	closed bool
}

var errSlowWriterClosed = errors.New("bench: slow writer is closed")

func (w *slowWriter) Write(e Event) error {
	for start := time.Now(); time.Since(start) < w.s.delay; {
	}
	w.bytes += int64(len(e.Payload))
	w.s.consumed.Add(1)
	return nil
}

func (w *slowWriter) Flush(bool) error {
	if w.closed {
		return errSlowWriterClosed
	}
	return nil
}

func (w *slowWriter) Close() error {
	w.closed = true
	return nil
}

// heapPeaks are the largest heap sizes a sampler saw.
type heapPeaks struct {
	heap, live uint64
}

// sampleHeap starts sampling the heap every 5ms; the returned function stops
// the sampler, waits for it and returns the largest sizes seen.
func sampleHeap() (stop func() heapPeaks) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	var (
		peak heapPeaks
		wg   sync.WaitGroup
	)
	read := func() {
		metrics.Read(samples)
		peak.heap = max(peak.heap, samples[0].Value.Uint64())
		peak.live = max(peak.live, samples[1].Value.Uint64())
	}
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	})
	return func() heapPeaks {
		close(done)
		wg.Wait()
		read()
		return peak
	}
}
