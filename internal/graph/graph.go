package graph

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/keygroup"
)

// NodeID identifies a node of a stream graph: its index in StreamGraph.Nodes.
type NodeID int

// Partitioner decides which downstream subtask receives a record.
type Partitioner int

const (
	// Forward sends subtask i's records to subtask i; both sides must have the same parallelism.
	Forward Partitioner = iota
	// Rebalance distributes records round-robin over all downstream subtasks.
	Rebalance
	// Hash sends a record to the subtask owning its key group.
	Hash
	// Broadcast sends every record to every downstream subtask.
	Broadcast
)

var partitionerNames = [...]string{"FORWARD", "REBALANCE", "HASH", "BROADCAST"}

func (p Partitioner) String() string {
	if int(p) < len(partitionerNames) {
		return partitionerNames[p]
	}
	return fmt.Sprintf("Partitioner(%d)", int(p))
}

// Kind is the role of a node.
type Kind int

const (
	// Source nodes have no inputs.
	Source Kind = iota
	// Operator nodes have one or two inputs and an output.
	Operator
	// Sink nodes have one input and no output.
	Sink
)

func (k Kind) String() string {
	switch k {
	case Source:
		return "source"
	case Operator:
		return "operator"
	default:
		return "sink"
	}
}

// Node is one operator of the stream graph.
type Node struct {
	ID   NodeID
	UID  string // stable identity, used to match state to operators across restarts
	Name string
	Kind Kind
	// Parallelism is the number of subtasks; always > 0 in a built graph.
	Parallelism int
	// Inputs is the number of logical inputs: 0 for sources, 1 or 2 otherwise.
	Inputs int
	// Keyed marks an operator that consumes a keyed stream and may use keyed state.
	Keyed bool
	// NoChain forbids chaining this node to its upstream (start a new chain).
	NoChain bool
}

// Edge connects an output of one node to a logical input of another.
type Edge struct {
	ID   int
	From NodeID
	To   NodeID
	// Port is "" for the main output, or the id of a side-output tag.
	Port string
	// Input is the logical input of To that the edge feeds (0 or 1).
	Input       int
	Partitioner Partitioner
}

// StreamGraph is the graph a program builds, one node per operator.
type StreamGraph struct {
	Nodes []Node
	Edges []Edge
	// MaxParallelism is the number of key groups of every keyed operator.
	MaxParallelism int
}

