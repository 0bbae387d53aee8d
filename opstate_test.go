package weir_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/state"
)

// The rescaling job of this file: a bounded stream of factor rules is
// broadcast, with the broadcast state "rules", to two operators:
//
//   - "enrich" (non-keyed) turns index i into "i:i*F", F the sum of the
//     factors of all rules; until it has all rules it buffers indexes in the
//     even-split list "pending". It also keeps an even-split list "tokens"
//     (5 per subtask, written once by the first run) and a union list
//     "markers" (one per subtask, rewritten by every run), to show how
//     each is redistributed;
//   - "audit" (keyed by i mod 37) counts per key ("k5,12", as in
//     savepoint_test.go) and keeps its own copy of the rules.
//
// Restores never replay the rules (the rules source finished before any
// restored checkpoint), so a subtask without a full copy of the broadcast
// state would buffer forever and lose output.

type osRule struct {
	ID     int64
	Factor int64
}

const osRules = 6

// osFactor is the sum of the rules' factors.
func osFactor() int64 {
	var f int64
	for i := range int64(osRules) {
		f += i + 1
	}
	return f
}

var osRulesDesc = weir.NewMapStateDescriptor[int64, int64]("rules")

// osRecorder collects what the instances of one run found on restore.
type osRecorder struct {
	mu       sync.Mutex
	restored map[int]bool     // subtask -> Context.IsRestored
	tokens   map[int][]string // subtask -> restored tokens
	markers  map[int][]string // subtask -> restored markers
	// complete counts the enrich and audit subtasks that have all rules.
	complete atomic.Int64
	// firstLen is the rules count each subtask of enrich or audit saw at
	// its first element ("enrich-0" -> 6).
	firstLen map[string]int
}

func newOSRecorder() *osRecorder {
	return &osRecorder{restored: map[int]bool{}, tokens: map[int][]string{}, markers: map[int][]string{}, firstLen: map[string]int{}}
}

func (r *osRecorder) first(op string, subtask, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := fmt.Sprint(op, "-", subtask)
	if _, ok := r.firstLen[k]; !ok {
		r.firstLen[k] = n
	}
}

type osEnricher struct {
	rec     *osRecorder
	pending state.List[int64]
	tokens  state.List[string]
	markers state.List[string]
}

func (e *osEnricher) Open(ctx *weir.Context) (err error) {
	if e.pending, err = weir.OperatorList[int64](ctx, "pending"); err != nil {
		return err
	}
	if e.tokens, err = weir.OperatorList[string](ctx, "tokens"); err != nil {
		return err
	}
	if e.markers, err = weir.UnionList[string](ctx, "markers"); err != nil {
		return err
	}
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	s := ctx.Subtask()
	e.rec.restored[s] = ctx.IsRestored()
	if ctx.IsRestored() {
		e.rec.tokens[s] = slices.Clone(e.tokens.Get())
		e.rec.markers[s] = slices.Clone(e.markers.Get())
	} else {
		for j := range 5 {
			e.tokens.Add(fmt.Sprintf("t%d.%d", s, j))
		}
	}
	// A union list keeps what the subtask must share: here, who it is.
	e.markers.Update([]string{fmt.Sprintf("p%d.s%d", ctx.Parallelism(), s)})
	return nil
}

func (e *osEnricher) emit(i int64, out weir.Collector[string]) {
	out.Collect(fmt.Sprintf("%d:%d", i, i*osFactor()))
}

func (e *osEnricher) ProcessElement(ctx *weir.ReadOnlyBroadcastContext, i int64, out weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	e.rec.first("enrich", ctx.Subtask(), rules.Len())
	if rules.Len() < osRules {
		e.pending.Add(i)
		return nil
	}
	for _, p := range e.pending.Get() {
		e.emit(p, out)
	}
	e.pending.Clear()
	e.emit(i, out)
	return nil
}

