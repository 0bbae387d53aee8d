package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/network"
)

// Exchange carries the channels of one job attempt that cross the TCP data
// plane (internal/network), in two halves that may live in different
// processes:
//
//   - Send returns the in-process Channel a RecordWriter sends into; a pump
//     goroutine takes the writer's envelopes from it and writes them to a
//     network output channel registered on the exchange's node;
//   - Receive subscribes to such an output channel at its producer's
//     address, and a pump goroutine polls it and sends into the consumer's
//     Channel, which the consuming task reads as usual.
//
// Records are encoded with the edge's codec, cut into buffers, sent with
// credit-based flow control and decoded again; events travel in band:
// watermarks, watermark status, cancel markers and end of partition as
// they are, and barriers with their options (kind, store URL and
// directory) in the event's payload, so that the consumer side builds its
// BarrierOptions without the producer's process: its store is opened from
// the URL through the exchange's StoreCache. The task loop is unchanged.
//
// Local mode's Exchange "tcp" (NewNetExchange, Bridge) puts both halves of
// every channel in one process, on a node that dials itself; a worker of a
// cluster (NewExchange) has a node of its own for all attempts, and an
// Exchange per attempt whose channel names carry the job and the attempt.
type Exchange struct {
	node    *network.Node
	ownNode bool // NewNetExchange's: closed with the exchange
	stores  *StoreCache
	log     *slog.Logger

	mu      sync.Mutex
	opts    map[int64]*BarrierOptions // barriers sent by this exchange, by id
	pumps   []func()
	closers []func()
	outs    []*network.ChannelMetrics
	seq     int
	wg      sync.WaitGroup
	once    sync.Once
}

// NetExchange is local mode's exchange (Options.Exchange "tcp").
type NetExchange = Exchange

// NewNetExchange starts a node listening on 127.0.0.1 that carries both
// halves of every bridged channel (Bridge); the exchange closes it.
func NewNetExchange(o network.Options) (*Exchange, error) {
	n, err := network.New(o)
	if err != nil {
		return nil, err
	}
	if err := n.Listen("127.0.0.1:0"); err != nil {
		n.Close()
		return nil, err
	}
	x := NewExchange(n, NewStoreCache(), o.Logger)
	x.ownNode = true
	return x, nil
}

// NewExchange returns the exchange of one attempt on node, a worker's data
// plane (listening, and closed by its owner, not by the exchange). stores
// opens the checkpoint stores that barriers from other processes name;
// logger may be nil. It starts no goroutine.
func NewExchange(node *network.Node, stores *StoreCache, logger *slog.Logger) *Exchange {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if stores == nil {
		stores = NewStoreCache()
	}
	return &Exchange{node: node, stores: stores, log: logger, opts: map[int64]*BarrierOptions{}}
}

// Addr is the address of the exchange's node.
func (x *Exchange) Addr() string { return x.node.Addr() }

// Bridge returns the channel a RecordWriter should send into so that what
// it sends reaches dst (read by the consuming task as usual) through the
// network: both halves in this process. The pumps start with Start and
// stop at end of partition or when done is closed.
func Bridge[T any](x *Exchange, dst *Channel[T], c codec.Codec[T], done <-chan struct{}) (*Channel[T], error) {
	x.mu.Lock()
	x.seq++
	name := fmt.Sprintf("bridge-%d", x.seq)
	x.mu.Unlock()
	src, err := Send(x, name, c, cap(dst.queue), done)
	if err != nil {
		return nil, err
	}
	if err := Receive(x, dst, x.node.Addr(), name, c, done); err != nil {
		return nil, err
	}
	return src, nil
}

