// Package cli is weir's command line: the roles of a cluster (weir
// jobmanager, weir taskmanager, weir cluster start|stop), weir run in
// local mode and on a cluster, the REST clients (list, info, cancel,
// checkpoint, savepoint, stop, checkpoints), and the bundled jobs
// (wordcount, nexmark). Command weir (cmd/weir) is one call of Main.
//
// The tests of this package run the test binary as the weir binary (see
// TestMain): they start real processes of every role.
package cli
