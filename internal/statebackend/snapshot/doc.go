// Package snapshot holds the pure cores of the keyed-state checkpoint
// lifecycle of one operator instance, below the operators (which get it
// through runtime.KeyedState).
//
// Ledger is the task-side ledger of an instance's incremental checkpoints:
// which checkpoint's shared files are the base the next checkpoint refers
// to, which checkpoints are pending, and which local checkpoint
// directories may go. It does no I/O: the incremental lifecycle
// (internal/statebackend/incremental) feeds it events and carries out what
// it returns. Its behaviour is specified by the data-driven scripts under
// testdata/ledger.
package snapshot
