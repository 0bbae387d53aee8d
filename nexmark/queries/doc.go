// Package queries holds the Nexmark queries as weir DataStream programs, each
// computing the result that the Flink Nexmark project's SQL (qN.sql, quoted
// in the appendix of NEXMARK.md) defines, with the columns of its sink table
// in order.
//
// A Query builds its operators on a stream of nexmark.Event (Events adds the
// source with the watermark of the Flink DDL: dateTime − 4 s) and sends its
// rows to an Output: CSV lines into a sink, or a counting blackhole that
// formats nothing (what Flink's blackhole connector measures).
//
// # Rows
//
// One row per result, the columns in the order of the sink table, separated
// by commas; strings are quoted as RFC 4180 says when they hold a comma, a
// quote or a line break; timestamps are milliseconds since the Unix epoch;
// decimals (0.908 · price) have exactly three digits after the point; SQL
// NULL is an empty field. Updating queries (q4, q9, q15–q19) write a
// changelog: each row starts with its kind, +I (insert), -U (retract the
// previous row of the key), +U (its new value) or -D (delete), and replaying
// a key's rows in order gives its final row. Flink emits the same kinds; it
// may batch updates (mini-batch), weir emits one change per input record.
//
// # Semantics
//
// The regular joins (q3, q4, q9, q20) keep both of their inputs in keyed
// state forever, as Flink's regular join does without state TTL, so their
// results do not depend on which side arrives first. Top-N and
// deduplication (q9, q18, q19) break ties in order of arrival, as Flink's
// rank functions do: with a parallel source, rows with equal sort keys may
// then win in another order from run to run. Aggregates follow Flink's
// types: AVG of a BIGINT is a BIGINT (truncated toward zero). DATE_FORMAT and
// HOUR use UTC.
//
// The windowed queries (q5, q7, q8, q11, q12) are keyed process functions
// with event-time timers (processing-time for q12): a window [start, end)
// fires when the watermark reaches end − 1, and records of windows that
// already fired are dropped as late, as in Flink. q6 is not here: Flink does
// not run it either.
//
// # Usage
//
//	q, err := queries.Lookup("q3")
//	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
//	events := queries.Events(env, nexmark.Source(nexmark.Config{Events: 1_000_000}))
//	q.Build(events, queries.Output{Sink: file.ExactlyOnce("out/q3", file.ExactlyOnceOptions{})})
//	err = env.Execute(ctx, "nexmark-q3")
package queries
