// Package collect is a sink for tests: it gathers the records of every
// subtask into memory, where the test reads them.
//
// New returns a Collector, which appends each record to its results as soon
// as a writer receives it (at-least-once: after a restore, records are
// collected again).
//
// Transactional returns a TransactionalCollector, the two-phase-commit
// variant that exactly-once tests use. Its writers implement
// connector.PreCommitter and the collector implements connector.Committer:
//
//   - Write adds the record to the writer's open transaction.
//   - PreCommit(n) closes the open transaction, parks its records in the
//     collector under an id, and returns the id as the committable.
//   - Commit moves the parked records of each committable into the results,
//     once: committing a committable again changes nothing.
//   - Records of a transaction that is never committed (aborted, or open
//     when the writer closes) never reach the results.
//
// # End of input
//
// The runtime is to take a final checkpoint when bounded input ends (see
// DESIGN.md §5), whose commit makes the last records visible. Until it does,
// no checkpoint follows Flush(true), so a transactional writer commits its
// open transaction there: on Flush(true) the records written since the last
// PreCommit go straight into the results. Transactions pre-committed before
// still wait for their Commit.
//
// Both collectors are safe for concurrent use: every subtask's writer and
// the test may use one collector at the same time. Results are in the order
// they arrived (Collector) or were committed (TransactionalCollector); the
// order of each subtask's records is kept, the interleaving of subtasks is
// not defined.
//
// # Usage
//
//	out := collect.Transactional[string]()
//	words.SinkTo("collect", out)
//	if err := env.Execute(ctx, "test"); err != nil { … }
//	got := out.Results()
//	slices.Sort(got)
//	if !slices.Equal(got, want) { … }
package collect
