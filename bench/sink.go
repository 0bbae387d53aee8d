package bench

import (
	"errors"
	"sync/atomic"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[int64]        = (*SumSink)(nil)
	_ connector.Writer[int64]      = (*sumWriter)(nil)
	_ connector.BatchWriter[int64] = (*sumWriter)(nil)
)

// SumSink adds up the records it receives. Each writer sums into a field of
// its own, so the per-record work is one addition, as in the baselines; the
// writers add their totals to the sink's at the end of input.
type SumSink struct {
	total atomic.Int64
}

// Sum returns the total of the records of every writer that reached the end
// of its input.
func (s *SumSink) Sum() int64 { return s.total.Load() }

// NewWriter implements connector.Sink.
func (s *SumSink) NewWriter(connector.WriterContext) (connector.Writer[int64], error) {
	return &sumWriter{s: s}, nil
}

type sumWriter struct {
	s      *SumSink
	sum    int64
	closed bool
}

var errWriterClosed = errors.New("bench: sum writer is closed")

func (w *sumWriter) Write(v int64) error {
	w.sum += v
	return nil
}

// WriteBatch implements connector.BatchWriter: the chain hands the sink a
// batch at a time, as it does every operator.
func (w *sumWriter) WriteBatch(recs []int64) error {
	sum := w.sum
	for _, v := range recs {
		sum += v
	}
	w.sum = sum
	return nil
}

func (w *sumWriter) Flush(endOfInput bool) error {
	if w.closed {
		return errWriterClosed
	}
	if endOfInput {
		w.s.total.Add(w.sum)
		w.sum = 0
	}
	return nil
}

func (w *sumWriter) Close() error {
	w.closed = true
	return nil
}