// Validate checks the graph's structure. Errors name the offending operator.
func (g *StreamGraph) Validate() error {
	if len(g.Nodes) == 0 {
		return errors.New("the job has no operators: add a source and a sink")
	}
	var errs []error
	uids := make(map[string]NodeID)
	for i, n := range g.Nodes {
		if n.ID != NodeID(i) {
			errs = append(errs, fmt.Errorf("node %d has id %d", i, n.ID))
		}
		if n.Parallelism < 1 {
			errs = append(errs, fmt.Errorf("operator %q: parallelism %d, want >= 1", n.Name, n.Parallelism))
		}
		if n.Keyed {
			if err := keygroup.Validate(g.MaxParallelism, n.Parallelism); err != nil {
				errs = append(errs, fmt.Errorf("operator %q: %w", n.Name, err))
			}
		}
		if prev, dup := uids[n.UID]; dup {
			errs = append(errs, fmt.Errorf("operators %q and %q share the uid %q: uids must be unique", g.Nodes[prev].Name, n.Name, n.UID))
		}
		uids[n.UID] = n.ID
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	inputs := make([][2]int, len(g.Nodes))
	outputs := make([]int, len(g.Nodes))
	for _, e := range g.Edges {
		from, to := g.Nodes[e.From], g.Nodes[e.To]
		if from.Kind == Sink {
			errs = append(errs, fmt.Errorf("sink %q cannot have outputs", from.Name))
		}
		if to.Kind == Source {
			errs = append(errs, fmt.Errorf("source %q cannot have inputs", to.Name))
		}
		if e.Input < 0 || e.Input >= max(to.Inputs, 1) {
			errs = append(errs, fmt.Errorf("operator %q has no input %d", to.Name, e.Input))
			continue
		}
		if e.Partitioner == Forward && from.Parallelism != to.Parallelism {
			errs = append(errs, fmt.Errorf("forward edge %q -> %q joins parallelism %d to %d: use Rebalance or equal parallelism",
				from.Name, to.Name, from.Parallelism, to.Parallelism))
		}
		inputs[e.To][e.Input]++
		outputs[e.From]++
	}
	for _, n := range g.Nodes {
		for in := range n.Inputs {
			if inputs[n.ID][in] == 0 {
				errs = append(errs, fmt.Errorf("operator %q: input %d is not connected", n.Name, in))
			}
		}
		if n.Kind != Sink && outputs[n.ID] == 0 {
			errs = append(errs, fmt.Errorf("operator %q: its output goes nowhere: add a sink (SinkTo) or remove it", n.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, err := g.topoOrder(); err != nil {
		return err
	}
	return nil
}

func (g *StreamGraph) topoOrder() ([]NodeID, error) {
	indeg := make([]int, len(g.Nodes))
	for _, e := range g.Edges {
		indeg[e.To]++
	}
	var queue, order []NodeID
	for _, n := range g.Nodes {
		if indeg[n.ID] == 0 {
			queue = append(queue, n.ID)
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		order = append(order, id)
		for _, e := range g.Edges {
			if e.From == id {
				indeg[e.To]--
				if indeg[e.To] == 0 {
					queue = append(queue, e.To)
				}
			}
		}
	}
	if len(order) != len(g.Nodes) {
		return nil, errors.New("the job graph has a cycle")
	}
	return order, nil
}

// Chainable reports whether edge e can be fused into one task.
func (g *StreamGraph) Chainable(e Edge) bool {
	from, to := g.Nodes[e.From], g.Nodes[e.To]
	if e.Partitioner != Forward || from.Parallelism != to.Parallelism || to.NoChain {
		return false
	}
	if from.Kind == Sink || to.Kind == Source {
		return false
	}
	in := 0
	for _, o := range g.Edges {
		if o.To == e.To {
			in++
		}
	}
	return in == 1
}

// VertexID identifies a job vertex: its index in JobGraph.Vertices.
type VertexID int

// Vertex is a chain of operators that runs as one task per subtask.
type Vertex struct {
	ID   VertexID
	Name string // "a -> b -> c", as Flink names chains
	// Head is the node that receives the vertex's inputs (or the source).
	Head NodeID
	// Nodes are the chained nodes in topological order, Head first.
	Nodes       []NodeID
	Parallelism int
	// Keyed marks a vertex whose head consumes a keyed stream.
	Keyed bool
	// Inputs are the edges that cross into this vertex, in stream-graph order.
	Inputs []Edge
	// Outputs are the edges that leave this vertex, in stream-graph order.
	Outputs []Edge
}

// JobGraph is the stream graph with chains fused into vertices.
type JobGraph struct {
	Stream   *StreamGraph
	Vertices []Vertex
	// VertexOf maps each node to its vertex.
	VertexOf []VertexID
	// Chained marks, by edge id, the edges inside a vertex.
	Chained map[int]bool
}

// Compile validates g and fuses chainable edges into vertices.
func Compile(g *StreamGraph) (*JobGraph, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	order, _ := g.topoOrder()
	jg := &JobGraph{Stream: g, VertexOf: make([]VertexID, len(g.Nodes)), Chained: make(map[int]bool)}
	for _, e := range g.Edges {
		if g.Chainable(e) {
			jg.Chained[e.ID] = true
		}
	}
	chainedInput := make([]bool, len(g.Nodes))
	for _, e := range g.Edges {
		if jg.Chained[e.ID] {
			chainedInput[e.To] = true
		}
	}
	for i := range jg.VertexOf {
		jg.VertexOf[i] = -1
	}
	// Heads in topological order, so vertex ids follow the data flow.
	for _, id := range order {
		if chainedInput[id] {
			continue
		}
		vid := VertexID(len(jg.Vertices))
		v := Vertex{ID: vid, Head: id, Parallelism: g.Nodes[id].Parallelism, Keyed: g.Nodes[id].Keyed}
		members := map[NodeID]bool{id: true}
		frontier := []NodeID{id}
		for len(frontier) > 0 {
			n := frontier[0]
			frontier = frontier[1:]
			for _, e := range g.Edges {
				if e.From == n && jg.Chained[e.ID] && !members[e.To] {
					members[e.To] = true
					frontier = append(frontier, e.To)
				}
			}
		}
		for _, n := range order {
			if members[n] {
				v.Nodes = append(v.Nodes, n)
				jg.VertexOf[n] = vid
			}
		}
		names := make([]string, len(v.Nodes))
		for i, n := range v.Nodes {
			names[i] = g.Nodes[n].Name
		}
		v.Name = strings.Join(names, " -> ")
		jg.Vertices = append(jg.Vertices, v)
	}
	for _, e := range g.Edges {
		if jg.Chained[e.ID] {
			continue
		}
		jg.Vertices[jg.VertexOf[e.From]].Outputs = append(jg.Vertices[jg.VertexOf[e.From]].Outputs, e)
		jg.Vertices[jg.VertexOf[e.To]].Inputs = append(jg.Vertices[jg.VertexOf[e.To]].Inputs, e)
	}
	return jg, nil
}

// Describe renders the job graph one vertex per line, for tests and logs.
func (jg *JobGraph) Describe() string {
	var b strings.Builder
	for _, v := range jg.Vertices {
		fmt.Fprintf(&b, "v%d [p=%d] %s", v.ID, v.Parallelism, v.Name)
		var ins []string
		for _, e := range v.Inputs {
			ins = append(ins, fmt.Sprintf("v%d/%s/in%d", jg.VertexOf[e.From], e.Partitioner, e.Input))
		}
		slices.Sort(ins)
		if len(ins) > 0 {
			fmt.Fprintf(&b, " <- %s", strings.Join(ins, ","))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TaskSpec is one subtask of a vertex.
type TaskSpec struct {
	Vertex      VertexID
	Subtask     int
	Parallelism int
	// KeyGroups is the range of key groups the subtask owns (empty unless the
	// vertex is keyed).
	KeyGroups keygroup.Range
}

// ID is the task's id, stable for a graph: "<vertex>-<subtask>".
func (t TaskSpec) ID() string { return fmt.Sprintf("%d-%d", t.Vertex, t.Subtask) }

// Plan is the set of subtasks to run.
type Plan struct {
	Job   *JobGraph
	Tasks []TaskSpec
}

// NewPlan expands every vertex into its subtasks.
func NewPlan(jg *JobGraph) *Plan {
	p := &Plan{Job: jg}
	for _, v := range jg.Vertices {
		for s := range v.Parallelism {
			t := TaskSpec{Vertex: v.ID, Subtask: s, Parallelism: v.Parallelism}
			if v.Keyed {
				t.KeyGroups = keygroup.RangeFor(jg.Stream.MaxParallelism, v.Parallelism, s)
			}
			p.Tasks = append(p.Tasks, t)
		}
	}
	return p
}
