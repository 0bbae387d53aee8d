package statetest

import (
	"fmt"
	"iter"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/state"
)

// The suite's states have fixed types: keys and namespaces are strings;
// values, reducing values and map values ints; list elements strings;
// aggregating states average int64s into an Avg.

// Namespaced is what every namespaced state adds to its kind.
type Namespaced interface {
	SetCurrentNamespace(string)
	CurrentNamespace() string
	Namespaces() iter.Seq[string]
	ClearAllNamespaces()
}

// NSValue is a namespaced value state.
type NSValue interface {
	state.Value[int]
	Namespaced
	Entries() iter.Seq2[string, string]
}

// NSList is a namespaced list state.
type NSList interface {
	state.List[string]
	Namespaced
	MergeNamespaces(target string, sources ...string)
}

// NSMap is a namespaced map state.
type NSMap interface {
	state.Map[string, int]
	Namespaced
}

// NSReducing is a namespaced reducing state.
type NSReducing interface {
	state.Reducing[int]
	Namespaced
	MergeNamespaces(target string, sources ...string)
}

// NSAggregating is a namespaced aggregating state.
type NSAggregating interface {
	state.Aggregating[int64, Avg]
	Namespaced
	MergeNamespaces(target string, sources ...string)
}

// Avg is the aggregating states' accumulator and result.
type Avg struct{ Sum, Count int64 }

// AvgFunc averages int64s. Add and Merge modify the accumulator they get,
// as Flink's AggregateFunctions may.
type AvgFunc struct{}

func (AvgFunc) CreateAccumulator() Avg { return Avg{} }
func (AvgFunc) Add(v int64, acc Avg) Avg {
	acc.Sum += v
	acc.Count++
	return acc
}
func (AvgFunc) GetResult(acc Avg) Avg { return acc }
func (AvgFunc) Merge(a, b Avg) Avg {
	a.Sum += b.Sum
	a.Count += b.Count
	return a
}

// Sum is the reducing states' function.
func Sum(a, b int) int { return a + b }

// Factory makes a backend of one kind and registers the suite's states on
// it. ttl is nil for a state without TTL. The namespaced constructors
// register a namespaced state; the others a state without namespaces.
type Factory struct {
	Kind string
	// New returns an empty backend for the key groups r, with the clock,
	// closed (if it must be) when the test ends.
	New func(t testing.TB, r keygroup.Range, clock func() int64) statebackend.KeyedBackend[string]

	Value         func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Value[int], error)
	NSValue       func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSValue, error)
	List          func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.List[string], error)
	NSList        func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSList, error)
	Map           func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Map[string, int], error)
	NSMap         func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSMap, error)
	Reducing      func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Reducing[int], error)
	NSReducing    func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSReducing, error)
	Aggregating   func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Aggregating[int64, Avg], error)
	NSAggregating func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSAggregating, error)
}

var (
	ns     = codec.String()
	ints   = codec.Int()
	strs   = codec.String()
	avgs   = mustOf[Avg]()
	keyCdc = codec.String()
)

func mustOf[T any]() codec.Codec[T] {
	c, err := codec.Of[T]()
	if err != nil {
		panic(err)
	}
	return c
}

// Heap is the Factory of the heap backend.
var Heap = Factory{
	Kind: "heap",
	New: func(_ testing.TB, r keygroup.Range, clock func() int64) statebackend.KeyedBackend[string] {
		return heap.NewWithOptions(r, keyCdc, heap.Options{Clock: clock})
	},
	Value: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Value[int], error) {
		return ret[state.Value[int]](heap.NewValueState(b.(*heap.Backend[string]), name, ints, heapOpts(ttl)...))
	},
	NSValue: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSValue, error) {
		return ret[NSValue](heap.NewNamespacedValueState(b.(*heap.Backend[string]), name, ns, ints, heapOpts(ttl)...))
	},
	List: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.List[string], error) {
		return ret[state.List[string]](heap.NewListState(b.(*heap.Backend[string]), name, strs, heapOpts(ttl)...))
	},
	NSList: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSList, error) {
		return ret[NSList](heap.NewNamespacedListState(b.(*heap.Backend[string]), name, ns, strs, heapOpts(ttl)...))
	},
	Map: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Map[string, int], error) {
		return ret[state.Map[string, int]](heap.NewMapState(b.(*heap.Backend[string]), name, strs, ints, heapOpts(ttl)...))
	},
	NSMap: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSMap, error) {
		return ret[NSMap](heap.NewNamespacedMapState(b.(*heap.Backend[string]), name, ns, strs, ints, heapOpts(ttl)...))
	},
	Reducing: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Reducing[int], error) {
		return ret[state.Reducing[int]](heap.NewReducingState(b.(*heap.Backend[string]), name, Sum, ints, heapOpts(ttl)...))
	},
	NSReducing: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSReducing, error) {
		return ret[NSReducing](heap.NewNamespacedReducingState(b.(*heap.Backend[string]), name, Sum, ns, ints, heapOpts(ttl)...))
	},
	Aggregating: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Aggregating[int64, Avg], error) {
		return ret[state.Aggregating[int64, Avg]](heap.NewAggregatingState(b.(*heap.Backend[string]), name, state.AggregateFunction[int64, Avg, Avg](AvgFunc{}), avgs, heapOpts(ttl)...))
	},
	NSAggregating: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSAggregating, error) {
		return ret[NSAggregating](heap.NewNamespacedAggregatingState(b.(*heap.Backend[string]), name, state.AggregateFunction[int64, Avg, Avg](AvgFunc{}), ns, avgs, heapOpts(ttl)...))
	},
}

