// Package datagen provides sources that compute their records instead of
// reading them: a sequence of numbers (Sequence), the values of a function of
// the record's index (Generator) and the elements of a slice (FromSlice). They
// serve examples, tests and benchmarks.
//
// Every datagen source is exactly-once: a record is a pure function of its
// index, and a reader's position in a split is the index of the next record,
// so a job restored from a checkpoint generates exactly the records that
// followed it.
//
// # Splits
//
// A bounded source of n records cuts the indexes [0, n) into one contiguous
// range per subtask (ranges that would be empty are left out, so a source of
// three records run with parallelism four has three splits). Within a split,
// records come in index order.
//
// An unbounded source cannot be cut into contiguous ranges, so its split k of
// p generates the indexes k, k+p, k+2p, … : with equal rates the subtasks
// advance through the index space together.
//
// A split's Data is its range (start, end, step as three big-endian int64s,
// end -1 when unbounded) and its Position the index of its next record (one
// big-endian int64), so a checkpoint taken with one parallelism restores with
// another.
//
// # Rate limit
//
// Options.RecordsPerSecond caps the rate of the whole source; each of the p
// subtasks generates at most RecordsPerSecond/p records per second. A reader
// that is ahead of its schedule returns NothingAvailable from Poll, and its
// Available channel fires when the next record is due. A reader that fell
// behind (because its task was busy or backpressured) catches up at most one
// second's worth of records, in batches of at most Options.BatchSize.
//
// # Usage
//
//	numbers := datagen.Sequence(1, 1_000_000)
//
//	events := datagen.Generator(-1, func(i int64) Event {
//		return Event{ID: i, User: users[i%int64(len(users))]}
//	}).WithOptions(datagen.Options{RecordsPerSecond: 5000})
//
//	words := datagen.FromSlice([]string{"to", "be", "or", "not", "to", "be"})
package datagen
