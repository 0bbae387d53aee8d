package weir_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/state"
)

// The keyed-state checkpoint lifecycle of every keyed operator kind
// (keyed_lifecycle.go): on pebble, with incremental checkpoints, with
// changelog checkpoints and with local recovery, a first checkpoint of
// lcKeys keys and then checkpoints after 1% of the keys changed. Each later
// checkpoint must upload no data file (or log segment) that storage
// already holds, and every data file it uploads is new data (a flush) or
// the output of a compaction that ran since the previous checkpoint (the
// database's event listener says which); with compactions off each
// uploads at most 5% of the first one, with compactions on the uploads are
// what the compactions rewrote and no more, and (incremental) some
// checkpoint uploads a compaction's output; the instance's pending
// checkpoints drain once notified; no local checkpoint or materialization
// directory outlives the retained checkpoint.

const (
	lcKeys   = 4000
	lcRounds = 3
	// lcMaxRounds bounds the checkpoints of a compactions-on run, which
	// goes on until one uploaded a compaction's output (pebble compacts
	// L0 once it holds 4 overlapping flushes: one per checkpoint here).
	lcMaxRounds = 12
	lcUID       = "op"
)

// lcRecord is "<key>:<seq>:<padding>": about 100 bytes that do not
// compress, a new value at every sequence number.
func lcRecord(key, seq int64) string {
	rng := rand.New(rand.NewPCG(uint64(key), uint64(seq)))
	var pad [40]byte
	for i := range pad {
		pad[i] = byte(rng.Uint32())
	}
	return fmt.Sprintf("%06d:%08d:%s", key, seq, hex.EncodeToString(pad[:]))
}

func lcKey(s string) int64 {
	k, _ := strconv.ParseInt(s[:6], 10, 64)
	return k
}

// lcGate emits lcRecord(i mod lcKeys scrambled, i) for i below allow, at
// event time 1000, and never ends; it has no position (the test does not
// restore it).
type lcGate struct{ allow *atomic.Int64 }

func (g lcGate) Boundedness() connector.Boundedness { return connector.Unbounded }
func (g lcGate) Splits(context.Context, int) ([]connector.SplitState, error) {
	return []connector.SplitState{{ID: "gate"}}, nil
}
func (g lcGate) NewReader(connector.ReaderContext) (connector.Reader[string], error) {
	return &lcGateReader{g: g}, nil
}

type lcGateReader struct {
	g    lcGate
	has  bool
	next int64
}

func (r *lcGateReader) AddSplits(splits []connector.SplitState) error {
	r.has = r.has || len(splits) > 0
	return nil
}
func (r *lcGateReader) NoMoreSplits() {}
func (r *lcGateReader) Poll(out connector.Emitter[string]) (connector.Status, error) {
	if !r.has {
		return connector.NothingAvailable, nil
	}
	limit := r.g.allow.Load()
	for k := 0; r.next < limit && k < 512; k++ {
		key := r.next
		if key >= lcKeys {
			key = (r.next * 7919) % lcKeys // spread over the key space
		}
		out.EmitAt(lcRecord(key, r.next), 1000)
		r.next++
	}
	if r.next >= limit {
		return connector.NothingAvailable, nil
	}
	return connector.MoreAvailable, nil
}
func (r *lcGateReader) Available() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(time.Millisecond, func() { close(ch) })
	return ch
}
func (r *lcGateReader) Snapshot(int64) ([]connector.SplitState, error) {
	if !r.has {
		return nil, nil
	}
	return []connector.SplitState{{ID: "gate", Position: []byte(strconv.FormatInt(r.next, 10))}}, nil
}
func (r *lcGateReader) Close() error { return nil }

// recordingStore records every object committed, with its size.
type recordingStore struct {
	storage.Store
	mu      sync.Mutex
	objects []recordedObject
}

type recordedObject struct {
	name string
	size int64
}

func (s *recordingStore) Create(ctx context.Context, name string) (storage.ObjectWriter, error) {
	w, err := s.Store.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &recordingWriter{ObjectWriter: w, s: s, name: name}, nil
}

func (s *recordingStore) since(n int) []recordedObject {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.objects[n:])
}

