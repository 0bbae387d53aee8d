package jobstate

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestRandomEvents feeds random event sequences: no Step may break the
// transition table (moveTo panics), a terminal state never changes, End is
// emitted exactly once and only on entering a terminal state, and Deploy
// numbers attempts 0, 1, 2, … in order.
func TestRandomEvents(t *testing.T) {
	boom := errors.New("boom")
	events := []func(r *rand.Rand) Event{
		func(*rand.Rand) Event { return Start{} },
		func(r *rand.Rand) Event { return Deployed{Sources: r.IntN(3)} },
		func(r *rand.Rand) Event { return DeployFailed{Err: boom, JobCancelled: r.IntN(4) == 0} },
		func(r *rand.Rand) Event { return SourceFinished{Task: []string{"s0", "s1", "s2"}[r.IntN(3)]} },
		func(r *rand.Rand) Event {
			var err error
			if r.IntN(2) == 0 {
				err = boom
			}
			return FinalCheckpointDone{Err: err, CoordinatorRunning: r.IntN(2) == 0}
		},
		func(*rand.Rand) Event { return StopRequested{} },
		func(r *rand.Rand) Event {
			if r.IntN(2) == 0 {
				return StopRequestDone{Err: boom}
			}
			return StopRequestDone{}
		},
		func(r *rand.Rand) Event {
			return CheckpointCompleted{Savepoint: r.IntN(2) == 0, StopAfter: r.IntN(3) == 0}
		},
		func(*rand.Rand) Event { return FailJob{Reason: "exceeded"} },
		func(*rand.Rand) Event { return Cancel{} },
		func(*rand.Rand) Event { return StopGraceExpired{} },
		func(r *rand.Rand) Event {
			var err error
			if r.IntN(2) == 0 {
				err = boom
			}
			return AttemptEnded{Err: err, Cancellation: r.IntN(2) == 0, JobCancelled: r.IntN(5) == 0}
		},
		func(r *rand.Rand) Event { return RestartDecided{Restart: r.IntN(3) > 0, DelayMs: 10} },
		func(*rand.Rand) Event { return RestartTimerFired{} },
		func(r *rand.Rand) Event {
			if r.IntN(4) == 0 {
				return RestartPointResolved{Err: boom}
			}
			return RestartPointResolved{}
		},
	}
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		m := New(Options{})
		ends, nextAttempt := 0, 0
		for i := 0; i < 200; i++ {
			before := m.State()
			e := events[r.IntN(len(events))](r)
			acts := m.Step(e, int64(i))
			if before.Terminal() && (m.State() != before || len(acts) > 0) {
				t.Fatalf("seed %d: %T moved terminal %s to %s with %v", seed, e, before, m.State(), acts)
			}
			for _, a := range acts {
				switch a := a.(type) {
				case End:
					ends++
					if !m.State().Terminal() || a.State != m.State() {
						t.Fatalf("seed %d: %v in state %s", seed, a, m.State())
					}
				case Deploy:
					if a.Attempt != nextAttempt {
						t.Fatalf("seed %d: %v, want attempt %d", seed, a, nextAttempt)
					}
					nextAttempt++
				}
			}
		}
		if ends > 1 || (ends == 1) != m.State().Terminal() {
			t.Fatalf("seed %d: %d End actions, final state %s", seed, ends, m.State())
		}
	}
}