// NewPebble opens the suite's pebble backend (string keys) for t, closed
// when t ends: opts with a temporary Dir, a small cache and memtable, the
// clock, and errors reported to t.
func NewPebble(t testing.TB, r keygroup.Range, clock func() int64, opts pebble.Options) *pebble.Backend[string] {
	t.Helper()
	opts.Dir = filepath.Join(t.TempDir(), "state")
	opts.CacheSize = 4 << 20
	opts.MemTableSize = 1 << 20
	opts.Clock = clock
	opts.OnError = func(err error) { t.Errorf("pebble backend: %v", err) }
	b, err := pebble.New(r, keyCdc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// Pebble is the Factory of the pebble backend, with a small cache and
// memtable.
var Pebble = Factory{
	Kind: "pebble",
	New: func(t testing.TB, r keygroup.Range, clock func() int64) statebackend.KeyedBackend[string] {
		return NewPebble(t, r, clock, pebble.Options{})
	},
	Value: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Value[int], error) {
		return ret[state.Value[int]](pebble.NewValueState(b.(*pebble.Backend[string]), name, ints, pebbleOpts(ttl)...))
	},
	NSValue: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSValue, error) {
		return ret[NSValue](pebble.NewNamespacedValueState(b.(*pebble.Backend[string]), name, ns, ints, pebbleOpts(ttl)...))
	},
	List: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.List[string], error) {
		return ret[state.List[string]](pebble.NewListState(b.(*pebble.Backend[string]), name, strs, pebbleOpts(ttl)...))
	},
	NSList: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSList, error) {
		return ret[NSList](pebble.NewNamespacedListState(b.(*pebble.Backend[string]), name, ns, strs, pebbleOpts(ttl)...))
	},
	Map: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Map[string, int], error) {
		return ret[state.Map[string, int]](pebble.NewMapState(b.(*pebble.Backend[string]), name, strs, ints, pebbleOpts(ttl)...))
	},
	NSMap: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSMap, error) {
		return ret[NSMap](pebble.NewNamespacedMapState(b.(*pebble.Backend[string]), name, ns, strs, ints, pebbleOpts(ttl)...))
	},
	Reducing: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Reducing[int], error) {
		return ret[state.Reducing[int]](pebble.NewReducingState(b.(*pebble.Backend[string]), name, Sum, ints, pebbleOpts(ttl)...))
	},
	NSReducing: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSReducing, error) {
		return ret[NSReducing](pebble.NewNamespacedReducingState(b.(*pebble.Backend[string]), name, Sum, ns, ints, pebbleOpts(ttl)...))
	},
	Aggregating: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (state.Aggregating[int64, Avg], error) {
		return ret[state.Aggregating[int64, Avg]](pebble.NewAggregatingState(b.(*pebble.Backend[string]), name, state.AggregateFunction[int64, Avg, Avg](AvgFunc{}), avgs, pebbleOpts(ttl)...))
	},
	NSAggregating: func(b statebackend.KeyedBackend[string], name string, ttl *state.TTLConfig) (NSAggregating, error) {
		return ret[NSAggregating](pebble.NewNamespacedAggregatingState(b.(*pebble.Backend[string]), name, state.AggregateFunction[int64, Avg, Avg](AvgFunc{}), ns, avgs, pebbleOpts(ttl)...))
	},
}

// Factories are the backends the suite knows.
var Factories = []Factory{Heap, Pebble}

func heapOpts(ttl *state.TTLConfig) []heap.Option {
	if ttl == nil {
		return nil
	}
	return []heap.Option{heap.WithTTL(*ttl)}
}

func pebbleOpts(ttl *state.TTLConfig) []pebble.Option {
	if ttl == nil {
		return nil
	}
	return []pebble.Option{pebble.WithTTL(*ttl)}
}

// ret converts a constructor's typed result to the interface I, keeping a
// nil state nil.
func ret[I any, S any](s *S, err error) (I, error) {
	var zero I
	if err != nil || s == nil {
		return zero, err
	}
	i, ok := any(s).(I)
	if !ok {
		return zero, fmt.Errorf("%T does not implement %T", s, (*I)(nil))
	}
	return i, nil
}