func (s *recordingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

type recordingWriter struct {
	storage.ObjectWriter
	s    *recordingStore
	name string
	n    int64
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	n, err := w.ObjectWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *recordingWriter) Commit() error {
	if err := w.ObjectWriter.Commit(); err != nil {
		return err
	}
	w.s.mu.Lock()
	w.s.objects = append(w.s.objects, recordedObject{w.name, w.n})
	w.s.mu.Unlock()
	return nil
}

var _ io.Writer = (*recordingWriter)(nil)

// sharedObject parses the name of a shared object an operator instance
// uploaded, "<uid>-<subtask>-<instance>-{c,m}<id>-<file>": it returns the
// instance's prefix and the local file.
var sharedObject = regexp.MustCompile(`^(.+-[0-9a-f]{8})-[cm][0-9]+-(.+)$`)

// lcTopology builds one keyed operator kind, uid lcUID, between the gate's
// records and a sink that drops everything.
type lcTopology func(env *weir.Environment, src *weir.Stream[string], bcast func() *weir.Stream[string]) *weir.Stream[string]

func lcKeyed(s *weir.Stream[string]) *weir.KeyedStream[int64, string] { return s.KeyBy(lcKey) }

func lcLatest(_, v string) string { return v }

// lcValues keeps the last record of each key (process, co-process and
// keyed broadcast functions).
type lcValues struct{ v state.Value[string] }

func (f *lcValues) Open(ctx *weir.KeyedContext[int64]) (err error) {
	f.v, err = weir.Value[string](ctx, "last")
	return err
}
func (f *lcValues) ProcessElement(_ *weir.KeyedContext[int64], in string, _ weir.Collector[string]) error {
	f.v.Update(in)
	return nil
}
func (f *lcValues) ProcessElement1(_ *weir.KeyedContext[int64], in string, _ weir.Collector[string]) error {
	f.v.Update(in)
	return nil
}
func (f *lcValues) ProcessElement2(_ *weir.KeyedContext[int64], in string, _ weir.Collector[string]) error {
	f.v.Update(in)
	return nil
}

type lcBroadcastValues struct{ lcValues }

func (f *lcBroadcastValues) ProcessElement(_ *weir.KeyedReadOnlyBroadcastContext[int64], in string, _ weir.Collector[string]) error {
	f.v.Update(in)
	return nil
}
func (f *lcBroadcastValues) ProcessBroadcastElement(ctx *weir.KeyedBroadcastContext[int64], in string, _ weir.Collector[string]) error {
	bs, err := ctx.BroadcastState(lcRules)
	if err != nil {
		return err
	}
	bs.Put(in, in)
	return nil
}

var lcRules = weir.NewMapStateDescriptor[string, string]("rules")

type lcWindowAll struct{}

func (lcWindowAll) Process(_ *weir.WindowContext[int64, weir.TimeWindow], _ []string, _ weir.Collector[string]) error {
	return nil
}

var lcKinds = []struct {
	name  string
	build lcTopology
}{
	{"process", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Process("op", &lcValues{})
	}},
	{"co-process", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		other := s.Map("other", func(v string) string { return v })
		return lcKeyed(s).Connect(lcKeyed(other)).Process("op", weir.KeyedCoProcessFunction[int64, string, string, string](&lcValues{}))
	}},
	{"tumbling-sliced", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.TumblingEventTimeWindows(time.Hour)).Reduce("op", lcLatest)
	}},
	{"tumbling", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.TumblingEventTimeWindows(time.Hour)).DisableSlicing().Reduce("op", lcLatest)
	}},
	{"tumbling-process", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.TumblingEventTimeWindows(time.Hour)).Process[string]("op", lcWindowAll{})
	}},
	{"sliding-sliced", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.SlidingEventTimeWindows(2*time.Hour, time.Hour)).Reduce("op", lcLatest)
	}},
	{"sliding", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.SlidingEventTimeWindows(2*time.Hour, time.Hour)).DisableSlicing().Reduce("op", lcLatest)
	}},
	{"session", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).Window(weir.EventTimeSessionWindows(time.Hour)).Reduce("op", lcLatest)
	}},
	{"interval-join", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		other := s.Map("other", func(v string) string { return v })
		return lcKeyed(s).IntervalJoin(lcKeyed(other)).Between(-time.Hour, time.Hour).
			Process("op", weir.JoinFunc(func(a, _ string) string { return a }))
	}},
	{"window-join", func(_ *weir.Environment, s *weir.Stream[string], _ func() *weir.Stream[string]) *weir.Stream[string] {
		other := s.Map("other", func(v string) string { return v })
		return weir.Join(s, other).Where(lcKey).EqualTo(lcKey).Window(weir.TumblingEventTimeWindows(time.Hour)).
			Apply("op", func(a, _ string) string { return a })
	}},
	{"keyed-broadcast", func(_ *weir.Environment, s *weir.Stream[string], b func() *weir.Stream[string]) *weir.Stream[string] {
		return lcKeyed(s).ConnectBroadcast(b().BroadcastState(lcRules)).
			Process("op", weir.KeyedBroadcastProcessFunction[int64, string, string, string](&lcBroadcastValues{}))
	}},
}

