package weir_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/state"
)

// cluster is a JobManager and workers in this process: each worker has
// its own build of the job (as each process of a cluster has) and its own
// network.Node on 127.0.0.1, so every edge between subtasks of two workers
// crosses TCP.
type cluster struct {
	job     deploy.Job // the JobManager's build
	workers []deploy.Worker
	slots   []deploy.Slots
	logs    *syncBuffer
}

// newCluster builds the job three times from build (the JobManager's and
// two workers'), with opts, and starts the workers' nodes.
func newCluster(t *testing.T, opts weir.Options, slotsEach int, build func(env *weir.Environment)) *cluster {
	t.Helper()
	c := &cluster{logs: &syncBuffer{}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(c.logs, nil))
	}
	mk := func() deploy.Job {
		env := weir.NewEnvironment(opts)
		build(env)
		job, err := env.Deployable("job")
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	c.job = mk()
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		node, err := network.New(network.Options{Logger: opts.Logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		c.workers = append(c.workers, wireWorker{t, deploy.NewLocalWorker(id, mk(), node, opts.Logger)})
		c.slots = append(c.slots, deploy.Slots{Worker: id, DataAddress: node.Addr(), Free: slotsEach})
	}
	return c
}

// wireWorker hands its worker the requests as another process gets them:
// through encoding/json, so without the open stores (a restore and a
// trigger name theirs by URL only) and without error values.
type wireWorker struct {
	t testing.TB
	deploy.Worker
}

func wire[T any](t testing.TB, v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("%T does not travel: %v", v, err)
		return v
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Errorf("%T does not travel back: %v", v, err)
		return v
	}
	return out
}

func (w wireWorker) Deploy(ctx context.Context, req jobmaster.DeployRequest, plan deploy.Plan, p deploy.Placement, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	return w.Worker.Deploy(ctx, wire(w.t, req), wire(w.t, plan), wire(w.t, p), l)
}

func (w wireWorker) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	w.Worker.TriggerCheckpoint(wire(w.t, req))
}

func (w wireWorker) Cancel(req jobmaster.CancelRequest) { w.Worker.Cancel(wire(w.t, req)) }

// Place implements deploy.Scheduler: Spread over the workers' slots.
func (c *cluster) Place(ctx context.Context, plan deploy.Plan, attempt int) (deploy.Placement, []deploy.Worker, error) {
	p, err := deploy.Spread(plan, c.slots)
	return p, c.workers, err
}

// start starts the job's JobMaster over the workers; run waits for it.
func (c *cluster) start(t *testing.T, ctx context.Context) (*jobmaster.JobMaster, <-chan error) {
	t.Helper()
	jmOpts, err := c.job.Master()
	if err != nil {
		t.Fatal(err)
	}
	jm, err := jobmaster.New(jmOpts, deploy.NewGateway(c.job.Plan(), c, nil))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- jm.Run(ctx) }()
	return jm, done
}

func (c *cluster) run(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, done := c.start(t, ctx)
	return <-done
}

