package cluster

import "time"

// Backoff is the delay between a TaskManager's attempts to reach its
// JobManager: Initial after the first failure, doubling up to Max (Flink's
// cluster.registration.initial-timeout and max-timeout, 100 ms and 30 s;
// weir caps at 5 s by default so that a restarted JobManager is found
// again within seconds).
type Backoff struct {
	Initial, Max time.Duration
}

// Delay is the wait before attempt n (0 for the first attempt).
func (b Backoff) Delay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}
