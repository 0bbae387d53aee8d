package runtime

import (
	"fmt"
	"log/slog"
)

// Operator is the lifecycle of one operator instance in a chain. The typed
// record path (Output[T]) is wired separately by whoever builds the chain.
// Every method runs on the task goroutine.
type Operator interface {
	// Open prepares the operator before the first record.
	Open() error
	// Finish is called once all of the operator's inputs have ended, in chain
	// order: the operator emits whatever it still holds.
	Finish() error
	// Close releases resources; called once, also after a failure.
	Close() error
}

// InputEnder is implemented by operators with several inputs that want to
// know when one of them ends.
type InputEnder interface {
	EndInput(input int) error
}

// Chained describes one operator of a task's chain.
type Chained struct {
	Name string
	Op   Operator
	// Keyed, when set, is the operator's keyed state. The task itself
	// delivers its checkpoint lifecycle — the snapshot after the
	// operator's own SnapshotState, NotifyKeyedComplete and
	// NotifyKeyedAborted before the operator's CheckpointListener — so
	// that no keyed operator has to forward them (Flink's
	// StreamOperatorStateHandler). Whoever builds the chain sets it for
	// every operator that has keyed state.
	Keyed KeyedState
}

// OperatorError is the error of a task failed by one of its operators.
type OperatorError struct {
	Operator    string
	Subtask     int
	Parallelism int
	Err         error
}

func (e *OperatorError) Error() string {
	return fmt.Sprintf("operator %q (subtask %d/%d): %v", e.Operator, e.Subtask+1, e.Parallelism, e.Err)
}

func (e *OperatorError) Unwrap() error { return e.Err }

// PanicError is the error of an operator that panicked.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Fail aborts the record being processed with err; the task ends with an
// OperatorError naming the operator of the current Cursor. Operators call it
// from Emit, which cannot return errors.
func Fail(err error) {
	panic(failure{err})
}

type failure struct{ err error }

// Cursor tracks which operator of a chain is running, so that a panic can be
// blamed on the right one. Operators set Current on entry to Emit.
type Cursor struct {
	Current int
	// Watermark is the task's current watermark, for operators to read.
	Watermark int64
}

// taskLogger returns l with the task's attributes.
func taskLogger(l *slog.Logger, name string, subtask int) *slog.Logger {
	return l.With("task", name, "subtask", subtask)
}
