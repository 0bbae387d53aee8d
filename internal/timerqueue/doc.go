// Package timerqueue holds the mechanics of the timers of keyed
// operators: a queue that orders timers by timestamp and finds one by its
// id for deletion, and the encoding under which a timer is stored in keyed
// state (its timestamp, then its namespace), so that timers are
// checkpointed and restored by key group with the rest of the state.
//
// The package is pure: no clock, no state backend, no goroutines. The
// timer service of the root package owns one queue per time domain,
// mirrors every timer in a keyed value state named after StateNames, and
// fires what PopDue returns on the task goroutine.
//
// # Usage
//
//	q := timerqueue.New[string, timerqueue.Void]()
//	q.Add(timerqueue.ID[string, timerqueue.Void]{Key: "k", TS: 10})
//	for id, ok := q.PopDue(watermark); ok; id, ok = q.PopDue(watermark) {
//		fire(id.Key, id.NS, id.TS)
//	}
package timerqueue
