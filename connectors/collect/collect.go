package collect

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[int]        = (*Collector[int])(nil)
	_ connector.Writer[int]      = (*writer[int])(nil)
	_ connector.BatchWriter[int] = (*writer[int])(nil)
)

var errClosed = errors.New("collect: writer is closed")

// Collector is a sink whose writers append every record to one shared list.
type Collector[T any] struct {
	mu      sync.Mutex
	results []T
}

// New returns an empty Collector.
func New[T any]() *Collector[T] {
	return &Collector[T]{}
}

// NewWriter returns the writer of one subtask.
func (c *Collector[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	return &writer[T]{c: c}, nil
}

// Results returns a copy of the records collected so far.
func (c *Collector[T]) Results() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.results)
}

// Len returns the number of records collected so far.
func (c *Collector[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

type writer[T any] struct {
	c      *Collector[T]
	closed bool
}

func (w *writer[T]) Write(rec T) error {
	if w.closed {
		return errClosed
	}
	w.c.mu.Lock()
	w.c.results = append(w.c.results, rec)
	w.c.mu.Unlock()
	return nil
}

// WriteBatch appends recs under one lock.
func (w *writer[T]) WriteBatch(recs []T) error {
	if w.closed {
		return errClosed
	}
	w.c.mu.Lock()
	w.c.results = append(w.c.results, recs...)
	w.c.mu.Unlock()
	return nil
}

// Flush does nothing: records are collected as they are written.
func (w *writer[T]) Flush(endOfInput bool) error {
	if w.closed {
		return errClosed
	}
	return nil
}

func (w *writer[T]) Close() error {
	w.closed = true
	return nil
}

func checkContext(ctx connector.WriterContext) error {
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism || ctx.Attempt < 0 {
		return fmt.Errorf("collect: invalid writer context: subtask %d of parallelism %d, attempt %d", ctx.Subtask, ctx.Parallelism, ctx.Attempt)
	}
	return nil
}
