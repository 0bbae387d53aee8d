package nats

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirstream/weir/connector"
)

func newWriter(t testing.TB, s *Sink[string], subtask, attempt int) connector.Writer[string] {
	t.Helper()
	w, err := s.NewWriter(connector.WriterContext{JobID: "job", Subtask: subtask, Parallelism: 2, Attempt: attempt, Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// checkpoint runs the runtime's part of checkpoint id on w: Flush, then
// PreCommit; it returns the committable.
func checkpoint(t testing.TB, w connector.Writer[string], subtask int, id int64) connector.Committable {
	t.Helper()
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	data, err := w.(connector.PreCommitter).PreCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	return connector.Committable{CheckpointID: id, Subtask: subtask, Data: data}
}

// TestSinkExactlyOnce: records become visible only on Commit; a repeated
// commit (a restore of the checkpoint) adds nothing; records written
// after the last pre-commit never appear; with and without atomic batches.
func TestSinkExactlyOnce(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprint("atomic=", atomic), func(t *testing.T) {
			ts := startServer(t)
			ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: atomic})
			mode := AtomicOff
			if atomic {
				mode = AtomicOn
			}
			// A batch size of 7 makes the 25 records of a checkpoint span
			// several atomic batches.
			s := StringSink(ts.url(), "out", SinkOptions{Atomic: mode, AtomicBatchSize: 7})
			w0, w1 := newWriter(t, s, 0, 0), newWriter(t, s, 1, 0)
			for i := range 25 {
				w0.Write(fmt.Sprint("a", i))
				w1.Write(fmt.Sprint("b", i))
			}
			c1 := []connector.Committable{checkpoint(t, w0, 0, 1), checkpoint(t, w1, 1, 1)}
			if got := ts.streamData("OUT"); len(got) != 0 {
				t.Fatalf("%d records visible before the commit", len(got))
			}
			w0.(connector.BatchWriter[string]).WriteBatch([]string{"c0", "c1"})
			c2 := []connector.Committable{checkpoint(t, w0, 0, 2), checkpoint(t, w1, 1, 2)}
			if c2[1].Data != nil {
				t.Fatalf("a checkpoint without records pre-committed %d bytes", len(c2[1].Data))
			}
			w0.Write("lost") // after the last pre-commit: dropped by Close
			ctx := context.Background()
			if err := s.Commit(ctx, c1); err != nil {
				t.Fatal(err)
			}
			// The restore repeats both commits, in one call, out of order.
			if err := s.Commit(ctx, append(slices.Clone(c2), c1...)); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, c2); err != nil {
				t.Fatal(err)
			}
			var exp []string
			for i := range 25 {
				exp = append(exp, fmt.Sprint("a", i))
			}
			for i := range 25 {
				exp = append(exp, fmt.Sprint("b", i))
			}
			exp = append(exp, "c0", "c1")
			if got := ts.streamData("OUT"); !slices.Equal(got, exp) {
				t.Fatalf("stream holds %d records %v, want %d", len(got), got, len(exp))
			}
		})
	}
}

// TestSinkAtomicBatchAllOrNothing: an atomic batch that the server
// rejects (here: one message too large for the stream) stores none of its
// records.
func TestSinkAtomicBatchAllOrNothing(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: true, MaxMsgSize: 100})
	s := StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn})
	w := newWriter(t, s, 0, 0)
	for i := range 10 {
		w.Write(fmt.Sprint("ok", i))
	}
	w.Write(strings.Repeat("x", 200))
	err := s.Commit(context.Background(), []connector.Committable{checkpoint(t, w, 0, 1)})
	if err == nil {
		t.Fatal("commit of a batch with an oversized message succeeded")
	}
	if got := ts.streamData("OUT"); len(got) != 0 {
		t.Fatalf("a rejected atomic batch left %d records: %v", len(got), got)
	}
}

