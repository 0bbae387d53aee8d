// Package cluster is weir's cluster membership: a JobManager's registry of
// TaskManagers and their task slots, and the TaskManager's agent that
// registers with it, over the gRPC control plane of proto/weir/cluster/v1
// (generated code in pb).
//
// The pure cores are Liveness (heartbeat bookkeeping fed with events and
// their time), SlotPool (slots offered and allocated) and Backoff. The
// shells are JobManager (Start serves the control plane and watches
// heartbeats; Close stops and waits for every goroutine) and TaskManager
// (Run registers, answers heartbeats, reconnects with backoff, and returns
// once its goroutines ended).
//
// Security: with a cluster token every call must carry it; a JobManager or
// TaskManager on an address other than a loopback one needs a token;
// mutual TLS with TLSFiles. Nothing on the control plane accepts code.
//
// Not built yet: deploying tasks to TaskManagers, checkpoint calls, and
// failover of tasks (docs/cluster.md).
package cluster
