package weir

import (
	"fmt"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/runtime"
)

// port is one output of a node: its main output or a side output. Edges hang
// off ports and keep the record type.
type port[T any] struct {
	node  *nodeBase
	tag   string // "" for the main output
	edges []*typedEdge[T]
}

// output builds subtask s's Output for the port: the chained consumers'
// inputs and a record writer per non-chained edge.
// The port's records (the operator's records out, and the records in of
// its chained consumers: each gets every record) are counted once, at the
// least cost: by the first chained consumer that counts the records it
// receives (recordsInCounter: a plain increment in its Emit), else by a
// CountingOutput around the port's outputs (one more call per record).
func (p *port[T]) output(bc *buildCtx, s int) runtime.Output[T] {
	m := runtime.MetricsOf(bc.task(p.node, s))
	from := bc.chainIndex(p.node)
	var outs []runtime.Output[T]
	var uncounted []int // chained consumers that do not count
	for _, e := range p.edges {
		if !bc.jg.Chained[e.id] {
			outs = append(outs, e.writer(bc, s))
			continue
		}
		in := e.to.chainedInput(bc, s)
		outs = append(outs, in)
		j := bc.chainIndex(e.to.target())
		if rc, ok := in.(recordsInCounter); ok {
			m.AddCounter(rc.recordsIn(), from, []int{j})
			from = -1 // counted
		} else {
			uncounted = append(uncounted, j)
		}
	}
	var out runtime.Output[T]
	switch len(outs) {
	case 0:
		out = runtime.Discard[T]{}
	case 1:
		out = outs[0]
	default:
		out = runtime.FanOut[T](outs)
	}
	if from < 0 && len(uncounted) == 0 {
		return out
	}
	return &runtime.CountingOutput[T]{Out: out, Counter: m.NewCounter(from, uncounted)}
}

// recordsInCounter is implemented by operators that count the records
// their Emit receives (inCount).
type recordsInCounter interface {
	recordsIn() *metrics.Counter
}

// inCount counts the records into an operator: a plain integer of the
// task goroutine (metrics.Counter), incremented in the operator's Emit at
// the cost of one add, and published by the task.
type inCount struct{ in metrics.Counter }

func (c *inCount) recordsIn() *metrics.Counter { return &c.in }

// sidePort is the untyped face of a side-output port.
type sidePort interface {
	sideOutput(bc *buildCtx, s int) any
}

func (p *port[T]) sideOutput(bc *buildCtx, s int) any { return p.output(bc, s) }

// consumer is one input of a node, typed by the records it takes.
type consumer[T any] interface {
	target() *nodeBase
	// chainedInput builds the node's subtask s (if not yet built) and returns
	// its input.
	chainedInput(bc *buildCtx, s int) runtime.Output[T]
	// builtInput returns the input of the already built subtask s.
	builtInput(s int) runtime.Output[T]
}

// typedEdge connects a port to a consumer.
type typedEdge[T any] struct {
	edgeCommon
	to consumer[T]
	// keyGroup returns, for a new writer, a function computing a record's key
	// group (Hash edges only). One per writer: it may keep a scratch buffer.
	keyGroup func(maxPar int) func(T) int
	chans    [][]*runtime.Channel[T] // [consumer subtask][producer subtask]
	// wchans are the channels writers send into: chans, or with
	// Options.Exchange "tcp" the bridges that carry them over the network.
	wchans [][]*runtime.Channel[T]
	// stateCodec encodes the channel state of unaligned checkpoints; nil
	// when the edge keeps none (unaligned.go).
	stateCodec codec.Codec[T]
	// rescaled: the restored channel state was taken at other
	// parallelisms; rescaledRecs[c] is what consumer c replays.
	rescaled     bool
	rescaledRecs [][]T
	rescaledTS   [][]int64
}

func connectPort[T any](p *port[T], to consumer[T], input int, part graph.Partitioner, partSet bool, keyGroup func(int) func(T) int) {
	e := &typedEdge[T]{
		edgeCommon: edgeCommon{from: p.node, to: to.target(), port: p.tag, input: input, part: part, partSet: partSet},
		to:         to,
		keyGroup:   keyGroup,
	}
	p.edges = append(p.edges, e)
	p.node.env.addEdge(e)
}

func (e *typedEdge[T]) connected(c, p int) bool {
	return e.part != graph.Forward || c == p
}

