// Package postgres connects weir to PostgreSQL at both ends: a sink that
// writes a stream into a table exactly once, with two-phase commit, and a
// change-data-capture source that reads a table's rows and then its
// changes through logical replication. It depends on the connector
// contract only, and on github.com/jackc/pgx/v5 and
// github.com/jackc/pglogrepl.
//
// # Sink
//
// NewSink writes records as rows: a RowMapper (StructMapper for a struct
// with `pg:"column"` tags, FuncMapper for a function) gives each record's
// values. Each subtask writes the rows of a checkpoint interval in one
// transaction, batched (COPY in Append mode, multi-row INSERT ... ON
// CONFLICT (key) DO UPDATE in Upsert mode), and at the checkpoint runs
// PREPARE TRANSACTION 'prefix-subtask-checkpoint'. When the checkpoint
// completes, the Committer runs COMMIT PREPARED; after a failure the
// restored job commits the transactions its checkpoint recorded (an
// already committed one is fine) and rolls back the other prepared
// transactions of the prefix, found in pg_prepared_xacts. So rows appear
// exactly once, and only when the checkpoint that covers them completes
// (as with Flink's JDBC sink in XA mode). A server restart between PREPARE
// and COMMIT PREPARED loses nothing: prepared transactions survive it, and
// the commit reconnects (within RetryTimeout).
//
// The server needs max_prepared_transactions > 0 (at least twice the
// sink's parallelism); the sink refuses to start otherwise. Where that
// cannot be changed, Guarantee AtLeastOnce commits a plain transaction at
// each checkpoint instead: after a failure the rows since the last
// checkpoint are written again (harmless in Upsert mode).
//
// In Upsert mode the rows of an interval wait in the writer, one per key,
// until the checkpoint: a row of a key that the previous checkpoint's
// prepared transaction still locks would otherwise block the writer's
// goroutine, which is the one that commits that transaction.
//
//	rows, _ := postgres.StructMapper[Count]() // type Count struct{ Word string `pg:"word"`; N int64 `pg:"count"` }
//	sink, err := postgres.NewSink(postgres.SinkOptions[Count]{
//		URL:   "postgres://weir@db:5432/app",
//		Table: "counts",
//		Rows:  rows,
//		Mode:  postgres.Upsert, Key: []string{"word"},
//	})
//	counts.SinkTo("pg", sink).UID("pg")
//
// # Change data capture
//
// NewCDC (or Changes, for the Change records themselves) reads the tables
// through a publication (created if missing, FOR TABLE the tables) and a
// logical replication slot with the pgoutput plugin (created if missing).
// At the first start it creates the slot with an exported snapshot and
// reads the tables' rows in that snapshot (Kind Read), then streams every
// committed change from the slot's consistent point, so that no change is
// missed or read twice between the two. Changes are typed: Insert (New),
// Update (New, and Old where the table's replica identity gives it),
// Delete (Old), with the table, the commit LSN and the commit time, which
// is the record's event time.
//
// The position in a checkpoint is an LSN (plus the number of changes read
// of a transaction that a checkpoint cut). The slot's confirmed flush
// position advances only when a checkpoint covering it completes: the
// reader implements connector.CheckpointListener, which the runtime calls
// after the checkpoint is complete. (Confirming at the snapshot would lose
// the changes in between if that checkpoint failed.) Standby status
// updates every StatusInterval keep the slot alive while nothing changes.
// StopAtCurrent makes the source bounded: it ends at the WAL position of
// the first start, kept in the checkpoint.
//
//	src, err := postgres.Changes(postgres.CDCOptions{
//		URL:    "postgres://replicator@db:5432/app",
//		Tables: []string{"public.orders"},
//		Slot:   "weir_orders",
//	})
//	changes := env.FromSource("orders", src).UID("orders")
//
// Limits: the initial snapshot is read in the reader's first poll, in one
// go, so that no checkpoint falls inside it (as in Flink CDC's
// non-incremental snapshot): checkpoints wait until it is read. A
// checkpoint taken before that first poll holds no position, and a job
// restored from it starts the capture over (a new slot and snapshot). A
// fresh start (no checkpoint) drops and recreates an existing slot of that
// name that no client holds. One subtask reads the slot. Creating a slot
// waits for every transaction open on the server at that moment to end,
// prepared transactions included: a prepared transaction left behind (see
// pg_prepared_xacts) holds it up.
//
// # Command line
//
// `weir run wordcount` takes --output postgres://USER@HOST:PORT/DB?table=T
// (columns word text, count bigint; mode=upsert keeps each word's latest
// count) and --input postgres://USER@HOST:PORT/DB?table=T&column=C
// (&stop=current ends at the first start's WAL position).
package postgres
