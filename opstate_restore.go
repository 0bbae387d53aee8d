package weir

import (
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/restart"
)

// restoreVeto is the job's restart strategy, except after a deployment found
// that the job cannot take the state it restores (checkRestoreCoverage:
// another MaxParallelism, state of an operator the job lacks): the job then
// fails at once with that error. Every retry would deploy from the same
// checkpoint and fail alike, forever with the default strategy. (The job
// master only sees a failed attempt; cancelling the job instead would
// discard its retained checkpoints.)
type restoreVeto struct {
	restart.Strategy
	vetoed atomic.Bool
}

func (v *restoreVeto) veto() { v.vetoed.Store(true) }

// OnFailure implements restart.Strategy.
func (v *restoreVeto) OnFailure(now time.Time) (bool, time.Duration) {
	if v.vetoed.Load() {
		return false, 0
	}
	return v.Strategy.OnFailure(now)
}
