package cluster

import (
	"slices"
	"time"
)

// Liveness is the heartbeat bookkeeping of one side of the control plane:
// the peers it watches and when it last heard from each. It is a pure core:
// it reads no clock and starts nothing; the shell feeds it events with
// their time and asks which peers have been silent for the timeout.
//
// The JobManager watches its TaskManagers' instances with one; a
// TaskManager watches its JobManager with another.
type Liveness struct {
	timeout time.Duration
	last    map[string]time.Time
}

// NewLiveness returns bookkeeping that takes a peer as lost once it has
// not been heard from for timeout.
func NewLiveness(timeout time.Duration) *Liveness {
	return &Liveness{timeout: timeout, last: map[string]time.Time{}}
}

// Watch starts watching id as heard at now (a registration counts as a
// heartbeat). Watching an id again restarts its clock.
func (l *Liveness) Watch(id string, now time.Time) { l.last[id] = now }

// Heard records a heartbeat of id at now. It reports false, and records
// nothing, when id is not watched (it was lost or never registered). A
// heartbeat older than the last one moves nothing back.
func (l *Liveness) Heard(id string, now time.Time) bool {
	t, ok := l.last[id]
	if !ok {
		return false
	}
	if now.After(t) {
		l.last[id] = now
	}
	return true
}

// Unwatch stops watching id (its connection broke, it deregistered). It
// reports whether id was watched.
func (l *Liveness) Unwatch(id string) bool {
	_, ok := l.last[id]
	delete(l.last, id)
	return ok
}

// Last is when id was last heard from.
func (l *Liveness) Last(id string) (time.Time, bool) {
	t, ok := l.last[id]
	return t, ok
}

// Expired removes and returns, sorted, the peers not heard from for the
// timeout at now: those whose last heartbeat is at or before now-timeout.
func (l *Liveness) Expired(now time.Time) []string {
	var out []string
	for id, t := range l.last {
		if now.Sub(t) >= l.timeout {
			out = append(out, id)
		}
	}
	for _, id := range out {
		delete(l.last, id)
	}
	slices.Sort(out)
	return out
}

// Next is the earliest moment a watched peer expires, or false when none is
// watched.
func (l *Liveness) Next() (time.Time, bool) {
	var next time.Time
	for _, t := range l.last {
		if d := t.Add(l.timeout); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next, !next.IsZero()
}

// Len is the number of peers watched.
func (l *Liveness) Len() int { return len(l.last) }
