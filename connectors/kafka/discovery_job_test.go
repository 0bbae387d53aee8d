package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/kafkatest"
)

func TestSplitOwnerSpreadsATopic(t *testing.T) {
	src := NewSource(SourceOptions{}, String())
	for _, par := range []int{1, 2, 3, 5, 8} {
		count := make([]int, par)
		for p := range int32(4 * par) {
			o := src.SplitOwner(splitID("events", p), par)
			if o < 0 || o >= par {
				t.Fatalf("partition %d at parallelism %d: owner %d", p, par, o)
			}
			count[o]++
		}
		for s, n := range count {
			if n != 4 {
				t.Fatalf("parallelism %d: subtask %d owns %d of %d partitions, want 4 each", par, s, n, 4*par)
			}
		}
	}
	for _, tc := range []struct {
		opts SourceOptions
		want bool
	}{
		{SourceOptions{}, true},
		{SourceOptions{DiscoveryInterval: time.Second}, true},
		{SourceOptions{DiscoveryInterval: -1}, false},
		{SourceOptions{Stop: StopLatest}, false},
	} {
		if got := NewSource(tc.opts, String()).DiscoversSplits(); got != tc.want {
			t.Fatalf("%+v: DiscoversSplits %v, want %v", tc.opts, got, tc.want)
		}
	}
}

// partitionValue is the value written at offset off of partition p: each
// record says where it is, so what a restored job must read follows from
// the checkpoint's offsets.
func partitionValue(p int32, off int) string { return fmt.Sprintf("p%d-%05d", p, off) }

