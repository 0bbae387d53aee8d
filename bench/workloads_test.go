package bench

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
)

// The tests run each workload small and check that the weir job and its
// baseline do the same work, so that the benchmarks compare like with like.

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestStatelessMatchesBaseline(t *testing.T) {
	const n = 100_000
	want := StatelessBaseline(n)
	if got := StatelessBaselineIndirect(n, func(i int64) int64 { return i }, Scale, NotFifth); got != want {
		t.Fatalf("indirect baseline: sum %d, want %d", got, want)
	}
	for _, batch := range []int{0, 7} {
		got, err := RunStateless(testContext(t), n, weir.Options{BatchSize: batch})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("batch %d: weir sum %d, baseline sum %d", batch, got, want)
		}
	}
}

func TestKeyedMatchesBaseline(t *testing.T) {
	const n, keys = 200_000, 10_000
	// Each key gets n/keys records, so the running counts of each key add
	// up to 1+2+...+n/keys.
	const perKey = n / keys
	const want = keys * perKey * (perKey + 1) / 2
	intKey := func(i int64) int64 { return IntKey(i, keys) }
	table := StringKeys(keys)
	strKey := func(i int64) string { return StringKey(i, table) }
	baselines := map[string]int64{
		"int generic":    KeyedBaseline(n, intKey),
		"int":            KeyedBaselineInt(n, keys),
		"string generic": KeyedBaseline(n, strKey),
		"string":         KeyedBaselineString(n, table),
	}
	for name, got := range baselines {
		if got != want {
			t.Errorf("baseline %s: sum %d, want %d", name, got, want)
		}
	}
	for _, par := range []int{1, 2, 3} {
		opts := weir.Options{Parallelism: par, BatchSize: 100}
		if got, err := RunKeyed(testContext(t), n, intKey, opts); err != nil || got != want {
			t.Errorf("int keys, parallelism %d: sum %d, err %v; want %d", par, got, err, want)
		}
		if got, err := RunKeyed(testContext(t), n, strKey, opts); err != nil || got != want {
			t.Errorf("string keys, parallelism %d: sum %d, err %v; want %d", par, got, err, want)
		}
	}
}

func TestSlowSinkBoundsInFlight(t *testing.T) {
	const batch, queue = 16, 2
	cfg := SlowSinkConfig{
		Records: 50_000,
		Delay:   time.Microsecond,
		// The bound below is the in-process exchange's, so the test pins
		// it (make test-tcp sets WEIR_EXCHANGE=tcp for every job): over TCP
		// the network's credits hold more records (2 exclusive and 8
		// floating buffers of 32 KiB per channel), and its own memory test,
		// internal/network's TestMemoryBounded (WEIR_NETWORK_MEMTEST=1),
		// proves that bound.
		Options: weir.Options{BatchSize: batch, QueueSize: queue, Exchange: "local"},
	}
	r, err := RunSlowSink(testContext(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A record is in flight in the source's batch of one Poll (if the
	// source hands the chain whole batches), in the writer's batch being
	// filled, in one of the queued batches or in the batch the sink's task
	// is processing.
	const bound = datagen.DefaultBatchSize + (queue+2)*batch
	if r.MaxInFlight > bound {
		t.Errorf("up to %d records were in flight; backpressure should bound them to %d", r.MaxInFlight, bound)
	}
	if r.MaxInFlight < batch {
		t.Errorf("at most %d records were in flight; the sink should have fallen behind by at least a batch (%d)", r.MaxInFlight, batch)
	}
}

func TestSlowSinkConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  SlowSinkConfig
		ok   bool
	}{
		{"defaults", SlowSinkConfig{}, true},
		{"negative records", SlowSinkConfig{Records: -1}, false},
		{"negative delay", SlowSinkConfig{Delay: -time.Second}, false},
		{"negative payload", SlowSinkConfig{Payload: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.EnsureDefaults()
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		ok   bool
	}{
		{"1000000,10000000", []int64{1_000_000, 10_000_000}, true},
		{" 5 , 6", []int64{5, 6}, true},
		{"1,x", nil, false},
		{"0", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		got, err := parseSizes(tt.in)
		if (err == nil) != tt.ok || len(got) != len(tt.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("parseSizes(%q) = %v, want %v", tt.in, got, tt.want)
				break
			}
		}
	}
}

func TestSizeLabel(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{10_000_000, "10M"},
		{500_000, "500k"},
		{1234, "1234"},
	}
	for _, tt := range tests {
		if got := sizeLabel(tt.n); got != tt.want {
			t.Errorf("sizeLabel(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