var lcModes = []struct {
	name             string
	changelog, local bool
}{
	{"incremental", false, false},
	{"changelog", true, false},
	{"local-recovery", false, true},
}

func TestKeyedLifecycleEveryOperator(t *testing.T) {
	for _, kind := range lcKinds {
		for _, mode := range lcModes {
			for _, compactions := range []bool{false, true} {
				name := kind.name + "/" + mode.name
				if compactions {
					name += "/compactions"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					lcRun(t, kind.build, mode.changelog, mode.local, compactions)
				})
			}
		}
	}
}

// lcTables records the tables the operator's database created, why
// (flushing, compacting) and when (the number of checkpoints triggered by
// then), and when each compaction ended.
type lcTables struct {
	mu      sync.Mutex
	epoch   int64
	created map[uint64]lcTable
	ended   map[int]int64 // compaction job -> epoch at its end
}

type lcTable struct {
	reason string
	job    int
	epoch  int64
}

func newLcTables() *lcTables {
	return &lcTables{created: map[uint64]lcTable{}, ended: map[int]int64{}}
}

func (r *lcTables) listener(uid string, _ int) *cpebble.EventListener {
	if uid != lcUID {
		return nil
	}
	return &cpebble.EventListener{
		TableCreated: func(info cpebble.TableCreateInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.created[uint64(info.FileNum)] = lcTable{reason: info.Reason, job: info.JobID, epoch: r.epoch}
		},
		CompactionEnd: func(info cpebble.CompactionInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ended[info.JobID] = r.epoch
		},
	}
}

// next starts the epoch of the next checkpoint and returns it.
func (r *lcTables) next() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	return r.epoch
}

// why says how the table file (a local name, 000123.sst) uploaded by
// the checkpoint of epoch k came to be: "flushing" or "compacting" if the
// database wrote it since checkpoint k-1 was triggered, or a compaction
// running then wrote it; "" otherwise (it should have been in an earlier
// checkpoint, or the database never wrote it).
func (r *lcTables) why(file string, k int64) string {
	n, err := strconv.ParseUint(strings.TrimSuffix(file, ".sst"), 10, 64)
	if err != nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.created[n]
	if !ok {
		return ""
	}
	if t.epoch >= k-1 {
		return t.reason
	}
	if end, done := r.ended[t.job]; t.reason == "compacting" && (!done || end >= k-1) {
		return t.reason
	}
	return ""
}

