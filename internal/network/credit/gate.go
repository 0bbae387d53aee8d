package credit

import (
	"errors"
	"fmt"
)

// ErrNoCredit is returned when a sender sent a buffer it had no credit for:
// a protocol violation by the peer.
var ErrNoCredit = errors.New("buffer received without credit")

// ErrUnknownChannel is returned for an event on a channel the gate does not
// have.
var ErrUnknownChannel = errors.New("unknown channel")

// Grant tells the shell to send AddCredit(Credit) to the sender of Channel.
type Grant struct {
	Channel int
	Credit  int
}

func (g Grant) String() string { return fmt.Sprintf("grant ch=%d credit=%d", g.Channel, g.Credit) }

// Gate is the receiving side's credit accounting for one input gate: the
// buffers of its input channels and the floating pool they share.
//
// Every buffer a channel owns is either free (and then already announced to
// the sender as credit: a Gate announces at once) or in use (it holds a
// received buffer the consumer has not released yet). Hence, for each
// channel, credit granted minus buffers received equals its free buffers,
// and a sender that respects its credit can never overrun the receiver.
//
// A Gate is not safe for concurrent use; it does no I/O and reads no clock.
// The slice of grants a method returns is valid until the next call.
type Gate struct {
	opts    Options
	pool    int   // free floating buffers not assigned to any channel
	waiting []int // channels waiting for floating buffers, oldest first
	chans   map[int]*inChannel
	grants  []Grant
}

type inChannel struct {
	free     int // owned buffers ready to receive (all announced as credit)
	inUse    int // owned buffers holding data not yet released
	floating int // floating buffers among the owned ones
	backlog  int // the sender's last announced backlog
	waiting  bool
}

// required is the number of free buffers the channel wants: its sender's
// backlog plus its exclusive share, as in Flink (backlog + initial credit).
func (g *Gate) required(c *inChannel) int { return c.backlog + g.opts.ExclusiveBuffers }

// NewGate returns a gate with no channels. opts must be valid (EnsureDefaults
// and Validate).
func NewGate(opts Options) (*Gate, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Gate{opts: opts, pool: opts.Floating(), chans: map[int]*inChannel{}}, nil
}

// AddChannel adds channel ch with its exclusive buffers and returns the
// initial credit to put in its partition request.
func (g *Gate) AddChannel(ch int) (initialCredit int, err error) {
	if _, ok := g.chans[ch]; ok {
		return 0, fmt.Errorf("channel %d added twice", ch)
	}
	g.chans[ch] = &inChannel{free: g.opts.ExclusiveBuffers}
	return g.opts.ExclusiveBuffers, nil
}

// OnBuffer accounts for a data buffer received on ch, which takes one free
// buffer, and for the backlog its sender announced with it. When the
// backlog is positive and the channel has fewer free buffers than backlog +
// ExclusiveBuffers, it asks the pool for floating ones (Flink's rule); what
// it gets is granted at once. A backlog of 0 asks for nothing: the
// exclusive buffers come back as the consumer releases them.
func (g *Gate) OnBuffer(ch, backlog int) ([]Grant, error) {
	g.grants = g.grants[:0]
	c, ok := g.chans[ch]
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownChannel, ch)
	}
	if c.free == 0 {
		return nil, fmt.Errorf("channel %d: %w", ch, ErrNoCredit)
	}
	if backlog < 0 {
		return nil, fmt.Errorf("channel %d: negative backlog %d", ch, backlog)
	}
	c.free--
	c.inUse++
	c.backlog = backlog
	switch {
	case backlog > 0:
		g.want(ch, c)
	case c.waiting:
		// The sender has nothing queued: the exclusive buffers suffice.
		g.unwait(ch, c)
	}
	return g.grants, nil
}

// want takes floating buffers from the pool for c up to its requirement, and
// queues c as waiting when the pool runs dry; a channel that needs no more
// leaves the queue.
func (g *Gate) want(ch int, c *inChannel) {
	got := 0
	for c.free < g.required(c) && g.pool > 0 {
		g.pool--
		c.floating++
		c.free++
		got++
	}
	if got > 0 {
		g.grants = append(g.grants, Grant{Channel: ch, Credit: got})
	}
	switch need := c.free < g.required(c); {
	case need && !c.waiting:
		c.waiting = true
		g.waiting = append(g.waiting, ch)
	case !need && c.waiting:
		g.unwait(ch, c)
	}
}

func (g *Gate) unwait(ch int, c *inChannel) {
	c.waiting = false
	for i, w := range g.waiting {
		if w == ch {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			return
		}
	}
}

// Release accounts for the consumer being done with one buffer of ch. The
// buffer becomes free again and is granted, unless it is a floating one the
// channel no longer needs: that one goes back to the pool, which hands it
// to the first waiting channel.
func (g *Gate) Release(ch int) ([]Grant, error) {
	g.grants = g.grants[:0]
	c, ok := g.chans[ch]
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownChannel, ch)
	}
	if c.inUse == 0 {
		return nil, fmt.Errorf("channel %d: release without a buffer in use", ch)
	}
	c.inUse--
	if c.floating > 0 && c.free >= g.required(c) {
		c.floating--
		g.pool++
		g.feed()
		return g.grants, nil
	}
	c.free++
	g.grants = append(g.grants, Grant{Channel: ch, Credit: 1})
	if c.waiting && c.free >= g.required(c) {
		g.unwait(ch, c)
	}
	return g.grants, nil
}

// feed hands free pool buffers to waiting channels, oldest first.
func (g *Gate) feed() {
	for g.pool > 0 && len(g.waiting) > 0 {
		ch := g.waiting[0]
		c := g.chans[ch]
		n := 0
		for c.free < g.required(c) && g.pool > 0 {
			g.pool--
			c.floating++
			c.free++
			n++
		}
		if n > 0 {
			g.grants = append(g.grants, Grant{Channel: ch, Credit: n})
		}
		if c.free >= g.required(c) {
			c.waiting = false
			g.waiting = g.waiting[1:]
		}
	}
}

// RemoveChannel drops ch (cancelled, finished or failed): its floating
// buffers, free or in use, go back to the pool and on to waiting channels.
func (g *Gate) RemoveChannel(ch int) ([]Grant, error) {
	g.grants = g.grants[:0]
	c, ok := g.chans[ch]
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownChannel, ch)
	}
	if c.waiting {
		g.unwait(ch, c)
	}
	delete(g.chans, ch)
	g.pool += c.floating
	g.feed()
	return g.grants, nil
}

// ChannelState is a snapshot of one channel's buffers.
type ChannelState struct {
	Free, InUse, Floating, Backlog int
	Waiting                        bool
}

// Channel reports the state of ch; ok is false if the gate does not have it.
func (g *Gate) Channel(ch int) (s ChannelState, ok bool) {
	c, ok := g.chans[ch]
	if !ok {
		return s, false
	}
	return ChannelState{Free: c.free, InUse: c.inUse, Floating: c.floating, Backlog: c.backlog, Waiting: c.waiting}, true
}

// Pool is the number of floating buffers not assigned to any channel.
func (g *Gate) Pool() int { return g.pool }

// Waiting lists the channels waiting for floating buffers, oldest first.
func (g *Gate) Waiting() []int { return g.waiting }

// MaxBuffers is the most buffers the gate can hold at once with n channels:
// the bound on its memory.
func (g *Gate) MaxBuffers(n int) int { return n*g.opts.ExclusiveBuffers + g.opts.Floating() }
