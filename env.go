package weir

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/weirstream/weir/internal/adapt"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/runtime"
)

// Environment collects the operators of a job and runs them.
type Environment struct {
	opts  Options
	nodes []node
	edges []edge
	errs  []error
	uids  map[string]bool
	names map[string]int
}

// NewEnvironment returns an environment configured by opts. Options are
// validated by Execute.
func NewEnvironment(opts Options) *Environment {
	return &Environment{opts: opts, uids: make(map[string]bool), names: make(map[string]int)}
}

// Options returns the environment's options with defaults filled in.
func (e *Environment) Options() Options {
	o := e.opts
	o.EnsureDefaults()
	return o
}

func (e *Environment) fail(err error) { e.errs = append(e.errs, err) }

// nodeBase is the untyped part of every operator of the stream graph.
type nodeBase struct {
	env         *Environment
	id          graph.NodeID
	name, uid   string
	kind        graph.Kind
	parallelism int // 0: the environment's default
	inputs      int
	keyed       bool
	noChain     bool
	// assignsTimestamps marks AssignTimestampsAndWatermarks: records leave
	// it with event-time timestamps (event-time windows check for one).
	assignsTimestamps bool
	sides             map[string]sidePort
	sideTypes         map[string]reflect.Type
	// prepare, when set, runs once per deployment before any task starts
	// (sinks: re-commit and clean up after a restore).
	prepare func(bc *buildCtx) error
	// sink is the connector.Sink of a sink node (nil for other nodes).
	sink any
}

func (n *nodeBase) base() *nodeBase { return n }

// node is a stream-graph node as the builder sees it.
type node interface {
	base() *nodeBase
	// reset forgets the instances of a previous deployment.
	reset(parallelism int)
	// buildHead builds subtask s of the node when it heads a task.
	buildHead(bc *buildCtx, s int)
}

// edge is a stream-graph edge as the builder sees it.
type edge interface {
	common() *edgeCommon
	// createChannels creates the channels of a non-chained edge.
	createChannels(bc *buildCtx)
	// attach binds the channels' receiving ends to the consumer's subtasks.
	attach(bc *buildCtx)
	// types names the edge's record type and its codec's type ("none"
	// when the type has no codec): part of the graph's fingerprint.
	types() (record, codec string)
}

type edgeCommon struct {
	id       int
	from, to *nodeBase
	port     string
	input    int
	part     graph.Partitioner
	partSet  bool
}

func (c *edgeCommon) common() *edgeCommon { return c }

func (e *Environment) addNode(n node, name string, kind graph.Kind, inputs int) *nodeBase {
	b := n.base()
	b.env, b.id, b.kind, b.inputs = e, graph.NodeID(len(e.nodes)), kind, inputs
	if name == "" {
		name = kind.String()
	}
	b.name = name
	e.names[name]++
	uid := name
	for k := e.names[name]; e.uids[uid]; k++ {
		uid = fmt.Sprintf("%s-%d", name, k)
	}
	b.uid = uid
	e.uids[uid] = true
	e.nodes = append(e.nodes, n)
	return b
}

func (e *Environment) addEdge(ed edge) {
	c := ed.common()
	c.id = len(e.edges)
	e.edges = append(e.edges, ed)
}

// streamGraph resolves defaults and returns the pure graph.
func (e *Environment) streamGraph(opts Options) *graph.StreamGraph {
	sg := &graph.StreamGraph{MaxParallelism: opts.MaxParallelism}
	par := func(b *nodeBase) int {
		switch {
		case b.parallelism > 0 && opts.capParallelism:
			return min(b.parallelism, opts.Parallelism)
		case b.parallelism > 0:
			return b.parallelism
		}
		return opts.Parallelism
	}
	for _, n := range e.nodes {
		b := n.base()
		sg.Nodes = append(sg.Nodes, graph.Node{
			ID: b.id, UID: b.uid, Name: b.name, Kind: b.kind, Parallelism: par(b),
			Inputs: b.inputs, Keyed: b.keyed, NoChain: b.noChain,
		})
	}
	for _, ed := range e.edges {
		c := ed.common()
		if !c.partSet {
			c.part = graph.Forward
			if par(c.from) != par(c.to) {
				c.part = graph.Rebalance
			}
		}
		sg.Edges = append(sg.Edges, graph.Edge{ID: c.id, From: c.from.id, To: c.to.id, Port: c.port, Input: c.input, Partitioner: c.part})
	}
	return sg
}