func (e *typedEdge[T]) createChannels(bc *buildCtx) {
	prod, cons := bc.parallelism(e.from), bc.parallelism(e.to.target())
	e.chans = make([][]*runtime.Channel[T], cons)
	e.wchans = e.chans
	e.setupChannelState(bc, prod, cons)
	var cd codec.Codec[T]
	if bc.net != nil || bc.place != nil {
		var err error
		if cd, err = codec.Of[T](); err != nil && bc.place != nil && e.crosses(bc, prod, cons) {
			bc.fail(fmt.Errorf("the edge %s crosses workers, but its records have no codec: %w", e.describe(), err))
			return
		} else if err != nil {
			bc.logger.Debug("exchange tcp: edge stays in process", "err", err)
			cd = nil
		}
		if cd != nil {
			e.wchans = make([][]*runtime.Channel[T], cons)
		}
	}
	for c := range cons {
		e.chans[c] = make([]*runtime.Channel[T], prod)
		if cd != nil {
			e.wchans[c] = make([]*runtime.Channel[T], prod)
		}
		cHere := bc.hereNode(e.to.target(), c)
		for p := range prod {
			if !e.connected(c, p) {
				continue
			}
			pHere := bc.hereNode(e.from, p)
			switch {
			case cHere && pHere:
				doorbell := bc.task(e.to.target(), c).Doorbell
				e.chans[c][p] = runtime.NewChannel[T](bc.opts.QueueSize, doorbell, nil)
				if bc.net != nil && cd != nil {
					w, err := runtime.Bridge(bc.net, e.chans[c][p], cd, bc.stop)
					if err != nil {
						bc.fail(err)
						return
					}
					e.wchans[c][p] = w
				} else if cd != nil {
					e.wchans[c][p] = e.chans[c][p]
				}
			case pHere:
				// The consumer is on another worker: the writer sends into
				// a network output channel of this worker's node.
				w, err := runtime.Send(bc.remote, e.channelName(bc, p, c), cd, bc.opts.QueueSize, bc.stop)
				if err != nil {
					bc.fail(fmt.Errorf("edge %s: %w", e.describe(), err))
					return
				}
				e.wchans[c][p] = w
				// The producer's bytes out are those its network channels
				// sent (Flink's numBytesOut).
				runtime.MetricsOf(bc.task(e.from, p)).AddNetworkBytes(nil, &w.NetworkMetrics().BytesOut)
			case cHere:
				// The producer is on another worker: the input reads what
				// arrives from its node.
				doorbell := bc.task(e.to.target(), c).Doorbell
				e.chans[c][p] = runtime.NewChannel[T](bc.opts.QueueSize, doorbell, nil)
				addr := bc.place.Workers[bc.place.Worker(int(bc.jg.VertexOf[e.from.id]), p)]
				if err := runtime.Receive(bc.remote, e.chans[c][p], addr, e.channelName(bc, p, c), cd, bc.stop); err != nil {
					bc.fail(fmt.Errorf("edge %s: %w", e.describe(), err))
					return
				}
				runtime.MetricsOf(bc.task(e.to.target(), c)).AddNetworkBytes(&e.chans[c][p].NetworkMetrics().BytesIn, nil)
			}
		}
	}
}

// crosses reports whether a connected pair of e's subtasks runs on two
// workers.
func (e *typedEdge[T]) crosses(bc *buildCtx, prod, cons int) bool {
	for c := range cons {
		for p := range prod {
			if e.connected(c, p) && bc.hereNode(e.from, p) != bc.hereNode(e.to.target(), c) {
				return true
			}
		}
	}
	return false
}

// channelName names the network channel from producer p to consumer c of
// e: the job, its submission on a cluster (Placement.Run), the attempt and
// the edge, so that a channel of one attempt never connects to another's.
func (e *typedEdge[T]) channelName(bc *buildCtx, p, c int) string {
	job := bc.opts.JobID
	if bc.place != nil && bc.place.Run != "" {
		job += "/run-" + bc.place.Run
	}
	return fmt.Sprintf("%s/attempt-%d/edge-%d/%d->%d", job, bc.attempt, e.id, p, c)
}

// types implements edge.
func (e *typedEdge[T]) types() (string, string) {
	t := reflect.TypeFor[T]()
	rec := t.String()
	if t.PkgPath() != "" {
		rec = t.PkgPath() + "." + t.Name()
	}
	cd, err := codec.Of[T]()
	if err != nil {
		return rec, "none"
	}
	return rec, fmt.Sprintf("%T", cd)
}

