package file

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
)

// This file plays the part of the runtime, which does not exist yet: it
// enumerates splits, assigns split i to subtask i % parallelism, and drives
// each subtask's reader until EndOfInput.

// stallTimeout is how long drain waits on Available before it calls the
// reader stuck. Inside a synctest bubble the wait is in fake time.
const stallTimeout = 10 * time.Second

// sliceEmitter collects what a reader emits, in order.
type sliceEmitter[T any] struct{ recs []T }

func (e *sliceEmitter[T]) Emit(rec T)             { e.recs = append(e.recs, rec) }
func (e *sliceEmitter[T]) EmitAt(rec T, ts int64) { e.recs = append(e.recs, rec) }

func readerContext(subtask, parallelism int) connector.ReaderContext {
	return connector.ReaderContext{
		Subtask:     subtask,
		Parallelism: parallelism,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

// assignSplits gives split i to subtask i % parallelism.
func assignSplits(splits []connector.SplitState, parallelism int) [][]connector.SplitState {
	assigned := make([][]connector.SplitState, parallelism)
	for i, s := range splits {
		assigned[i%parallelism] = append(assigned[i%parallelism], s)
	}
	return assigned
}

// runSource runs src from its start with the given parallelism and returns
// the records of each subtask in emission order.
func runSource[T any](t *testing.T, src connector.Source[T], parallelism int) [][]T {
	t.Helper()
	splits, err := src.Splits(t.Context(), parallelism)
	if err != nil {
		t.Fatalf("Splits(%d): %v", parallelism, err)
	}
	return runSplits(t, src, parallelism, splits)
}

// runSplits runs the given split states, each subtask on its own goroutine
// as the runtime would.
func runSplits[T any](t *testing.T, src connector.Source[T], parallelism int, splits []connector.SplitState) [][]T {
	t.Helper()
	assigned := assignSplits(splits, parallelism)
	out := make([][]T, parallelism)
	errs := make([]error, parallelism)
	var wg sync.WaitGroup
	for k := range parallelism {
		wg.Go(func() { out[k], errs[k] = readSubtask(src, k, parallelism, assigned[k]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func readSubtask[T any](src connector.Source[T], subtask, parallelism int, splits []connector.SplitState) (recs []T, err error) {
	r, err := src.NewReader(readerContext(subtask, parallelism))
	if err != nil {
		return nil, fmt.Errorf("subtask %d: NewReader: %w", subtask, err)
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if err := r.AddSplits(splits); err != nil {
		return nil, fmt.Errorf("subtask %d: AddSplits: %w", subtask, err)
	}
	r.NoMoreSplits()
	recs, err = drain(r)
	if err != nil {
		return recs, fmt.Errorf("subtask %d: %w", subtask, err)
	}
	return recs, nil
}

// drain polls r until EndOfInput.
func drain[T any](r connector.Reader[T]) ([]T, error) {
	var e sliceEmitter[T]
	_, err := pollUntil(r, &e, -1)
	return e.recs, err
}

// pollUntil polls r until e holds at least n records (never, if n < 0) or
// the input ends, waiting on Available when told to, and returns the last
// status.
func pollUntil[T any](r connector.Reader[T], e *sliceEmitter[T], n int) (connector.Status, error) {
	for n < 0 || len(e.recs) < n {
		st, err := r.Poll(e)
		if err != nil {
			return st, fmt.Errorf("Poll: %w", err)
		}
		switch st {
		case connector.EndOfInput:
			return st, nil
		case connector.NothingAvailable:
			select {
			case <-r.Available():
			case <-time.After(stallTimeout):
				return st, errors.New("reader stalled: Available did not fire")
			}
		}
	}
	return connector.MoreAvailable, nil
}

// newReader returns a reader of src holding splits, closed at the end of
// the test.
func newReader[T any](t *testing.T, src connector.Source[T], subtask, parallelism int, splits []connector.SplitState) connector.Reader[T] {
	t.Helper()
	r, err := src.NewReader(readerContext(subtask, parallelism))
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.AddSplits(splits); err != nil {
		t.Fatalf("AddSplits: %v", err)
	}
	r.NoMoreSplits()
	return r
}

func splitIDs(states []connector.SplitState) []string {
	var ids []string
	for _, s := range states {
		ids = append(ids, s.ID)
	}
	return ids
}
