package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

func sourceOpts(c interface{ ListenAddrs() []string }, topics ...string) SourceOptions {
	return SourceOptions{Brokers: c.ListenAddrs(), Topics: topics, Stop: StopLatest, ConnectTimeout: 5 * time.Second}
}

// TestSourceRewindFromEveryCheckpoint snapshots a reader after every Poll
// (small batches) and restores a new reader from each snapshot: what it
// reads must be exactly what followed the snapshot, with no gap and no
// repeat.
func TestSourceRewindFromEveryCheckpoint(t *testing.T) {
	c := newCluster(t, 3, "in")
	all := values("v", 600)
	produce(t, c, "in", 3, all...)
	o := sourceOpts(c, "in")
	o.BatchSize = 37
	src := NewSource(o, String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 3 {
		t.Fatalf("%d splits, want 3", len(splits))
	}
	r := newReader(t, src, splits)
	var e sliceEmitter[string]
	type snap struct {
		n      int
		states []connector.SplitState
	}
	var snaps []snap
	for id := int64(1); ; id++ {
		st, err := r.Poll(&e)
		if err != nil {
			t.Fatal(err)
		}
		states, err := r.Snapshot(id)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap{len(e.recs), states})
		if st == connector.EndOfInput {
			break
		}
		if st == connector.NothingAvailable {
			<-r.Available()
		}
	}
	if got := sorted(e.recs); !slices.Equal(got, all) {
		t.Fatalf("read %d records, want %d", len(got), len(all))
	}
	if len(snaps) < 10 {
		t.Fatalf("only %d snapshots", len(snaps))
	}
	for i, s := range snaps {
		r2 := newReader(t, src, s.states)
		var e2 sliceEmitter[string]
		if _, err := pollUntil(r2, &e2, -1); err != nil {
			t.Fatalf("restore from snapshot %d: %v", i, err)
		}
		r2.Close()
		// Per partition, the order is the log's: the restored reader
		// must read on from exactly the recorded offsets.
		got := sorted(append(slices.Clone(e.recs[:s.n]), e2.recs...))
		if !slices.Equal(got, all) {
			t.Fatalf("snapshot %d (after %d records): before+after = %d records, want %d (gap or repeat)", i, s.n, len(got), len(all))
		}
	}
	t.Logf("%d snapshots, each restored", len(snaps))
}

// TestSourceStopLatestKeptInCheckpoint: the stop offsets are fixed at the
// first start; records written later are not read, also by a reader
// restored from a checkpoint taken before they were written.
func TestSourceStopLatestKeptInCheckpoint(t *testing.T) {
	c := newCluster(t, 2, "in")
	produce(t, c, "in", 2, values("a", 100)...)
	src := NewSource(sourceOpts(c, "in"), String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, "in", 2, values("b", 50)...)
	r := newReader(t, src, splits)
	var e sliceEmitter[string]
	if _, err := pollUntil(r, &e, 30); err != nil {
		t.Fatal(err)
	}
	states, _ := r.Snapshot(1)
	r2 := newReader(t, src, states)
	var e2 sliceEmitter[string]
	if _, err := pollUntil(r2, &e2, -1); err != nil {
		t.Fatal(err)
	}
	got := sorted(append(e.recs, e2.recs...))
	if !slices.Equal(got, values("a", 100)) {
		t.Fatalf("read %d records (%v...), want the 100 written before the start", len(got), got[:min(3, len(got))])
	}
}

// TestSourceReadCommitted: records of aborted transactions are not read,
// and a partition whose last entries before the stop offset are
// transaction markers still ends. Reading uncommitted sees the aborted
// records too.
func TestSourceReadCommitted(t *testing.T) {
	c := newCluster(t, 1, "in")
	for i, commit := range []bool{true, false, true, false} {
		cl := newClient(t, c, kgo.TransactionalID("t"+string(rune('0'+i))), kgo.DefaultProduceTopic("in"))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := "aborted"
		if commit {
			v = "committed"
		}
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte(v)}, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	for _, uncommitted := range []bool{false, true} {
		o := sourceOpts(c, "in")
		o.ReadUncommitted = uncommitted
		src := NewSource(o, String())
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var e sliceEmitter[string]
		if _, err := pollUntil(newReader(t, src, splits), &e, -1); err != nil {
			t.Fatal(err)
		}
		want := []string{"committed", "committed", "committed", "committed"}
		if uncommitted {
			want = []string{"aborted", "aborted", "aborted", "aborted", "committed", "committed", "committed", "committed"}
		}
		if got := sorted(e.recs); !slices.Equal(got, want) {
			t.Errorf("ReadUncommitted %v: read %q, want %q", uncommitted, got, want)
		}
	}
}

type point struct {
	X int `json:"x"`
}

