package adapt

import "fmt"

// Flavor names one of the two implementations a Chooser picks from. The
// caller decides what each means; flavor 0 is the one run before the first
// exploration ends, so it should be the one that is never much worse.
type Flavor uint8

// Options configures a Chooser. The zero value gives the defaults.
type Options struct {
	// Trials is the number of timed batches of each flavor in an
	// exploration. Default 4.
	Trials int
	// Exploit is the number of batches that the chosen flavor runs untimed
	// after an exploration that changed the choice (and after the first).
	// Default 256.
	Exploit int
	// MaxExploit bounds the exploit length, which doubles after each
	// exploration that confirms the choice. Default 16384.
	MaxExploit int
	// MinRecords is the smallest batch that is timed or counted. Default 64.
	MinRecords int
}

// EnsureDefaults fills the zero fields of o with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Trials == 0 {
		o.Trials = 4
	}
	if o.Exploit == 0 {
		o.Exploit = 256
	}
	if o.MaxExploit == 0 {
		o.MaxExploit = 16384
	}
	if o.MinRecords == 0 {
		o.MinRecords = 64
	}
}

// Validate rejects options out of range; call it after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.Trials < 1:
		return fmt.Errorf("adapt: Options.Trials is %d; want at least 1 (0 means 4)", o.Trials)
	case o.Exploit < 1:
		return fmt.Errorf("adapt: Options.Exploit is %d; want at least 1 (0 means 256)", o.Exploit)
	case o.MaxExploit < o.Exploit:
		return fmt.Errorf("adapt: Options.MaxExploit is %d; want at least Exploit, %d (0 means 16384)", o.MaxExploit, o.Exploit)
	case o.MinRecords < 1:
		return fmt.Errorf("adapt: Options.MinRecords is %d; want at least 1 (0 means 64)", o.MinRecords)
	}
	return nil
}

// Chooser decides which of two flavors runs each batch. The zero value is
// not ready: use New. It is not safe for concurrent use; each operator
// instance owns one.
type Chooser struct {
	opts    Options
	current Flavor
	// trial counts the timed batches of the exploration under way; it is
	// 2*Trials while the chosen flavor is being exploited.
	trial int
	// best is each flavor's lowest time per record in this exploration.
	best [2]float64
	// left is the number of batches still to exploit before the next
	// exploration; exploit is the length of the current exploit phase.
	left, exploit int
	// explored is false until the first exploration has ended.
	explored bool
	// fixed is set by Fixed: no exploration ever starts.
	fixed bool
}

// New returns a Chooser that starts with an exploration. It panics if
// opts, after EnsureDefaults, does not Validate: options are the
// operator's own constants, not user input.
func New(opts Options) *Chooser {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	c := &Chooser{opts: opts, exploit: opts.Exploit}
	c.startExploration()
	return c
}

func (c *Chooser) startExploration() {
	c.trial = 0
	c.best = [2]float64{-1, -1}
}

// Current returns the flavor that untimed batches run with: flavor 0 until
// the first exploration has ended, then the faster one of the last.
func (c *Chooser) Current() Flavor { return c.current }

// Next returns the flavor to run a batch of n records with, and whether to
// time it; if timed, the caller reports the time with Observe before it
// calls Next again.
func (c *Chooser) Next(n int) (f Flavor, timed bool) {
	if n < c.opts.MinRecords {
		return c.current, false
	}
	if c.trial < 2*c.opts.Trials {
		return Flavor(c.trial % 2), true
	}
	if c.fixed {
		return c.current, false
	}
	c.left--
	if c.left <= 0 {
		c.startExploration()
	}
	return c.current, false
}

// Observe reports that a timed batch of n records took ns nanoseconds with
// flavor f. An exploration ends with its last trial: the faster flavor
// becomes Current.
func (c *Chooser) Observe(f Flavor, n int, ns int64) {
	if n <= 0 || int(f) > 1 || c.trial >= 2*c.opts.Trials {
		return
	}
	per := float64(max(ns, 0)) / float64(n)
	if c.best[f] < 0 || per < c.best[f] {
		c.best[f] = per
	}
	c.trial++
	if c.trial < 2*c.opts.Trials {
		return
	}
	winner := Flavor(0)
	if c.best[1] >= 0 && (c.best[0] < 0 || c.best[1] < c.best[0]) {
		winner = 1
	}
	switch {
	case c.explored && winner == c.current:
		c.exploit = min(2*c.exploit, c.opts.MaxExploit)
	default:
		c.exploit = c.opts.Exploit
	}
	c.current, c.explored = winner, true
	c.left = c.exploit
}

// String describes the state, for tests and debugging.
func (c *Chooser) String() string {
	if c.trial < 2*c.opts.Trials {
		return fmt.Sprintf("current=%d exploring trial=%d/%d best=[%s %s]", c.current, c.trial, 2*c.opts.Trials, fmtBest(c.best[0]), fmtBest(c.best[1]))
	}
	return fmt.Sprintf("current=%d exploiting left=%d/%d best=[%s %s]", c.current, c.left, c.exploit, fmtBest(c.best[0]), fmtBest(c.best[1]))
}

func fmtBest(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}

// Fixed returns a Chooser that runs every batch with flavor f and times
// none: for tests that must run each flavor, and for comparing them.
func Fixed(f Flavor) *Chooser {
	c := New(Options{})
	c.current = f
	c.trial = 2 * c.opts.Trials
	c.fixed = true
	return c
}