// produceTo appends n records to partition p, whose next offset is from.
func produceTo(t *testing.T, cl *kgo.Client, topic string, p int32, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(partitionValue(p, from+i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// topicLog keeps what was written to each partition of a topic.
type topicLog struct {
	t     *testing.T
	c     interface{ ListenAddrs() []string }
	adm   *kadm.Client
	topic string
	n     []int // records of each partition
}

func (l *topicLog) write(p int32, n int) {
	// A new client each time: one made before partitions were added
	// would not know them yet.
	cl := kafkatest.Client(l.t, l.c.ListenAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(l.t, cl, l.topic, p, l.n[p], n)
	l.n[p] += n
}

func (l *topicLog) addPartitions(k int) {
	l.t.Helper()
	resp, err := l.adm.CreatePartitions(context.Background(), k, l.topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		l.t.Fatalf("create %d partitions of %s: %v", k, l.topic, err)
	}
	l.n = append(l.n, make([]int, k)...)
}

func (l *topicLog) total() int {
	n := 0
	for _, c := range l.n {
		n += c
	}
	return n
}

// after returns the values at or after the given offsets; a partition
// without an offset is read whole.
func (l *topicLog) after(pos map[string]int64) []string {
	var out []string
	for p, n := range l.n {
		for off := int(pos[splitID(l.topic, int32(p))]); off < n; off++ {
			out = append(out, partitionValue(int32(p), off))
		}
	}
	slices.Sort(out)
	return out
}

func waitLen(t *testing.T, out *collect.Collector[string], n int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for out.Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d records after 30s, want %d", what, out.Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a few discovery intervals, to catch extra records
}

// TestJobDiscoveryRestoreEveryCheckpointRescaled runs an unbounded weir
// job at parallelism 2 on a topic of 2 partitions, adds partitions with
// kadm CreatePartitions twice while it runs (and writes to them), cancels
// it, adds a partition and records while it is stopped, and restores a
// job from every checkpoint it completed at parallelism 1, 3 and 4 in
// turn: each restored job reads exactly the records at and after the
// offsets its checkpoint recorded, and every record of each partition the
// checkpoint does not hold: no gap, no repeat, whatever the parallelism.
func TestJobDiscoveryRestoreEveryCheckpointRescaled(t *testing.T) {
	c := newCluster(t, 2, "in")
	log := &topicLog{t: t, c: c, adm: kadm.NewClient(newClient(t, c)), topic: "in", n: make([]int, 2)}
	log.write(0, 200)
	log.write(1, 200)

	dir := t.TempDir()
	opts := weir.Options{Parallelism: 2, JobID: "disc"}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	opts.Checkpointing.Retained = 1000
	opts.Checkpointing.Storage = dir
	opts.Checkpointing.RetainOnCancel = true
	env := weir.NewEnvironment(opts)
	o := SourceOptions{Brokers: c.ListenAddrs(), Topics: []string{"in"}, ConnectTimeout: 5 * time.Second,
		BatchSize: 20, DiscoveryInterval: 20 * time.Millisecond}
	out := collect.New[string]()
	env.FromSource("in", NewSource(o, String())).UID("in").
		Map("slow", func(s string) string {
			if strings.HasSuffix(s, "0") {
				time.Sleep(time.Millisecond)
			}
			return s
		}).SinkTo("out", out)
	job, err := env.ExecuteAsync(t.Context(), "disc")
	if err != nil {
		t.Fatal(err)
	}
	waitLen(t, out, 200, "before partitions were added")
	log.addPartitions(2) // partitions 2 and 3
	log.write(2, 150)
	log.write(0, 50)
	time.Sleep(50 * time.Millisecond)
	log.write(3, 150)
	waitLen(t, out, log.total(), "after partitions 2 and 3 were added")
	log.addPartitions(1) // partition 4
	log.write(4, 100)
	waitLen(t, out, log.total(), "first run")
	if got := sorted(out.Results()); !slices.Equal(got, log.after(nil)) {
		t.Fatalf("first run read %d records, want %d, each once", len(got), log.total())
	}
	job.Cancel()
	job.Wait()
	// While no job runs.
	log.addPartitions(1) // partition 5
	log.write(5, 40)
	log.write(2, 30)

	_, hist := job.Checkpoints()
	var paths []string
	for _, h := range hist {
		if h.Status == weir.CheckpointCompleted {
			paths = append(paths, filepath.Join(dir, h.Path))
		}
	}
	if len(paths) < 4 {
		t.Fatalf("%d checkpoints completed, want at least 4", len(paths))
	}
	// The recorded offsets of every checkpoint; restoring them all takes
	// long, so up to 4 of each number of partitions held are restored,
	// spread over the run.
	type recorded struct {
		path string
		pos  map[string]int64
	}
	byHeld := map[int][]recorded{}
	for _, p := range paths {
		_, _, md, err := storage.ResolveRestore(context.Background(), p)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", p, err)
		}
		pos := map[string]int64{}
		for _, op := range md.Operators {
			if op.UID != "in" {
				continue
			}
			for _, st := range op.Subtasks {
				for _, sp := range st.Splits {
					if _, dup := pos[sp.ID]; dup {
						t.Fatalf("checkpoint %s holds %s twice", p, sp.ID)
					}
					pos[sp.ID] = int64(binary.BigEndian.Uint64(sp.Position))
				}
			}
		}
		byHeld[len(pos)] = append(byHeld[len(pos)], recorded{p, pos})
	}
	var restores []recorded
	held := map[int]int{} // partitions a checkpoint holds -> checkpoints restored
	for _, k := range slices.Sorted(maps.Keys(byHeld)) {
		cs := byHeld[k]
		for i := range min(4, len(cs)) {
			restores = append(restores, cs[i*(len(cs)-1)/max(1, min(4, len(cs))-1)])
			held[k]++
		}
	}
	for i, r := range restores {
		p, pos := r.path, r.pos
		want := log.after(pos)
		par := []int{1, 3, 4}[i%3]
		renv := weir.NewEnvironment(weir.Options{Parallelism: par, JobID: "disc-restore", Restore: p})
		rout := collect.New[string]()
		renv.FromSource("in", NewSource(o, String())).UID("in").SinkTo("out", rout)
		rjob, err := renv.ExecuteAsync(t.Context(), "disc-restore")
		if err != nil {
			t.Fatalf("restore from %s at parallelism %d: %v", p, par, err)
		}
		waitLen(t, rout, len(want), fmt.Sprintf("restored from %s at parallelism %d", p, par))
		rjob.Cancel()
		rjob.Wait()
		if got := sorted(rout.Results()); !slices.Equal(got, want) {
			t.Fatalf("restored from %s at parallelism %d (positions %v): read %d records, want %d", p, par, pos, len(got), len(want))
		}
	}
	if held[2] == 0 || held[4] == 0 || held[5] == 0 {
		t.Fatalf("checkpoints by the number of partitions they hold: %v; want some taken before partitions were added and some after", held)
	}
	t.Logf("%d of %d checkpoints restored at parallelisms 1, 3, 4; by partitions held: %v", len(restores), len(paths), held)
}

// TestSourceDiscoversTopicsOfPattern: a topic created while the reader
// runs that TopicPattern matches is read from its start; one it does not
// match is not; partitions added to a read topic are read.
func TestSourceDiscoversTopicsOfPattern(t *testing.T) {
	c := newCluster(t, 2, "events.a", "other")
	produce(t, c, "events.a", 2, "a1", "a2")
	o := SourceOptions{Brokers: c.ListenAddrs(), TopicPattern: `events\..*`, ConnectTimeout: 5 * time.Second,
		DiscoveryInterval: 20 * time.Millisecond}
	src := NewSource(o, String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, splits)
	var e sliceEmitter[string]
	if _, err := pollUntil(r, &e, 2); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, c))
	for topic, parts := range map[string]int32{"events.b": 3, "other.b": 1} {
		resp, err := adm.CreateTopic(t.Context(), parts, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	produce(t, c, "events.b", 3, "b1", "b2", "b3")
	produce(t, c, "other", 2, "x1")
	produce(t, c, "other.b", 1, "x2")
	if _, err := pollUntil(r, &e, 5); err != nil {
		t.Fatal(err)
	}
	if resp, err := adm.CreatePartitions(t.Context(), 1, "events.a"); err != nil || resp.Error() != nil {
		t.Fatalf("create a partition of events.a: %v, %v", err, resp.Error())
	}
	cl := kafkatest.Client(t, c.ListenAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(t, cl, "events.a", 2, 0, 2)
	if _, err := pollUntil(r, &e, 7); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if st, err := r.Poll(&e); err != nil || st == connector.EndOfInput {
		t.Fatalf("Poll: %v, %v", st, err)
	}
	want := []string{"a1", "a2", "b1", "b2", "b3", partitionValue(2, 0), partitionValue(2, 1)}
	if got := sorted(e.recs); !slices.Equal(got, sorted(want)) {
		t.Fatalf("read %q, want %q", got, sorted(want))
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sp := range snap {
		ids = append(ids, sp.ID)
	}
	slices.Sort(ids)
	if w := []string{"events.a/0", "events.a/1", "events.a/2", "events.b/0", "events.b/1", "events.b/2"}; !slices.Equal(ids, w) {
		t.Fatalf("snapshot holds %v, want %v", ids, w)
	}
}
