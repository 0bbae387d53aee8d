// Package watermark holds the pure cores of weir's event time (DESIGN.md
// §9): watermark strategies and generators, the per-split watermarks of a
// source subtask (Splits), and the merging of the watermarks arriving on the
// input channels of a task (Merger).
//
// A watermark t is a promise, as in Flink: no record with a timestamp <= t
// follows on this stream. Times are int64 epoch milliseconds. MinWatermark
// means "none yet"; MaxWatermark ends event time (a bounded input is read).
// Watermarks travel in band with records, as runtime.Watermark events, and
// so does the watermark status: an idle stream sends no records for now
// and does not hold back the watermark of the tasks that read it.
//
// Every type here is a synchronous state machine in the shape of the
// checkpoint package's: events in, Output out. They read no clock, start no
// goroutine, do no I/O and are not safe for concurrent use; a lint test
// keeps os, net, time, sync, io/fs and log out of the package. Processing
// time is an input: Splits.Periodic takes the caller's `now`, and idleness is
// measured with it and nothing else, so every path is testable with scripts
// (testdata/) and random event sequences.
//
// The pieces:
//
//   - Strategy (Flink's WatermarkStrategy) makes one Generator per split:
//     BoundedOutOfOrderness(maxDelay) emits maxTimestampSeen - maxDelay - 1
//     on periodic calls, Monotonous is the same with no delay, NoWatermarks
//     emits none, ForGenerator takes a custom (periodic or punctuated)
//     Generator. WithIdleness(timeout) marks an input idle after timeout
//     without records.
//   - Splits combines the splits of one source subtask: the least watermark
//     of its active splits; finished splits are forgotten; all idle makes
//     the subtask idle.
//   - Merger combines the input channels of a task the same way; a channel
//     that ended is removed; MaxWatermark passes once every channel reached
//     it or ended.
//
// Both send only what changes (Output): an active status, a watermark that
// advances, an idle status. Sent watermarks never go backwards.
//
// # Usage
//
// A source task owns a Splits, fed with the timestamp of every record its
// reader emits and ticked every DefaultInterval on the task's timer:
//
//	ws, err := watermark.NewSplits(strategy) // e.g. BoundedOutOfOrderness(5000).WithIdleness(60_000)
//	if err != nil {
//		return err
//	}
//	send := func(out watermark.Output) {
//		if out.BecameActive {
//			broadcast(statusEvent(watermark.Active))
//		}
//		if out.Advanced {
//			chain.ProcessWatermark(out.Watermark) // fires event-time timers in the chain
//			broadcast(runtime.Event{Kind: runtime.Watermark, Timestamp: out.Watermark})
//		}
//		if out.BecameIdle {
//			broadcast(statusEvent(watermark.Idle))
//		}
//	}
//	// The reader's splits arrive (new or restored):
//	for _, sp := range splits {
//		out, err := ws.AddSplit(sp.ID)
//		if err != nil {
//			return err
//		}
//		send(out)
//	}
//	// Each record the reader emits, from split id (Output is empty unless
//	// the split was idle or a punctuated generator emits):
//	out := ws.OnEvent(id, ts)
//	send(watermark.Output{BecameActive: out.BecameActive})
//	emit(rec, ts)
//	send(watermark.Output{Advanced: out.Advanced, Watermark: out.Watermark})
//	// A split read to its end:
//	send(ws.FinishSplit(id))
//	// The periodic timer, every watermark.DefaultInterval ms:
//	send(ws.Periodic(clock.NowMs()))
//	// The reader reports EndOfInput of a bounded source (or stop with drain):
//	send(ws.EndOfInput()) // MaxWatermark, then end of partition
//
// OnEvent takes no `now`: the record path reads no clock. A record makes its
// split active again at once; Periodic is what notices silence.
//
// A task with inputs owns a Merger with one channel per input channel, fed
// by the control events it reads; it forwards what the merger says, not
// what it reads. (A two-input operator has one Merger per input, whose
// Outputs feed a third Merger with two channels: its watermark is the least
// of the two inputs', as in Flink.)
//
//	m, err := watermark.NewMerger(len(inputs))
//	if err != nil {
//		return err
//	}
//	ch, ev := nextEvent()
//	switch ev.Kind {
//	case runtime.Watermark:
//		send(m.OnWatermark(ch, ev.Timestamp))
//	case watermarkStatus:
//		send(m.OnStatus(ch, ev.Status))
//	case runtime.EndOfPartition:
//		send(m.OnEndOfPartition(ch)) // also given to the checkpoint Aligner
//	}
//
// Watermarks are not part of checkpoints, as in Flink: after a restore the
// generators start again from MinWatermark.
package watermark