// Execute runs the job and waits until it ends: all bounded sources are
// exhausted and their records processed (nil), ctx is cancelled (ctx's
// error), or an operator fails and the restart strategy gives up (an error
// naming the operator and subtask).
func (e *Environment) Execute(ctx context.Context, jobName string) error {
	c, err := e.ExecuteAsync(ctx, jobName)
	if err != nil {
		return err
	}
	return c.Wait()
}

func compile(e *Environment, opts Options, jobName string) (*graph.JobGraph, error) {
	jg, err := graph.Compile(e.streamGraph(opts))
	if err != nil {
		return nil, fmt.Errorf("job %q is not valid: %w", jobName, err)
	}
	return jg, nil
}

// buildCtx holds one deployment of a job graph.
type buildCtx struct {
	ctx    context.Context
	opts   Options
	jg     *graph.JobGraph
	stop   chan struct{}
	logger *slog.Logger
	tasks  [][]*runtime.TaskConfig // [vertex][subtask]
	err    error
	// restore is the checkpoint the deployment starts from, nil for none.
	restore   *jobmaster.Restored
	responder runtime.Responder
	attempt   int
	// net carries the non-chained edges over TCP (Options.Exchange "tcp").
	net *runtime.NetExchange
	// chans is the restored checkpoint's channel state (unaligned.go).
	chans *restoredChannels
	// self and place: on a worker of a cluster, the worker's id and the
	// attempt's placement, of which only self's subtasks are built; nil
	// place in local mode (every subtask is built).
	self  string
	place *deploy.Placement
	// remote carries the edges between self and other workers.
	remote *runtime.Exchange
}

// here reports whether subtask s of vertex v is built in this deployment.
func (bc *buildCtx) here(v graph.VertexID, s int) bool {
	return bc.place == nil || bc.place.Worker(int(v), s) == bc.self
}

// hereNode reports whether subtask s of n's vertex is built here.
func (bc *buildCtx) hereNode(n *nodeBase, s int) bool {
	return bc.here(bc.jg.VertexOf[n.id], s)
}

func (bc *buildCtx) fail(err error) {
	if bc.err == nil {
		bc.err = err
	}
}

func (bc *buildCtx) parallelism(n *nodeBase) int {
	return bc.jg.Stream.Nodes[n.id].Parallelism
}

func (bc *buildCtx) task(n *nodeBase, s int) *runtime.TaskConfig {
	return bc.tasks[bc.jg.VertexOf[n.id]][s]
}

func (bc *buildCtx) deploy(e *Environment) ([]*runtime.Task, error) {
	for _, n := range e.nodes {
		n.reset(bc.parallelism(n.base()))
	}
	bc.tasks = make([][]*runtime.TaskConfig, len(bc.jg.Vertices))
	for _, v := range bc.jg.Vertices {
		for s := range v.Parallelism {
			cfg := &runtime.TaskConfig{
				ID: fmt.Sprintf("%d-%d", v.ID, s), Name: v.Name, Subtask: s, Parallelism: v.Parallelism,
				Doorbell: make(chan struct{}, 1), Cursor: new(runtime.Cursor),
				Chain: make([]runtime.Chained, len(v.Nodes)), Logger: bc.logger,
				BufferTimeout: max(bc.opts.BufferTimeout, 0),
			}
			if bc.responder != nil {
				cc := &runtime.CheckpointConfig{Responder: bc.responder, Faults: bc.opts.Checkpointing.faults}
				if bc.opts.Checkpointing.Mode == AtLeastOnce {
					cc.Mode = checkpoint.AtLeastOnce
				}
				cc.Unaligned, cc.AlignedTimeout = bc.opts.Checkpointing.Unaligned, bc.opts.Checkpointing.AlignedTimeout
				for _, id := range v.Nodes {
					n := bc.jg.Stream.Nodes[id]
					cc.Operators = append(cc.Operators, runtime.OperatorInfo{UID: n.UID, Name: n.Name})
				}
				cfg.Checkpointing = cc
				cfg.CountRecords = bc.opts.Checkpointing.EveryNRecords > 0
			}
			for i, id := range v.Nodes {
				cfg.Chain[i].Name = bc.jg.Stream.Nodes[id].Name
			}
			bc.tasks[v.ID] = append(bc.tasks[v.ID], cfg)
		}
	}
	for _, ed := range e.edges {
		if !bc.jg.Chained[ed.common().id] {
			ed.createChannels(bc)
		}
	}
	for _, v := range bc.jg.Vertices {
		for s := range v.Parallelism {
			if bc.here(v.ID, s) {
				e.nodes[v.Head].buildHead(bc, s)
			}
		}
	}
	if bc.err != nil {
		return nil, bc.err
	}
	for _, ed := range e.edges {
		if !bc.jg.Chained[ed.common().id] {
			ed.attach(bc)
		}
	}
	if bc.err != nil {
		return nil, bc.err
	}
	if err := bc.checkChannelCoverage(e.edges); err != nil {
		return nil, err
	}
	if bc.place == nil {
		// On a cluster the JobManager prepares, before any worker deploys
		// (deploy.Plan.Prepare).
		if err := bc.prepareNodes(e); err != nil {
			return nil, err
		}
	}
	var tasks []*runtime.Task
	for v, vt := range bc.tasks {
		for s, cfg := range vt {
			if bc.here(graph.VertexID(v), s) {
				tasks = append(tasks, runtime.NewTask(*cfg))
			}
		}
	}
	return tasks, nil
}