func (e *osEnricher) ProcessBroadcastElement(ctx *weir.BroadcastContext, r osRule, out weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	if _, err := ctx.BroadcastState(weir.NewMapStateDescriptor[string, int64]("nope")); err == nil {
		return errors.New("a state not given to BroadcastState was found")
	}
	rules.Put(r.ID, r.Factor)
	if rules.Len() == osRules {
		e.rec.complete.Add(1)
		for _, p := range e.pending.Get() {
			e.emit(p, out)
		}
		e.pending.Clear()
	}
	return nil
}

type osAudit struct {
	rec   *osRecorder
	count state.Value[int64]
}

func (a *osAudit) Open(ctx *weir.KeyedContext[string]) (err error) {
	a.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (a *osAudit) ProcessElement(ctx *weir.KeyedReadOnlyBroadcastContext[string], s string, out weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	a.rec.first("audit", ctx.Subtask(), rules.Len())
	n, _ := a.count.Value()
	n++
	a.count.Update(n)
	out.Collect(fmt.Sprintf("%s,%d", ctx.CurrentKey(), n))
	return nil
}

func (a *osAudit) ProcessBroadcastElement(ctx *weir.KeyedBroadcastContext[string], r osRule, _ weir.Collector[string]) error {
	rules, err := ctx.BroadcastState(osRulesDesc)
	if err != nil {
		return err
	}
	rules.Put(r.ID, r.Factor)
	if rules.Len() == osRules {
		a.rec.complete.Add(1)
	}
	return nil
}

// osWantEnriched is enrich's output for the indexes 0..n-1.
func osWantEnriched(n int64) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%d:%d", i, i*osFactor())
	}
	return out
}

type osRun struct {
	par       int
	opts      weir.Options
	src       *datagen.Source[int64]
	enriched  *collect.TransactionalCollector[string]
	counts    *collect.TransactionalCollector[string]
	rec       *osRecorder
	tap       *atomic.Int64
	rulesRate float64
}

