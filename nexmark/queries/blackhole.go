package queries

import (
	"sync/atomic"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[int]        = (*Blackhole[int])(nil)
	_ connector.BatchWriter[int] = (*blackholeWriter[int])(nil)
)

// Blackhole is a sink that drops its records, as Flink's blackhole
// connector does; it counts them into Rows when Rows is set. Counting is
// at-least-once: after a restore, replayed records are counted again.
type Blackhole[T any] struct {
	Rows *atomic.Int64
}

// NewWriter returns a writer that drops what it receives.
func (b *Blackhole[T]) NewWriter(connector.WriterContext) (connector.Writer[T], error) {
	return &blackholeWriter[T]{rows: b.Rows}, nil
}

type blackholeWriter[T any] struct {
	rows *atomic.Int64
	n    int64 // counted since the last Flush
}

func (w *blackholeWriter[T]) Write(T) error {
	w.n++
	return nil
}

// WriteBatch implements connector.BatchWriter.
func (w *blackholeWriter[T]) WriteBatch(recs []T) error {
	w.n += int64(len(recs))
	return nil
}

// Flush adds the rows counted since the last Flush to the shared counter, so
// that writers do not contend on it for every record.
func (w *blackholeWriter[T]) Flush(bool) error {
	if w.rows != nil {
		w.rows.Add(w.n)
	}
	w.n = 0
	return nil
}

func (w *blackholeWriter[T]) Close() error { return nil }
