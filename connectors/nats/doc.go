// Package nats reads from and writes to NATS JetStream streams, on
// github.com/nats-io/nats.go and its jetstream package.
//
// # Source
//
// Strings (and SourceOf, with a decode function) reads a stream, or the
// messages of the stream that match SourceOptions.Subjects. Each subject
// is one split (no subjects: the whole stream is one split), read by an
// ephemeral ordered consumer that starts at the split's position with
// DeliverByStartSequence. The position is the stream sequence after the
// last record emitted, so a restored job goes on with the next message:
// nothing is skipped or read twice. Nothing is acknowledged (ordered
// consumers need no acks): the checkpoint is the source of truth, and the
// stream keeps its messages for as long as its own retention says. The
// first run starts at SourceOptions.StartSequence (default: the first
// message).
//
// With SourceOptions.Bounded the source ends: Splits (which runs once,
// when a job starts without a checkpoint) records the stream's last
// sequence in each split, and a split ends at that sequence, or as soon
// as no message matching its subject is left before it. The stop
// sequence is in the checkpoint, so a restored job stops at the same
// message however much the stream grew meanwhile.
//
// Records carry event time when SourceOptions.EventTime says where it is:
// the time the server stored the message, or a header holding
// milliseconds since the Unix epoch. Each split's records go through the
// runtime's per-split outputs, so watermarks follow the slowest split;
// a split without new messages is idle for the runtime's idleness timeout
// (WatermarkStrategy.WithIdleness) and then no longer holds the watermark
// back.
//
// A reader connects on its first Poll and reconnects for as long as it
// takes when the server goes away (the ordered consumer is then
// recreated at the sequence after the last message delivered). Check
// connects once and reports, in one line, an unreachable server, a
// missing stream, or a subject outside the stream.
//
// # Sink
//
// StringSink (and SinkOf, with an encode function) publishes to a
// subject, which must belong to a stream. With the default Delivery,
// ExactlyOnce, a writer keeps the records of the current checkpoint and
// its PreCommit hands them over as the checkpoint's committable; the
// Sink's Commit publishes them once the checkpoint completes, each
// (without atomic batches, see below) with the Nats-Msg-Id
//
//	<job>.<subtask>.<writer token>.<checkpoint>.<index in the checkpoint>
//
// (the writer token is random per writer and stored in the committable),
// and waits for every publish acknowledgement. A restored job commits the
// committables of its checkpoint again: the same records with the same
// IDs, which the stream's duplicate window drops.
//
// Why the records wait for the checkpoint instead of being published as
// they come and acknowledged at the snapshot: a restored job replays the
// records after its checkpoint, but not with the same checkpoint
// boundaries (checkpoints are timed, and the records of several inputs
// interleave differently), so the i-th record of checkpoint n in the
// failed run is in general another record in the restored one. IDs of the
// form (checkpoint, i) given to records published early would then drop
// new records and keep old ones. Publishing the stored records of a
// completed checkpoint makes the IDs name the same records every time.
// The cost: output becomes visible when its checkpoint completes (as with
// any exactly-once sink), and the records of a checkpoint are held in
// memory and in the checkpoint's metadata until they are committed, so a
// checkpoint interval should keep them to a few megabytes per subtask.
//
// The guarantee, plainly: each record is stored in the stream exactly
// once provided that a commit interrupted by a failure is repeated (by
// the restored job) within the stream's duplicate window (its Duplicates
// setting, 2 minutes by default) of its first attempt. A repeat after the
// window stores the records of that one checkpoint again. Only the time
// from a failure during a commit to the restored job's commit counts; the
// checkpoint interval does not, since nothing is published before its
// checkpoint completes. The sink checks the stream's window when it
// connects and logs a warning when it is shorter than
// SinkOptions.RecoveryTime (default 1 minute).
//
// Where the stream allows atomic batch publish (its AllowAtomicPublish,
// nats-server 2.12 and later), Commit publishes each checkpoint's records
// as atomic batches (Nats-Batch-Id, Nats-Batch-Sequence,
// Nats-Batch-Commit) of at most SinkOptions.AtomicBatchSize messages
// (default 1000, the server's default max_batch_size): the server stores
// a batch whole or not at all. A batch is deduplicated as a unit: only its
// first message carries a Nats-Msg-Id,
//
//	<job>.<subtask>.<writer token>.<checkpoint>.0.b<index of the batch's first record>
//
// and the server, which checks every message ID of a batch before it
// stores any of it, rejects a repeated batch whole as one that holds a
// duplicate, which Commit counts as done. The server thus tracks one ID
// per batch instead of one per record, which is most of the cost of
// exactly-once publishing (see BENCHMARKS.md). The batch size is fixed in
// the committable, so a repeated commit cuts the same batches whatever
// the restored job's options say; a committable pre-committed for atomic
// batches fails to commit, with an error saying so, if the stream no
// longer allows atomic publish. A checkpoint of up to AtomicBatchSize
// records per subtask is thus all-or-nothing; a larger one is published as
// several batches, each all-or-nothing and deduplicated on its own.
// A batch during which the connection to the server was lost (a server
// restart: the reply to its commit may never come) is published again at
// once under a new batch ID, which its message ID makes harmless, instead
// of waiting out SinkOptions.AckTimeout. SinkOptions.Atomic turns atomic
// batches off or requires them.
//
// A commit cannot be undone: published messages stay in the stream. (The
// runtime's contract for sinks whose commits cannot be undone is being
// defined separately; this sink is one.)
//
// Delivery AtLeastOnce publishes each record as it comes and waits for
// the acknowledgements at every checkpoint (Flush): records after the
// last checkpoint are published again after a restore. Use it for jobs
// without checkpoints.
//
// # Usage
//
//	lines := env.FromSource("in", nats.Strings("nats://127.0.0.1:4222", "EVENTS",
//		nats.SourceOptions{Subjects: []string{"events.>"}, EventTime: nats.MessageTime}))
//	counts.SinkTo("out", nats.SinkOf("nats://127.0.0.1:4222", "counts", func(c Count) nats.Message {
//		return nats.Message{Data: []byte(c.String())}
//	}, nats.SinkOptions{}))
//
// From the command line:
//
//	weir run wordcount --input 'nats://127.0.0.1:4222/EVENTS?subject=events.text&stop=latest' \
//		--output nats://127.0.0.1:4222/counts --checkpoint-interval 1s --checkpoint-dir ck
package nats
