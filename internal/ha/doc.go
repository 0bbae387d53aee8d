// Package ha is JobManager high availability on etcd, as Flink's
// ZooKeeper and Kubernetes HA services: the JobManagers of a cluster
// campaign for leadership (an etcd lease, concurrency.Session, and
// Election.Campaign); the leader serves the control plane; the standbys
// wait and point to the leader; and etcd keeps what a new leader needs to
// take over: the submitted jobs, each job's checkpoint id counter and the
// pointer to its latest completed checkpoint (the checkpoint itself stays
// in checkpoint storage).
//
// # Fencing
//
// Every write of the leader is a transaction guarded by its leadership:
// Compare(CreateRevision(leaderKey), "=", revision). Once the leader's
// lease expired (it was paused, partitioned or too slow) its election key
// is gone, the guard fails and the write is refused with ErrNotLeader,
// even if the old leader has not noticed yet. A deposed leader can
// therefore never move a checkpoint pointer or a counter. The revision is
// also the control plane's fencing token (the JobManager session
// TaskManagers register with).
//
// # Pure parts
//
// Keys (the key layout) and Plan (what a new leader recovers from what it
// read) read nothing and are tested alone.
//
// # Usage
//
//	c, err := ha.Dial(ctx, ha.Options{Endpoints: eps, ClusterID: "prod"})
//	defer c.Close()
//	l, err := c.Campaign(ctx, ha.LeaderInfo{Name: n, RPCAddress: rpc, RESTURL: url})
//	defer l.Resign(context.Background())
//	store := l.Store()          // guarded writes
//	plan, err := store.Recover(ctx)
//	select { case <-l.Done(): /* deposed: stop serving */ }
package ha
