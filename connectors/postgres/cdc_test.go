package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/testutil/pgtest"
)

type collector struct{ got []Change }

func (c *collector) Emit(rec Change) { c.got = append(c.got, rec) }
func (c *collector) EmitAt(rec Change, ts int64) {
	if ts != rec.CommitTime.UnixMilli() {
		panic(fmt.Sprintf("event time %d, commit time %v", ts, rec.CommitTime))
	}
	c.got = append(c.got, rec)
}

// pollUntil polls r until the collector holds n changes.
func pollUntil(t *testing.T, r connector.Reader[Change], c *collector, n int) connector.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(c.got) < n {
		st, err := r.Poll(c)
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.EndOfInput {
			return st
		}
		if st == connector.NothingAvailable {
			select {
			case <-r.Available():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d changes, want %d: %v", len(c.got), n, describe(c.got))
		}
	}
	return connector.MoreAvailable
}

func describe(cs []Change) []string {
	var out []string
	for _, c := range cs {
		s := c.Kind.String() + " " + c.Table
		if c.Old != nil {
			s += fmt.Sprintf(" old=%v", c.Old["id"])
		}
		if c.New != nil {
			s += fmt.Sprintf(" new=%v/%v", c.New["id"], c.New["v"])
		}
		out = append(out, s)
	}
	return out
}

