package ha

// OrphanForTest stops l's keep-alives without revoking its lease, as a
// process paused by SIGSTOP: the lease then expires on etcd's side.
func OrphanForTest(l *Leadership) { l.session.Orphan() }
