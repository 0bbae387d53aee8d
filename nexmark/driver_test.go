package nexmark

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/connector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// This file plays the part of the runtime: it enumerates splits, assigns
// split i to subtask i % parallelism, and drives each subtask's reader.

// stallTimeout is how long drain waits on Available before it calls the
// reader stuck. Inside a synctest bubble the wait is in fake time.
const stallTimeout = 10 * time.Second

// sliceEmitter collects what a reader emits, in order, with the timestamps.
type sliceEmitter struct {
	events []Event
	ts     []int64
}

func (e *sliceEmitter) Emit(ev Event) { e.EmitAt(ev, connector.NoTimestamp) }
func (e *sliceEmitter) EmitAt(ev Event, ts int64) {
	e.events = append(e.events, ev)
	e.ts = append(e.ts, ts)
}

func readerContext(subtask, parallelism int) connector.ReaderContext {
	return connector.ReaderContext{
		Subtask:           subtask,
		Parallelism:       parallelism,
		Logger:            slog.New(slog.DiscardHandler),
		RequestCheckpoint: func() {},
	}
}

func assignSplits(splits []connector.SplitState, parallelism int) [][]connector.SplitState {
	assigned := make([][]connector.SplitState, parallelism)
	for i, s := range splits {
		assigned[i%parallelism] = append(assigned[i%parallelism], s)
	}
	return assigned
}

// runSource runs src from its start and returns each subtask's events in
// emission order.
func runSource(t *testing.T, src connector.Source[Event], parallelism int) [][]Event {
	t.Helper()
	splits, err := src.Splits(t.Context(), parallelism)
	if err != nil {
		t.Fatalf("Splits(%d): %v", parallelism, err)
	}
	assigned := assignSplits(splits, parallelism)
	out := make([][]Event, parallelism)
	errs := make([]error, parallelism)
	var wg sync.WaitGroup
	for k := range parallelism {
		wg.Go(func() {
			r, err := src.NewReader(readerContext(k, parallelism))
			if err != nil {
				errs[k] = err
				return
			}
			defer r.Close()
			if err := r.AddSplits(assigned[k]); err != nil {
				errs[k] = err
				return
			}
			r.NoMoreSplits()
			var e sliceEmitter
			_, errs[k] = pollUntil(r, &e, -1)
			out[k] = e.events
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// pollUntil polls r until e holds at least n events (never, if n < 0) or
// the input ends, waiting on Available when told to.
func pollUntil(r connector.Reader[Event], e *sliceEmitter, n int) (connector.Status, error) {
	for n < 0 || len(e.events) < n {
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
func newReader(t *testing.T, src connector.Source[Event], subtask, parallelism int, splits []connector.SplitState) connector.Reader[Event] {
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

func drain(t *testing.T, r connector.Reader[Event]) []Event {
	t.Helper()
	var e sliceEmitter
	if _, err := pollUntil(r, &e, -1); err != nil {
		t.Fatal(err)
	}
	return e.events
}

// generate returns events [from, to) of the single-generator stream of cfg.
func generate(t testing.TB, cfg Config, from, to int64) []Event {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events := make([]Event, 0, to-from)
	for i := from; i < to; i++ {
		events = append(events, g.Event(i))
	}
	return events
}

// eventEqual reports whether two events hold equal records.
func eventEqual(a, b Event) bool {
	if a.Type != b.Type || a.Bid != b.Bid || (a.Person == nil) != (b.Person == nil) || (a.Auction == nil) != (b.Auction == nil) {
		return false
	}
	return (a.Person == nil || *a.Person == *b.Person) && (a.Auction == nil || *a.Auction == *b.Auction)
}

// diffEvents reports the first difference between two event sequences, as
// JSON.
func diffEvents(got, want []Event) string {
	for i := range min(len(got), len(want)) {
		if !eventEqual(got[i], want[i]) {
			return fmt.Sprintf("event %d:\n got %s\nwant %s", i, AppendJSON(nil, &got[i]), AppendJSON(nil, &want[i]))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d events, want %d", len(got), len(want))
	}
	return ""
}
