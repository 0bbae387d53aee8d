package postgres

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/testutil/pgtest"
)

// Benchmarks against a real server, each side by side with a bare client
// loop doing the same work in the same run:
//
//	go test -run '^$' -bench . -benchtime 2000000x ./connectors/postgres/
//
// BenchmarkSink/exactly-once drives a writer as the runtime does with 1 s
// checkpoints (Flush, PreCommit, then Commit every second); bare-copy is a
// pgx COPY loop into the same kind of table, committing every second.
// BenchmarkCDC reads b.N inserts (pgbench-style: 10 rows per transaction)
// from a slot with the reader and with a bare pglogrepl receive loop;
// BenchmarkCDCLag measures commit-to-record lag of single-row commits.

var words = func() []string {
	w := make([]string, 1000)
	for i := range w {
		w[i] = "word" + strconv.Itoa(i)
	}
	return w
}()

func BenchmarkSink(b *testing.B) {
	srv := pgtest.Shared(b)
	b.Run("bare-copy", func(b *testing.B) {
		url := srv.NewDatabase(b)
		exec(b, url, "CREATE TABLE kv (word text, count bigint)")
		ctx := context.Background()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		rows := make([][]any, 4096)
		b.ResetTimer()
		start, last := time.Now(), time.Now()
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; {
			n := min(len(rows), b.N-i)
			for j := range n {
				rows[j] = []any{words[(i+j)%len(words)], int64(i + j)}
			}
			if _, err := c.CopyFrom(ctx, pgx.Identifier{"kv"}, []string{"word", "count"}, pgx.CopyFromRows(rows[:n])); err != nil {
				b.Fatal(err)
			}
			i += n
			if time.Since(last) >= time.Second {
				if _, err := c.Exec(ctx, "COMMIT; BEGIN"); err != nil {
					b.Fatal(err)
				}
				last = time.Now()
			}
		}
		if _, err := c.Exec(ctx, "COMMIT"); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
	})
	b.Run("exactly-once", func(b *testing.B) {
		url := srv.NewDatabase(b)
		rows, _ := StructMapper[kv]()
		s, err := NewSink(SinkOptions[kv]{URL: url, Table: "kv", Rows: rows, Setup: "CREATE TABLE IF NOT EXISTS kv (word text, count bigint)"})
		if err != nil {
			b.Fatal(err)
		}
		w, err := s.NewWriter(wctx(0, 1))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		pc := w.(connector.PreCommitter)
		ctx := context.Background()
		var id int64
		checkpoint := func() {
			id++
			if err := w.Flush(false); err != nil {
				b.Fatal(err)
			}
			data, err := pc.PreCommit(id)
			if err != nil {
				b.Fatal(err)
			}
			if data != nil {
				if err := s.Commit(ctx, []connector.Committable{{CheckpointID: id, Data: data}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ResetTimer()
		start, last := time.Now(), time.Now()
		for i := range b.N {
			if err := w.Write(kv{words[i%len(words)], int64(i)}); err != nil {
				b.Fatal(err)
			}
			if i%1024 == 0 && time.Since(last) >= time.Second {
				checkpoint()
				last = time.Now()
			}
		}
		checkpoint()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
	})
}

// insertPGBench inserts n rows in transactions of 10 rows.
func insertPGBench(b *testing.B, url string, n int) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	batch := &pgx.Batch{}
	for i := 0; i < n; i += 10 {
		batch.Queue("INSERT INTO items (v, n) SELECT 'value-' || g, g FROM generate_series($1::int, $2::int) g", i, min(n, i+10)-1)
		if batch.Len() == 500 {
			if err := c.SendBatch(ctx, batch).Close(); err != nil {
				b.Fatal(err)
			}
			batch = &pgx.Batch{}
		}
	}
	if err := c.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
}

func createSlot(b *testing.B, url, slot string) uint64 {
	ctx := context.Background()
	cfg, _ := pgconn.ParseConfig(url)
	cfg.RuntimeParams["replication"] = "database"
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	res, err := pglogrepl.CreateReplicationSlot(ctx, c, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil {
		b.Fatal(err)
	}
	lsn, _ := pglogrepl.ParseLSN(res.ConsistentPoint)
	return uint64(lsn)
}

func BenchmarkCDC(b *testing.B) {
	srv := pgtest.Shared(b)
	b.Run("bare-pglogrepl", func(b *testing.B) {
		url := srv.NewDatabase(b)
		benchSetup(b, url)
		lsn := createSlot(b, url, "bare")
		insertPGBench(b, url, b.N)
		ctx := context.Background()
		cfg, _ := pgconn.ParseConfig(url)
		cfg.RuntimeParams["replication"] = "database"
		c, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		b.ResetTimer()
		start := time.Now()
		if err := pglogrepl.StartReplication(ctx, c, "bare", pglogrepl.LSN(lsn), pglogrepl.StartReplicationOptions{
			PluginArgs: []string{"proto_version '1'", "publication_names 'bench_pub'"}}); err != nil {
			b.Fatal(err)
		}
		rels := map[uint32]*pglogrepl.RelationMessage{}
		got := 0
		for got < b.N {
			msg, err := c.ReceiveMessage(ctx)
			if err != nil {
				b.Fatal(err)
			}
			cd, ok := msg.(*pgproto3.CopyData)
			if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
				continue
			}
			xld, _ := pglogrepl.ParseXLogData(cd.Data[1:])
			m, err := pglogrepl.Parse(xld.WALData)
			if err != nil {
				b.Fatal(err)
			}
			switch m := m.(type) {
			case *pglogrepl.RelationMessage:
				rels[m.RelationID] = m
			case *pglogrepl.InsertMessage:
				// The least a consumer does: the values as strings.
				row := make(map[string]any, len(m.Tuple.Columns))
				for i, col := range m.Tuple.Columns {
					row[rels[m.RelationID].Columns[i].Name] = string(col.Data)
				}
				got++
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "changes/s")
	})
	b.Run("weir-reader", func(b *testing.B) {
		url := srv.NewDatabase(b)
		benchSetup(b, url)
		lsn := createSlot(b, url, "weir")
		insertPGBench(b, url, b.N)
		src, err := Changes(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "weir", Publication: "bench_pub"})
		if err != nil {
			b.Fatal(err)
		}
		pos, _ := json.Marshal(position{LSN: lsn})
		b.ResetTimer()
		start := time.Now()
		r := newReader(b, src, []connector.SplitState{{ID: "slot-weir", Position: pos}})
		defer r.Close()
		c := &counter{}
		for c.n < b.N {
			st, err := r.Poll(c)
			if err != nil {
				b.Fatal(err)
			}
			if st == connector.NothingAvailable {
				<-r.Available()
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "changes/s")
	})
}

func benchSetup(b *testing.B, url string) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{"CREATE TABLE items (id serial PRIMARY KEY, v text, n int)", "CREATE PUBLICATION bench_pub FOR TABLE items"} {
		if _, err := c.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

type counter struct {
	n   int
	lag []time.Duration
}

func (c *counter) Emit(Change) { c.n++ }
func (c *counter) EmitAt(ch Change, _ int64) {
	c.n++
	if c.lag != nil || ch.Kind == Insert {
		c.lag = append(c.lag, time.Since(ch.CommitTime))
	}
}

// BenchmarkCDCLag: one single-row transaction per iteration, read by a
// running reader; reports the median and 99th percentile of the time from
// the commit (the server's commit timestamp) to the record's emission.
func BenchmarkCDCLag(b *testing.B) {
	srv := pgtest.Shared(b)
	url := srv.NewDatabase(b)
	benchSetup(b, url)
	src, _ := Changes(CDCOptions{URL: url, Tables: []string{"items"}, Slot: "lag", Publication: "bench_pub", NoSnapshot: true})
	splits, _ := src.Splits(context.Background(), 1)
	r := newReader(b, src, splits)
	defer r.Close()
	c := &counter{lag: []time.Duration{}}
	if _, err := r.Poll(c); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	// The test server runs with synchronous_commit = off, whose WAL
	// writer flushes (and so lets the WAL sender send) every 200 ms.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := conn.Exec(ctx, "INSERT INTO items (v, n) VALUES ('x', $1)", i); err != nil {
			b.Fatal(err)
		}
		for c.n <= i {
			st, err := r.Poll(c)
			if err != nil {
				b.Fatal(err)
			}
			if st == connector.NothingAvailable && c.n <= i {
				<-r.Available()
			}
		}
	}
	b.StopTimer()
	slices.Sort(c.lag)
	if len(c.lag) > 0 {
		b.ReportMetric(float64(c.lag[len(c.lag)/2].Microseconds()), "p50-lag-µs")
		b.ReportMetric(float64(c.lag[len(c.lag)*99/100].Microseconds()), "p99-lag-µs")
	}
}
