package weir_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// bcNop is a broadcast process function that does nothing.
type bcNop struct{}

func (bcNop) ProcessElement(*weir.ReadOnlyBroadcastContext, int64, weir.Collector[int64]) error {
	return nil
}
func (bcNop) ProcessBroadcastElement(*weir.BroadcastContext, string, weir.Collector[int64]) error {
	return nil
}

type noCodec struct{ f func() }

func TestBroadcastStateBuildErrors(t *testing.T) {
	tests := []struct {
		name  string
		descs func() []weir.BroadcastStateDescriptor
		want  string
	}{
		{"no descriptor", func() []weir.BroadcastStateDescriptor { return nil }, "give at least one MapStateDescriptor"},
		{"duplicate names", func() []weir.BroadcastStateDescriptor {
			return []weir.BroadcastStateDescriptor{weir.NewMapStateDescriptor[string, int]("r"), weir.NewMapStateDescriptor[int, int]("r")}
		}, `two descriptors are named "r"`},
		{"empty name", func() []weir.BroadcastStateDescriptor {
			return []weir.BroadcastStateDescriptor{weir.MapStateDescriptor[string, int]{}}
		}, "empty name"},
		{"nil codec", func() []weir.BroadcastStateDescriptor {
			return []weir.BroadcastStateDescriptor{weir.NewMapStateDescriptorWithCodecs[string, int]("r", nil, nil)}
		}, `broadcast state "r": nil codec`},
		{"no built-in codec", func() []weir.BroadcastStateDescriptor {
			return []weir.BroadcastStateDescriptor{weir.NewMapStateDescriptor[string, noCodec]("r")}
		}, "use NewMapStateDescriptorWithCodecs"},
		{"nil descriptor", func() []weir.BroadcastStateDescriptor { return []weir.BroadcastStateDescriptor{nil} }, "nil descriptor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 1})
			rules := env.FromSource("rules", datagen.Generator(1, func(int64) string { return "r" })).BroadcastState(tt.descs()...)
			env.FromSource("events", datagen.Generator(1, func(i int64) int64 { return i })).
				ConnectBroadcast(rules).Process("p", bcNop{}).SinkTo("out", collect.New[int64]())
			err := env.Execute(t.Context(), "bad")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
	t.Run("other environment", func(t *testing.T) {
		env, other := weir.NewEnvironment(weir.Options{}), weir.NewEnvironment(weir.Options{})
		rules := other.FromSource("rules", datagen.Generator(1, func(int64) string { return "r" })).
			BroadcastState(weir.NewMapStateDescriptor[string, int]("r"))
		env.FromSource("events", datagen.Generator(1, func(i int64) int64 { return i })).
			ConnectBroadcast(rules).Process("p", bcNop{}).SinkTo("out", collect.New[int64]())
		if err := env.Execute(t.Context(), "bad"); err == nil || !strings.Contains(err.Error(), "different environments") {
			t.Fatalf("err = %v", err)
		}
	})
}

// bcViews checks, from inside a running operator, what the two sides may
// do with the broadcast state.
type bcViews struct {
	mu   *sync.Mutex
	errs *[]string
}

func (v bcViews) fail(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	*v.errs = append(*v.errs, fmt.Sprintf(format, args...))
}

var bcDesc = weir.NewMapStateDescriptor[string, int64]("m")

func (v bcViews) ProcessElement(ctx *weir.ReadOnlyBroadcastContext, i int64, out weir.Collector[int64]) error {
	ro, err := ctx.BroadcastState(bcDesc)
	if err != nil {
		return err
	}
	if _, ok := ro.(weir.BroadcastState[string, int64]); ok {
		v.fail("the read-only view can be written through a type assertion")
	}
	if _, err := ctx.BroadcastState(weir.NewMapStateDescriptor[string, string]("m")); err == nil || !strings.Contains(err.Error(), "another key or value type") {
		v.fail("another value type under the same name: err = %v", err)
	}
	out.Collect(int64(ro.Len()))
	return nil
}

func (v bcViews) ProcessBroadcastElement(ctx *weir.BroadcastContext, s string, _ weir.Collector[int64]) error {
	m, err := ctx.BroadcastState(bcDesc)
	if err != nil {
		return err
	}
	m.Put(s, int64(len(s)))
	m.PutAll(map[string]int64{s + "!": 1})
	m.Remove(s + "!")
	if got, ok := m.Get(s); !ok || got != int64(len(s)) || !m.Contains(s) {
		v.fail("Get(%q) = %d, %v", s, got, ok)
	}
	var keys []string
	for k := range m.All() {
		keys = append(keys, k)
	}
	if len(keys) != m.Len() {
		v.fail("All yields %d keys, Len %d", len(keys), m.Len())
	}
	if _, err := ctx.BroadcastState(weir.NewMapStateDescriptor[string, int64]("other")); err == nil || !strings.Contains(err.Error(), `"other" is not one of the descriptors`) {
		v.fail("a state not given to BroadcastState: err = %v", err)
	}
	return nil
}

func TestBroadcastStateViews(t *testing.T) {
	var mu sync.Mutex
	var errs []string
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	rules := env.FromSource("rules", datagen.Generator(3, func(i int64) string { return fmt.Sprint("rule", i) })).BroadcastState(bcDesc)
	sink := collect.New[int64]()
	env.FromSource("events", datagen.Generator(50, func(i int64) int64 { return i })).
		ConnectBroadcast(rules).Process("p", bcViews{&mu, &errs}).SinkTo("out", sink)
	if err := env.Execute(t.Context(), "views"); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
	if got := sink.Results(); len(got) != 50 || slices.Max(got) > 3 {
		t.Fatalf("sizes seen %v", got)
	}
}

// coCounter is a CoProcessFunction keeping the records of both inputs in
// an operator list state and, in a union list, the number it saw.
type coCounter struct {
	seen  state.List[string]
	total state.List[int64]
	mu    *sync.Mutex
	got   map[int][]string // subtask -> restored seen
	tot   map[int][]int64  // subtask -> restored totals
}

func (c *coCounter) Open(ctx *weir.Context) (err error) {
	if c.seen, err = weir.OperatorListWithCodec(ctx, "seen", codec.String()); err != nil {
		return err
	}
	if c.total, err = weir.UnionList[int64](ctx, "total"); err != nil {
		return err
	}
	if ctx.IsRestored() {
		c.mu.Lock()
		c.got[ctx.Subtask()] = slices.Clone(c.seen.Get())
		c.tot[ctx.Subtask()] = slices.Clone(c.total.Get())
		c.mu.Unlock()
	}
	return nil
}

func (c *coCounter) SnapshotState(int64) error {
	c.total.Update([]int64{int64(len(c.seen.Get()))})
	return nil
}

func (c *coCounter) ProcessElement1(_ *weir.Context, i int64, _ weir.Collector[string]) error {
	c.seen.Add(fmt.Sprint("a", i))
	return nil
}

func (c *coCounter) ProcessElement2(_ *weir.Context, s string, _ weir.Collector[string]) error {
	c.seen.Add("b" + s)
	return nil
}

// TestCoProcessOperatorListRescale runs a co-process function with list
// state to its end at parallelism 3 (its final checkpoint holds every
// record), then restores that checkpoint at parallelism 2: the even-split
// list comes back with each record once, in two nearly equal halves; the
// union list, whose totals the function wrote in its SnapshotState hook,
// comes back whole on both subtasks.
func TestCoProcessOperatorListRescale(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var mu sync.Mutex
	run := func(par int, restore string) *coCounter {
		opts := weir.Options{Parallelism: par, JobID: "coprocess", Restore: restore}
		opts.Checkpointing = weir.CheckpointOptions{Interval: 5 * time.Millisecond, Storage: "file://" + root}
		env := weir.NewEnvironment(opts)
		a := env.FromSource("a", datagen.Generator(100, func(i int64) int64 { return i })).UID("a")
		b := env.FromSource("b", datagen.Generator(60, func(i int64) string { return fmt.Sprint(i) })).UID("b")
		fn := &coCounter{mu: &mu, got: map[int][]string{}, tot: map[int][]int64{}}
		a.Connect(b).Process("co", fn).UID("co").SinkTo("out", collect.New[string]()).UID("out")
		if err := env.Execute(spCtx(t), "coprocess"); err != nil {
			t.Fatal(err)
		}
		return fn
	}
	run(3, "")
	fn := run(2, "latest")
	var all []string
	for s := range 2 {
		all = append(all, fn.got[s]...)
		if n := len(fn.got[s]); n != 80 {
			t.Errorf("subtask %d got %d records, want 80 (160 split in two)", s, n)
		}
		if tot := fn.tot[s]; len(tot) != 3 || tot[0]+tot[1]+tot[2] != 160 {
			t.Errorf("subtask %d: union totals %v, want one per old subtask summing to 160", s, tot)
		}
	}
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprint("a", i))
	}
	for i := range 60 {
		want = append(want, fmt.Sprint("b", i))
	}
	spSameMultiset(t, "restored records", all, want)
}