func lcRun(t *testing.T, build lcTopology, changelog, local, compactions bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	opts := weir.Options{Parallelism: 1, JobID: "lc", StateBackend: "pebble", LocalStateDir: stateDir}
	opts.Checkpointing.Incremental, opts.Checkpointing.LocalRecovery = true, local
	if changelog {
		opts.Checkpointing.Changelog = weir.ChangelogOptions{Enabled: true} // no materialization during the test
	}
	store := &recordingStore{Store: storage.NewMemoryStore()}
	weir.SetCheckpointStore(&opts, store)
	if !compactions {
		weir.DisablePebbleCompactions(&opts)
	}
	tables := newLcTables()
	weir.SetPebbleEvents(&opts, tables.listener)
	var mu sync.Mutex
	var probes []weir.KeyedStateProbe
	weir.OnKeyedOpen(&opts, func(p weir.KeyedStateProbe) {
		mu.Lock()
		probes = append(probes, p)
		mu.Unlock()
	})
	env := weir.NewEnvironment(opts)
	var allow, allowB atomic.Int64
	allowB.Store(1)
	var tap atomic.Int64
	// The watermark stays an hour behind the records (at 1000 ms): no
	// window fires, no join buffer is cleaned up.
	src := env.FromSource("src", connector.Source[string](lcGate{&allow})).
		AssignTimestampsAndWatermarks("wm", weir.ForBoundedOutOfOrderness[string](time.Hour)).
		Map("tap", func(v string) string { tap.Add(1); return v }) // chained to the source
	bcast := func() *weir.Stream[string] { return env.FromSource("rules", connector.Source[string](lcGate{&allowB})) }
	build(env, src, bcast).UID(lcUID).Filter("drop", func(string) bool { return false }).SinkTo("out", collect.New[string]())
	job, err := env.ExecuteAsync(ctx, "lc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()

	pending := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, p := range probes {
			if p.UID == lcUID {
				n += p.Pending()
			}
		}
		return n
	}
	// checkpoint lets the source emit up to n records, waits for them to
	// be in the operator (a checkpoint's barrier follows them), takes a
	// checkpoint and returns the objects the operator uploaded for it.
	checkpoint := func(n int64) (int64, int64, []recordedObject) {
		allow.Store(n)
		lcWaitFor(t, fmt.Sprint(n, " records from the source"), func() string {
			if got := tap.Load(); got < n {
				return fmt.Sprintf("%d emitted", got)
			}
			return ""
		})
		before := store.count()
		epoch := tables.next()
		id, err := job.TriggerCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mine []recordedObject
		for _, o := range store.since(before) {
			if strings.HasPrefix(path.Base(o.name), lcUID+"-0-") {
				mine = append(mine, o)
			}
		}
		return id, epoch, mine
	}

	uploaded := map[string]int64{} // instance prefix + local file -> checkpoint
	compacted := 0                 // compaction outputs uploaded
	record := func(id, epoch int64, objs []recordedObject) int64 {
		var total int64
		for _, o := range objs {
			total += o.size
			if path.Base(path.Dir(o.name)) != storage.SharedDirName {
				continue // MANIFEST, OPTIONS and the like, rewritten each time
			}
			m := sharedObject.FindStringSubmatch(path.Base(o.name))
			if m == nil {
				t.Errorf("checkpoint %d: unexpected shared object %s", id, o.name)
				continue
			}
			key := m[1] + "/" + m[2]
			if first, ok := uploaded[key]; ok {
				t.Errorf("checkpoint %d uploaded %s again (first uploaded by checkpoint %d): storage already holds it", id, m[2], first)
			}
			uploaded[key] = id
			if strings.HasSuffix(m[2], ".sst") {
				switch tables.why(m[2], epoch) {
				case "":
					t.Errorf("checkpoint %d uploaded %s, which no flush or compaction since the previous checkpoint wrote", id, m[2])
				case "compacting":
					compacted++
				}
			}
		}
		return total
	}

	id, epoch, objs := checkpoint(lcKeys)
	full := record(id, epoch, objs)
	if st, ok := job.Checkpoint(id); !ok || st.CheckpointedSize != st.StateSize || st.StateSize < full {
		t.Errorf("first checkpoint: state size %d, checkpointed size %d; want both equal and >= the %d bytes uploaded for the operator",
			st.StateSize, st.CheckpointedSize, full)
	}
	if full < lcKeys*50 {
		t.Fatalf("the first checkpoint uploaded %d bytes for %d keys of ~100 bytes", full, lcKeys)
	}
	last := id
	// With compactions on (incremental), the run goes on until a
	// checkpoint uploaded a compaction's output.
	wantCompacted := compactions && !changelog
	for round := 1; round <= lcRounds || wantCompacted && compacted == 0 && round <= lcMaxRounds; round++ {
		id, epoch, objs := checkpoint(int64(lcKeys + round*lcKeys/100))
		n := record(id, epoch, objs)
		ratio := float64(n) / float64(full)
		if !compactions && ratio > 0.05 {
			t.Errorf("checkpoint %d after 1%% of the keys changed uploaded %d bytes = %.1f%% of the first checkpoint's %d, want <= 5%%",
				id, n, 100*ratio, full)
		}
		if compactions {
			t.Logf("checkpoint %d uploaded %d bytes = %.1f%% of the first checkpoint's (compaction outputs uploaded so far: %d)", id, n, 100*ratio, compacted)
		}
		if n == 0 {
			t.Errorf("checkpoint %d uploaded nothing after 1%% of the keys changed", id)
		}
		lcCheckStats(t, job, id, n, full)
		last = id
	}
	if wantCompacted && compacted == 0 {
		t.Errorf("no checkpoint of %d uploaded a compaction's output: the compactions-on case proves nothing", lcMaxRounds)
	}
	// The notifications reach the keyed state: nothing stays pending, and
	// the local directories of older checkpoints go.
	lcWaitFor(t, "the operator's pending checkpoints to drain", func() string {
		if n := pending(); n != 0 {
			return fmt.Sprintf("%d checkpoints pending", n)
		}
		return ""
	})
	lcWaitFor(t, "local checkpoint directories of retained checkpoints only", func() string {
		var extra []string
		_ = filepath.WalkDir(stateDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if n, ok := strings.CutPrefix(d.Name(), "chk-"); ok {
				if local && n == strconv.FormatInt(last, 10) {
					return fs.SkipDir
				}
				extra = append(extra, p)
				return fs.SkipDir
			}
			if strings.HasPrefix(d.Name(), "mat-") {
				extra = append(extra, p)
				return fs.SkipDir
			}
			return nil
		})
		if len(extra) > 0 {
			return fmt.Sprintf("left: %v", extra)
		}
		return ""
	})
}