// crossed returns the bytes the workers' exchanges sent over TCP.
func (c *cluster) crossed(t *testing.T) int {
	t.Helper()
	re := regexp.MustCompile(`exchange over tcp closed".* bytes=(\d+)`)
	total := 0
	deadline := time.Now().Add(5 * time.Second)
	for {
		total = 0
		for _, m := range re.FindAllStringSubmatch(c.logs.String(), -1) {
			b, _ := strconv.Atoi(m[1])
			total += b
		}
		if total > 0 || time.Now().After(deadline) {
			return total
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dpShape is a job of the two-worker tests: build adds it to env with its
// sink; the output is a multiset of strings.
type dpShape struct {
	name  string
	build func(env *weir.Environment, sink connector.Sink[string])
}

// dpRuleCount is a keyed broadcast function: a running count per key for
// the elements, and one "rule" line per rule on every subtask (so the
// output does not depend on when the rules arrive).
type dpRuleCount struct{ count state.Value[int64] }

var dpRules = weir.NewMapStateDescriptor[string, string]("rules")

func (f *dpRuleCount) Open(ctx *weir.KeyedContext[int64]) (err error) {
	f.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (f *dpRuleCount) ProcessElement(ctx *weir.KeyedReadOnlyBroadcastContext[int64], in int64, out weir.Collector[string]) error {
	n, _ := f.count.Value()
	n++
	f.count.Update(n)
	out.Collect(fmt.Sprintf("k%d,%d", ctx.CurrentKey(), n))
	return nil
}

func (f *dpRuleCount) ProcessBroadcastElement(ctx *weir.KeyedBroadcastContext[int64], in string, out weir.Collector[string]) error {
	bs, err := ctx.BroadcastState(dpRules)
	if err != nil {
		return err
	}
	bs.Put(in, in)
	out.Collect("rule " + in)
	return nil
}

var dpShapes = []dpShape{
	{"map-filter-rebalance", func(env *weir.Environment, sink connector.Sink[string]) {
		env.FromSource("src", datagen.Generator(3000, func(i int64) int64 { return i })).
			Map("triple", func(i int64) int64 { return 3 * i }).
			Filter("even", func(i int64) bool { return i%2 == 0 }).
			Rebalance().
			Map("fmt", func(i int64) string { return strconv.FormatInt(i, 10) }).Parallelism(3).
			SinkTo("out", sink)
	}},
	{"keyby-count", func(env *weir.Environment, sink connector.Sink[string]) {
		env.FromSource("src", datagen.Generator(5000, func(i int64) string { return fmt.Sprint("k", i%31) })).Parallelism(1).
			KeyBy(func(s string) string { return s }).
			Process("count", &runningCount{}).
			SinkTo("out", sink)
	}},
	{"tumbling-window", func(env *weir.Environment, sink connector.Sink[string]) {
		env.FromSource("events", datagen.Generator(4000, func(i int64) ev { return ev{Key: fmt.Sprint("k", i%7), TS: i, V: i} }),
			weir.ForBoundedOutOfOrderness[ev](5*time.Millisecond).WithTimestampAssigner(func(e ev, _ int64) int64 { return e.TS })).
			KeyBy(evKey).Window(weir.TumblingEventTimeWindows(50*time.Millisecond)).Reduce("sum", sumV).
			Map("fmt", func(e ev) string { return fmt.Sprintf("%s@%d=%d", e.Key, e.TS/50, e.V) }).
			SinkTo("out", sink)
	}},
	{"interval-join", func(env *weir.Environment, sink connector.Sink[string]) {
		const n = 400
		left := env.FromSource("left", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 0) }), joinStrategy())
		right := env.FromSource("right", datagen.Generator(n, func(i int64) joinEvent { return joinSide(i, 5) }), joinStrategy())
		key := func(e joinEvent) int { return e.Key }
		left.KeyBy(key).IntervalJoin(right.KeyBy(key)).Between(-20*time.Millisecond, 30*time.Millisecond).
			Process("join", weir.ProcessJoinFunction[joinEvent, joinEvent, string](joinPair{})).
			SinkTo("out", sink)
	}},
	{"keyed-broadcast", func(env *weir.Environment, sink connector.Sink[string]) {
		rules := env.FromSource("rules", datagen.Generator(5, func(i int64) string { return fmt.Sprint("r", i) })).Parallelism(1).BroadcastState(dpRules)
		env.FromSource("events", datagen.Generator(3000, func(i int64) int64 { return i })).
			KeyBy(func(i int64) int64 { return i % 11 }).
			ConnectBroadcast(rules).Process("p", weir.KeyedBroadcastProcessFunction[int64, int64, string, string](&dpRuleCount{})).
			SinkTo("out", sink)
	}},
	{"union-rebalance", func(env *weir.Environment, sink connector.Sink[string]) {
		a := env.FromSource("a", datagen.Generator(2000, func(i int64) string { return fmt.Sprint("a", i) })).Parallelism(1)
		b := env.FromSource("b", datagen.Generator(2000, func(i int64) string { return fmt.Sprint("b", i) }))
		a.Union(b).Rebalance().Map("up", strings.ToUpper).SinkTo("out", sink)
	}},
}

// TestTwoWorkersSameAsLocal: every job shape gives, on two workers of
// this process (edges between them over TCP), the output it gives in
// local mode, on the heap backend and on pebble with incremental
// checkpoints, checkpointing into file:// storage.
func TestTwoWorkersSameAsLocal(t *testing.T) {
	for _, shape := range dpShapes {
		for _, backend := range []string{"heap", "pebble"} {
			t.Run(shape.name+"/"+backend, func(t *testing.T) {
				opts := weir.Options{Parallelism: 2, StateBackend: backend, LocalStateDir: t.TempDir(), Restart: "none"}
				opts.Checkpointing.Interval = 20 * time.Millisecond
				opts.Checkpointing.Storage = "file://" + t.TempDir()
				opts.Checkpointing.Incremental = backend == "pebble"

				local := collect.New[string]()
				env := weir.NewEnvironment(opts)
				shape.build(env, local)
				if err := env.Execute(t.Context(), "job"); err != nil {
					t.Fatalf("local mode: %v", err)
				}
				if len(local.Results()) == 0 {
					t.Fatal("local mode gave no output: the test proves nothing")
				}

				opts.Checkpointing.Storage = "file://" + t.TempDir()
				sink := collect.New[string]()
				c := newCluster(t, opts, 2, func(env *weir.Environment) { shape.build(env, sink) })
				if err := c.run(t); err != nil {
					t.Fatalf("two workers: %v", err)
				}
				spSameMultiset(t, "two workers vs local mode", sink.Results(), local.Results())
				if b := c.crossed(t); b == 0 {
					t.Fatalf("no byte crossed between the workers:\n%s", c.logs.String())
				}
			})
		}
	}
}

// TestTwoWorkersExactlyOnce: a keyed count into a committing sink, on two
// workers; a task of the counter fails once mid-run on one worker: the
// attempt is cancelled on both, restarts from the latest checkpoint on
// both, and the committed output is exactly once.
func TestTwoWorkersExactlyOnce(t *testing.T) {
	for _, backend := range []string{"heap", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			const n = 6000
			opts := weir.Options{Parallelism: 2, StateBackend: backend, LocalStateDir: t.TempDir(), Restart: "fixed-delay:attempts=3,delay=10ms"}
			opts.Checkpointing.Interval = 20 * time.Millisecond
			opts.Checkpointing.Storage = "file://" + t.TempDir()
			opts.Checkpointing.Incremental = backend == "pebble"
			sink := collect.Transactional[string]()
			var failed atomic.Bool
			var restored atomic.Int64
			opts.OnRestore = func(r weir.RestoreInfo) {
				if r.Restart {
					restored.Store(r.ID)
				}
			}
			var tap atomic.Int64
			c := newCluster(t, opts, 1, func(env *weir.Environment) {
				counter := &spCounter{onElement: func(i int64) error {
					if tap.Load() >= n/2 && failed.CompareAndSwap(false, true) {
						return errors.New("injected failure")
					}
					return nil
				}}
				spBuildWith(env, spIndexes(n, 10000), 2, sink, &tap, counter)
			})
			if err := c.run(t); err != nil {
				t.Fatal(err)
			}
			if !failed.Load() {
				t.Fatal("the failure was not injected")
			}
			if restored.Load() == 0 {
				t.Fatalf("the job did not restart from a checkpoint:\n%s", c.logs.String())
			}
			spSameMultiset(t, "committed output", sink.Results(), spWant(n))
		})
	}
}