// TestSourceDeserializeErrors: a bad record fails the job by default, or
// goes to OnDeserializeError; it is never dropped silently.
func TestSourceDeserializeErrors(t *testing.T) {
	c := newCluster(t, 1, "in")
	produce(t, c, "in", 1, `{"x":1}`, `not json`, `{"x":3}`)
	src := NewSource(sourceOpts(c, "in"), JSON[point]())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var e sliceEmitter[point]
	_, err = pollUntil(newReader(t, src, splits), &e, -1)
	if err == nil || !strings.Contains(err.Error(), "offset 1 of partition 0 of topic \"in\" does not deserialize") {
		t.Fatalf("err = %v, want the bad record named", err)
	}
	o := sourceOpts(c, "in")
	var bad []string
	o.OnDeserializeError = func(r *kgo.Record, err error) error {
		bad = append(bad, string(r.Value))
		return nil
	}
	src = NewSource(o, JSON[point]())
	e.recs = nil
	if _, err := pollUntil(newReader(t, src, splits), &e, -1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.recs, []point{{1}, {3}}) || !slices.Equal(bad, []string{"not json"}) {
		t.Fatalf("emitted %v, side path %q", e.recs, bad)
	}
	o.OnDeserializeError = func(r *kgo.Record, err error) error { return errors.New("dead-letter topic down") }
	src = NewSource(o, JSON[point]())
	if _, err := pollUntil(newReader(t, src, splits), &e, -1); err == nil || !strings.Contains(err.Error(), "dead-letter topic down") {
		t.Fatalf("err = %v, want the side path's error", err)
	}
}

// TestSourceStartModes checks where each Start mode begins.
func TestSourceStartModes(t *testing.T) {
	c := newCluster(t, 1, "in")
	produce(t, c, "in", 1, values("a", 10)...)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	produce(t, c, "in", 1, values("b", 5)...)
	adm := kadm.NewClient(newClient(t, c))
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "in", Partition: 0, At: 12, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(t.Context(), "g", offs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start Start
		group string
		want  int // first offset read
	}{
		{StartEarliest, "", 0},
		{StartLatest, "", 15},
		{StartTimestamp, "", 10},
		{StartCommitted, "g", 12},
		{StartCommitted, "nobody", 0},
	} {
		o := sourceOpts(c, "in")
		o.Start, o.Group, o.StartTimestamp = tc.start, tc.group, mid
		splits, err := NewSource(o, String()).Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		_, next, err := decodeSplit(splits[0])
		if err != nil || next != int64(tc.want) {
			t.Errorf("start %v group %q: next offset %d (%v), want %d", tc.start, tc.group, next, err, tc.want)
		}
	}
}

// TestSourceBadInput: an unreachable broker, a missing topic and a
// checkpoint naming a partition the topic no longer has are each a
// one-line error naming the broker or the topic.
func TestSourceBadInput(t *testing.T) {
	c := newCluster(t, 1, "in")
	o := sourceOpts(c, "nope")
	if err := NewSource(o, String()).Check(t.Context()); err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
		t.Errorf("missing topic: %v", err)
	}
	o = SourceOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"in"}, ConnectTimeout: time.Second}
	if _, err := NewSource(o, String()).Splits(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "cannot reach brokers 127.0.0.1:1") {
		t.Errorf("unreachable: %v", err)
	}
	// A checkpoint of a 3-partition topic, restored against the topic
	// with 1 partition.
	st := partitionSplit{Topic: "in", Partition: 2, Stop: -1}.state(5)
	r := newReader(t, NewSource(sourceOpts(c, "in"), String()), []connector.SplitState{st})
	_, err := r.Poll(&sliceEmitter[string]{})
	if err == nil || !strings.Contains(err.Error(), `topic "in" has 1 partitions, but partition 2 is to be read`) {
		t.Errorf("fewer partitions: %v", err)
	}
	for _, err := range []error{err} {
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error spans lines: %q", err)
		}
	}
	_ = context.Background
}

// TestSourceTopicPattern reads every topic the pattern matches, as listed
// at the first start.
func TestSourceTopicPattern(t *testing.T) {
	c := newCluster(t, 2, "events.a", "events.b", "other")
	produce(t, c, "events.a", 2, "a1", "a2")
	produce(t, c, "events.b", 2, "b1")
	produce(t, c, "other", 2, "x")
	o := sourceOpts(c)
	o.TopicPattern = `events\..*`
	src := NewSource(o, String())
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var e sliceEmitter[string]
	if _, err := pollUntil(newReader(t, src, splits), &e, -1); err != nil {
		t.Fatal(err)
	}
	if got := sorted(e.recs); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("read %q", got)
	}
	o.TopicPattern = `nothing.*`
	if err := NewSource(o, String()).Check(t.Context()); err == nil || !strings.Contains(err.Error(), `no topic on brokers`) {
		t.Fatalf("err = %v", err)
	}
}
