package kafka

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/weirstream/weir/connector"
)

// splitRecorder is an Emitter with SplitOutputs, as the runtime's: it
// records the split and timestamp of each record and the releases.
type splitRecorder struct {
	recs     []string
	splits   []string
	ts       []int64
	released []string
}

type splitEmit struct {
	r  *splitRecorder
	id string
}

func (e splitEmit) Emit(v string) { e.EmitAt(v, connector.NoTimestamp) }
func (e splitEmit) EmitAt(v string, ts int64) {
	e.r.recs, e.r.splits, e.r.ts = append(e.r.recs, v), append(e.r.splits, e.id), append(e.r.ts, ts)
}
func (r *splitRecorder) Emit(v string)                                { r.EmitAt(v, connector.NoTimestamp) }
func (r *splitRecorder) EmitAt(v string, ts int64)                    { splitEmit{r, ""}.EmitAt(v, ts) }
func (r *splitRecorder) ForSplit(id string) connector.Emitter[string] { return splitEmit{r, id} }
func (r *splitRecorder) ReleaseSplit(id string)                       { r.released = append(r.released, id) }

// TestSourcePerPartitionWatermarks: each partition's records go through
// the split output of that partition, with the record's timestamp, so the
// runtime tracks a watermark per partition (and idleness per partition);
// a partition that reaches its stop offset is released.
func TestSourcePerPartitionWatermarks(t *testing.T) {
	c := newCluster(t, 3, "in")
	before := time.Now().UnixMilli()
	produce(t, c, "in", 3, values("v", 30)...)
	after := time.Now().UnixMilli()
	src := NewSource(sourceOpts(c, "in"), String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, splits)
	rec := &splitRecorder{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := r.Poll(rec)
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.EndOfInput {
			break
		}
		if st == connector.NothingAvailable {
			<-r.Available()
		}
	}
	if len(rec.recs) != 30 {
		t.Fatalf("%d records, want 30", len(rec.recs))
	}
	for i, v := range rec.recs {
		n, _ := strconv.Atoi(strings.TrimPrefix(v, "v"))
		if want := splitID("in", int32(n%3)); rec.splits[i] != want {
			t.Errorf("%s emitted through split %q, want %q", v, rec.splits[i], want)
		}
		if rec.ts[i] < before-1 || rec.ts[i] > after+1 {
			t.Errorf("%s at timestamp %d, want the record's (%d..%d)", v, rec.ts[i], before, after)
		}
	}
	slices.Sort(rec.released)
	if want := []string{"in/0", "in/1", "in/2"}; !slices.Equal(rec.released, want) {
		t.Errorf("released %q, want %q", rec.released, want)
	}
}

// TestSinkBrokerRestartBetweenPreCommitAndCommit: the broker (with its
// state on disk) restarts after the pre-commit; the commit, by producer id
// and epoch, still makes the records visible.
func TestSinkBrokerRestartBetweenPreCommitAndCommit(t *testing.T) {
	dataDir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(2, "out"), kfake.DataDir(dataDir), kfake.SyncWrites())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	s := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	w := newWriter(t, s, 0, 1)
	write(t, w, "a", "b")
	c1 := checkpoint(t, w, 0, 1)
	w.Close()
	c.Close()

	c = start()
	t.Cleanup(c.Close)
	s2 := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	if err := s2.Commit(t.Context(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, c, true, "a", "b")
}

// TestSourceCommitsOffsetsToGroup: with a Group, the offsets of a
// checkpoint go to the group when the checkpoint completes
// (connector.CheckpointListener), never at the snapshot, for monitoring.
func TestSourceCommitsOffsetsToGroup(t *testing.T) {
	c := newCluster(t, 1, "in")
	produce(t, c, "in", 1, values("v", 100)...)
	o := sourceOpts(c, "in")
	o.Group, o.BatchSize = "monitor", 10
	src := NewSource(o, String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, splits)
	l, ok := r.(connector.CheckpointListener)
	if !ok {
		t.Fatalf("the reader %T is no connector.CheckpointListener", r)
	}
	var e sliceEmitter[string]
	if _, err := pollUntil(r, &e, 10); err != nil {
		t.Fatal(err)
	}
	first, _ := r.Snapshot(1)
	_, want1, _ := decodeSplit(first[0])
	if _, err := pollUntil(r, &e, 20); err != nil {
		t.Fatal(err)
	}
	second, err := r.Snapshot(2)
	if err != nil {
		t.Fatal(err)
	}
	_, want2, _ := decodeSplit(second[0])
	adm := kadm.NewClient(newClient(t, c))
	time.Sleep(100 * time.Millisecond)
	if offs, err := adm.FetchOffsets(t.Context(), "monitor"); err == nil {
		if o, ok := offs.Lookup("in", 0); ok {
			t.Fatalf("offset %d committed before any checkpoint completed", o.At)
		}
	}
	waitGroupOffset := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			offs, err := adm.FetchOffsets(t.Context(), "monitor")
			if err == nil {
				if o, ok := offs.Lookup("in", 0); ok && o.At == want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("group offsets %v (%v), want %d (%s)", offs, err, want, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := l.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	waitGroupOffset(want1, "checkpoint 1's, once it completed")
	if err := l.NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	waitGroupOffset(want2, "checkpoint 2's, once it completed")
}
