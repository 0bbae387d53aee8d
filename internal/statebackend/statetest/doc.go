// Package statetest is the conformance suite of the keyed state backends:
// one suite, run by the heap and the pebble packages' tests against their
// backend with the other as the reference (Run), and the harness it is
// built on (Factory, Harness, the random operations Ops).
//
// The suite registers one state of every kind (value, list, map, reducing,
// aggregating) in every variant (without namespaces, namespaced, with a
// TTL of either update type) and checks:
//
//   - differentially, that the same random operations (every method of
//     every kind, namespaces, MergeNamespaces, a processing-time clock that
//     expires entries) read the same on both backends, and that their
//     snapshots are byte-identical;
//   - that each backend restores the other's snapshots, whole and by
//     key-group ranges (rescaling out to two ranges and back in to one from
//     snapshots of different backends);
//   - the semantics of each kind and of TTL (expiry, renewal on write or
//     read, expired entries left out of snapshots) on each backend alone;
//   - that registering a restored state as another kind, or with other
//     namespaces or TTL, fails with the same message on both.
//
// # Usage
//
//	func TestConformance(t *testing.T) { statetest.Run(t, statetest.Pebble, statetest.Heap) }
package statetest
