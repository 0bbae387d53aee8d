// Package jobstate is the pure lifecycle core of a job (DESIGN.md §5, STYLE.md
// rule 1): the state machine the JobMaster feeds with what happened to the
// job's attempt and whose Actions it carries out.
//
//	Created ──► Running ──► Finishing ──► Finished
//	               │  ╲          │
//	               │   ╲         ▼
//	               │    ╲──► Stopping ──► Finished
//	               ▼
//	          Restarting ──► Running …
//	any live state ──► Cancelled | Failed
//
// Running is an attempt whose tasks run; Finishing is an attempt whose
// sources all read their bounded input and whose final checkpoint is being
// taken (the sources end once it completed); Stopping is an attempt whose
// stop-with-savepoint completed (the tasks are told to stop, and cancelled
// after a grace period); Restarting is the wait between a failed attempt and
// the next (the restart delay, then the choice of the restore point). The
// legal transitions are declared in one table (transitions); a Step that would
// break it panics, since it is a bug of this package, not bad input.
//
// Like internal/checkpoint, the package does no I/O, reads no clock, starts
// no goroutine and is not safe for concurrent use; a lint test keeps os,
// net, time, sync, io/fs and log out of it. Time is an input: every Step takes
// the caller's now in milliseconds, and timers are Actions the shell arms
// (ArmRestartTimer, ArmStopGrace) and reports back as events when they fire.
// The checkpoint coordinator is not part of it: the shell drives both and
// translates the coordinator's decisions that matter to the lifecycle (a
// checkpoint completed, the final checkpoint's or a stop's request done,
// FailJob) into Events.
//
// # Usage
//
//	m := jobstate.New(jobstate.Options{RetainOnCancel: retain})
//	acts := m.Step(jobstate.Start{}, nowMs())
//	for len(acts) > 0 {
//		var next []jobstate.Action
//		for _, a := range acts {
//			switch a := a.(type) {
//			case jobstate.Deploy:
//				tasks, err := gateway.Deploy(ctx, a.Attempt, restore)
//				if err != nil {
//					next = append(next, m.Step(jobstate.DeployFailed{Err: err}, nowMs())...)
//				} else {
//					next = append(next, m.Step(jobstate.Deployed{Sources: tasks.Sources()}, nowMs())...)
//				}
//			case jobstate.TriggerFinalCheckpoint:
//				requests.final = coordinator.TriggerManual(nowMs(), checkpointRequest)
//			case jobstate.ConsultRestart:
//				ok, delay := strategy.OnFailure(clock.Now())
//				next = append(next, m.Step(jobstate.RestartDecided{Restart: ok, DelayMs: delay.Milliseconds()}, nowMs())...)
//			case jobstate.ArmRestartTimer:
//				restartTimer = clock.NewTimer(time.Duration(a.DelayMs) * time.Millisecond)
//			case jobstate.End:
//				return a.Err
//			// … QuiesceCheckpoints, ResumeCheckpoints, StopCheckpoints,
//			// FinishSources, StopTasks, ArmStopGrace, CancelTasks,
//			// Settle, ResolveRestartPoint, DiscardRetained
//			}
//		}
//		acts = next
//	}
package jobstate
