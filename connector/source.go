package connector

import (
	"context"
	"log/slog"
)

// Boundedness says whether a source ends.
type Boundedness int

const (
	// Bounded sources end once every split has been read; the job then finishes.
	Bounded Boundedness = iota
	// Unbounded sources run until the job is cancelled.
	Unbounded
)

func (b Boundedness) String() string {
	if b == Bounded {
		return "bounded"
	}
	return "unbounded"
}

// NoTimestamp marks a record that carries no event-time timestamp.
const NoTimestamp int64 = -1 << 63

// SplitState is one split of a source together with a read position in it. It
// is what a checkpoint stores for a source and what a reader is given back on
// restore, so every field must be plain data.
type SplitState struct {
	// ID identifies the split, stable across runs and processes (for example a
	// file path, or "range-3").
	ID string
	// Data is the source's own description of the split (a path, a numeric
	// range), opaque to weir.
	Data []byte
	// Position is where reading resumes, in the source's own encoding; nil means
	// the beginning of the split.
	Position []byte
}

// Source is a split-based source of records of type T. A Source value is a
// description: it holds configuration only, and may be shared by all subtasks.
type Source[T any] interface {
	// Boundedness reports whether the source ends.
	Boundedness() Boundedness
	// Splits enumerates the source's splits. It is called once, when a job
	// starts without restored state; splits are then assigned to subtasks
	// (split i to subtask i mod parallelism, or by the owner rule of a
	// SplitDiscoverer). A restored job reuses the split states of its
	// checkpoint instead.
	Splits(ctx context.Context, parallelism int) ([]SplitState, error)
	// NewReader creates the reader of one subtask. It must not start
	// goroutines; a reader that needs them starts them on its first Poll and
	// stops them in Close.
	NewReader(ctx ReaderContext) (Reader[T], error)
}

// ReaderContext tells a reader where it runs.
type ReaderContext struct {
	// Subtask is the index of the reader's subtask, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of subtasks of the source.
	Parallelism int
	// Logger is the subtask's logger; never nil.
	Logger *slog.Logger
	// RequestCheckpoint asks for a checkpoint as soon as possible: a reader
	// calls it when it reads a marker record that asks for one. Never nil;
	// safe to call from Poll only.
	RequestCheckpoint func()
}

// Status is what a reader reports after a Poll.
type Status int

const (
	// MoreAvailable means Poll should be called again soon.
	MoreAvailable Status = iota
	// NothingAvailable means the reader has nothing now; the task waits on
	// Available before it polls again.
	NothingAvailable
	// EndOfInput means every split assigned to the reader is finished and no
	// more will come. Poll is not called again.
	EndOfInput
)

// Emitter receives the records a reader produces during one Poll.
type Emitter[T any] interface {
	// Emit passes on a record without an event-time timestamp.
	Emit(rec T)
	// EmitAt passes on a record with an event-time timestamp (milliseconds).
	EmitAt(rec T, timestamp int64)
}

// BatchEmitter is implemented by the Emitter the runtime passes to Poll: a
// reader that produces records in runs may hand a whole run over in one
// call, which is much cheaper per record than Emit. EmitBatch(recs) has the
// effect of Emit(recs[i]) for each i in order (the records carry no
// timestamps). The emitter neither keeps nor modifies recs: the reader may
// reuse the slice as soon as the call returns. A reader must not rely on it
// being there (test emitters may lack it) and falls back to Emit.
type BatchEmitter[T any] interface {
	EmitBatch(recs []T)
}

// Reader reads the splits assigned to one subtask. All methods are called from
// the task's goroutine, never concurrently.
type Reader[T any] interface {
	// AddSplits assigns splits (with their start positions) to the reader.
	AddSplits(splits []SplitState) error
	// NoMoreSplits tells the reader that AddSplits will not be called again,
	// so that it can report EndOfInput once its splits are read.
	NoMoreSplits()
	// Poll emits the records that are available, at most a few thousand per
	// call so that the task stays responsive, and reports what follows. A
	// record emitted by Poll belongs to the position that a Snapshot taken
	// after this Poll returns, never to the one before.
	Poll(out Emitter[T]) (Status, error)
	// Available returns a channel that becomes ready (receives or is closed)
	// when a Poll may make progress again after it returned NothingAvailable.
	Available() <-chan struct{}
	// Snapshot returns the state of every split that is not finished, with the
	// position right after the last record emitted. Finished splits are left
	// out: they are never read again.
	Snapshot(checkpointID int64) ([]SplitState, error)
	// Close releases the reader's resources. It is called once, also after an
	// error.
	Close() error
}

// SplitOutputs is implemented by the Emitter the runtime passes to Poll. A
// reader that reads several splits at once emits each split's records
// through ForSplit(id), so that event-time watermarks are tracked per split
// (the subtask's watermark is the minimum over its active splits), and
// calls ReleaseSplit(id) once the split is finished, so that it no longer
// holds the watermark back. Readers that do not use it emit through the
// Emitter itself, and the subtask's records count as one split.
type SplitOutputs[T any] interface {
	ForSplit(id string) Emitter[T]
	ReleaseSplit(id string)
}
