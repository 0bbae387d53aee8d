package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/testutil/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type kv struct {
	Word  string `pg:"word"`
	Count int64  `pg:"count"`
}

func exec(t testing.TB, url string, sql ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range sql {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func kvSink(t *testing.T, url string, mut func(*SinkOptions[kv])) *Sink[kv] {
	t.Helper()
	rows, err := StructMapper[kv]()
	if err != nil {
		t.Fatal(err)
	}
	o := SinkOptions[kv]{URL: url, Table: "kv", Rows: rows, BatchRows: 3,
		Setup: "CREATE TABLE IF NOT EXISTS kv (word text, count bigint)"}
	if mut != nil {
		mut(&o)
	}
	s, err := NewSink(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wctx(sub, par int) connector.WriterContext {
	return connector.WriterContext{JobID: "j", Subtask: sub, Parallelism: par, Logger: slog.Default()}
}

func rowsOf(t *testing.T, url string) []string {
	t.Helper()
	return pgtest.Query[string](t, url, "SELECT word || ',' || count FROM kv ORDER BY word, count")
}

func prepared(t *testing.T, url string) []string {
	t.Helper()
	return pgtest.Query[string](t, url, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY gid")
}

func writeAll[T any](t *testing.T, w connector.Writer[T], recs ...T) {
	t.Helper()
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
}

func preCommit(t *testing.T, w connector.Writer[kv], id int64) connector.Committable {
	t.Helper()
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	data, err := w.(connector.PreCommitter).PreCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	return connector.Committable{CheckpointID: id, Subtask: 0, Data: data}
}

// TestSinkTwoPhaseCommit: rows become visible at COMMIT PREPARED only; a
// second commit of the same transaction is fine; an interval without rows
// prepares nothing.
func TestSinkTwoPhaseCommit(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := kvSink(t, url, nil)
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, kv{"a", 1}, kv{"b", 1}, kv{"a", 2}, kv{"c", 1}, kv{"d", 1}) // more than BatchRows
	c1 := preCommit(t, w, 1)
	if got := rowsOf(t, url); len(got) != 0 {
		t.Fatalf("rows visible before commit: %v", got)
	}
	if got, want := prepared(t, url), []string{"weir-kv-0-1"}; !slices.Equal(got, want) {
		t.Fatalf("prepared = %v, want %v", got, want)
	}
	writeAll(t, w, kv{"e", 1})
	c2 := preCommit(t, w, 2)
	if data, err := w.(connector.PreCommitter).PreCommit(3); err != nil || data != nil {
		t.Fatalf("empty interval: PreCommit = %q, %v; want no transaction", data, err)
	}
	if err := s.Commit(context.Background(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(t, url), []string{"a,1", "a,2", "b,1", "c,1", "d,1"}; !slices.Equal(got, want) {
		t.Fatalf("after commit 1: %v, want %v", got, want)
	}
	if err := s.Commit(context.Background(), []connector.Committable{c1, c2}); err != nil {
		t.Fatalf("commit again: %v", err)
	}
	if got := rowsOf(t, url); len(got) != 6 {
		t.Fatalf("after commit 2: %v", got)
	}
	if got := prepared(t, url); len(got) != 0 {
		t.Fatalf("prepared left: %v", got)
	}
}

// TestSinkCleanup: after a failure, the restore commits the recorded
// transaction and Cleanup rolls back the unrecorded one; a fresh writer
// rolls back what earlier runs of its subtask left.
func TestSinkCleanup(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := kvSink(t, url, nil)
	w, err := s.NewWriter(wctx(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, kv{"a", 1})
	c1 := preCommit(t, w, 1)
	writeAll(t, w, kv{"b", 1})
	preCommit(t, w, 2) // never completed
	writeAll(t, w, kv{"c", 1})
	w.Close() // killed: "c" was in an open transaction

	w1, err := s.NewWriter(wctx(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w1, kv{"z", 1})
	preCommit(t, w1, 2)
	w1.Close()

	s2 := kvSink(t, url, nil) // the restored job
	if err := s2.Commit(context.Background(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Cleanup(context.Background(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	if got := prepared(t, url); len(got) != 0 {
		t.Fatalf("prepared left after cleanup: %v", got)
	}
	if got, want := rowsOf(t, url), []string{"a,1"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}

	// A fresh start (no restore, no Cleanup): the writer of subtask 0
	// rolls back its own leftovers and those of subtasks beyond the new
	// parallelism, not those of subtask 1 of other prefixes.
	w, _ = s2.NewWriter(wctx(0, 1))
	writeAll(t, w, kv{"x", 1})
	preCommit(t, w, 1)
	w.Close()
	other := kvSink(t, url, func(o *SinkOptions[kv]) { o.TransactionPrefix = "weir-kv-other" })
	ow, _ := other.NewWriter(wctx(3, 4))
	writeAll(t, ow, kv{"o", 1})
	preCommit(t, ow, 7)
	ow.Close()
	w1, _ = s2.NewWriter(wctx(1, 3))
	writeAll(t, w1, kv{"y", 1})
	preCommit(t, w1, 5)
	w1.Close()
	w, err = s2.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, want := prepared(t, url), []string{"weir-kv-other-3-7"}; !slices.Equal(got, want) {
		t.Fatalf("prepared = %v, want %v", got, want)
	}
	// A prepared transaction left on the shared server would hold up the
	// creation of every logical replication slot (the CDC tests').
	exec(t, url, "ROLLBACK PREPARED 'weir-kv-other-3-7'")
}

// TestSinkServerRestartBetweenPrepareAndCommit: the server restarts after
// PREPARE; the commit reconnects and commits, and the writer goes on.
func TestSinkServerRestartBetweenPrepareAndCommit(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.NewDatabase(t)
	s := kvSink(t, url, nil)
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, kv{"a", 1}, kv{"b", 1})
	c1 := preCommit(t, w, 1)
	// Warm a commit connection, so that the restart breaks it.
	if err := s.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	if got := prepared(t, url); len(got) != 1 {
		t.Fatalf("prepared after restart: %v", got)
	}
	if err := s.Commit(context.Background(), []connector.Committable{c1}); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	srv.Restart(t)
	writeAll(t, w, kv{"c", 1})
	c2 := preCommit(t, w, 2)
	if err := s.Commit(context.Background(), []connector.Committable{c2}); err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(t, url), []string{"a,1", "b,1", "c,1"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

// TestSinkUpsert keeps the latest value per key, within a batch, across
// batches and across transactions.
func TestSinkUpsert(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	s := kvSink(t, url, func(o *SinkOptions[kv]) {
		o.Mode, o.Key = Upsert, []string{"word"}
		o.Setup = "CREATE TABLE IF NOT EXISTS kv (word text PRIMARY KEY, count bigint)"
	})
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, kv{"a", 1}, kv{"a", 2}, kv{"b", 1}, kv{"a", 3}, kv{"c", 1}, kv{"b", 2}, kv{"d", 1})
	c1 := preCommit(t, w, 1)
	// Rows of keys that the prepared transaction holds wait in the writer
	// until the next checkpoint, by which time the first one committed.
	writeAll(t, w, kv{"a", 4}, kv{"d", 2}, kv{"e", 1}, kv{"f", 1}, kv{"g", 1})
	if err := s.Commit(context.Background(), []connector.Committable{c1}); err != nil {
		t.Fatal(err)
	}
	c2 := preCommit(t, w, 2)
	if err := s.Commit(context.Background(), []connector.Committable{c2}); err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(t, url), []string{"a,4", "b,2", "c,1", "d,2", "e,1", "f,1", "g,1"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

// TestSinkAtLeastOnce commits at each checkpoint's flush, without
// prepared transactions, on a server that has none.
func TestSinkAtLeastOnce(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{NoPreparedTransactions: true})
	url := srv.NewDatabase(t)
	s := kvSink(t, url, nil)
	if _, err := s.NewWriter(wctx(0, 1)); err == nil || !strings.Contains(err.Error(), "max_prepared_transactions = 0") || !strings.Contains(err.Error(), "raise") {
		t.Fatalf("exactly-once on a server without prepared transactions: %v", err)
	}
	s = kvSink(t, url, func(o *SinkOptions[kv]) { o.Guarantee = AtLeastOnce })
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, ok := w.(connector.PreCommitter); ok {
		t.Fatal("at-least-once writer pre-commits")
	}
	writeAll(t, w, kv{"a", 1})
	if got := rowsOf(t, url); len(got) != 0 {
		t.Fatalf("visible before the flush: %v", got)
	}
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, kv{"b", 1})
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(t, url), []string{"a,1", "b,1"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

// TestSinkBadInput: each mistake is a one-line error that names what was
// wrong, and nothing is committed.
func TestSinkBadInput(t *testing.T) {
	srv := pgtest.Shared(t)
	url := srv.NewDatabase(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	srv.CreatePasswordUser(t, db, "right")
	exec(t, url, "CREATE TABLE typed (word text, count text)", "CREATE TABLE nokey (word text, count bigint)")
	rows, _ := StructMapper[kv]()
	mk := func(mut func(*SinkOptions[kv])) SinkOptions[kv] {
		o := SinkOptions[kv]{URL: url, Table: "kv", Rows: rows, Setup: "CREATE TABLE IF NOT EXISTS kv (word text, count bigint)"}
		mut(&o)
		return o
	}
	cases := []struct {
		name string
		opts SinkOptions[kv]
		want []string
	}{
		{"wrong password", mk(func(o *SinkOptions[kv]) {
			o.URL = fmt.Sprintf("postgres://%s:wrong@%s/%s?sslmode=disable", pgtest.PasswordUser, srv.Addr(), db)
		}), []string{"password authentication failed", pgtest.PasswordUser, srv.Addr()}},
		{"missing table", mk(func(o *SinkOptions[kv]) { o.Table, o.Setup = "nosuch", "" }), []string{"table nosuch", `relation "nosuch" does not exist`}},
		{"missing column", mk(func(o *SinkOptions[kv]) {
			o.Rows = FuncMapper([]string{"word", "cnt"}, func(r kv, d []any) error { d[0], d[1] = r.Word, r.Count; return nil })
		}), []string{"table kv", `column "cnt"`}},
		{"column of the wrong type", mk(func(o *SinkOptions[kv]) {
			o.Table = "typed"
			o.Rows.Types = []string{"text|varchar", "bigint"}
		}), []string{"table typed", "column count is of type text", "bigint"}},
		{"upsert without unique key", mk(func(o *SinkOptions[kv]) { o.Table, o.Mode, o.Key = "nokey", Upsert, []string{"word"} }), []string{"table nokey", "ON CONFLICT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSink(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.NewWriter(wctx(0, 1))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error has several lines: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			t.Log(msg)
		})
	}

	t.Run("unconvertible value", func(t *testing.T) {
		exec(t, url, "CREATE TABLE IF NOT EXISTS kv (word text, count bigint)")
		s, err := NewSink(SinkOptions[kv]{URL: url, Table: "kv", Rows: FuncMapper([]string{"word", "count"}, func(r kv, d []any) error {
			d[0], d[1] = r.Word, r.Word // a word into the bigint column
			return nil
		})})
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.NewWriter(wctx(0, 1))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		err = w.Write(kv{"five", 1})
		if err == nil {
			err = w.Flush(false)
		}
		if err == nil {
			_, err = w.(connector.PreCommitter).PreCommit(1)
		}
		if err == nil || !strings.Contains(err.Error(), "table kv, column count (int8)") || !strings.Contains(err.Error(), "five") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error = %v", err)
		}
		t.Log(err)
		if got := rowsOf(t, url); len(got) != 0 {
			t.Fatalf("rows committed: %v", got)
		}
		if got := prepared(t, url); len(got) != 0 {
			t.Fatalf("prepared: %v", got)
		}
	})

	t.Run("options", func(t *testing.T) {
		for _, o := range []SinkOptions[kv]{
			{Table: "kv", Rows: rows},
			{URL: url, Rows: rows},
			{URL: url, Table: "kv"},
			{URL: url, Table: "kv", Rows: rows, Mode: Upsert},
			{URL: url, Table: "kv", Rows: rows, Mode: Upsert, Key: []string{"nope"}},
			{URL: url, Table: "kv", Rows: rows, TransactionPrefix: "it's"},
		} {
			if _, err := NewSink(o); err == nil {
				t.Errorf("NewSink(%+v): no error", o)
			}
		}
	})
}

func TestStructMapper(t *testing.T) {
	type rec struct {
		UserID   int64
		Name     string `pg:"full_name"`
		Skip     bool   `pg:"-"`
		HTTPCode int
		hidden   int
	}
	m, err := StructMapper[*rec]()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"user_id", "full_name", "http_code"}; !slices.Equal(m.Columns, want) {
		t.Fatalf("columns = %v, want %v", m.Columns, want)
	}
	dst := make([]any, 3)
	if err := m.Map(&rec{UserID: 7, Name: "n", HTTPCode: 200, hidden: 1}, dst); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dst) != "[7 n 200]" {
		t.Fatalf("values = %v", dst)
	}
	if err := m.Map(nil, dst); err == nil {
		t.Fatal("nil record: no error")
	}
	if _, err := StructMapper[int](); err == nil {
		t.Fatal("StructMapper[int]: no error")
	}
}
