// Package restart holds the restart strategies of a failed job (DESIGN.md
// §8), modelled on Flink's: none, fixed-delay, exponential-delay (the
// default) and failure-rate, with Flink 1.19's defaults.
//
// The package is pure: a Strategy is told each failure with the caller's
// `now` and answers whether to restart and after how long. It reads no
// clock, sleeps on no timer and starts no goroutine; exponential-delay's
// jitter comes from an injected random source. The job's failover loop owns
// one Strategy per job and does the waiting.
//
// # Usage
//
//	opts, err := restart.Parse(flagValue) // "fixed-delay:attempts=3,delay=10s"
//	strategy, err := restart.New(opts, nil)
//	for {
//		err := runJobFromLatestCheckpoint(ctx)
//		if err == nil || ctx.Err() != nil {
//			return err
//		}
//		ok, delay := strategy.OnFailure(clock.Now())
//		if !ok {
//			return fmt.Errorf("job failed, restart strategy %s gives up: %w", strategy, err)
//		}
//		logger.Warn("job failed, restarting", "delay", delay, "err", err)
//		select {
//		case <-clock.After(delay):
//		case <-ctx.Done():
//			return ctx.Err()
//		}
//	}
package restart
