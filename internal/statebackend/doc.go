// Package statebackend defines what every keyed state backend offers the
// operators that own it. A backend instance belongs to one subtask of one keyed
// operator: it holds the state of the key groups in the subtask's range, and it
// is used only from the subtask's goroutine, except for the asynchronous part
// of a snapshot, which reads a frozen view and never the live tables.
//
// Backends: heap (package heap) keeps typed Go maps per key group; pebble (a
// later issue) keeps bytes in an LSM tree under keyGroup|stateId|key|namespace.
// Both write snapshots in the canonical format of package format, so that
// state restores into either and across a change of parallelism.
//
// # Checkpoints
//
// On the task goroutine, in this order:
//
//  1. Restore(handles, open), once, if the task starts from a checkpoint;
//  2. register states (the user's Open): restored bytes are decoded here;
//  3. for each checkpoint, on its barrier: snap, err := Snapshot(id) — the
//     synchronous part — then forward the barrier and keep processing;
//  4. on another goroutine: handle, err := snap.WriteState(w);
//  5. back on the task goroutine (a mailbox message), after WriteState
//     returned, or at once if the checkpoint was aborted before it ran:
//     snap.Release().
//
// Until its Release a snapshot makes the first write to each part of the
// state it froze copy that part (the heap backend copies one key group of one
// state at a time), and the frozen parts stay in memory: a snapshot that is
// never released leaks them.
package statebackend
