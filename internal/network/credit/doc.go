// Package credit is the pure core of weir's credit-based flow control: the
// accounting of buffers and credits on both ends of a network channel, with
// no I/O, no clock, no locks and no goroutines (internal/checkpoint's
// shape). The shell in internal/network owns the sockets and goroutines,
// feeds these types the events it sees and carries out what they return.
//
// The receiving side is a Gate: each input channel owns ExclusiveBuffers
// buffers for its whole life, and the gate lends FloatingBuffers more to
// the channels whose senders announce a backlog. A free buffer is always
// already granted to the sender as credit, so a sender that spends one
// credit per buffer can never overrun the receiver's memory.
//
// The sending side is an Outbox per channel: data buffers and events
// queued in order; a buffer goes out only with credit, an event needs none
// but never overtakes the data before it, and an aligned barrier blocks
// the channel until the receiver resumes it. A priority event (an
// unaligned barrier or a barrier announcement, Flink's priority events)
// overtakes everything not sent yet, needs no credit and is not held by
// the block: PushPriority reports the items it overtook (the sender's
// output channel state), and Prioritize converts a queued aligned barrier
// at its timeout.
//
// # Usage
//
//	// receiver
//	credit0, _ := gate.AddChannel(id)      // put in the partition request
//	grants, err := gate.OnBuffer(id, backlog) // a buffer frame arrived
//	grants, err = gate.Release(id)           // the task consumed it
//	for _, g := range grants { sendAddCredit(g.Channel, g.Credit) }
//
//	// sender
//	box.Push(credit.Data, buf)
//	box.AddCredit(n)                          // an add-credit frame arrived
//	for box.Available() { kind, buf, backlog := box.Pop(); write(kind, buf, backlog) }
package credit