// TestSinkAtLeastOnce publishes at once and waits for acks on Flush.
func TestSinkAtLeastOnce(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}})
	s := StringSink(ts.url(), "out", SinkOptions{Delivery: AtLeastOnce})
	w := newWriter(t, s, 0, 0)
	if _, ok := w.(connector.PreCommitter); ok {
		t.Fatal("the at-least-once writer pre-commits")
	}
	for i := range 100 {
		if err := w.Write(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got := ts.streamData("OUT"); len(got) != 100 {
		t.Fatalf("%d records after Flush, want 100", len(got))
	}
}

// TestSinkChecks: a subject in no stream, an unreachable server, atomic
// publish required but off — one-line errors; a short duplicate window
// gives a warning.
func TestSinkChecks(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, Duplicates: 5 * time.Second})
	for _, tc := range []struct {
		name string
		s    *Sink[string]
		want string
	}{
		{"unreachable", StringSink("nats://127.0.0.1:1", "out", SinkOptions{ConnectTimeout: time.Second}), "cannot connect to nats://127.0.0.1:1"},
		{"subject outside", StringSink(ts.url(), "nowhere", SinkOptions{}), `subject "nowhere" is in no stream`},
		{"atomic required", StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn}), `stream "OUT" does not allow atomic publish`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Check(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line with %q", err, tc.want)
			}
		})
	}
	var logs bytes.Buffer
	s := StringSink(ts.url(), "out", SinkOptions{RecoveryTime: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "duplicate window is shorter") || !strings.Contains(logs.String(), "duplicate_window=5s") {
		t.Fatalf("no warning for a 5s window and a 10s recovery time: %q", logs.String())
	}
	logs.Reset()
	s = StringSink(ts.url(), "out", SinkOptions{RecoveryTime: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := s.Check(context.Background()); err != nil || logs.Len() != 0 {
		t.Fatalf("err %v, logs %q for a window longer than the recovery time", err, logs.String())
	}
}

func TestCommittableRoundTrip(t *testing.T) {
	w := &writer[string]{sink: StringSink("", "s", SinkOptions{}), opts: SinkOptions{AtomicBatchSize: 9}, ctx: connector.WriterContext{JobID: "j"}, token: "t0", conn: &sinkConn{atomic: true}}
	w.Write("x")
	w.Write("")
	data, _ := w.PreCommit(1)
	c, err := decodeCommittable(data)
	if err != nil || c.job != "j" || c.token != "t0" || c.batch != 9 || len(c.msgs) != 2 || string(c.msgs[0].Data) != "x" {
		t.Fatalf("%+v %v", c, err)
	}
	for i := range data {
		if _, err := decodeCommittable(data[:i]); err == nil {
			t.Fatalf("truncated committable of %d bytes decoded", i)
		}
	}
}

// TestSinkRecommitAfterServerRestart: the duplicate window survives a
// restart of the server (file storage): a commit repeated after it adds
// nothing, with and without atomic batches.
func TestSinkRecommitAfterServerRestart(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprint("atomic=", atomic), func(t *testing.T) {
			ts := startServer(t)
			ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: atomic})
			s := StringSink(ts.url(), "out", SinkOptions{})
			w := newWriter(t, s, 0, 0)
			for i := range 50 {
				w.Write(fmt.Sprint(i))
			}
			c := []connector.Committable{checkpoint(t, w, 0, 1)}
			if err := s.Commit(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			w.Close()
			ts.restart()
			// A new sink value, as in a restored process.
			s2 := StringSink(ts.url(), "out", SinkOptions{})
			if err := s2.Commit(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if got := ts.streamData("OUT"); len(got) != 50 {
				t.Fatalf("stream holds %d records after a repeated commit, want 50", len(got))
			}
		})
	}
}

