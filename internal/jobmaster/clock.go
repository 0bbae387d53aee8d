package jobmaster

import "time"

// Clock is the JobMaster's only source of time: event stamps, the
// coordinator's tick, the restart delay and the stop grace period all come
// from it, so that tests drive them by hand. Its methods may be called from
// any goroutine.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d.
	NewTicker(d time.Duration) Ticker
}

// Timer is a Clock's one-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop stops the timer; it reports whether it stopped it before it fired.
	Stop() bool
}

// Ticker is a Clock's periodic timer.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// RealClock is the Clock of the time package.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker returns a time.Ticker.
func (RealClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
