package runtime

import (
	"sync/atomic"
	"time"
)

// The buffer timeout (Flink's execution.buffer-timeout.interval) bounds how
// long a record waits in a partly filled batch while its task is busy. A
// task sends its partial batches whenever it runs out of work and before
// every event it sends; a task that never runs out of work (a source that
// always has more, a slow operator behind a full input) would otherwise
// hold a record until its batch fills. With a timeout, a ticker of the
// task's own counts ticks, and the task's writers send what they hold
// when they see a new tick: at the next record they take, or at the end
// of the task's round (its poll of the source, its pass over its inputs),
// whichever comes first. Flink flushes from a thread of its own (the
// OutputFlusher); in weir the batches belong to the task goroutine, so
// the ticker only counts and the task flushes.

// DefaultBufferTimeout is the buffer timeout of a job that sets none, as
// in Flink.
const DefaultBufferTimeout = 100 * time.Millisecond

// timedFlusher is a Writer that sends its partly filled batches when the
// task's flush ticker has ticked since it last did (RecordWriter). Both
// methods run on the task goroutine.
type timedFlusher interface {
	// bindFlushTicks makes the writer watch ticks.
	bindFlushTicks(ticks *atomic.Uint64)
	// flushIfTicked sends the partly filled batches when ticks moved.
	flushIfTicked()
}

var _ timedFlusher = (*RecordWriter[int])(nil)

// startFlusher binds the task's writers to its flush ticks and starts the
// ticker, which ends when the task does (t.done). It does nothing without
// a timeout or writers.
func (t *Task) startFlusher() {
	d := t.cfg.BufferTimeout
	if d <= 0 {
		return
	}
	for _, w := range t.cfg.Writers {
		if f, ok := w.(timedFlusher); ok {
			f.bindFlushTicks(&t.flushTicks)
			t.flushers = append(t.flushers, f)
		}
	}
	if len(t.flushers) == 0 {
		return
	}
	go func() {
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				t.flushTicks.Add(1)
			case <-t.done:
				return
			}
		}
	}()
}

// flushIfTicked sends the writers' partial batches when the buffer timeout
// ticked since they last did.
func (t *Task) flushIfTicked() {
	for _, f := range t.flushers {
		f.flushIfTicked()
	}
}

// bindFlushTicks implements timedFlusher.
func (w *RecordWriter[T]) bindFlushTicks(ticks *atomic.Uint64) {
	w.flushTicks, w.flushSeen = ticks, ticks.Load()
}

// flushIfTicked implements timedFlusher. A source task's writer (which
// never waits in a send) puts what does not fit into its backlog.
func (w *RecordWriter[T]) flushIfTicked() {
	if w.flushTicks == nil {
		return
	}
	if n := w.flushTicks.Load(); n != w.flushSeen {
		w.flushSeen = n
		for i := range w.targets {
			w.flush(i)
		}
	}
}
