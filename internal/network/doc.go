// Package network is weir's data plane between processes: logical
// channels (one producer subtask → one consumer subtask of an edge)
// multiplexed over one TCP connection per pair of processes, with
// credit-based flow control, records serialized into buffers with the
// edge's codec, and control events in band.
//
// # Shape
//
// The accounting is a pure core, package credit: a Gate per consuming task
// (each input channel owns ExclusiveBuffers buffers; FloatingBuffers more
// are lent to the channels whose senders announce a backlog) and an Outbox
// per producing channel (the queue of buffers and events, its credit, and
// the block after an aligned barrier). This package is the shell: it owns
// the sockets and goroutines and feeds the core what it sees.
//
// A Node listens for consumers and dials producers. The consumer dials: its
// first channel to a producer process opens the connection, later ones
// reuse it. Per connection two goroutines run, one reading frames and one
// writing; the writer takes the channels that may send (credit, or an event
// at the head) in turn, one item each, so that a channel whose consumer is
// slow (no credit) never holds the others back. It gathers what is ready
// (up to 64 frames or 256 KiB) and writes it with one writev, the buffers
// themselves and no copy of them (over TLS through a buffered writer), so
// writes are batched under load and immediate when idle. The reader reads
// frame headers through a bufio.Reader and a buffer's remainder of at
// least 16 KiB straight into the receive buffer. Records are encoded on the producing
// task's goroutine (OutputChannel.Write) and decoded on the consuming
// task's (InputChannel.Poll); the network goroutines only move buffers.
//
// A record is encoded straight into the open buffer when it fits; one
// that fills whole buffers is lent to the connection as slices of its own
// encoding (one large record at a time per channel, so the sending side
// holds at most two encodings of a large record besides its buffers); one
// that spans buffers is gathered at the receiver into memory its value
// keeps, without a second copy when the codec is a codec.AliasDecoder
// (String, Bytes). With object reuse (InputChannel.SetObjectReuse, off by
// default) the values of a batch point into the receive buffer, which is
// given back, with its credit, only at the next Poll.
//
// # Wire protocol
//
// A handshake first (magic, ProtocolVersion, buffer size, cluster token;
// the listener answers with a status), then frames of
// length:u32 type:u8 channel:u32 body: partition-request (with the initial
// credit), buffer (with the sender's backlog), event, add-credit,
// resume-consumption, cancel, close and error. frame.go describes the
// bytes. A record is uvarint(len<<1|hasTimestamp) [varint ts] value, in a
// byte stream per channel cut into buffers wherever the cut falls: records
// span buffers, a buffer holds many records.
//
// # Guarantees
//
//   - A sender never sends a buffer without credit, and every free receive
//     buffer is already granted: memory is bounded at both ends,
//     (channels × ExclusiveBuffers + FloatingBuffers) × BufferSize per
//     gate and SenderBuffers × BufferSize per output channel.
//   - Events sent with Emit never overtake the data written before them.
//     An aligned barrier blocks its channel at the sender until the
//     consumer calls Resume, so a receiver never buffers data during
//     alignment. A priority event (EmitPriority, ConvertQueued: an
//     unaligned barrier, a barrier announcement) overtakes every buffer
//     not sent yet, and reports the records it overtook; it arrives behind
//     what was sent before it, with Event.Priority set.
//   - A broken connection, a malformed frame or a consumer's cancel fails
//     the affected channels with an error naming the channel and the peer
//     address; a stranger, another version, a wrong token or certificate is
//     refused in the handshake, before any frame is read.
//   - Close ends every goroutine the node started.
//
// # Usage
//
//	prod, _ := network.New(network.Options{Token: tok})
//	prod.Listen("127.0.0.1:0")
//	out, _ := network.NewOutput(prod, "job/edge/0->1", codec.String(), taskDone)
//	out.Write(recs, ts)                                  // blocks while out of credit
//	out.Emit(network.Event{Kind: network.Barrier, ID: 7, Aligned: true})
//
//	cons, _ := network.New(network.Options{Token: tok})
//	gate := cons.NewGate()
//	in, _ := network.Subscribe(gate, prod.Addr(), "job/edge/0->1", codec.String())
//	for {
//		what, recs, ts, ev, err := in.Poll()
//		switch {
//		case err != nil: // fail the task
//		case what == network.Empty: <-gate.Doorbell()
//		case what == network.Records: // recs, ts valid until the next Poll
//		case ev.Kind == network.Barrier && ev.Aligned: // snapshot, then in.Resume()
//		}
//	}
//
// docs/architecture.md ("Network data plane") says where weir differs
// from Flink's network stack.
package network
