// Package checkpoint holds the pure protocol cores of weir's checkpointing
// (DESIGN.md §5): the Coordinator, which decides when checkpoints start and
// when they are complete, aborted, retained or discarded, and the Aligner,
// which aligns barriers on the inputs of one task.
//
// Both are synchronous state machines in the shape of etcd raft's RawNode:
// events in, decisions out. They do no I/O, read no clock, start no
// goroutine and are not safe for concurrent use; a lint test keeps os, net,
// time, sync, io/fs and log out of the package. Time is an input: every
// event carries the caller's `now` in milliseconds, and only
// Coordinator.Tick makes timers fire. Everything else — timers, RPC to tasks,
// checkpoint storage, the checkpoint id counter, logging — belongs to the
// shell that drives them, which makes every protocol path testable with
// scripts (testdata/) and random event sequences.
//
// The commit point is the durable metadata: when every task acknowledged
// checkpoint n, the coordinator asks for chk-n/_metadata to be written
// (WriteMetadata) and counts n complete only when the shell reports it
// durable (MetadataDurable); only then are tasks notified (NotifyComplete)
// and exactly-once sinks commit.
//
// # Usage
//
// The JobManager's checkpoint loop owns a Coordinator:
//
//	c, err := checkpoint.NewCoordinator(opts, counter.Last(), store.Completed())
//	if err != nil {
//		return err
//	}
//	if err := c.Start(nowMs(), tasks, restoredID); err != nil {
//		return err
//	}
//	for {
//		select {
//		case <-ticker.C:
//			c.Tick(nowMs())
//		case r := <-restRequests:
//			r.reply(c.TriggerManual(nowMs(), r.req)) // request id; outcome in RequestDone
//		case m := <-fromTasks:
//			switch m := m.(type) {
//			case ackMsg:
//				c.Ack(nowMs(), m.id, m.task, m.snapshot)
//			case declineMsg:
//				c.Decline(nowMs(), m.id, m.task, m.reason)
//			}
//		case w := <-metadataWritten: // from the goroutine doing the write
//			c.MetadataDurable(nowMs(), w.id, w.err)
//		}
//		for _, d := range c.Decisions() {
//			switch d := d.(type) {
//			case checkpoint.TriggerCheckpoint:
//				counter.Persist(d.ID) // before any barrier leaves
//				sendTriggerToSources(d)
//			case checkpoint.WriteMetadata:
//				go writeMetadata(d, metadataWritten)
//			case checkpoint.NotifyComplete:
//				broadcast(d)
//			case checkpoint.NotifyAborted:
//				broadcast(d)
//				storage.RemoveExclusive(d.ID)
//			case checkpoint.Discard:
//				storage.Remove(d.ID)
//			case checkpoint.DiscardTaskState:
//				storage.Release(d.ID, d.Task)
//			case checkpoint.RequestDone:
//				requests.Finish(d.RequestID, d.ID, d.Err)
//			case checkpoint.FailJob:
//				failJob(d.Reason) // then c.Stop or c.TaskFailed, and c.Start
//			case checkpoint.Completed, checkpoint.Warning:
//				record(d) // statistics, logs
//			}
//		}
//	}
//
// Each task's mailbox loop owns an Aligner and skips blocked channels:
//
//	al, _ := checkpoint.NewAligner(checkpoint.ExactlyOnce, len(inputs))
//	ch, ev := nextEvent(func(ch int) bool { return !al.Blocked(ch) })
//	var acts []checkpoint.Action
//	switch ev := ev.(type) {
//	case barrier:
//		acts = al.OnBarrier(ch, ev.id, nowMs())
//	case cancelMarker:
//		acts = al.OnCancel(ch, ev.id)
//	case endOfPartition:
//		acts = al.OnEndOfPartition(ch, nowMs())
//	}
//	for _, a := range acts {
//		switch a := a.(type) {
//		case checkpoint.Snapshot:
//			snapshotAndForwardBarrier(a) // ack later with a.AlignmentMs
//		case checkpoint.AbortAlignment:
//			forwardCancel(a.ID)
//			if a.Reason != checkpoint.AlignCanceled {
//				decline(a.ID)
//			}
//		}
//	}
package checkpoint