// Send registers the network output channel name on the exchange's node
// and returns the channel (of capacity batches) a RecordWriter sends into
// for it. Its pump starts with Start and ends after the end of partition
// or when done is closed.
func Send[T any](x *Exchange, name string, c codec.Codec[T], capacity int, done <-chan struct{}) (*Channel[T], error) {
	// abort gives a blocked write up: closed when done is and the
	// producer had not queued its end of partition. A producer that ended
	// normally before the attempt stopped (the consumers on other workers
	// may still be reading) has what it queued sent to the end.
	abort := make(chan struct{})
	out, err := network.NewOutput(x.node, name, c, abort)
	if err != nil {
		return nil, err
	}
	src := NewChannel[T](capacity, make(chan struct{}, 1), nil)
	src.bridged, src.prioBell = true, make(chan struct{}, 1)
	src.net = out.Metrics()
	var finished atomic.Bool
	pumped := make(chan struct{})
	// toNet is the network event of env's event.
	toNet := func(e Event) (network.Event, error) {
		ev := network.Event{Kind: network.EventKind(e.Kind), ID: e.ID, Timestamp: e.Timestamp, Unaligned: e.Unaligned, AlignedTimeoutMs: e.AlignedTimeoutMs}
		if (e.Kind == Barrier || e.Kind == BarrierAnnouncement) && e.Options != nil {
			x.mu.Lock()
			x.opts[e.ID] = e.Options
			x.mu.Unlock()
			p, err := encodeBarrierOptions(e.Options)
			if err != nil {
				x.log.Error("exchange: a barrier's options cannot cross the network", "channel", name, "checkpoint", e.ID, "err", err)
				return ev, err
			}
			ev.Payload = p
		}
		return ev, nil
	}
	// priority sends an unaligned barrier or an announcement that the
	// writer put at the head of src as a network priority event: it
	// overtakes the buffers not sent yet (and the rest of a batch being
	// written), whose records an unaligned barrier hands to its
	// producer's checkpoint as output state.
	priority := func(env envelope[T]) error {
		src.prio.Add(-1)
		ev, err := toNet(env.ev)
		if err == nil {
			var recs []T
			var ts []int64
			recs, ts, err = out.EmitPriority(ev, env.ev.net != nil)
			if env.ev.net != nil {
				env.ev.net.resolve(recs, ts, err)
			}
		} else if env.ev.net != nil {
			env.ev.net.resolve(nil, nil, err)
		}
		return err
	}
	// stash holds what the hook took from src that was not a priority
	// envelope (it follows the batch being written).
	var stash []envelope[T]
	var hookErr error
	out.SetPriorityHook(src.prioBell, func() {
		for hookErr == nil && len(stash) == 0 && src.prio.Load() > 0 {
			env, ok := src.tryRecv()
			if !ok {
				return
			}
			if env.recs == nil && env.ev.priority {
				hookErr = priority(env)
			} else {
				stash = append(stash, env)
			}
		}
	})
	// handle sends env; false ends the pump.
	handle := func(env envelope[T]) bool {
		if env.recs != nil {
			err := out.Write(env.recs, env.ts)
			src.recycle(env)
			return err == nil && hookErr == nil
		}
		if env.ev.priority {
			return priority(env) == nil
		}
		ev, err := toNet(env.ev)
		if err != nil {
			return false
		}
		if slot := env.ev.slot; slot != nil && env.ev.Kind == Barrier && ev.AlignedTimeoutMs > 0 {
			// A timed barrier leaves the writer's queue for the
			// network's: it is taken once it goes on the wire, and
			// converted there if its timeout passes while it is still
			// queued (Flink's output side of the aligned timeout).
			id := ev.ID
			convert := time.AfterFunc(time.Until(time.UnixMilli(ev.Timestamp+ev.AlignedTimeoutMs)), func() {
				recs, ts, converted, err := out.ConvertQueued(id)
				switch {
				case err != nil:
					slot.taken() // the channel failed: so does the job
				case converted && slot.wrap != nil:
					slot.resolve(slotConverted, slot.wrap(recs, ts))
				case converted:
					slot.resolve(slotConverted, nil)
				}
			})
			if err := out.EmitTracked(ev, func() { convert.Stop(); slot.taken() }); err != nil {
				convert.Stop()
				slot.taken()
				return false
			}
			return true
		}
		if env.ev.slot != nil {
			env.ev.slot.taken()
		}
		if err := out.Emit(ev); err != nil {
			return false
		}
		if env.ev.Kind == EndOfPartition {
			finished.Store(true)
			return false
		}
		return true
	}
	send := func() {
		defer close(pumped)
		defer func() {
			// Barriers the pump will not send: their checkpoints fail
			// rather than wait.
			for env, ok := src.tryRecv(); ok; env, ok = src.tryRecv() {
				if env.ev.net != nil {
					env.ev.net.resolve(nil, nil, fmt.Errorf("network channel %s ended before the barrier was sent", name))
				}
			}
		}()
		for {
			for len(stash) > 0 {
				env := stash[0]
				stash = stash[1:]
				if !handle(env) {
					return
				}
			}
			env, ok := src.tryRecv()
			for !ok {
				// Every send rings src's doorbell (its own), so a
				// send after the failed tryRecv is not missed.
				select {
				case <-src.doorbell:
				case <-abort:
					return
				}
				env, ok = src.tryRecv()
			}
			if !handle(env) {
				return
			}
		}
	}
	watch := func() {
		select {
		case <-done:
			if !src.ended.Load() {
				close(abort)
			}
		case <-pumped:
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pumps = append(x.pumps, send, watch)
	x.closers = append(x.closers, func() {
		// A finished channel is left to send what it queued: closing it
		// would drop that. It stays registered under its name, which no
		// later attempt uses.
		if !finished.Load() {
			out.Close()
		}
	})
	x.outs = append(x.outs, out.Metrics())
	return src, nil
}

// Receive subscribes to the output channel name of the producer process
// at addr and forwards what arrives into dst. Its pump starts with Start
// and ends after the end of partition, when the network channel fails, or
// when done is closed.
func Receive[T any](x *Exchange, dst *Channel[T], addr, name string, c codec.Codec[T], done <-chan struct{}) error {
	gate := x.node.NewGate()
	in, err := network.Subscribe(gate, addr, name, c)
	if err != nil {
		return err
	}
	dst.net = in.Metrics()
	// copyRecs is env for dst of a batch polled from the network.
	copyRecs := func(recs []T, ts []int64) envelope[T] {
		b := dst.batch(len(recs))
		b = append(b, recs...)
		env := envelope[T]{recs: b}
		if ts != nil {
			env.ts = append(dst.timestamps(len(ts)), ts...)
		}
		return env
	}
	event := func(ev network.Event) (Event, bool) {
		e := Event{Kind: EventKind(ev.Kind), ID: ev.ID, Timestamp: ev.Timestamp, Unaligned: ev.Unaligned, AlignedTimeoutMs: ev.AlignedTimeoutMs}
		if e.Kind == Barrier || e.Kind == BarrierAnnouncement {
			opts, err := x.barrierOptions(ev)
			if err != nil {
				x.log.Error("exchange: cannot take a barrier's options", "channel", name, "peer", addr, "checkpoint", ev.ID, "err", err)
				return e, false
			}
			e.Options = opts
		}
		return e, true
	}
	// wait waits for the channel; false: done.
	wait := func() bool {
		select {
		case <-gate.Doorbell():
			return true
		case <-done:
			return false
		}
	}
	// pend is what the pump received and has not handed to dst yet.
	var pend []envelope[T]
	// The receiver's side of the aligned-checkpoint timeout (Flink's
	// RemoteInputChannel converts a queued barrier the same way): the
	// announcement of an aligned barrier with a timeout arms a timer for
	// its deadline, and then the pump converts the barrier where it
	// waits (dst, pend or the network's receive queue) into an unaligned
	// one at the head of dst, with copies of the records it overtook as
	// the consumer's input state; one received after its deadline is
	// converted on arrival. due is set by the timer, dueBell wakes the
	// pump; timer is touched by the pump only.
	var due atomic.Bool
	dueBell := make(chan struct{}, 1)
	var timer *time.Timer
	arm := func(ev network.Event) {
		if timer != nil {
			timer.Stop()
		}
		timer = time.AfterFunc(time.Until(time.UnixMilli(ev.Timestamp+ev.AlignedTimeoutMs)), func() {
			due.Store(true)
			select {
			case dueBell <- struct{}{}:
			default:
			}
		})
	}
	isDue := func(e Event) bool {
		return e.Kind == Barrier && !e.Unaligned && e.AlignedTimeoutMs > 0 && !time.Now().Before(time.UnixMilli(e.Timestamp+e.AlignedTimeoutMs))
	}
	// takePriority hands the first priority event of the channel to the
	// consumer ahead of everything received before it and not consumed
	// (Flink's priority events at the input): those envelopes go behind
	// it, and an unaligned barrier carries copies of their records, the
	// consumer's input state. A record begun before the barrier and
	// completed by the buffers its sender overtook is input state too.
	takePriority := func(polled *network.Event) bool {
		list := dst.drainQueue(nil)
		list = append(list, pend...)
		pend = nil
		var pe network.Event
		if polled != nil {
			pe = *polled
		}
		for found := polled != nil; !found; {
			what, recs, ts, ev, err := in.Poll()
			switch {
			case err != nil:
				x.log.Warn("exchange: input channel failed", "channel", name, "peer", addr, "err", err)
				return false
			case what == network.Records:
				list = append(list, copyRecs(recs, ts))
			case what == network.Control && ev.Priority:
				pe, found = ev, true
			case what == network.Control:
				e, ok := event(ev)
				if !ok {
					return false
				}
				list = append(list, envelope[T]{ev: e})
			default:
				if !wait() {
					return false
				}
			}
		}
		var after []envelope[T]
		unaligned := pe.Kind == network.Barrier
		for pending := unaligned && in.Partial(); pending; {
			what, recs, ts, ev, err := in.Poll()
			switch {
			case err != nil:
				x.log.Warn("exchange: input channel failed", "channel", name, "peer", addr, "err", err)
				return false
			case what == network.Records:
				var t0 []int64
				if ts != nil {
					t0 = ts[:1]
				}
				list = append(list, copyRecs(recs[:1], t0))
				pending = false
				if len(recs) > 1 {
					var rest []int64
					if ts != nil {
						rest = ts[1:]
					}
					after = append(after, copyRecs(recs[1:], rest))
				}
			case what == network.Control:
				e, ok := event(ev)
				if !ok {
					return false
				}
				after = append(after, envelope[T]{ev: e})
			default:
				if !wait() {
					return false
				}
			}
		}
		e, ok := event(pe)
		if !ok {
			return false
		}
		if pe.Kind == network.BarrierAnnouncement && pe.AlignedTimeoutMs > 0 {
			arm(pe)
		}
		if unaligned {
			e.inflight = inflightOf(list)
		}
		// dst is empty but for what the consumer took meanwhile: room.
		if _, ok := dst.send(envelope[T]{ev: e}, done); !ok {
			return false
		}
		pend = append(list, after...)
		return true
	}
	// convertDue converts the first barrier past its aligned timeout in
	// dst, pend or the network's receive queue (polling the latter up to
	// it); false: the channel failed or done.
	convertDue := func() bool {
		list := dst.drainQueue(nil)
		list = append(list, pend...)
		pend = nil
		k := slices.IndexFunc(list, func(env envelope[T]) bool { return env.recs == nil && isDue(env.ev) })
		for k < 0 {
			what, recs, ts, ev, err := in.Poll()
			switch {
			case err != nil:
				x.log.Warn("exchange: input channel failed", "channel", name, "peer", addr, "err", err)
				return false
			case what == network.Records:
				list = append(list, copyRecs(recs, ts))
			case what == network.Control && ev.Priority:
				// It goes ahead of all this; the barrier, if
				// it comes later, is converted on arrival.
				pend = list
				return takePriority(&ev)
			case what == network.Control:
				e, ok := event(ev)
				if !ok {
					return false
				}
				list = append(list, envelope[T]{ev: e})
				if isDue(e) {
					k = len(list) - 1
				}
			default: // not received yet: converted on arrival
				pend = list
				return true
			}
		}
		e := list[k].ev
		e.Unaligned, e.AlignedTimeoutMs = true, 0
		e.inflight = inflightOf(list[:k])
		// dst is empty but for what the consumer took meanwhile: room.
		if _, ok := dst.send(envelope[T]{ev: e}, done); !ok {
			return false
		}
		pend = append(list[:k:k], list[k+1:]...)
		return true
	}
	recv := func() {
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			if due.Swap(false) {
				if !convertDue() {
					return
				}
				continue
			}
			if in.PriorityQueued() > 0 {
				if !takePriority(nil) {
					return
				}
				continue
			}
			if len(pend) > 0 {
				env := pend[0]
				_, ok, woke := dst.sendOrWake2(env, done, in.PriorityBell(), dueBell)
				if !ok {
					return
				}
				if woke {
					continue
				}
				pend[0] = envelope[T]{}
				pend = pend[1:]
				if env.recs == nil && env.ev.Kind == EndOfPartition {
					return
				}
				continue
			}
			what, recs, ts, ev, err := in.Poll()
			switch {
			case err != nil:
				x.log.Warn("exchange: input channel failed", "channel", name, "peer", addr, "err", err)
				return
			case what == network.Records:
				pend = append(pend, copyRecs(recs, ts))
			case what == network.Control && ev.Priority:
				// It arrived after the check above: what it overtakes
				// is in dst.
				if !takePriority(&ev) {
					return
				}
			case what == network.Control:
				e, ok := event(ev)
				if !ok {
					return
				}
				pend = append(pend, envelope[T]{ev: e})
				if isDue(e) && !convertDue() {
					return
				}
			default:
				select {
				case <-gate.Doorbell():
				case <-in.PriorityBell():
				case <-dueBell:
				case <-done:
					return
				}
			}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pumps = append(x.pumps, recv)
	x.closers = append(x.closers, in.Cancel)
	return nil
}

// barrierOptions returns the options of a barrier received: those this
// exchange sent (both halves in this process), else those its payload
// names, with the store opened from its URL.
func (x *Exchange) barrierOptions(ev network.Event) (*BarrierOptions, error) {
	x.mu.Lock()
	o := x.opts[ev.ID]
	x.mu.Unlock()
	if o != nil {
		return o, nil
	}
	if len(ev.Payload) == 0 {
		return nil, nil
	}
	kind, url, dir, err := decodeBarrierOptions(ev.Payload)
	if err != nil {
		return nil, err
	}
	o = &BarrierOptions{Kind: kind, Dir: dir}
	if url != "" {
		if o.Store, err = x.stores.Open(url); err != nil {
			return nil, fmt.Errorf("open the checkpoint storage %q: %w", url, err)
		}
	}
	return o, nil
}

const barrierOptionsVersion = 1

// encodeBarrierOptions is a barrier's options as an event payload:
// version:u8 kind:u8 uvarint(len) storeURL uvarint(len) dir.
func encodeBarrierOptions(o *BarrierOptions) ([]byte, error) {
	url := ""
	if o.Store != nil {
		url = o.Store.URL()
	}
	b := []byte{barrierOptionsVersion, byte(o.Kind)}
	b = binary.AppendUvarint(b, uint64(len(url)))
	b = append(b, url...)
	b = binary.AppendUvarint(b, uint64(len(o.Dir)))
	b = append(b, o.Dir...)
	if len(b) > network.MaxEventPayload {
		return nil, fmt.Errorf("store URL and directory take %d bytes, more than the %d a barrier carries", len(b), network.MaxEventPayload)
	}
	return b, nil
}

var errBadOptions = errors.New("malformed barrier options")

func decodeBarrierOptions(b []byte) (kind checkpoint.Kind, url, dir string, err error) {
	if len(b) < 2 || b[0] != barrierOptionsVersion {
		return 0, "", "", errBadOptions
	}
	kind = checkpoint.Kind(b[1])
	b = b[2:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	url, ok1 = str()
	dir, ok2 = str()
	if !ok1 || !ok2 || len(b) != 0 {
		return 0, "", "", errBadOptions
	}
	return kind, url, dir, nil
}

// Start starts the pumps of every channel. Once they have all ended (at
// end of partition, or when the attempt stops) the exchange closes its
// channels (and its node, in local mode).
func (x *Exchange) Start() {
	x.mu.Lock()
	pumps := x.pumps
	x.pumps = nil
	halves := len(x.closers)
	x.mu.Unlock()
	for _, p := range pumps {
		x.wg.Go(p)
	}
	// channels counts the halves here: a bridged channel has both.
	x.log.Info("exchange over tcp", "addr", x.node.Addr(), "channels", halves)
	go func() {
		x.wg.Wait()
		x.Close()
	}()
}

// Close closes the exchange's channels (and its node in local mode): a
// pump blocked on the network ends with it. It is idempotent; an exchange
// whose attempt failed to build is closed without Start.
func (x *Exchange) Close() error {
	x.once.Do(func() {
		x.mu.Lock()
		closers := x.closers
		var buffers, bytes int64
		for _, m := range x.outs {
			buffers += m.BuffersOut.Load()
			bytes += m.BytesOut.Load()
		}
		x.mu.Unlock()
		for _, c := range closers {
			c()
		}
		if x.ownNode {
			x.node.Close()
		}
		x.log.Info("exchange over tcp closed", "addr", x.node.Addr(), "buffers", buffers, "bytes", bytes)
	})
	return nil
}

// inflightOf is copies of the records of envs, the input state of an
// unaligned barrier that a receiving pump moved ahead of them; nil (an
// untyped nil any, as Input.Poll expects) when there are none.
func inflightOf[T any](envs []envelope[T]) any {
	f := &inflightRecords[T]{}
	for _, env := range envs {
		if env.recs != nil {
			f.recs, f.ts = appendRecordsCopy(f.recs, f.ts, env.recs, env.ts)
		}
	}
	if len(f.recs) == 0 {
		return nil
	}
	return f
}
