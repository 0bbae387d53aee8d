package watermark

import "fmt"

// Status is the watermark status of an input channel, or of an output:
// an idle one does not hold back the watermark of the task that reads it.
type Status uint8

const (
	// Active inputs hold back the merged watermark. Channels start active.
	Active Status = iota
	// Idle inputs send no records for now and do not hold back the merged
	// watermark until they are active again.
	Idle
)

func (s Status) String() string {
	switch s {
	case Active:
		return "active"
	case Idle:
		return "idle"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Merger combines the watermarks and statuses arriving on the N input
// channels of a task, numbered 0..N-1, into the task's watermark and
// status, as Flink's StatusWatermarkValve. The task's watermark is the least
// watermark of its active channels; idle channels do not hold it back, and
// when every channel is idle the task is idle. A channel that ended (end of
// partition) is removed. MaxWatermark passes once every channel reached it
// or ended. The output only ever advances; see Output for what to send.
//
// A channel's watermarks are expected to increase; one that does not is
// ignored, as in Flink. Unlike Flink's valve, a channel that becomes active
// again behind the task's watermark holds the task's watermark back until it
// catches up, instead of being skipped: every watermark sent is at most the
// watermark of every active channel, so records the channel sends after its
// own watermark are never made late by the others.
//
// Merger is a synchronous state machine: no clock, no I/O, not safe for
// concurrent use; the task's mailbox loop owns it. A channel index outside
// 0..N-1 is a bug in the caller and panics like an out-of-range slice index.
type Merger struct {
	channels []InputState
	out      combined
}

// NewMerger returns a merger for a task with channels input channels, all
// active and without a watermark. channels must be at least 1.
func NewMerger(channels int) (*Merger, error) {
	if channels < 1 {
		return nil, fmt.Errorf("watermark: merger has %d input channels, want >= 1", channels)
	}
	m := &Merger{channels: make([]InputState, channels), out: newCombined()}
	for i := range m.channels {
		m.channels[i].Watermark = MinWatermark
	}
	return m, nil
}

// OnWatermark handles watermark wm read from channel ch. A watermark that
// does not advance on the channel's, or arrives after its end, is ignored.
// A watermark on an idle channel is kept, but the channel stays idle until
// an active status arrives.
func (m *Merger) OnWatermark(ch int, wm int64) Output {
	c := &m.channels[ch]
	if c.Ended || wm <= c.Watermark {
		return Output{}
	}
	c.Watermark = wm
	return m.update()
}

// OnStatus handles a watermark status read from channel ch. Repeating the
// channel's status, or a status after its end, does nothing.
func (m *Merger) OnStatus(ch int, status Status) Output {
	c := &m.channels[ch]
	idle := status == Idle
	if c.Ended || c.Idle == idle {
		return Output{}
	}
	c.Idle = idle
	return m.update()
}

// OnEndOfPartition handles the end of channel ch: it no longer holds back
// the task's watermark.
func (m *Merger) OnEndOfPartition(ch int) Output {
	c := &m.channels[ch]
	if c.Ended {
		return Output{}
	}
	c.Ended = true
	return m.update()
}

// Watermark returns the task's watermark: the last one sent, MinWatermark
// before the first.
func (m *Merger) Watermark() int64 { return m.out.wm }

// Idle reports whether the task's output is idle.
func (m *Merger) Idle() bool { return m.out.idle }

// NumChannels returns the number of input channels, ended or not.
func (m *Merger) NumChannels() int { return len(m.channels) }

// Channel returns what the merger knows of channel ch.
func (m *Merger) Channel(ch int) InputState { return m.channels[ch] }

func (m *Merger) update() Output {
	sum := newSummary()
	for _, c := range m.channels {
		if c.Ended {
			// Ended after MaxWatermark: it still counts as having reached it.
			if c.Watermark == MaxWatermark {
				sum.reachedMax = true
			}
			continue
		}
		sum.add(c.Watermark, c.Idle)
	}
	return m.out.update(sum)
}
