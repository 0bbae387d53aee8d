// Package connector defines the contracts between weir and the systems it reads
// from and writes to: split-based sources whose read positions can be
// snapshotted and rewound, and sinks whose writers may take part in the
// two-phase commit of a checkpoint.
//
// Connectors (packages under connectors/) depend on this package only, never on
// the runtime. The runtime drives every method of a Reader or a Writer from the
// one goroutine of the task that owns it, so implementations need no locks
// unless they start goroutines of their own.
//
// # Exactly-once
//
// A source is exactly-once when Reader.Snapshot returns positions from which a
// new reader, given the same splits, emits exactly the records that followed the
// snapshot. A sink is exactly-once when its writer implements PreCommitter and
// its Sink implements Committer: records written between two checkpoints become
// visible only when the checkpoint that pre-committed them completes.
//
// A restore from a checkpoint older than others that completed (a fallback
// past a damaged one, an older checkpoint or savepoint given by path) would
// repeat what the newer ones committed. A Committer that owns its output
// implements RollbackCommitter and undoes it; for one that cannot (Kafka,
// NATS), the runtime refuses such a restore unless the job allows repeated
// output.
//
// # Splits found at run time
//
// A source whose splits appear while the job runs (Kafka partitions, files
// of a watched directory) implements SplitDiscoverer: its readers discover
// splits themselves, and one owner rule, applied by the runtime to the
// splits of the first start and of every restore and by each reader to
// what it discovers (SplitClaims), makes every split be read by exactly
// one subtask at any parallelism.
package connector
