package nats

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirstream/weir/connector"
)

func readerOf(t testing.TB, src connector.Source[string], splits []connector.SplitState) connector.Reader[string] {
	t.Helper()
	r, err := src.NewReader(connector.ReaderContext{Subtask: 0, Parallelism: 1, Logger: slog.Default(), RequestCheckpoint: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	r.NoMoreSplits()
	return r
}

func want(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestSourceRewindsToEverySnapshot reads a stream, snapshots at several
// points, and checks that a reader restored from each snapshot emits
// exactly the records that followed it.
func TestSourceRewindsToEverySnapshot(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}})
	ts.publish("in.a", "m", 1000)
	src := Strings(ts.url(), "IN", SourceOptions{BatchSize: 100})
	splits, err := src.Splits(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := readerOf(t, src, splits)
	var c collector
	type snap struct {
		at     int
		states []connector.SplitState
	}
	var snaps []snap
	for len(c.recs) < 1000 {
		drain(t, r, &c, 1)
		st, err := r.Snapshot(int64(len(snaps)))
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap{len(c.recs), st})
	}
	if !slices.Equal(c.recs, want("m", 0, 1000)) {
		t.Fatalf("read %d records, not the 1000 published in order", len(c.recs))
	}
	ts.publish("in.a", "n", 10)
	for _, s := range []snap{snaps[0], snaps[len(snaps)/2], snaps[len(snaps)-1]} {
		r2 := readerOf(t, src, s.states)
		var c2 collector
		drain(t, r2, &c2, 1000-s.at+10)
		exp := append(want("m", s.at, 1000), want("n", 0, 10)...)
		if !slices.Equal(c2.recs, exp) {
			t.Fatalf("restored at %d: got %d records (first %q), want %d (first %q)", s.at, len(c2.recs), first(c2.recs), len(exp), first(exp))
		}
		r2.Close()
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestSourceBoundedStopsAtFirstStart: a bounded source ends at the last
// sequence of the stream when Splits ran, also after a restore, and with
// a subject filter whose last message comes before the stop.
func TestSourceBoundedStopsAtFirstStart(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}})
	ts.publish("in.a", "a", 50)
	ts.publish("in.b", "b", 50)
	src := Strings(ts.url(), "IN", SourceOptions{Bounded: true, BatchSize: 10})
	if src.Boundedness() != connector.Bounded {
		t.Fatal("bounded source reports unbounded")
	}
	splits, err := src.Splits(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ts.publish("in.a", "late", 20) // after the first start: never read
	r := readerOf(t, src, splits)
	var c collector
	drain(t, r, &c, 30)
	at := len(c.recs) // Polls emit up to 10: at may pass 30
	states, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	drainToEnd(t, r, &c)
	exp := append(want("a", 0, 50), want("b", 0, 50)...)
	if !slices.Equal(c.recs, exp) {
		t.Fatalf("got %d records, want the 100 before the first start", len(c.recs))
	}
	// Restored from the snapshot, the reader stops at the same message.
	r2 := readerOf(t, src, states)
	var c2 collector
	drainToEnd(t, r2, &c2)
	if !slices.Equal(c2.recs, exp[at:]) {
		t.Fatalf("restored: got %d records, want %d", len(c2.recs), len(exp)-at)
	}
	// A filter whose messages end before the stop sequence ends too.
	fsrc := Strings(ts.url(), "IN", SourceOptions{Bounded: true, Subjects: []string{"in.b", "in.none"}})
	fsplits, err := fsrc.Splits(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(fsplits) != 2 {
		t.Fatalf("%d splits for 2 subjects", len(fsplits))
	}
	r3 := readerOf(t, fsrc, fsplits)
	var c3 collector
	drainToEnd(t, r3, &c3)
	if !slices.Equal(c3.recs, want("b", 0, 50)) {
		t.Fatalf("filtered: got %d records, want the 50 of in.b", len(c3.recs))
	}
}

// TestSourceEventTime takes timestamps from the message and from a header.
func TestSourceEventTime(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in"}})
	_, js := ts.js()
	before := time.Now().Add(-time.Second).UnixMilli()
	for i := range 5 {
		m := &nats.Msg{Subject: "in", Data: []byte(strconv.Itoa(i)), Header: nats.Header{"Ts": []string{strconv.Itoa(1000 + i)}}}
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		opts SourceOptions
		ok   func(i int, ts int64) bool
	}{
		{"message", SourceOptions{EventTime: MessageTime}, func(_ int, ts int64) bool { return ts >= before && ts <= time.Now().UnixMilli() }},
		{"header", SourceOptions{EventTime: HeaderTime, TimestampHeader: "Ts"}, func(i int, ts int64) bool { return ts == int64(1000+i) }},
		{"none", SourceOptions{}, func(_ int, ts int64) bool { return ts == connector.NoTimestamp }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Strings(ts.url(), "IN", tc.opts)
			splits, err := src.Splits(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			r := readerOf(t, src, splits)
			var c collector
			drain(t, r, &c, 5)
			for i, v := range c.ts {
				if !tc.ok(i, v) {
					t.Errorf("record %d: timestamp %d", i, v)
				}
			}
		})
	}
	// A header that is not a number fails with a message naming it.
	_, _ = js.Publish(context.Background(), "in", []byte("bad"))
	src := Strings(ts.url(), "IN", SourceOptions{EventTime: HeaderTime, TimestampHeader: "Ts", StartSequence: 6})
	splits, _ := src.Splits(context.Background(), 1)
	r := readerOf(t, src, splits)
	var c collector
	var err error
	for range 100 {
		if _, err = r.Poll(&c); err != nil {
			break
		}
		<-r.Available()
	}
	if err == nil || !strings.Contains(err.Error(), "header Ts") {
		t.Fatalf("bad header: err %v", err)
	}
}

// TestSourceBadInput: one-line errors naming the server, stream or subject.
func TestSourceBadInput(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}})
	ts.createStream(jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other"}})
	for _, tc := range []struct {
		name string
		src  *Source[string]
		want string
	}{
		{"unreachable", Strings("nats://127.0.0.1:1", "IN", SourceOptions{ConnectTimeout: time.Second}), "cannot connect to nats://127.0.0.1:1"},
		{"missing stream", Strings(ts.url(), "NOPE", SourceOptions{}), `stream "NOPE" does not exist`},
		{"subject outside", Strings(ts.url(), "IN", SourceOptions{Subjects: []string{"elsewhere"}}), `subject "elsewhere" is not in stream "IN"`},
		{"subject of another stream", Strings(ts.url(), "IN", SourceOptions{Subjects: []string{"other"}}), `subject "other" is not in stream "IN"`},
		{"bad options", Strings(ts.url(), "IN", SourceOptions{EventTime: HeaderTime}), "TimestampHeader is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.src.Check(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line with %q", err, tc.want)
			}
			if _, err := tc.src.Splits(context.Background(), 1); err == nil {
				t.Fatal("Splits accepted it")
			}
		})
	}
}

// TestSourceServerRestart: the reader goes on, without loss or repeat,
// across a restart of the server that keeps its store.
func TestSourceServerRestart(t *testing.T) {
	ts := startServer(t)
	ts.createStream(jetstream.StreamConfig{Name: "IN", Subjects: []string{"in"}})
	ts.publish("in", "m", 100)
	src := Strings(ts.url(), "IN", SourceOptions{})
	splits, err := src.Splits(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := readerOf(t, src, splits)
	var c collector
	drain(t, r, &c, 100)
	ts.restart()
	ts.publish("in", "n", 100)
	drain(t, r, &c, 100)
	if exp := append(want("m", 0, 100), want("n", 0, 100)...); !slices.Equal(c.recs, exp) {
		t.Fatalf("got %d records across the restart, want %d in order", len(c.recs), len(exp))
	}
}