// TestSinkAtomicBatchLeftOpen: a process killed in the middle of an
// atomic batch leaves an open batch that is never committed; the restored
// job's repeat of the commit stores every record once.
func TestSinkAtomicBatchLeftOpen(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: true})
	s := StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn})
	w := newWriter(t, s, 0, 0)
	for i := range 20 {
		w.Write(fmt.Sprint(i))
	}
	c := checkpoint(t, w, 0, 1)
	dc, err := decodeCommittable(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	// The killed process's half batch: the first 5 messages, no commit.
	nc, _ := ts.js()
	for i := range 5 {
		m := &nats.Msg{Subject: "out", Data: dc.msgs[i].Data, Header: nats.Header{}}
		if i == 0 {
			m.Header.Set(jetstream.MsgIDHeader, BatchMsgID(dc.job, 0, dc.token, 1, i))
		}
		m.Header.Set("Nats-Batch-Id", "killed-attempt")
		m.Header.Set("Nats-Batch-Sequence", fmt.Sprint(i+1))
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	if got := ts.streamData("OUT"); len(got) != 0 {
		t.Fatalf("an uncommitted batch stored %d records", len(got))
	}
	if err := s.Commit(context.Background(), []connector.Committable{c}); err != nil {
		t.Fatal(err)
	}
	var exp []string
	for i := range 20 {
		exp = append(exp, fmt.Sprint(i))
	}
	if got := ts.streamData("OUT"); !slices.Equal(got, exp) {
		t.Fatalf("stream holds %v, want %v", got, exp)
	}
}

// streamMsgIDs returns the Nats-Msg-Id of every message of the stream
// ("" for none).
func streamMsgIDs(t *testing.T, ts *testServer, stream string) []string {
	t.Helper()
	_, js := ts.js()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Header.Get(jetstream.MsgIDHeader))
	}
	return out
}

// TestSinkAtomicBatchDedupAsUnit: with atomic batches only the first
// message of each batch carries a message ID, and that one ID drops the
// whole batch when a commit is repeated: after a commit that died between
// two batches of a checkpoint, the restored job's repeat (whose sink has
// another AtomicBatchSize: the committable's batch size rules) stores
// each record once; so do further repeats, and a repeat after the server
// restarted. A committable pre-committed for atomic batches is not
// published one by one (which its batch IDs could not deduplicate) once
// the stream no longer allows atomic publish.
func TestSinkAtomicBatchDedupAsUnit(t *testing.T) {
	ts := startServer(t)
	st := ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: true})
	s := StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn, AtomicBatchSize: 7})
	w := newWriter(t, s, 3, 0)
	var exp []string
	for i := range 20 {
		w.Write(fmt.Sprint(i))
		exp = append(exp, fmt.Sprint(i))
	}
	cm := checkpoint(t, w, 3, 5)
	dc, err := decodeCommittable(cm.Data)
	if err != nil || dc.batch != 7 {
		t.Fatalf("committable batch %d, err %v; want 7", dc.batch, err)
	}
	// The failed attempt: its first batch (records 0-6) was stored, then
	// the process died.
	c, err := s.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts := *(&SinkOptions{}).EnsureDefaults()
	bid := func(i int) string { return BatchMsgID(dc.job, 3, dc.token, 5, i) }
	if err := s.publishBatch(context.Background(), c, &opts, dc.msgs, 0, 7, nil, bid); err != nil {
		t.Fatal(err)
	}
	s.release()
	if got := ts.streamData("OUT"); len(got) != 7 {
		t.Fatalf("the first batch stored %d records, want 7", len(got))
	}
	restored := StringSink(ts.url(), "out", SinkOptions{AtomicBatchSize: 5})
	for range 2 {
		if err := restored.Commit(context.Background(), []connector.Committable{cm}); err != nil {
			t.Fatal(err)
		}
	}
	ts.restart()
	if err := StringSink(ts.url(), "out", SinkOptions{}).Commit(context.Background(), []connector.Committable{cm}); err != nil {
		t.Fatal(err)
	}
	if got := ts.streamData("OUT"); !slices.Equal(got, exp) {
		t.Fatalf("stream holds %v, want %v", got, exp)
	}
	ids := streamMsgIDs(t, ts, "OUT")
	for i, id := range ids {
		want := ""
		if i%7 == 0 {
			want = bid(i)
		}
		if id != want {
			t.Fatalf("message %d has ID %q, want %q (IDs %q)", i, id, want, ids)
		}
	}

	// The stream stops allowing atomic publish between pre-commit and
	// commit.
	w.Write("late")
	cm2 := checkpoint(t, w, 3, 6)
	cfg := st.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	_, js := ts.js()
	if _, err := js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	err = StringSink(ts.url(), "out", SinkOptions{}).Commit(context.Background(), []connector.Committable{cm2})
	if err == nil || !strings.Contains(err.Error(), "no longer allows atomic publish") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one line saying the stream no longer allows atomic publish", err)
	}
	if got := ts.streamData("OUT"); len(got) != 20 {
		t.Fatalf("stream holds %d records after the refused commit, want 20", len(got))
	}
}