func (e *typedEdge[T]) writer(bc *buildCtx, s int) runtime.Output[T] {
	var targets []*runtime.Channel[T]
	var consumers []int
	for c := range e.wchans {
		if e.connected(c, s) {
			targets = append(targets, e.wchans[c][s])
			consumers = append(consumers, c)
		}
	}
	o := runtime.WriterOptions[T]{
		Partitioner: e.part, MaxParallelism: bc.opts.MaxParallelism,
		BatchSize: bc.opts.BatchSize, Done: bc.stop, Subtask: s,
	}
	if e.part == graph.Hash {
		o.KeyGroup = e.keyGroup(bc.opts.MaxParallelism)
	}
	w := runtime.NewRecordWriter(targets, o)
	e.writerChannelState(bc, w, s, consumers)
	cfg := bc.task(e.from, s)
	cfg.Writers = append(cfg.Writers, w)
	return w
}

func (e *typedEdge[T]) attach(bc *buildCtx) {
	for c, row := range e.chans {
		if !bc.hereNode(e.to.target(), c) {
			continue
		}
		cfg := bc.task(e.to.target(), c)
		dst := e.to.builtInput(c)
		for p, ch := range row {
			if ch == nil {
				continue
			}
			in := runtime.NewInput(ch, dst, nil)
			e.inputChannelState(bc, in, p, c)
			cfg.Inputs = append(cfg.Inputs, in)
			cfg.InputGate = append(cfg.InputGate, e.input)
		}
	}
}

// oneInputOp is an operator with one input.
type oneInputOp[IN any] interface {
	runtime.Output[IN]
	runtime.Operator
}

// oneInputNode is a node with one input: map, filter, process, sink, ...
type oneInputNode[IN, OUT any] struct {
	nodeBase
	out  *port[OUT] // nil for sinks
	make func(env *opEnv, out runtime.Output[OUT]) oneInputOp[IN]
	inst []oneInputOp[IN]
}

func (n *oneInputNode[IN, OUT]) reset(par int)                       { n.inst = make([]oneInputOp[IN], par) }
func (n *oneInputNode[IN, OUT]) target() *nodeBase                   { return &n.nodeBase }
func (n *oneInputNode[IN, OUT]) builtInput(s int) runtime.Output[IN] { return n.inst[s] }
func (n *oneInputNode[IN, OUT]) buildHead(bc *buildCtx, s int)       { n.chainedInput(bc, s) }

func (n *oneInputNode[IN, OUT]) chainedInput(bc *buildCtx, s int) runtime.Output[IN] {
	if n.inst[s] == nil {
		env := bc.opEnv(&n.nodeBase, s)
		var out runtime.Output[OUT] = runtime.Discard[OUT]{}
		if n.out != nil {
			out = n.out.output(bc, s)
		}
		op := n.make(env, out)
		n.inst[s] = op
		bc.addOperator(&n.nodeBase, s, op, env)
	}
	return n.inst[s]
}

// twoInputOp is an operator with two inputs.
type twoInputOp[A, B any] interface {
	runtime.Operator
	input1() runtime.Output[A]
	input2() runtime.Output[B]
}

// twoInputNode is a node with two inputs of different types.
type twoInputNode[A, B, OUT any] struct {
	nodeBase
	out  *port[OUT]
	make func(env *opEnv, out runtime.Output[OUT]) twoInputOp[A, B]
	inst []twoInputOp[A, B]
}

func (n *twoInputNode[A, B, OUT]) reset(par int) { n.inst = make([]twoInputOp[A, B], par) }

func (n *twoInputNode[A, B, OUT]) buildHead(bc *buildCtx, s int) {
	if n.inst[s] == nil {
		env := bc.opEnv(&n.nodeBase, s)
		op := n.make(env, n.out.output(bc, s))
		n.inst[s] = op
		bc.addOperator(&n.nodeBase, s, op, env)
	}
}

// A two-input node never chains to its upstream (it has two input edges), so
// chainedInput is never called; it builds the node anyway for safety.
type firstInput[A, B, OUT any] struct{ n *twoInputNode[A, B, OUT] }

func (i firstInput[A, B, OUT]) target() *nodeBase { return &i.n.nodeBase }
func (i firstInput[A, B, OUT]) chainedInput(bc *buildCtx, s int) runtime.Output[A] {
	i.n.buildHead(bc, s)
	return i.n.inst[s].input1()
}
func (i firstInput[A, B, OUT]) builtInput(s int) runtime.Output[A] { return i.n.inst[s].input1() }

type secondInput[A, B, OUT any] struct{ n *twoInputNode[A, B, OUT] }

func (i secondInput[A, B, OUT]) target() *nodeBase { return &i.n.nodeBase }
func (i secondInput[A, B, OUT]) chainedInput(bc *buildCtx, s int) runtime.Output[B] {
	i.n.buildHead(bc, s)
	return i.n.inst[s].input2()
}
func (i secondInput[A, B, OUT]) builtInput(s int) runtime.Output[B] { return i.n.inst[s].input2() }
