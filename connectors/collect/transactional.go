package collect

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[int]    = (*TransactionalCollector[int])(nil)
	_ connector.Committer    = (*TransactionalCollector[int])(nil)
	_ connector.Writer[int]  = (*txWriter[int])(nil)
	_ connector.PreCommitter = (*txWriter[int])(nil)
)

// TransactionalCollector is a sink whose records become visible in Results
// only when the transaction that holds them is committed. See the package
// documentation.
type TransactionalCollector[T any] struct {
	mu        sync.Mutex
	committed []T
	// pending holds the records of pre-committed transactions by id until
	// they are committed.
	pending map[string][]T
	// done holds the ids of committed transactions, so that committing one
	// again is recognised.
	done map[string]bool
}

// Transactional returns an empty TransactionalCollector.
func Transactional[T any]() *TransactionalCollector[T] {
	return &TransactionalCollector[T]{
		pending: make(map[string][]T),
		done:    make(map[string]bool),
	}
}

// NewWriter returns the writer of one subtask; it is a
// connector.PreCommitter.
func (c *TransactionalCollector[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	return &txWriter[T]{
		c:      c,
		prefix: fmt.Sprintf("%s/subtask-%d/attempt-%d", ctx.JobID, ctx.Subtask, ctx.Attempt),
	}, nil
}

// Commit moves the records of the committables' transactions into the
// results. A committable already committed is skipped. A committable this
// collector did not pre-commit is an error, and then nothing is committed.
func (c *TransactionalCollector[T]) Commit(ctx context.Context, committables []connector.Committable) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("collect: commit: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cm := range committables {
		id := string(cm.Data)
		if _, ok := c.pending[id]; !ok && !c.done[id] {
			return fmt.Errorf("collect: commit checkpoint %d subtask %d: unknown transaction %q; was it pre-committed by a writer of this collector?", cm.CheckpointID, cm.Subtask, id)
		}
	}
	for _, cm := range committables {
		id := string(cm.Data)
		if c.done[id] {
			continue
		}
		c.committed = append(c.committed, c.pending[id]...)
		delete(c.pending, id)
		c.done[id] = true
	}
	return nil
}

// Results returns a copy of the committed records.
func (c *TransactionalCollector[T]) Results() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.committed)
}

// Len returns the number of committed records.
func (c *TransactionalCollector[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.committed)
}

// Pending returns the number of transactions pre-committed and not yet
// committed.
func (c *TransactionalCollector[T]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

type txWriter[T any] struct {
	c *TransactionalCollector[T]
	// prefix makes transaction ids unique across jobs, subtasks and
	// attempts; the checkpoint id completes them.
	prefix string
	// open is the transaction being written, since the last PreCommit.
	open   []T
	closed bool
}

func (w *txWriter[T]) Write(rec T) error {
	if w.closed {
		return errClosed
	}
	w.open = append(w.open, rec)
	return nil
}

// Flush(false) keeps the records in the open transaction. Flush(true)
// commits the open transaction at once, because no checkpoint follows the
// end of input yet (see the package documentation).
func (w *txWriter[T]) Flush(endOfInput bool) error {
	if w.closed {
		return errClosed
	}
	if endOfInput {
		w.c.mu.Lock()
		w.c.committed = append(w.c.committed, w.open...)
		w.c.mu.Unlock()
		w.open = nil
	}
	return nil
}

// PreCommit parks the open transaction in the collector and returns its id.
func (w *txWriter[T]) PreCommit(checkpointID int64) ([]byte, error) {
	if w.closed {
		return nil, errClosed
	}
	id := fmt.Sprintf("%s/chk-%d", w.prefix, checkpointID)
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if _, ok := w.c.pending[id]; ok || w.c.done[id] {
		return nil, fmt.Errorf("collect: transaction %q pre-committed twice", id)
	}
	w.c.pending[id] = w.open
	w.open = nil
	return []byte(id), nil
}

// Close drops the open transaction: its records never become visible.
func (w *txWriter[T]) Close() error {
	w.closed = true
	w.open = nil
	return nil
}