func newReader(t testing.TB, src *CDC[Change], splits []connector.SplitState) connector.Reader[Change] {
	t.Helper()
	r, err := src.NewReader(connector.ReaderContext{Subtask: 0, Parallelism: 1, Logger: slog.Default(), RequestCheckpoint: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	r.NoMoreSplits()
	return r
}

func slotFlushed(t *testing.T, url, slot string) uint64 {
	t.Helper()
	got := pgtest.Query[string](t, url, "SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots WHERE slot_name = $1", slot)
	if len(got) != 1 {
		t.Fatalf("slot %s: %v", slot, got)
	}
	lsn, err := pglogrepl.ParseLSN(got[0])
	if err != nil {
		t.Fatal(err)
	}
	return uint64(lsn)
}

// TestCDCSnapshotStreamRestore: the snapshot, then typed changes; a
// restore from a checkpoint reads exactly what followed it; the slot's
// confirmed position moves only when a checkpoint completes.
func TestCDCSnapshotStreamRestore(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	exec(t, url, "CREATE TABLE items (id int PRIMARY KEY, v text)", "ALTER TABLE items REPLICA IDENTITY FULL",
		"INSERT INTO items VALUES (1, 'a'), (2, 'b')")
	src, err := Changes(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "s1", StatusInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	splits, err := src.Splits(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, splits)
	c := &collector{}
	pollUntil(t, r, c, 2)
	if got, want := describe(c.got), []string{"read public.items new=1/a", "read public.items new=2/b"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot = %v, want %v", got, want)
	}
	exec(t, url, "INSERT INTO items VALUES (3, 'c')", "UPDATE items SET v = 'B' WHERE id = 2", "DELETE FROM items WHERE id = 1")
	pollUntil(t, r, c, 5)
	ck1, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	start := slotFlushed(t, url, "s1")
	exec(t, url, "BEGIN; INSERT INTO items VALUES (4, 'd'); INSERT INTO items VALUES (5, 'e'); COMMIT")
	pollUntil(t, r, c, 7)
	if got, want := describe(c.got[2:]), []string{"insert public.items new=3/c", "update public.items old=2 new=2/B", "delete public.items old=1",
		"insert public.items new=4/d", "insert public.items new=5/e"}; !slices.Equal(got, want) {
		t.Fatalf("stream = %v, want %v", got, want)
	}
	if c.got[3].Old["v"] != "b" || c.got[5].LSN != c.got[6].LSN || c.got[5].LSN <= c.got[2].LSN || c.got[5].CommitTime.IsZero() {
		t.Fatalf("old row, LSNs or commit times wrong: %+v", c.got[3:])
	}
	// Checkpoint 1 never completes: nothing is confirmed.
	time.Sleep(200 * time.Millisecond)
	if got := slotFlushed(t, url, "s1"); got != start {
		t.Fatalf("slot confirmed %v before any checkpoint completed (was %v)", pglogrepl.LSN(got), pglogrepl.LSN(start))
	}
	r.Close()

	// Restore from checkpoint 1: the last transaction again, once.
	r = newReader(t, src, ck1)
	c2 := &collector{}
	pollUntil(t, r, c2, 2)
	exec(t, url, "INSERT INTO items VALUES (6, 'f')")
	pollUntil(t, r, c2, 3)
	if got, want := describe(c2.got), []string{"insert public.items new=4/d", "insert public.items new=5/e", "insert public.items new=6/f"}; !slices.Equal(got, want) {
		t.Fatalf("after restore = %v, want %v", got, want)
	}
	if _, err := r.Snapshot(2); err != nil {
		t.Fatal(err)
	}
	if err := r.(connector.CheckpointListener).NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slotFlushed(t, url, "s1") < c2.got[2].LSN {
		if time.Now().After(deadline) {
			t.Fatalf("slot not confirmed up to %v after the checkpoint completed", pglogrepl.LSN(c2.got[2].LSN))
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Close()
}

// TestCDCMidTransactionRestore: a checkpoint in the middle of a large
// transaction resumes after the changes already read.
func TestCDCMidTransactionRestore(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	exec(t, url, "CREATE TABLE items (id int PRIMARY KEY, v text)")
	src, _ := Changes(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "s2"})
	splits, _ := src.Splits(context.Background(), 1)
	r := newReader(t, src, splits)
	c := &collector{}
	if _, err := r.Poll(c); err != nil { // starts: the snapshot is empty
		t.Fatal(err)
	}
	n := maxPerPoll + 100
	exec(t, url, fmt.Sprintf("INSERT INTO items SELECT g, 'x' FROM generate_series(1, %d) g", n))
	for len(c.got) == 0 {
		pollUntil(t, r, c, 1)
	}
	if len(c.got) != maxPerPoll {
		t.Fatalf("one poll emitted %d changes, want %d", len(c.got), maxPerPoll)
	}
	ck, _ := r.Snapshot(1)
	r.Close()
	r = newReader(t, src, ck)
	defer r.Close()
	c2 := &collector{}
	pollUntil(t, r, c2, 100)
	if c2.got[0].New["id"] != int32(maxPerPoll+1) || c2.got[99].New["id"] != int32(n) {
		t.Fatalf("resumed at %v..%v, want %d..%d", c2.got[0].New["id"], c2.got[99].New["id"], maxPerPoll+1, n)
	}
}

// TestCDCStopAtCurrent ends at the position of the first start.
func TestCDCStopAtCurrent(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	exec(t, url, "CREATE TABLE items (id int PRIMARY KEY, v text)", "INSERT INTO items VALUES (1, 'a')")
	src, _ := Changes(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "s3", StopAtCurrent: true})
	if src.Boundedness() != connector.Bounded {
		t.Fatal("not bounded")
	}
	splits, _ := src.Splits(context.Background(), 1)
	r := newReader(t, src, splits)
	c := &collector{}
	pollUntil(t, r, c, 1)
	ck, _ := r.Snapshot(1)
	exec(t, url, "INSERT INTO items VALUES (2, 'b')")
	if st := pollUntil(t, r, c, 2); st != connector.EndOfInput || len(c.got) != 1 {
		t.Fatalf("status %v, changes %v: want the end after the snapshot", st, describe(c.got))
	}
	r.Close()
	r = newReader(t, src, ck)
	defer r.Close()
	c = &collector{}
	if st := pollUntil(t, r, c, 1); st != connector.EndOfInput || len(c.got) != 0 {
		t.Fatalf("restored: status %v, changes %v", st, describe(c.got))
	}
}

// TestCDCBadInput: each mistake is a one-line error naming it.
func TestCDCBadInput(t *testing.T) {
	srv := pgtest.Shared(t)
	url := srv.NewDatabase(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	srv.CreatePasswordUser(t, db, "right")
	exec(t, url, "CREATE TABLE items (id int PRIMARY KEY, v text)")
	// A slot held by another client.
	cfg, _ := pgconn.ParseConfig(url)
	cfg.RuntimeParams["replication"] = "database"
	ctx := context.Background()
	holder, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := pglogrepl.CreateReplicationSlot(ctx, holder, "held", "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
		t.Fatal(err)
	}
	exec(t, url, "CREATE PUBLICATION held_pub FOR TABLE items")
	if err := pglogrepl.StartReplication(ctx, holder, "held", 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{"proto_version '1'", "publication_names 'held_pub'"}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts CDCOptions
		want []string
	}{
		{"wrong password", CDCOptions{URL: fmt.Sprintf("postgres://%s:wrong@%s/%s?sslmode=disable", pgtest.PasswordUser, srv.Addr(), db), Tables: []string{"items"}},
			[]string{"password authentication failed", pgtest.PasswordUser}},
		{"missing table", CDCOptions{URL: url, Tables: []string{"nosuch"}}, []string{"table nosuch", "does not exist"}},
		{"missing column", CDCOptions{URL: url, Tables: []string{"items"}, Columns: []Column{{Table: "items", Name: "line", Types: "text"}}},
			[]string{"table items has no column line"}},
		{"column of the wrong type", CDCOptions{URL: url, Tables: []string{"items"}, Columns: []Column{{Table: "items", Name: "id", Types: "text|varchar"}}},
			[]string{"table items, column id is of type int4", "text or varchar"}},
		{"slot held by another client", CDCOptions{URL: url, Tables: []string{"items"}, Slot: "held"}, []string{"replication slot held is in use by another client"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, err := Changes(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = src.Splits(ctx, 1)
			checkOneLine(t, err, c.want...)
		})
	}
	t.Run("wal_level not logical", func(t *testing.T) {
		srv := pgtest.Start(t, pgtest.Options{WALLevel: "replica"})
		url := srv.NewDatabase(t)
		src, _ := Changes(CDCOptions{URL: url, Tables: []string{"items"}})
		_, err := src.Splits(ctx, 1)
		checkOneLine(t, err, "wal_level = replica", "wal_level = logical")
	})
	t.Run("unconvertible value", func(t *testing.T) {
		exec(t, url, "INSERT INTO items VALUES (1, 'a')")
		src, _ := NewCDC(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "conv"}, func(c *Change) (string, bool, error) {
			s, ok := c.New["id"].(string)
			if !ok {
				return "", false, fmt.Errorf("column id holds %T, not text", c.New["id"])
			}
			return s, true, nil
		})
		splits, _ := src.Splits(ctx, 1)
		r, _ := src.NewReader(connector.ReaderContext{Logger: slog.Default(), RequestCheckpoint: func() {}})
		defer r.Close()
		r.AddSplits(splits)
		_, err := r.Poll(discard{})
		checkOneLine(t, err, "table public.items", "column id holds int32")
	})
}

type discard struct{}

func (discard) Emit(string)          {}
func (discard) EmitAt(string, int64) {}

func checkOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error has several lines: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	t.Log(msg)
}
