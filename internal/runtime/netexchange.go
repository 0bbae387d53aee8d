package runtime

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/network"
)

// NetExchange carries channels of one job attempt through the TCP data
// plane (internal/network) on 127.0.0.1, for local mode's Exchange "tcp":
// the whole suite of jobs can then run over the network path. Every
// bridged channel gets a network channel on a node that listens on a
// loopback port and dials itself, so records are encoded with the edge's
// codec, cut into buffers, sent with credit-based flow control and decoded
// again, events in band.
//
// The bridge is a pair of goroutines per channel: one takes the writer's
// envelopes from an in-process Channel and writes them to the network
// channel, the other polls the network channel and sends into the
// consumer's Channel. The task loop is unchanged; the cluster issue will
// read network channels from the task directly instead.
//
// Barriers cross with their checkpoint id; their options (store and
// directory: not serializable) are looked up in a table of the exchange,
// which works because both ends are in this process.
type NetExchange struct {
	node  *network.Node
	addr  string
	mu    sync.Mutex
	opts  map[int64]*BarrierOptions
	pumps []func()
	wg    sync.WaitGroup
	seq   int
	once  sync.Once
	log   *slog.Logger
	outs  []*network.ChannelMetrics
}

// NewNetExchange starts a node listening on 127.0.0.1.
func NewNetExchange(o network.Options) (*NetExchange, error) {
	n, err := network.New(o)
	if err != nil {
		return nil, err
	}
	if err := n.Listen("127.0.0.1:0"); err != nil {
		n.Close()
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NetExchange{node: n, addr: n.Addr(), opts: map[int64]*BarrierOptions{}, log: log}, nil
}

// Bridge returns the channel a RecordWriter should send into so that what
// it sends reaches dst (read by the consuming task as usual) through the
// network. The pumps start with Start and stop at end of partition or when
// done is closed.
func Bridge[T any](x *NetExchange, dst *Channel[T], c codec.Codec[T], done <-chan struct{}) (*Channel[T], error) {
	x.mu.Lock()
	x.seq++
	name := fmt.Sprintf("bridge-%d", x.seq)
	x.mu.Unlock()
	out, err := network.NewOutput(x.node, name, c, done)
	if err != nil {
		return nil, err
	}
	gate := x.node.NewGate()
	in, err := network.Subscribe(gate, x.addr, name, c)
	if err != nil {
		out.Close()
		return nil, err
	}
	src := NewChannel[T](cap(dst.queue), make(chan struct{}, 1), nil)
	send := func() {
		for {
			var env envelope[T]
			select {
			case env = <-src.queue:
			case <-done:
				return
			}
			if env.recs != nil {
				err := out.Write(env.recs, env.ts)
				src.recycle(env)
				if err != nil {
					return
				}
				continue
			}
			if env.ev.Kind == Barrier && env.ev.Options != nil {
				x.mu.Lock()
				x.opts[env.ev.ID] = env.ev.Options
				x.mu.Unlock()
			}
			ev := network.Event{Kind: network.EventKind(env.ev.Kind), ID: env.ev.ID, Timestamp: env.ev.Timestamp}
			if out.Emit(ev) != nil || env.ev.Kind == EndOfPartition {
				return
			}
		}
	}
	recv := func() {
		for {
			what, recs, ts, ev, err := in.Poll()
			switch {
			case err != nil:
				return
			case what == network.Records:
				b := dst.batch(len(recs))
				b = append(b, recs...)
				env := envelope[T]{recs: b}
				if ts != nil {
					env.ts = append(dst.timestamps(len(ts)), ts...)
				}
				if _, ok := dst.send(env, done); !ok {
					return
				}
			case what == network.Control:
				e := Event{Kind: EventKind(ev.Kind), ID: ev.ID, Timestamp: ev.Timestamp}
				if e.Kind == Barrier {
					x.mu.Lock()
					e.Options = x.opts[ev.ID]
					x.mu.Unlock()
				}
				if _, ok := dst.send(envelope[T]{ev: e}, done); !ok || e.Kind == EndOfPartition {
					return
				}
			default:
				select {
				case <-gate.Doorbell():
				case <-done:
					return
				}
			}
		}
	}
	x.mu.Lock()
	x.pumps = append(x.pumps, send, recv)
	x.outs = append(x.outs, out.Metrics())
	x.mu.Unlock()
	return src, nil
}

// Start starts the pumps of every bridged channel. The exchange closes
// itself (and its node) once they have all ended: at end of partition, or
// when the attempt stops.
func (x *NetExchange) Start() {
	x.mu.Lock()
	pumps := x.pumps
	x.pumps = nil
	x.mu.Unlock()
	for _, p := range pumps {
		x.wg.Go(p)
	}
	x.log.Info("exchange over tcp", "addr", x.addr, "channels", len(pumps)/2)
	go func() {
		x.wg.Wait()
		x.Close()
	}()
}

// Close closes the node, ending the network's goroutines; the pumps of a
// started exchange end with it. It is idempotent.
func (x *NetExchange) Close() error {
	x.once.Do(func() {
		x.node.Close()
		var buffers, bytes int64
		x.mu.Lock()
		for _, m := range x.outs {
			buffers += m.BuffersOut.Load()
			bytes += m.BytesOut.Load()
		}
		x.mu.Unlock()
		x.log.Info("exchange over tcp closed", "addr", x.addr, "buffers", buffers, "bytes", bytes)
	})
	return nil
}
