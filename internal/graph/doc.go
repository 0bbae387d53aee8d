// Package graph turns the stream graph a user program builds into the graphs
// the runtime executes:
//
//	StreamGraph   one node per operator, one edge per connection (with its partitioner)
//	JobGraph      operators fused into chains (vertices); edges only between vertices
//	Plan          every vertex expanded into its subtasks, each with its key-group range
//
// The package is pure: it holds no user code and no types of records, only ids,
// names, parallelisms and partitioners. The root package keeps the typed halves
// of nodes and edges and looks them up by the ids used here.
//
// # Chaining
//
// An edge is chained (its two operators run in one task, records passed by a
// function call) when it is a forward edge, both ends have the same
// parallelism, the downstream operator has exactly this one input edge, and
// neither end disabled chaining. A node may chain to several downstream nodes.
package graph