// lcCheckStats checks the statistics of checkpoint id, which uploaded n
// bytes for the operator, whose full state is about full bytes: the
// checkpointed size is what was uploaded, the state size the full state
// referred to, per checkpoint and per subtask.
func lcCheckStats(t *testing.T, job *weir.JobClient, id, n, full int64) {
	t.Helper()
	st, ok := job.Checkpoint(id)
	if !ok {
		t.Fatalf("no statistics of checkpoint %d", id)
	}
	if st.CheckpointedSize < n || st.CheckpointedSize > n+4096 {
		t.Errorf("checkpoint %d: checkpointed size %d, want the %d bytes uploaded for the operator (and a little inline state)", id, st.CheckpointedSize, n)
	}
	if st.StateSize < full*9/10 {
		t.Errorf("checkpoint %d: state size %d, want the full state it refers to (about %d)", id, st.StateSize, full)
	}
	var state, uploaded int64
	for _, sub := range st.Subtasks {
		state += sub.StateSize
		uploaded += sub.CheckpointedSize
	}
	if state != st.StateSize || uploaded != st.CheckpointedSize {
		t.Errorf("checkpoint %d: subtasks sum to state size %d and checkpointed size %d; the checkpoint says %d and %d",
			id, state, uploaded, st.StateSize, st.CheckpointedSize)
	}
}

// lcWaitFor polls cond (which says what is still wrong, "" when it holds)
// for up to 20 s.
func lcWaitFor(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnwritableLocalStateDir starts a pebble job whose LocalStateDir is a
// file: the job fails with an error naming the directory, whatever the
// checkpoint mode.
func TestUnwritableLocalStateDir(t *testing.T) {
	for _, mode := range lcModes {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			file := filepath.Join(t.TempDir(), "not-a-dir")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := weir.Options{Parallelism: 1, JobID: "lc-bad", StateBackend: "pebble", LocalStateDir: file}
			opts.Checkpointing.Incremental, opts.Checkpointing.LocalRecovery = true, mode.local
			opts.Checkpointing.Changelog.Enabled = mode.changelog
			env := weir.NewEnvironment(opts)
			var allow atomic.Int64
			lcKinds[0].build(env, env.FromSource("src", connector.Source[string](lcGate{&allow})), nil).
				Filter("drop", func(string) bool { return false }).SinkTo("out", collect.New[string]())
			job, err := env.ExecuteAsync(ctx, "lc-bad")
			if err == nil {
				err = job.Wait()
			}
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Fatalf("job with LocalStateDir %s (a file): error %v, want one naming the directory", file, err)
			}
			t.Logf("error: %v", err)
		})
	}
}
