package kafka

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirstream/weir/connector"
)

func sinkOpts(c *kfake.Cluster, g Guarantee) SinkOptions {
	return SinkOptions{Brokers: c.ListenAddrs(), Topic: "out", Guarantee: g, TransactionalIDPrefix: "job", ConnectTimeout: 5 * time.Second}
}

func newWriter(t *testing.T, s *Sink[string], subtask, parallelism int) connector.Writer[string] {
	t.Helper()
	w, err := s.NewWriter(connector.WriterContext{JobID: "j", Subtask: subtask, Parallelism: parallelism})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func write(t *testing.T, w connector.Writer[string], recs ...string) {
	t.Helper()
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatalf("Write(%q): %v", r, err)
		}
	}
}

// checkpoint does what the runtime does at checkpoint id.
func checkpoint(t *testing.T, w connector.Writer[string], subtask int, id int64) connector.Committable {
	t.Helper()
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	data, err := w.(connector.PreCommitter).PreCommit(id)
	if err != nil {
		t.Fatalf("PreCommit(%d): %v", id, err)
	}
	return connector.Committable{CheckpointID: id, Subtask: subtask, Data: data}
}

func checkTopic(t *testing.T, c *kfake.Cluster, committed bool, want ...string) {
	t.Helper()
	if got := consume(t, c, "out", committed); !slices.Equal(got, sorted(want)) {
		t.Fatalf("read_committed=%v: topic holds %q, want %q", committed, got, sorted(want))
	}
}

// TestSinkExactlyOnceCommitsPerCheckpoint: records become visible to
// read_committed consumers only when their checkpoint commits.
func TestSinkExactlyOnceCommitsPerCheckpoint(t *testing.T) {
	c := newCluster(t, 2, "out")
	// Record the protocol versions negotiated (the package documentation
	// names them).
	versions := map[int16]int16{}
	var vmu sync.Mutex
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.EndTxn, kmsg.InitProducerID, kmsg.ListTransactions} {
		c.ControlKey(int16(k), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			vmu.Lock()
			versions[req.Key()] = req.GetVersion()
			vmu.Unlock()
			return nil, nil, false
		})
	}
	s := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	w := newWriter(t, s, 0, 1)
	write(t, w, "a", "b")
	c1 := checkpoint(t, w, 0, 1)
	write(t, w, "c")
	c2 := checkpoint(t, w, 0, 2)
	checkTopic(t, c, false, "a", "b", "c")
	if err := s.Commit(t.Context(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	write(t, w, "d")
	// c2 is pre-committed and open: a read_committed consumer stops at
	// its start.
	checkTopic(t, c, true, "a", "b")
	if err := s.Commit(t.Context(), []connector.Committable{c2}); err != nil {
		t.Fatal(err)
	}
	c3 := checkpoint(t, w, 0, 3)
	if err := s.Commit(t.Context(), []connector.Committable{c3, c3}); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, c, true, "a", "b", "c", "d")
	if !strings.Contains(string(c1.Data), `"txn":"job-0-1"`) || !strings.Contains(string(c3.Data), `"txn":"job-0-3"`) {
		t.Errorf("committables %s, %s: want transactional ids prefix-subtask-checkpoint", c1.Data, c3.Data)
	}
	vmu.Lock()
	defer vmu.Unlock()
	t.Logf("versions: Produce v%d, EndTxn v%d, InitProducerID v%d, ListTransactions v%d",
		versions[int16(kmsg.Produce)], versions[int16(kmsg.EndTxn)], versions[int16(kmsg.InitProducerID)], versions[int16(kmsg.ListTransactions)])
	if versions[int16(kmsg.EndTxn)] < 5 {
		t.Errorf("EndTxn v%d: the package documentation says v5 was tested", versions[int16(kmsg.EndTxn)])
	}
}

