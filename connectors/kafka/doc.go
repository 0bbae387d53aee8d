// Package kafka reads from and writes to Apache Kafka, on the franz-go
// client (kgo, kadm, kmsg), as Flink's KafkaSource and KafkaSink.
//
// # Source
//
// Each partition of the topics (named, or matched by TopicPattern) is a
// split; the offset of the next record is its
// checkpointed position. A job that starts without a checkpoint
// resolves every start offset in Splits: earliest (the default), latest, a
// timestamp, or the committed offsets of a consumer group (earliest for a
// partition without one). With Stop set to StopLatest the source is
// bounded: the end offsets are fixed when the job first starts and kept in
// the split data of every checkpoint, so a restored job stops at the same
// place. Records are read with read_committed isolation unless
// ReadUncommitted is set; transaction markers move the position, so a
// partition whose last entries are markers still ends.
//
//	src := kafka.NewSource(kafka.SourceOptions{
//		Brokers: []string{"127.0.0.1:9092"},
//		Topics:  []string{"events"},
//		Group:   "my-job", // offsets committed for monitoring
//	}, kafka.JSON[Event]())
//	events := env.FromSource("events", src, strategy.WithIdleness(time.Minute))
//
// A reader emits each partition's records through its own split output
// (connector.SplitOutputs) with the record's timestamp, so watermarks are
// tracked per partition; a watermark strategy's idleness keeps a silent
// partition from holding the watermark back, and a partition that reaches
// its stop offset is released. Deserializers are Bytes, String and JSON; a
// record the deserializer rejects fails the job, or goes to
// SourceOptions.OnDeserializeError (a dead-letter topic, a log) when that
// is set: it is never dropped silently.
//
// Offsets go to the group (if Group is set) for monitoring only: the
// checkpoint is the truth. The offsets of checkpoint n are committed when
// n completes (the reader is a connector.CheckpointListener), as Flink's
// KafkaSource does.
//
// # Partition discovery
//
// An unbounded source finds partitions added to its topics, and topics
// created later that TopicPattern matches, every DiscoveryInterval
// (default 5 minutes, as Flink's partition.discovery.interval.ms;
// negative turns it off), and once when each reader starts. A partition
// found is read from its earliest offset, whatever Start says. A bounded
// source (StopLatest) reads the partitions of its first start only, as
// Flink's.
//
// There is no coordinator: every reader lists the partitions itself and
// reads those the owner rule gives its subtask, (h + p) mod parallelism
// for partition p of a topic whose FNV-1a hash is h (Source.SplitOwner),
// which spreads a topic's partitions evenly. The runtime deals the
// partitions of the first start, and those of a restored checkpoint at
// any parallelism, by the same rule (connector.SplitDiscoverer), so a
// partition is read by exactly one subtask: from its checkpointed offset
// if the checkpoint holds it, from its earliest offset if not (it was
// added after the checkpoint, and what a failed run read of it was rolled
// back with the run). A reader assigned no partition stays up to take
// partitions added later; with more subtasks than partitions, give the
// watermark strategy an idleness timeout, so that such a subtask does not
// hold the watermark back. A partition is read about a second after
// discovery finds it: the client waits for its metadata refresh and for
// the fetch in flight, and a discovering reader sets kgo.MetadataMinAge
// and kgo.FetchMaxWait to 500 ms for that (franz-go's defaults are 5 s;
// ClientOptions can set them otherwise).
//
// A restored job checks that the partitions of its checkpoint still exist
// (CheckSplits does so before a job starts) and fails naming the topic
// otherwise.
//
// # Sink
//
// Three guarantees, as Flink's DeliveryGuarantee. None hands records to
// the producer. AtLeastOnce (the default) flushes them at every
// checkpoint. ExactlyOnce writes the records between two checkpoints in a
// transaction per subtask with the transactional id
// "prefix-subtask-checkpoint": at the checkpoint the writer flushes the
// transaction and records its id, producer id and epoch in the checkpoint
// (the committable); when the checkpoint completes, and again after a
// restore from it, Commit ends the transaction with a raw EndTxn request
// carrying that producer id and epoch (franz-go has no resumeTransaction).
// Committing twice succeeds. A commit that fails because the broker
// aborted the transaction (it outlived its timeout, or another producer
// took its id) fails the job with an error saying data may be lost.
//
// Transactions of the prefix that no checkpoint recorded (those of a
// process that died) are aborted when the job starts: by Cleanup after a
// restore, and by each writer for its own subtask on a fresh start, so that
// read_committed consumers are not held back until the transaction
// timeout. The prefix must therefore be unique to the job.
// TransactionTimeout defaults to 10 minutes, under the broker's default
// transaction.max.timeout.ms of 15 minutes (Flink's one-hour default fails
// against a default broker); the sink checks it against the broker's
// limit, and against CommitDeadline (the checkpoint timeout plus the
// restart delay), when it starts, with an error naming both figures.
//
//	sink := kafka.NewSink(kafka.SinkOptions{
//		Brokers:               []string{"127.0.0.1:9092"},
//		Topic:                 "counts",
//		Guarantee:             kafka.ExactlyOnce,
//		TransactionalIDPrefix: "counts-job",
//	}, kafka.StringValues())
//
// Readers of an exactly-once topic must use read_committed isolation;
// read_uncommitted ones also see the records of aborted transactions.
//
// # What it was tested against
//
// The connector was tested against franz-go's kfake (pkg/kfake at
// v0.0.0-20260918054303-01f206a7e32c), in process and as a broker process
// of its own, not against a JVM Kafka broker. kfake speaks the protocol of
// Kafka 4.x, and franz-go negotiated the newest versions with it (among
// them Produce v13, InitProducerID v5, ListTransactions v2 and EndTxn v5,
// with KIP-890's epoch bump per transaction). The connector needs a broker of Kafka 3.0 or later:
// transactions and read_committed fetches (0.11+), DescribeConfigs for
// transaction.max.timeout.ms, and ListTransactions (KIP-664, 3.0) to find
// the transactions to abort. Re-committing a transaction that was already
// committed relies on the broker treating a repeated EndTxn as a retry:
// with EndTxn v5 (Kafka 4.0+) the broker accepts the epoch one below its
// own, which kfake implements; older brokers accept the same epoch, which
// is untested here.
package kafka
