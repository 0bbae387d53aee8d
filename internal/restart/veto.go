package restart

import (
	"sync/atomic"
	"time"
)

// Vetoable is a job's restart strategy, except after a deployment found
// that the job cannot take the state it restores (another MaxParallelism,
// state of an operator the job lacks): once Veto is called the job fails
// at once. Every retry would deploy from the same checkpoint and fail
// alike, forever with the default strategy. (The job master only sees a
// failed attempt; cancelling the job instead would discard its retained
// checkpoints.) Veto may be called from any goroutine.
type Vetoable struct {
	Strategy
	vetoed atomic.Bool
}

// Veto makes every later failure final.
func (v *Vetoable) Veto() { v.vetoed.Store(true) }

// OnFailure implements Strategy: the wrapped strategy's answer, or no
// restart once vetoed.
func (v *Vetoable) OnFailure(now time.Time) (bool, time.Duration) {
	if v.vetoed.Load() {
		return false, 0
	}
	return v.Strategy.OnFailure(now)
}
