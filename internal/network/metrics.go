package network

import (
	"sync/atomic"
	"time"
)

// ChannelMetrics are one channel's figures, updated by the network and the
// task as data flows and readable by any goroutine at any time. An
// OutputChannel fills the Out side, an InputChannel the In side.
type ChannelMetrics struct {
	// BuffersOut and BytesOut count the buffer frames sent and their
	// payload bytes; BuffersIn and BytesIn those received.
	BuffersOut, BytesOut, BuffersIn, BytesIn atomic.Int64
	// Credit is, at the sender, the credit it has left; at the receiver,
	// its free buffers, all of which are granted credit.
	Credit atomic.Int64
	// Backlog is, at the sender, the buffers queued waiting for credit; at
	// the receiver, the backlog the sender last announced.
	Backlog atomic.Int64
	// BackPressuredNanos is the time the producer waited for a free sender
	// buffer, that is for credit: the same measure as a task's
	// backPressuredTimeMsPerSecond in process.
	BackPressuredNanos atomic.Int64
}

// ChannelStats is a copy of ChannelMetrics at one instant.
type ChannelStats struct {
	BuffersOut, BytesOut, BuffersIn, BytesIn int64
	Credit, Backlog                          int64
	BackPressured                            time.Duration
}

// Snapshot copies the figures.
func (m *ChannelMetrics) Snapshot() ChannelStats {
	return ChannelStats{
		BuffersOut: m.BuffersOut.Load(), BytesOut: m.BytesOut.Load(),
		BuffersIn: m.BuffersIn.Load(), BytesIn: m.BytesIn.Load(),
		Credit: m.Credit.Load(), Backlog: m.Backlog.Load(),
		BackPressured: time.Duration(m.BackPressuredNanos.Load()),
	}
}
