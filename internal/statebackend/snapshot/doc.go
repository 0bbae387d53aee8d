// Package snapshot holds the pure cores of the keyed-state checkpoint
// lifecycle of one operator instance, below the operators (which get it
// through runtime.KeyedState). Neither does I/O, reads a clock, locks or
// starts a goroutine (lint_test.go): the incremental lifecycle
// (internal/statebackend/incremental) feeds them events and carries out
// what they return.
//
// Ledger is the task-side ledger of an instance's incremental checkpoints:
// which checkpoint's shared files are the base the next checkpoint refers
// to, which checkpoints are pending, and which local checkpoint
// directories may go. Its behaviour is specified by the data-driven
// scripts under testdata/ledger.
//
// ChangelogLedger is the ledger of an instance's changelog checkpoints:
// events in (the log cut or failed, a snapshot taken, a checkpoint
// uploaded, complete or aborted, a materialization ready or failed, a
// restore, close), actions out (open or close the log, take a
// materialization, what a checkpoint refers to and uploads, drop a
// materialization, remove local segments and directories). Its behaviour
// is specified by the scripts under testdata/changelog, whose driver also
// checks the rule the job master's shared-state registry deletes files by.
package snapshot
