// Package cli is weir's command line, for weir's own binary and for
// programs of their own: the roles of a cluster (jobmanager, taskmanager,
// cluster start|stop), run NAME in local mode and on a cluster, the REST
// clients (list, info, cancel, checkpoint, savepoint, stop, checkpoints).
//
// Main(jobs...) runs it with the program's jobs. Command weir (cmd/weir)
// is Main(Bundled()...): the bundled jobs wordcount and nexmark, with weir
// demo and weir nexmark. A program of its own passes its own Jobs, each a
// name, its flags and a Builder; every process of a cluster builds a
// submitted job from its name and flags with the same Builder, so code
// never travels (see Job, and examples/clusterjob).
//
// The tests of this package run the test binary as the weir binary (see
// TestMain): they start real processes of every role.
package cli
