// Package opstate redistributes operator (non-keyed) state when a job is
// restored, possibly with another parallelism: even-split lists are dealt
// in contiguous chunks, union lists go whole to every subtask, and every
// subtask gets one copy of each broadcast state (Flink's
// RoundRobinOperatorStateRepartitioner).
//
// The package is pure: it takes the subtask snapshots of a checkpoint's
// metadata and returns one new subtask's share. The root package's
// restore path calls it once per operator and subtask.
//
// # Usage
//
//	lists, broadcast := opstate.Redistribute(op.Subtasks, newParallelism, subtask)
package opstate