func osBuild(t *testing.T, r osRun) *weir.JobClient {
	t.Helper()
	opts := r.opts
	opts.Parallelism = r.par
	env := weir.NewEnvironment(opts)
	rules := env.FromSource("rules", datagen.Generator(osRules, func(i int64) osRule { return osRule{ID: i, Factor: i + 1} })).
		Parallelism(1).UID("rules").
		BroadcastState(osRulesDesc)
	enriched := env.FromSource("src", r.src).UID("src").
		ConnectBroadcast(rules).
		Process("enrich", &osEnricher{rec: r.rec}).UID("enrich")
	enriched.Map("tap", func(s string) string { r.tap.Add(1); return s }).UID("tap").
		SinkTo("enriched", r.enriched).UID("enriched")
	enriched.KeyBy(func(s string) string {
		i, _, _ := strings.Cut(s, ":")
		var n int64
		fmt.Sscan(i, &n)
		return spKey(n)
	}).ConnectBroadcast(rules).
		Process("audit", &osAudit{rec: r.rec}).UID("audit").
		SinkTo("counts", r.counts).UID("counts")
	c, err := env.ExecuteAsync(spCtx(t), "opstate")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// osBroadcastCopies checks that every subtask of op in md has a full copy
// of the rules.
func osBroadcastCopies(t *testing.T, md *checkpoint.Metadata, uid string, par int) {
	t.Helper()
	op := spOperator(md, uid)
	if op == nil || op.Parallelism != par || len(op.Subtasks) != par {
		t.Fatalf("checkpoint %d: operator %s missing or not at parallelism %d: %+v", md.ID, uid, par, op)
	}
	kc, _ := codec.Of[int64]()
	for s, st := range op.Subtasks {
		if len(st.Broadcast) != 1 || st.Broadcast[0].Name != "rules" {
			t.Fatalf("checkpoint %d: %s subtask %d: broadcast state %+v, want one copy of rules", md.ID, uid, s, st.Broadcast)
		}
		got := map[int64]int64{}
		for _, e := range st.Broadcast[0].Entries {
			k, _, err := kc.Decode(e.Key)
			v, _, err2 := kc.Decode(e.Value)
			if err != nil || err2 != nil {
				t.Fatal(err, err2)
			}
			got[k] = v
		}
		want := map[int64]int64{}
		for i := range int64(osRules) {
			want[i] = i + 1
		}
		if !maps.Equal(got, want) {
			t.Fatalf("checkpoint %d: %s subtask %d has rules %v, want %v", md.ID, uid, s, got, want)
		}
	}
}

// TestOperatorAndBroadcastStateRescale checkpoints the job at parallelism
// 4, cancels it, restores the latest checkpoint at parallelism 2, stops
// that run with a savepoint and restores the savepoint at parallelism 3:
// the even-split tokens are dealt in contiguous chunks, each exactly once;
// every subtask gets all the union markers of the previous run; every
// subtask of both broadcast operators has all rules from its first record
// on; the output of both sinks is exactly once.
func TestOperatorAndBroadcastStateRescale(t *testing.T) {
	t.Parallel()
	const n = 9000
	root := t.TempDir()
	src := spIndexes(n, 12000)
	enriched, counts := collect.Transactional[string](), collect.Transactional[string]()
	opts := weir.Options{JobID: "opstate"}
	opts.Checkpointing = weir.CheckpointOptions{Interval: 10 * time.Millisecond, Storage: "file://" + root, RetainOnCancel: true}

	// Run 1, parallelism 4: periodic checkpoints once every subtask has
	// the rules, then cancel.
	rec1, tap1 := newOSRecorder(), new(atomic.Int64)
	c := osBuild(t, osRun{par: 4, opts: opts, src: src, enriched: enriched, counts: counts, rec: rec1, tap: tap1})
	spWait(t, "every subtask of enrich and audit to have all rules", 10*time.Second, func() bool { return rec1.complete.Load() == 8 })
	s0, _ := c.Checkpoints()
	spWait(t, "2 checkpoints after the rules and 1500 records", 10*time.Second, func() bool {
		s, _ := c.Checkpoints()
		return s.Completed >= s0.Completed+2 && tap1.Load() >= 1500
	})
	c.Cancel()
	if err := spWaitJob(t, c, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("run 1: Wait = %v, want context.Canceled", err)
	}
	sum1, _ := c.Checkpoints()
	for s := range 4 {
		if rec1.restored[s] {
			t.Errorf("run 1, subtask %d: IsRestored true for a fresh job", s)
		}
	}
	osBroadcastCopies(t, spReadMetadata(t, fmt.Sprintf("%s/opstate/chk-%d", root, sum1.LatestCompleted)), "enrich", 4)

	// Run 2, parallelism 2, from the latest checkpoint; stop with a
	// savepoint midway.
	rec2, tap2 := newOSRecorder(), new(atomic.Int64)
	opts2 := opts
	opts2.Restore = "latest"
	c = osBuild(t, osRun{par: 2, opts: opts2, src: src, enriched: enriched, counts: counts, rec: rec2, tap: tap2})
	spWait(t, "run 2 to process 2000 records", 10*time.Second, func() bool { return tap2.Load() >= 2000 })
	sp, err := c.StopWithSavepoint(spCtx(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, c, 10*time.Second); err != nil {
		t.Fatalf("run 2: %v", err)
	}
	sum2, _ := c.Checkpoints()
	if sum2.Restored != sum1.LatestCompleted || sum2.Restarts != 0 {
		t.Fatalf("run 2 restored %d with %d restarts, want %d and none", sum2.Restored, sum2.Restarts, sum1.LatestCompleted)
	}
	md2 := spReadMetadata(t, spFilePath(t, sp))
	osBroadcastCopies(t, md2, "enrich", 2)
	osBroadcastCopies(t, md2, "audit", 2)

	// Run 3, parallelism 3, from the savepoint, to the end.
	rec3, tap3 := newOSRecorder(), new(atomic.Int64)
	opts3 := opts
	opts3.Restore = sp
	c = osBuild(t, osRun{par: 3, opts: opts3, src: src, enriched: enriched, counts: counts, rec: rec3, tap: tap3})
	if err := spWaitJob(t, c, 20*time.Second); err != nil {
		t.Fatalf("run 3: %v", err)
	}

	var all []string
	for s := range 4 {
		for j := range 5 {
			all = append(all, fmt.Sprintf("t%d.%d", s, j))
		}
	}
	check := func(run string, rec *osRecorder, tokens [][]string, markers []string) {
		t.Helper()
		for s := range tokens {
			if !rec.restored[s] {
				t.Errorf("%s, subtask %d: IsRestored false", run, s)
			}
			if !slices.Equal(rec.tokens[s], tokens[s]) {
				t.Errorf("%s, subtask %d: even-split tokens %q, want %q", run, s, rec.tokens[s], tokens[s])
			}
			got := slices.Sorted(slices.Values(rec.markers[s]))
			if !slices.Equal(got, markers) {
				t.Errorf("%s, subtask %d: union markers %q, want %q", run, s, got, markers)
			}
			for _, op := range []string{"enrich", "audit"} {
				if l, ok := rec.firstLen[fmt.Sprint(op, "-", s)]; ok && l != osRules {
					t.Errorf("%s: %s subtask %d had %d rules at its first record, want all %d", run, op, s, l, osRules)
				}
			}
		}
	}
	check("run 2 (4 -> 2)", rec2, [][]string{all[:10], all[10:]}, []string{"p4.s0", "p4.s1", "p4.s2", "p4.s3"})
	check("run 3 (2 -> 3)", rec3, [][]string{all[:7], all[7:14], all[14:]}, []string{"p2.s0", "p2.s1"})
	spSameMultiset(t, "enriched, 4 -> 2 -> 3", enriched.Results(), osWantEnriched(n))
	spSameMultiset(t, "counts, 4 -> 2 -> 3", counts.Results(), spWant(n))
}

// TestIncompatibleRestoreFailsAtStart: a restore whose key groups cannot be
// split as the job's (another MaxParallelism), or whose state belongs to an
// operator the job lacks, fails at once with an error that says so, instead
// of being retried by the restart strategy; the checkpoint stays.
func TestIncompatibleRestoreFailsAtStart(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	opts := weir.Options{Parallelism: 2, JobID: "maxpar"}
	opts.Checkpointing = weir.CheckpointOptions{Interval: 5 * time.Millisecond, Storage: "file://" + root}
	env := weir.NewEnvironment(opts)
	var tap atomic.Int64
	spBuild(env, spIndexes(500, 20000), 1, collect.Transactional[string](), &tap)
	if err := env.Execute(spCtx(t), "maxpar"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(o *weir.Options)
		build func(env *weir.Environment)
		want  []string
	}{
		{"another max parallelism", func(o *weir.Options) { o.MaxParallelism = 64 }, func(env *weir.Environment) {
			spBuild(env, spIndexes(500, 20000), 1, collect.Transactional[string](), &tap)
		}, []string{"MaxParallelism 128", "the job has 64", "cannot be redistributed"}},
		{"an operator the job lacks", func(*weir.Options) {}, func(env *weir.Environment) {
			env.FromSource("src", spIndexes(500, 20000)).UID("src").Parallelism(1).
				Map("str", func(i int64) string { return fmt.Sprint(i) }).UID("str").
				SinkTo("out", collect.Transactional[string]()).UID("out")
		}, []string{`operator uid "count"`, "AllowNonRestoredState"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.Restore = "latest"
			tt.edit(&o)
			env := weir.NewEnvironment(o)
			tt.build(env)
			c, err := env.ExecuteAsync(spCtx(t), "maxpar")
			if err != nil {
				t.Fatal(err)
			}
			// The default restart strategy restarts forever: the job must
			// fail at once all the same.
			err = spWaitJob(t, c, 10*time.Second)
			if err == nil {
				t.Fatal("the job ran")
			}
			if sum, _ := c.Checkpoints(); sum.Restarts != 0 {
				t.Errorf("%d restarts, want none", sum.Restarts)
			}
			if dirs := spCheckpointDirs(t, filepath.Join(root, "maxpar")); !slices.Contains(slices.Collect(maps.Values(dirs)), true) {
				t.Errorf("no complete checkpoint left: %v", dirs)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
