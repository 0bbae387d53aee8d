package graph

import (
	"strings"
	"testing"
)

// g builds a stream graph from a compact description: nodes "name:kind:par"
// and edges "from>to:partitioner[:input]".
func g(t *testing.T, nodes []string, edges []string) *StreamGraph {
	t.Helper()
	sg := &StreamGraph{MaxParallelism: 128}
	ids := map[string]NodeID{}
	for i, spec := range nodes {
		f := strings.Split(spec, ":")
		n := Node{ID: NodeID(i), UID: f[0], Name: f[0], Parallelism: atoi(f[2])}
		switch f[1] {
		case "src":
			n.Kind = Source
		case "op":
			n.Kind, n.Inputs = Operator, 1
		case "op2":
			n.Kind, n.Inputs = Operator, 2
		case "key":
			n.Kind, n.Inputs, n.Keyed = Operator, 1, true
		case "nochain":
			n.Kind, n.Inputs, n.NoChain = Operator, 1, true
		case "sink":
			n.Kind, n.Inputs = Sink, 1
		}
		ids[f[0]] = n.ID
		sg.Nodes = append(sg.Nodes, n)
	}
	for i, spec := range edges {
		f := strings.Split(spec, ":")
		ends := strings.Split(f[0], ">")
		e := Edge{ID: i, From: ids[ends[0]], To: ids[ends[1]]}
		switch f[1] {
		case "fwd":
			e.Partitioner = Forward
		case "rebalance":
			e.Partitioner = Rebalance
		case "hash":
			e.Partitioner = Hash
		case "broadcast":
			e.Partitioner = Broadcast
		}
		if len(f) > 2 {
			e.Input = atoi(f[2])
		}
		sg.Edges = append(sg.Edges, e)
	}
	return sg
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestChaining(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		edges []string
		want  string
	}{
		{
			name:  "stateless chain fuses into one task",
			nodes: []string{"src:src:1", "map:op:1", "filter:op:1", "sink:sink:1"},
			edges: []string{"src>map:fwd", "map>filter:fwd", "filter>sink:fwd"},
			want:  "v0 [p=1] src -> map -> filter -> sink\n",
		},
		{
			name:  "hash edge breaks the chain",
			nodes: []string{"src:src:2", "split:op:2", "count:key:2", "sink:sink:2"},
			edges: []string{"src>split:fwd", "split>count:hash", "count>sink:fwd"},
			want:  "v0 [p=2] src -> split\nv1 [p=2] count -> sink <- v0/HASH/in0\n",
		},
		{
			name:  "different parallelism breaks the chain",
			nodes: []string{"src:src:1", "map:op:2", "sink:sink:2"},
			edges: []string{"src>map:rebalance", "map>sink:fwd"},
			want:  "v0 [p=1] src\nv1 [p=2] map -> sink <- v0/REBALANCE/in0\n",
		},
		{
			name:  "rebalance with equal parallelism is not chained",
			nodes: []string{"src:src:2", "map:op:2", "sink:sink:2"},
			edges: []string{"src>map:rebalance", "map>sink:fwd"},
			want:  "v0 [p=2] src\nv1 [p=2] map -> sink <- v0/REBALANCE/in0\n",
		},
		{
			name:  "broadcast is not chained",
			nodes: []string{"src:src:2", "sink:sink:2"},
			edges: []string{"src>sink:broadcast"},
			want:  "v0 [p=2] src\nv1 [p=2] sink <- v0/BROADCAST/in0\n",
		},
		{
			name:  "union input (two edges) is not chained",
			nodes: []string{"a:src:1", "b:src:1", "map:op:1", "sink:sink:1"},
			edges: []string{"a>map:fwd", "b>map:fwd", "map>sink:fwd"},
			want:  "v0 [p=1] a\nv1 [p=1] b\nv2 [p=1] map -> sink <- v0/FORWARD/in0,v1/FORWARD/in0\n",
		},
		{
			name:  "two-input operator is not chained",
			nodes: []string{"a:src:1", "b:src:1", "co:op2:1", "sink:sink:1"},
			edges: []string{"a>co:fwd:0", "b>co:fwd:1", "co>sink:fwd"},
			want:  "v0 [p=1] a\nv1 [p=1] b\nv2 [p=1] co -> sink <- v0/FORWARD/in0,v1/FORWARD/in1\n",
		},
		{
			name:  "disabled chaining starts a new chain",
			nodes: []string{"src:src:1", "map:nochain:1", "sink:sink:1"},
			edges: []string{"src>map:fwd", "map>sink:fwd"},
			want:  "v0 [p=1] src\nv1 [p=1] map -> sink <- v0/FORWARD/in0\n",
		},
		{
			name:  "fan-out chains both branches",
			nodes: []string{"src:src:1", "a:sink:1", "b:sink:1"},
			edges: []string{"src>a:fwd", "src>b:fwd"},
			want:  "v0 [p=1] src -> a -> b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jg, err := Compile(g(t, tt.nodes, tt.edges))
			if err != nil {
				t.Fatal(err)
			}
			if got := jg.Describe(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		edges []string
		want  string
	}{
		{"empty", nil, nil, "no operators"},
		{"forward with different parallelism", []string{"src:src:1", "sink:sink:2"}, []string{"src>sink:fwd"}, `forward edge "src" -> "sink" joins parallelism 1 to 2`},
		{"dangling operator", []string{"src:src:1", "map:op:1", "sink:sink:1"}, []string{"src>sink:fwd", "src>map:fwd"}, `operator "map": its output goes nowhere`},
		{"unconnected input", []string{"src:src:1", "sink:sink:1"}, nil, `operator "sink": input 0 is not connected`},
		{"zero parallelism", []string{"src:src:0", "sink:sink:0"}, []string{"src>sink:fwd"}, `parallelism 0`},
		{"keyed parallelism above max", []string{"src:src:1", "k:key:200", "sink:sink:200"}, []string{"src>k:hash", "k>sink:fwd"}, `operator "k"`},
		{"duplicate uid", []string{"src:src:1", "src:sink:1"}, []string{"src>src:fwd"}, `share the uid "src"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(g(t, tt.nodes, tt.edges))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestPlanKeyGroups(t *testing.T) {
	jg, err := Compile(g(t, []string{"src:src:2", "k:key:3", "sink:sink:3"}, []string{"src>k:hash", "k>sink:fwd"}))
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlan(jg)
	var got []string
	for _, task := range p.Tasks {
		got = append(got, task.ID()+"="+task.KeyGroups.String())
	}
	want := "0-0=" + emptyRange() + " 0-1=" + emptyRange() + " 1-0=[0, 43) 1-1=[43, 86) 1-2=[86, 128)"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("plan = %s\nwant   %s", s, want)
	}
}

func emptyRange() string { var r TaskSpec; return r.KeyGroups.String() }