// TestSinkCommitsVersion1: a committable of version 1 (written before
// atomic batches were deduplicated as a unit) is committed as it was
// meant: every message with its own ID, so a repeat adds nothing.
func TestSinkCommitsVersion1(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprint("atomic=", atomic), func(t *testing.T) {
			ts := startServer(t)
			ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: atomic})
			b := binary.AppendUvarint(nil, 1)
			b = appendString(b, "job")
			b = appendString(b, "tok")
			b = binary.AppendUvarint(b, 3)
			for _, r := range []string{"x", "y", "z"} {
				b = appendMessage(b, &Message{Data: []byte(r)})
			}
			s := StringSink(ts.url(), "out", SinkOptions{AtomicBatchSize: 2})
			cm := []connector.Committable{{CheckpointID: 1, Data: b}}
			for range 2 {
				if err := s.Commit(context.Background(), cm); err != nil {
					t.Fatal(err)
				}
			}
			if got := ts.streamData("OUT"); !slices.Equal(got, []string{"x", "y", "z"}) {
				t.Fatalf("stream holds %v", got)
			}
			if ids := streamMsgIDs(t, ts, "OUT"); ids[2] != MsgID("job", 0, "tok", 1, 2) {
				t.Fatalf("IDs %q", ids)
			}
		})
	}
}

// TestSinkAtomicCommitAcrossServerRestart: the server restarts (its store
// kept) while a commit publishes atomic batches. A batch whose commit
// reply was lost with the connection is published again instead of
// waiting out AckTimeout, and its message ID drops it if the first one
// was stored: the commit ends soon after the server is back, and the
// stream holds each record once.
func TestSinkAtomicCommitAcrossServerRestart(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out"}, AllowAtomicPublish: true})
	s := StringSink(ts.url(), "out", SinkOptions{Atomic: AtomicOn, AtomicBatchSize: 200, AckTimeout: 5 * time.Minute})
	w := newWriter(t, s, 0, 0)
	const n = 20_000
	for i := range n {
		w.Write(fmt.Sprint(i))
	}
	cm := []connector.Committable{checkpoint(t, w, 0, 1)}
	// Watch the stream grow, and restart the server in the middle.
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		_, js := ts.js()
		for {
			st, err := js.Stream(context.Background(), "OUT")
			if err == nil && st.CachedInfo().State.Msgs >= n/4 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		ts.restart()
	}()
	done := make(chan error, 1)
	go func() { done <- s.Commit(context.Background(), cm) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the commit did not end within 60s of a server restart: waiting for a reply lost with the connection?")
	}
	<-restarted
	if err != nil {
		// Failing is allowed (the job restores and repeats the commit);
		// the repeat must then store what is missing, once.
		t.Logf("commit across the restart failed: %v; repeating it", err)
		if err := StringSink(ts.url(), "out", SinkOptions{}).Commit(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	got := ts.streamData("OUT")
	if len(got) != n {
		t.Fatalf("stream holds %d records, want %d", len(got), n)
	}
	seen := make(map[string]bool, n)
	for _, g := range got {
		if seen[g] {
			t.Fatalf("record %s stored twice", g)
		}
		seen[g] = true
	}
}
