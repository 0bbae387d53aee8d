// Package heap is the state backend that keeps keyed state in Go maps, one map
// per state and key group, holding typed values (no serialization on access).
// Splitting by key group lets a snapshot or a rescale take whole key groups at
// a time.
package heap
