package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/postgres"
	"github.com/weirstream/weir/internal/testutil/pgtest"
)

// TestJobConfirmsSlotAfterCheckpoints runs a real job: the runtime tells
// the CDC reader of completed checkpoints (connector.CheckpointListener),
// and the slot's confirmed position follows; the exactly-once sink in the
// same job commits through the runtime's Committer.
func TestJobConfirmsSlotAfterCheckpoints(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{"CREATE TABLE src (id int PRIMARY KEY, v text)", "INSERT INTO src SELECT g, 'v' || g FROM generate_series(1, 100) g",
		"CREATE TABLE dst (id int, v text)"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	src, err := postgres.Changes(postgres.CDCOptions{URL: url, Tables: []string{"src"}, Slot: "job", StatusInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID int32  `pg:"id"`
		V  string `pg:"v"`
	}
	rows, _ := postgres.StructMapper[row]()
	sink, err := postgres.NewSink(postgres.SinkOptions[row]{URL: url, Table: "dst", Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	opts := weir.Options{Parallelism: 1, JobID: "pgjob"}
	opts.Checkpointing.Interval = 50 * time.Millisecond
	opts.Checkpointing.Storage = "memory://" + t.Name()
	env := weir.NewEnvironment(opts)
	changes := env.FromSource("cdc", src).UID("cdc")
	out := changes.Map("row", func(ch postgres.Change) row { return row{ch.New["id"].(int32), ch.New["v"].(string)} })
	out.SinkTo("pg", sink).UID("pg")
	n := collect.New[postgres.Change]()
	changes.SinkTo("collect", n).UID("collect")
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	job, err := env.ExecuteAsync(jctx, "pgjob")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); job.Wait() }()
	// The snapshot is read (the slot exists) before the next rows come,
	// which only the stream can bring.
	for start := time.Now(); n.Len() < 100; time.Sleep(10 * time.Millisecond) {
		select {
		case <-job.Done():
			t.Fatalf("job ended: %v", job.Wait())
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("snapshot: %d rows of 100 after 30 s", n.Len())
		}
	}
	var lsn string
	if _, err := c.Exec(ctx, "INSERT INTO src SELECT g, 'v' || g FROM generate_series(101, 150) g"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var confirmed bool
		var committed int
		if err := c.QueryRow(ctx, "SELECT confirmed_flush_lsn >= $1::pg_lsn, (SELECT count(*) FROM dst) FROM pg_replication_slots WHERE slot_name = 'job'", lsn).Scan(&confirmed, &committed); err != nil && err != pgx.ErrNoRows { // no slot yet
			t.Fatal(err)
		}
		if confirmed && committed == 150 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: slot confirmed past %s: %v; rows committed: %d of 150; collected %d", lsn, confirmed, committed, n.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := n.Len(); got != 150 {
		t.Fatalf("collected %d changes, want 150", got)
	}
}
