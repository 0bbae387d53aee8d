package collect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
)

func writerContext(subtask, parallelism, attempt int) connector.WriterContext {
	return connector.WriterContext{
		JobID:       "job-1",
		Subtask:     subtask,
		Parallelism: parallelism,
		Attempt:     attempt,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

func TestCollector(t *testing.T) {
	const parallelism, perSubtask = 4, 250
	c := New[string]()
	var wg sync.WaitGroup
	errs := make([]error, parallelism)
	for k := range parallelism {
		w, err := c.NewWriter(writerContext(k, parallelism, 0))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer w.Close()
			for i := range perSubtask {
				if err := w.Write(fmt.Sprintf("%d/%03d", k, i)); err != nil {
					errs[k] = err
					return
				}
			}
			errs[k] = w.Flush(true)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := c.Results()
	if c.Len() != len(got) {
		t.Errorf("Len() = %d, Results has %d", c.Len(), len(got))
	}
	// Each subtask's records keep their order.
	for k := range parallelism {
		var mine, want []string
		for _, r := range got {
			if strings.HasPrefix(r, fmt.Sprintf("%d/", k)) {
				mine = append(mine, r)
			}
		}
		for i := range perSubtask {
			want = append(want, fmt.Sprintf("%d/%03d", k, i))
		}
		if !slices.Equal(mine, want) {
			t.Errorf("subtask %d: collected %v, want %v", k, mine, want)
		}
	}
	if len(got) != parallelism*perSubtask {
		t.Errorf("collected %d records, want %d", len(got), parallelism*perSubtask)
	}
}

func TestCollectorResultsIsACopy(t *testing.T) {
	c := New[int]()
	w, err := c.NewWriter(writerContext(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(1)
	got := c.Results()
	got[0] = 99
	w.Write(2)
	if want := []int{1, 2}; !slices.Equal(c.Results(), want) {
		t.Errorf("Results() = %v, want %v", c.Results(), want)
	}
}

func TestCollectorClose(t *testing.T) {
	c := New[int]()
	w, err := c.NewWriter(writerContext(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Write(1); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: err = %v", err)
	}
	if c.Len() != 0 {
		t.Errorf("a closed writer collected %v", c.Results())
	}
}

func TestCollectorIsNotTwoPhase(t *testing.T) {
	c := New[int]()
	if _, ok := any(c).(connector.Committer); ok {
		t.Error("Collector is a Committer")
	}
	w, err := c.NewWriter(writerContext(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.(connector.PreCommitter); ok {
		t.Error("Collector's writer is a PreCommitter")
	}
}

func TestInvalidWriterContext(t *testing.T) {
	for _, s := range []connector.Sink[int]{New[int](), Transactional[int]()} {
		for _, ctx := range []connector.WriterContext{writerContext(1, 1, 0), writerContext(-1, 1, 0), writerContext(0, 0, 0), writerContext(0, 1, -1)} {
			if _, err := s.NewWriter(ctx); err == nil || !strings.Contains(err.Error(), "invalid writer context") {
				t.Errorf("%T.NewWriter(%+v): err = %v", s, ctx, err)
			}
		}
	}
}

// txHarness drives transactional writers the way the runtime will.
type txHarness struct {
	t *testing.T
	c *TransactionalCollector[string]
}

func (h txHarness) writer(subtask, parallelism, attempt int) *txWriter[string] {
	h.t.Helper()
	w, err := h.c.NewWriter(writerContext(subtask, parallelism, attempt))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { w.Close() })
	return w.(*txWriter[string])
}

func (h txHarness) write(w connector.Writer[string], recs ...string) {
	h.t.Helper()
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			h.t.Fatal(err)
		}
	}
}

// checkpoint runs the synchronous part of checkpoint id on one subtask:
// Flush, then PreCommit.
func (h txHarness) checkpoint(w *txWriter[string], id int64, subtask int) connector.Committable {
	h.t.Helper()
	if err := w.Flush(false); err != nil {
		h.t.Fatal(err)
	}
	data, err := w.PreCommit(id)
	if err != nil {
		h.t.Fatalf("PreCommit(%d): %v", id, err)
	}
	return connector.Committable{CheckpointID: id, Subtask: subtask, Data: data}
}

func (h txHarness) commit(cs ...connector.Committable) {
	h.t.Helper()
	if err := h.c.Commit(h.t.Context(), cs); err != nil {
		h.t.Fatalf("Commit: %v", err)
	}
}

func (h txHarness) expect(step string, want ...string) {
	h.t.Helper()
	if got := h.c.Results(); !slices.Equal(got, want) {
		h.t.Errorf("%s: results = %q, want %q", step, got, want)
	}
	if h.c.Len() != len(want) {
		h.t.Errorf("%s: Len() = %d, want %d", step, h.c.Len(), len(want))
	}
}

func TestTransactionalStory(t *testing.T) {
	h := txHarness{t, Transactional[string]()}

	w := h.writer(0, 1, 0)
	h.write(w, "a", "b")
	h.expect("written, not pre-committed")
	c1 := h.checkpoint(w, 1, 0)
	h.expect("pre-committed, not committed")
	if got := h.c.Pending(); got != 1 {
		t.Errorf("Pending() = %d, want 1", got)
	}

	h.write(w, "c")
	c2 := h.checkpoint(w, 2, 0)
	h.write(w, "d") // open when the writer fails
	h.commit(c1)
	h.expect("checkpoint 1 complete", "a", "b")
	h.commit(c1)
	h.expect("checkpoint 1 committed again", "a", "b")

	// The job fails before checkpoint 2 completes and restarts from it: the
	// runtime commits its committables again, and the source replays "d".
	w.Close()
	w = h.writer(0, 1, 1)
	h.commit(c1, c2)
	h.expect("restored from checkpoint 2", "a", "b", "c")
	h.commit(c2)
	h.expect("checkpoint 2 committed a third time", "a", "b", "c")
	if got := h.c.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}

	h.write(w, "d", "e")
	c3 := h.checkpoint(w, 3, 0)
	h.write(w, "f")
	// Checkpoint 3 is aborted; the job fails again and restarts from 2.
	w.Close()
	w = h.writer(0, 1, 2)
	h.commit(c1, c2)
	h.expect("restored from checkpoint 2 again", "a", "b", "c")
	h.write(w, "d", "e", "f")
	c4 := h.checkpoint(w, 4, 0)
	h.commit(c4)
	h.expect("checkpoint 4 complete", "a", "b", "c", "d", "e", "f")
	if got := h.c.Pending(); got != 1 {
		t.Errorf("Pending() = %d, want 1 (the aborted %q)", got, c3.Data)
	}
}

func TestTransactionalEndOfInput(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w := h.writer(0, 1, 0)
	h.write(w, "a")
	c1 := h.checkpoint(w, 1, 0)
	h.write(w, "b", "c")
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	h.expect("end of input", "b", "c")
	h.commit(c1)
	h.expect("checkpoint 1 completes after the end", "b", "c", "a")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h.expect("closed", "b", "c", "a")
}

func TestTransactionalSeveralSubtasks(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w0, w1 := h.writer(0, 2, 0), h.writer(1, 2, 0)
	h.write(w0, "x0")
	h.write(w1, "y0", "y1")
	c := []connector.Committable{h.checkpoint(w0, 1, 0), h.checkpoint(w1, 1, 1)}
	if string(c[0].Data) == string(c[1].Data) {
		t.Fatalf("two subtasks got the same transaction id %q", c[0].Data)
	}
	h.write(w0, "x1")
	h.commit(c[1])
	h.expect("subtask 1 committed", "y0", "y1")
	h.commit(c...)
	h.expect("both committed", "y0", "y1", "x0")
}

func TestTransactionalEmptyTransaction(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w := h.writer(0, 1, 0)
	h.commit(h.checkpoint(w, 1, 0))
	h.expect("empty checkpoint")
}

func TestTransactionalCommitErrors(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w := h.writer(0, 1, 0)
	h.write(w, "a")
	good := h.checkpoint(w, 1, 0)
	unknown := connector.Committable{CheckpointID: 1, Subtask: 3, Data: []byte("job-0/subtask-3/attempt-0/chk-1")}
	err := h.c.Commit(t.Context(), []connector.Committable{good, unknown})
	if err == nil || !strings.Contains(err.Error(), `unknown transaction "job-0/subtask-3/attempt-0/chk-1"`) {
		t.Errorf("Commit of an unknown transaction: err = %v", err)
	}
	h.expect("failed commit commits nothing")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.c.Commit(ctx, []connector.Committable{good}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context: err = %v", err)
	}
	h.expect("cancelled commit commits nothing")

	// The same committable twice in one call is committed once.
	h.commit(good, good)
	h.expect("committed", "a")
}

func TestTransactionalPreCommitTwice(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w := h.writer(0, 1, 0)
	h.checkpoint(w, 5, 0)
	if _, err := w.PreCommit(5); err == nil || !strings.Contains(err.Error(), "pre-committed twice") {
		t.Errorf("second PreCommit(5): err = %v", err)
	}
}

func TestTransactionalClose(t *testing.T) {
	h := txHarness{t, Transactional[string]()}
	w := h.writer(0, 1, 0)
	h.write(w, "lost")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Write":     w.Write("x"),
		"Flush":     w.Flush(true),
		"PreCommit": func() error { _, err := w.PreCommit(1); return err }(),
	} {
		if !errors.Is(err, errClosed) {
			t.Errorf("%s after Close: err = %v", name, err)
		}
	}
	h.expect("closed without commit")
}

func TestTransactionalConcurrentWriters(t *testing.T) {
	const parallelism, checkpoints, perCheckpoint = 4, 5, 20
	c := Transactional[string]()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		cms  []connector.Committable
		want []string
		errs = make([]error, parallelism)
	)
	for k := range parallelism {
		w, err := c.NewWriter(writerContext(k, parallelism, 0))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer w.Close()
			for n := range int64(checkpoints) {
				for i := range perCheckpoint {
					rec := fmt.Sprintf("%d/%d/%d", k, n, i)
					if err := w.Write(rec); err != nil {
						errs[k] = err
						return
					}
					mu.Lock()
					want = append(want, rec)
					mu.Unlock()
				}
				data, err := w.(connector.PreCommitter).PreCommit(n + 1)
				if err != nil {
					errs[k] = err
					return
				}
				mu.Lock()
				cms = append(cms, connector.Committable{CheckpointID: n + 1, Subtask: k, Data: data})
				mu.Unlock()
			}
			w.Write("never committed")
		})
	}
	// Commit concurrently with the writers, some committables twice.
	done := make(chan struct{})
	var commitErr error
	go func() {
		defer close(done)
		for range 50 {
			mu.Lock()
			batch := slices.Clone(cms)
			mu.Unlock()
			if err := c.Commit(t.Context(), batch); err != nil {
				commitErr = err
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if err := errors.Join(append(errs, commitErr)...); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(t.Context(), cms); err != nil {
		t.Fatal(err)
	}
	got := c.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("committed %d records, want the %d written ones exactly once", len(got), len(want))
	}
}

func TestCollectorWriteBatch(t *testing.T) {
	c := New[int]()
	w, err := c.NewWriter(writerContext(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	bw := w.(connector.BatchWriter[int])
	if err := bw.WriteBatch([]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(3); err != nil {
		t.Fatal(err)
	}
	if err := bw.WriteBatch([]int{4}); err != nil {
		t.Fatal(err)
	}
	if got := c.Results(); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("Results() = %v, want [1 2 3 4]", got)
	}
	w.Close()
	if err := bw.WriteBatch([]int{5}); !errors.Is(err, errClosed) {
		t.Errorf("WriteBatch after Close: err = %v, want %v", err, errClosed)
	}
}