// TestRestoreAcrossModes: a job stopped with a savepoint in local mode
// goes on from it on two workers, is stopped there with a savepoint, and
// goes on from that in local mode to its end: the committed output of the
// three runs is each record exactly once (the state is the same in both
// modes).
func TestRestoreAcrossModes(t *testing.T) {
	const n = 6000
	base := weir.Options{Parallelism: 2, StateBackend: "pebble", LocalStateDir: t.TempDir(), Restart: "none"}
	base.Checkpointing.Storage = "file://" + t.TempDir()
	base.Checkpointing.Incremental = true
	sink := collect.Transactional[string]()
	var tap atomic.Int64
	savepoints := t.TempDir()

	// 1. Local mode, stopped after a third of the input.
	env := weir.NewEnvironment(base)
	spBuild(env, spIndexes(n, 3000), 2, sink, &tap)
	jc, err := env.ExecuteAsync(spCtx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	spWait(t, "a third of the input", 20*time.Second, func() bool { return tap.Load() >= n/3 })
	sp1, err := jc.StopWithSavepoint(spCtx(t), savepoints)
	if err != nil {
		t.Fatal(err)
	}
	if err := spWaitJob(t, jc, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// 2. Two workers from that savepoint, stopped after two thirds.
	opts := base
	opts.Restore = sp1
	c := newCluster(t, opts, 2, func(env *weir.Environment) { spBuild(env, spIndexes(n, 3000), 2, sink, &tap) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jm, done := c.start(t, ctx)
	spWait(t, "two thirds of the input", 20*time.Second, func() bool { return tap.Load() >= 2*n/3 })
	sp2, err := jm.TriggerSavepoint(ctx, savepoints, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if tap.Load() >= n {
		t.Fatal("the input ended before the second savepoint: the test proves nothing")
	}

	// 3. Local mode from the workers' savepoint, to the end.
	opts = base
	opts.Restore = sp2
	env = weir.NewEnvironment(opts)
	spBuild(env, spIndexes(n, 100000), 2, sink, &tap)
	if err := env.Execute(spCtx(t), "job"); err != nil {
		t.Fatal(err)
	}
	spSameMultiset(t, "committed output of the three runs", sink.Results(), spWant(n))
}

// TestDeployableFingerprint: two builds of the same program and options
// have the same fingerprint; another parallelism, uid, record type,
// partitioner or chaining gives another; a worker whose build differs
// refuses the plan with both fingerprints in the error.
func TestDeployableFingerprint(t *testing.T) {
	fp := func(opts weir.Options, build func(env *weir.Environment)) deploy.Job {
		t.Helper()
		env := weir.NewEnvironment(opts)
		build(env)
		job, err := env.Deployable("fp")
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	src := func(env *weir.Environment) *weir.Stream[int64] {
		return env.FromSource("src", datagen.Generator(10, func(i int64) int64 { return i }))
	}
	base := func(env *weir.Environment) {
		src(env).Map("m", func(i int64) int64 { return i }).SinkTo("out", collect.New[int64]())
	}
	p2 := weir.Options{Parallelism: 2}
	a, b := fp(p2, base), fp(p2, base)
	if a.Plan().Fingerprint == "" || a.Plan().Fingerprint != b.Plan().Fingerprint {
		t.Fatalf("two builds of one program: fingerprints %q and %q", a.Plan().Fingerprint, b.Plan().Fingerprint)
	}
	if got := a.Plan(); len(got.Vertices) != 1 || got.Vertices[0].Parallelism != 2 || !got.Vertices[0].Source || got.MaxParallelism != 128 {
		t.Fatalf("plan %+v", got)
	}
	others := map[string]deploy.Job{
		"parallelism":     fp(weir.Options{Parallelism: 3}, base),
		"max parallelism": fp(weir.Options{Parallelism: 2, MaxParallelism: 64}, base),
		"uid": fp(p2, func(env *weir.Environment) {
			src(env).Map("m", func(i int64) int64 { return i }).UID("other").SinkTo("out", collect.New[int64]())
		}),
		"record type": fp(p2, func(env *weir.Environment) {
			src(env).Map("m", func(i int64) string { return "" }).SinkTo("out", collect.New[string]())
		}),
		"partitioner": fp(p2, func(env *weir.Environment) {
			src(env).Map("m", func(i int64) int64 { return i }).Rebalance().SinkTo("out", collect.New[int64]())
		}),
		"chaining": fp(p2, func(env *weir.Environment) {
			src(env).Map("m", func(i int64) int64 { return i }).DisableChaining().SinkTo("out", collect.New[int64]())
		}),
	}
	seen := map[string]string{a.Plan().Fingerprint: "base"}
	for what, job := range others {
		f := job.Plan().Fingerprint
		if prev, ok := seen[f]; ok {
			t.Errorf("%s: fingerprint %s, the same as %s's", what, f, prev)
		}
		seen[f] = what
	}
	node, err := network.New(network.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	w := deploy.NewLocalWorker("w1", others["uid"], node, nil)
	p, err := deploy.Spread(a.Plan(), []deploy.Slots{{Worker: "w1", DataAddress: "127.0.0.1:1", Free: 2}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Deploy(t.Context(), jobmaster.DeployRequest{JobID: "fp", Attempt: 0}, a.Plan(), p, nil)
	if err == nil || !strings.Contains(err.Error(), a.Plan().Fingerprint) || !strings.Contains(err.Error(), others["uid"].Plan().Fingerprint) {
		t.Fatalf("a worker of another build deployed the plan: %v", err)
	}
}

// TestDeployableRefusals: memory:// checkpoint storage is refused on more
// than one worker (on one it is fine), and so is a bad job; each with an
// error naming what is wrong. Unaligned checkpoints run on two workers.
func TestDeployableRefusals(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, Exchange: "carrier-pigeon"})
	env.FromSource("src", datagen.Generator(1, func(i int64) int64 { return i })).SinkTo("out", collect.New[int64]())
	if _, err := env.Deployable("bad"); err == nil || !strings.Contains(err.Error(), `Options.Exchange is "carrier-pigeon"`) {
		t.Fatalf("Deployable of a bad job = %v", err)
	}

	opts := weir.Options{Parallelism: 2, Restart: "none"}
	opts.Checkpointing.Storage = "memory://deploy-refusal"
	opts.Checkpointing.Interval = time.Hour
	c := newCluster(t, opts, 1, func(env *weir.Environment) {
		env.FromSource("src", datagen.Generator(10, func(i int64) int64 { return i })).SinkTo("out", collect.New[int64]())
	})
	err := c.run(t)
	if err == nil || !strings.Contains(err.Error(), `checkpoint storage "memory://deploy-refusal" is the memory of one process, but the job runs on 2 workers`) {
		t.Fatalf("memory storage on two workers: %v", err)
	}

	// Unaligned checkpoints on two workers: no longer refused (a restore
	// after a TaskManager's loss lost records until a drain of a channel
	// became atomic for its consumer, docs/architecture.md).
	uopts := opts
	uopts.Checkpointing.Storage = "file://" + t.TempDir()
	uopts.Checkpointing.Unaligned = true
	usink := collect.New[int64]()
	c = newCluster(t, uopts, 1, func(env *weir.Environment) {
		env.FromSource("src", datagen.Generator(10, func(i int64) int64 { return i })).SinkTo("out", usink)
	})
	if err := c.run(t); err != nil {
		t.Fatalf("unaligned checkpoints on two workers: %v", err)
	}
	if got := len(usink.Results()); got != 10 {
		t.Fatalf("unaligned checkpoints on two workers: %d records, want 10", got)
	}

	// One worker of two slots: memory storage is fine.
	sink := collect.New[int64]()
	c = newCluster(t, opts, 2, func(env *weir.Environment) {
		env.FromSource("src", datagen.Generator(10, func(i int64) int64 { return i })).SinkTo("out", sink)
	})
	c.workers, c.slots = c.workers[:1], c.slots[:1]
	if err := c.run(t); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.Results()); got != 10 {
		t.Fatalf("one worker: %d records, want 10", got)
	}
}

// TestTwoWorkersCancel: cancelling a job that runs on two workers (their
// requests through encoding/json) ends it as cancelled, not failed: no
// restart, and Run returns the cancellation.
func TestTwoWorkersCancel(t *testing.T) {
	opts := weir.Options{Parallelism: 2, Restart: "fixed-delay:attempts=3,delay=10ms"}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	opts.Checkpointing.Storage = "file://" + t.TempDir()
	var tap atomic.Int64
	c := newCluster(t, opts, 1, func(env *weir.Environment) {
		spBuild(env, spIndexes(1_000_000, 2000), 2, collect.New[string](), &tap)
	})
	ctx, cancel := context.WithCancel(t.Context())
	_, done := c.start(t, ctx)
	spWait(t, "records on both workers", 20*time.Second, func() bool { return tap.Load() > 200 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want the cancellation", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not end after its cancel")
	}
	if strings.Contains(c.logs.String(), "restarting") {
		t.Fatalf("the cancel restarted the job:\n%s", c.logs.String())
	}
}