// prepareNodes runs the nodes' prepare functions (sinks: re-commit and
// clean up after a restore), once per attempt before any task starts.
func (bc *buildCtx) prepareNodes(e *Environment) error {
	for _, n := range e.nodes {
		if p := n.base().prepare; p != nil {
			if err := p(bc); err != nil {
				return fmt.Errorf("operator %q: %w", n.base().name, err)
			}
		}
	}
	return nil
}

// opEnv is what an operator instance knows about its place in the job.
type opEnv struct {
	name, uid   string
	jobID       string
	subtask     int
	parallelism int
	maxPar      int
	keyGroups   keygroup.Range
	cursor      *runtime.Cursor
	index       int // position in the task's chain
	logger      *slog.Logger
	sides       map[string]any // side-output tag id -> runtime.Output[X]
	ctx         context.Context
	attempt     int
	// backend and stateDir choose the keyed state backend and its local
	// working directory (pebble).
	backend, stateDir string
	// filterLoop is the filters' loop: adaptive unless a test or
	// benchmark forced one (adapt.ForceFilterLoop).
	filterLoop string
	// incremental and localRecovery: Options.Checkpointing's.
	incremental, localRecovery bool
	// changelog: Options.Checkpointing.Changelog.
	changelog ChangelogOptions
	// restored is the operator's state from the checkpoint restored, nil
	// when there is none.
	restored  *restoredState
	responder runtime.Responder
	taskID    string

	// ops is the instance's operator list and broadcast state (opstate.go).
	ops *opStates
	// test: Options.Checkpointing's test hooks (nil in production).
	test *testHooks
	// keyed is the instance's keyed state, set by newKeyedEnv; addOperator
	// hands it to the task, which delivers its checkpoint lifecycle.
	keyed runtime.KeyedState
}

func (bc *buildCtx) opEnv(n *nodeBase, s int) *opEnv {
	idx := bc.chainIndex(n)
	par := bc.parallelism(n)
	env := &opEnv{
		name: n.name, uid: n.uid, jobID: bc.opts.JobID, subtask: s, parallelism: par,
		maxPar: bc.opts.MaxParallelism, cursor: bc.task(n, s).Cursor, index: idx,
		logger: bc.logger.With("operator", n.name, "subtask", s), ctx: bc.ctx,
	}
	if n.keyed {
		env.keyGroups = keygroup.RangeFor(bc.opts.MaxParallelism, par, s)
	}
	env.attempt, env.responder, env.taskID = bc.attempt, bc.responder, bc.task(n, s).ID
	env.backend, env.filterLoop = bc.opts.StateBackend, adapt.ForcedFilterLoop()
	env.incremental, env.localRecovery = bc.opts.Checkpointing.Incremental, bc.opts.Checkpointing.LocalRecovery
	env.changelog = bc.opts.Checkpointing.Changelog
	env.test = bc.opts.Checkpointing.test
	env.stateDir = bc.opts.localJobDir
	env.restored = bc.restoreFor(n, s, par, env)
	env.ops = newOpStates(s, bc.restore != nil, env.restored)
	if len(n.sides) > 0 {
		env.sides = make(map[string]any, len(n.sides))
		for tag, p := range n.sides {
			env.sides[tag] = p.sideOutput(bc, s)
		}
	}
	return env
}

// addOperator puts op, made with env, into its task's chain, with its keyed
// state if it has any.
func (bc *buildCtx) addOperator(n *nodeBase, s int, op runtime.Operator, env *opEnv) {
	c := &bc.task(n, s).Chain[bc.chainIndex(n)]
	c.Op = op
	if env != nil && env.keyed != nil {
		c.Keyed = env.keyed
	}
}

// chainIndex is n's position in its task's chain.
func (bc *buildCtx) chainIndex(n *nodeBase) int {
	return slices.Index(bc.jg.Vertices[bc.jg.VertexOf[n.id]].Nodes, n.id)
}