// TestSinkRecommitAfterRestore: a process pre-commits and dies before
// the commit; a new sink (as after a restart) commits the restored
// committable by producer id and epoch, and again (idempotent); Cleanup
// aborts the transaction the dead process left open after its checkpoint.
func TestSinkRecommitAfterRestore(t *testing.T) {
	c := newCluster(t, 2, "out")
	s := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	w := newWriter(t, s, 0, 1)
	write(t, w, "a", "b")
	c1 := checkpoint(t, w, 0, 1)
	// After the checkpoint, records in a transaction no checkpoint
	// recorded; the process "dies": its client goes away without ending
	// the transaction.
	write(t, w, "lost")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	tw := w.(*txnWriter[string])
	tw.cur.Close()
	tw.cur = nil
	w.Close()

	s2 := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	for range 2 {
		if err := s2.Commit(t.Context(), []connector.Committable{c1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s2.Cleanup(t.Context(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, c, true, "a", "b")
	checkTopic(t, c, false, "a", "b", "lost")
	// The new writer numbers its transactions after the restored
	// checkpoint.
	w2 := newWriter(t, s2, 0, 1)
	write(t, w2, "c")
	c2 := checkpoint(t, w2, 0, 2)
	if !strings.Contains(string(c2.Data), `"txn":"job-0-2"`) {
		t.Errorf("committable %s: want job-0-2", c2.Data)
	}
	if err := s2.Commit(t.Context(), []connector.Committable{c2}); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, c, true, "a", "b", "c")
}

// TestSinkFreshStartAbortsLingering: a fresh start (no checkpoint, so no
// Cleanup) aborts what an earlier run of its subtask left open; otherwise
// read_committed consumers would wait for the transaction timeout.
func TestSinkFreshStartAbortsLingering(t *testing.T) {
	c := newCluster(t, 1, "out")
	old := newClient(t, c, kgo.TransactionalID("job-1-7"), kgo.DefaultProduceTopic("out"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(t.Context(), &kgo.Record{Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	other := newClient(t, c, kgo.TransactionalID("otherjob-1-7"), kgo.DefaultProduceTopic("out"))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	s := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	w := newWriter(t, s, 1, 2)
	write(t, w, "new")
	if err := s.Commit(t.Context(), []connector.Committable{checkpoint(t, w, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, c, true, "new")
	// The transaction of another prefix is not touched.
	if err := other.ProduceSync(t.Context(), &kgo.Record{Value: []byte("other")}).FirstErr(); err != nil {
		t.Fatalf("the other job's transaction was disturbed: %v", err)
	}
}

// TestSinkCommitTimedOut: a transaction the broker aborted because it
// outlived its timeout cannot be committed: the error says data may be
// lost, and why.
func TestSinkCommitTimedOut(t *testing.T) {
	c := newCluster(t, 1, "out")
	o := sinkOpts(c, ExactlyOnce)
	o.TransactionTimeout = 200 * time.Millisecond
	s := NewSink(o, StringValues())
	w := newWriter(t, s, 0, 1)
	write(t, w, "a")
	c1 := checkpoint(t, w, 0, 1)
	time.Sleep(700 * time.Millisecond)
	err := s.Commit(t.Context(), []connector.Committable{c1})
	if err == nil || !strings.Contains(err.Error(), "DATA MAY BE LOST") || !strings.Contains(err.Error(), "timeout (200ms)") {
		t.Fatalf("err = %v, want a data-may-be-lost error naming the timeout", err)
	}
	checkTopic(t, c, true)
}

// TestSinkTransactionTimeoutChecks: a timeout above the broker's limit,
// or not above the checkpoint timeout plus the restart delay, is refused
// at start with both figures named.
func TestSinkTransactionTimeoutChecks(t *testing.T) {
	c := newCluster(t, 1, "out")
	o := sinkOpts(c, ExactlyOnce)
	o.TransactionTimeout = time.Hour
	err := NewSink(o, StringValues()).Check(t.Context())
	if err == nil || !strings.Contains(err.Error(), "TransactionTimeout 1h0m0s exceeds the broker's transaction.max.timeout.ms 900000 (15m0s)") {
		t.Errorf("Check: %v", err)
	}
	w := newWriter(t, NewSink(o, StringValues()), 0, 1)
	if err := w.Write("a"); err == nil || !strings.Contains(err.Error(), "transaction.max.timeout.ms 900000") {
		t.Errorf("Write: %v", err)
	}
	o.TransactionTimeout = 0
	o.CommitDeadline = 11 * time.Minute
	if err := NewSink(o, StringValues()).Check(t.Context()); err == nil || !strings.Contains(err.Error(), "TransactionTimeout 10m0s is not longer than the checkpoint timeout plus the restart delay (11m0s)") {
		t.Errorf("CommitDeadline: %v", err)
	}
	o.CommitDeadline = 0
	o.Topic = "nope"
	if err := NewSink(o, StringValues()).Check(t.Context()); err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
		t.Errorf("missing topic: %v", err)
	}
}

// TestSinkAtLeastOnceAndNone: at-least-once has every record on the
// broker after Flush(false); none after Flush(true).
func TestSinkAtLeastOnceAndNone(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, None} {
		c := newCluster(t, 1, "out")
		s := NewSink(sinkOpts(c, g), StringValues())
		w := newWriter(t, s, 0, 1)
		if _, ok := w.(connector.PreCommitter); ok {
			t.Fatalf("%v writer is a PreCommitter", g)
		}
		write(t, w, "a", "b")
		if err := w.Flush(g == None); err != nil {
			t.Fatal(err)
		}
		checkTopic(t, c, true, "a", "b")
	}
}

// TestSinkFencedProducer: another producer taking the transactional id
// fences the writer; the error fails the job (the restore then rewrites
// the records).
func TestSinkFencedProducer(t *testing.T) {
	c := newCluster(t, 1, "out")
	s := NewSink(sinkOpts(c, ExactlyOnce), StringValues())
	w := newWriter(t, s, 0, 1)
	write(t, w, "a")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	thief := newClient(t, c, kgo.TransactionalID("job-0-1"))
	req := kmsg.NewPtrInitProducerIDRequest()
	tid := "job-0-1"
	req.TransactionalID, req.TransactionTimeoutMillis = &tid, 60000
	if _, err := req.RequestWith(context.Background(), thief); err != nil {
		t.Fatal(err)
	}
	write(t, w, "b")
	err := w.Flush(false)
	if err == nil {
		_, err = w.(connector.PreCommitter).PreCommit(1)
	}
	if err == nil {
		t.Fatal("a fenced writer pre-committed")
	}
	t.Logf("fenced: %v", err)
	checkTopic(t, c, true)
}
