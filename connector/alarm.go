package connector

import "time"

// Alarm is a reusable one-shot timer for readers that wait on a schedule
// (a rate limit): Set arms it, and C is the channel Reader.Available
// returns while the reader waits. The zero Alarm is ready to use; all
// methods run on the reader's goroutine (the timer's own function only
// sends on C).
type Alarm struct {
	timer *time.Timer
	// tick has room for one signal, so that the timer's function never
	// blocks.
	tick chan struct{}
}

// Set arms the alarm to signal C after d, replacing an earlier setting.
func (a *Alarm) Set(d time.Duration) {
	if a.timer == nil {
		tick := make(chan struct{}, 1)
		a.tick = tick
		a.timer = time.AfterFunc(d, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		return
	}
	// Drop a signal nobody received. A firing racing with this Reset can
	// still leave one behind: the task then polls once too early, finds
	// nothing due and waits anew.
	select {
	case <-a.tick:
	default:
	}
	a.timer.Reset(d)
}

// C returns the channel the alarm signals (nil before the first Set).
func (a *Alarm) C() <-chan struct{} { return a.tick }

// Stop stops the alarm's timer, if it was ever set.
func (a *Alarm) Stop() {
	if a.timer != nil {
		a.timer.Stop()
	}
}
