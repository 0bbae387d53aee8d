package datagen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/typeinfo"
)

var _ connector.Source[int64] = (*Source[int64])(nil)

// Source generates records of type T from their index. Build one with
// Sequence, Generator or FromSlice; it is a description, safe to share by
// all subtasks.
type Source[T any] struct {
	// n is the number of records; negative means unbounded.
	n   int64
	gen func(i int64) T
	// fill, when set, does what gen does for a run of indexes: buf[j] =
	// gen(first + j*step). The readers call it once per batch instead of
	// gen per record (a call through a function value each).
	fill func(buf []T, first, step int64)
	opts Options
	// err is a construction error, reported by Splits and NewReader because
	// the constructors return no error.
	err error
}

// Sequence returns a bounded source of the numbers from, from+1, …, to
// (both inclusive). It is empty when to < from. A range of more than
// math.MaxInt64 numbers is rejected (by Splits and NewReader).
func Sequence(from, to int64) *Source[int64] {
	s := &Source[int64]{
		gen: func(i int64) int64 { return from + i },
		fill: func(buf []int64, first, step int64) {
			fillSeq(buf, from+first, step)
		},
	}
	switch {
	case to < from:
		s.n = 0
	case uint64(to)-uint64(from) >= math.MaxInt64:
		s.err = fmt.Errorf("datagen: Sequence(%d, %d) has more than %d numbers; split it into several sources", from, to, int64(math.MaxInt64))
	default:
		s.n = to - from + 1
	}
	return s
}

// Generator returns a source of fn(0), fn(1), …, fn(n-1). A negative n makes
// the source unbounded: fn(0), fn(1), … forever (see the package
// documentation for how subtasks share the indexes). fn must be a pure
// function of i: a restored job calls it again for the indexes that followed
// the checkpoint. It may be called concurrently by several subtasks.
func Generator[T any](n int64, fn func(i int64) T) *Source[T] {
	s := &Source[T]{n: n, gen: fn}
	if fn == nil {
		s.err = errors.New("datagen: Generator needs a non-nil function")
	}
	return s
}

// FromSlice returns a bounded source of the elements of items, in order
// within each split. It copies items, so the caller may reuse the slice.
func FromSlice[T any](items []T) *Source[T] {
	items = slices.Clone(items)
	return &Source[T]{
		n:   int64(len(items)),
		gen: func(i int64) T { return items[i] },
		fill: func(buf []T, first, step int64) {
			if step == 1 {
				copy(buf, items[first:])
				return
			}
			for j := range buf {
				buf[j] = items[first+int64(j)*step]
			}
		},
	}
}

// fillSeqGo sets buf[j] = v + j*step for every j, wrapping around as int64
// arithmetic does. It is fillSeq where there is no vector version, and the
// reference the vector version is tested against.
func fillSeqGo(buf []int64, v, step int64) {
	// Four records per iteration: the loop's own compare and branch cost as
	// much as the store they guard.
	j := 0
	for ; j+4 <= len(buf); j += 4 {
		b := buf[j : j+4 : j+4]
		b[0], b[1], b[2], b[3] = v, v+step, v+2*step, v+3*step
		v += 4 * step
	}
	for ; j < len(buf); j++ {
		buf[j] = v
		v += step
	}
}

// WithOptions returns a copy of s configured by opts. Invalid options are
// reported by Splits and NewReader.
func (s *Source[T]) WithOptions(opts Options) *Source[T] {
	c := *s
	c.opts = opts
	return &c
}

// Boundedness reports Unbounded for a Generator with a negative n, Bounded
// otherwise.
func (s *Source[T]) Boundedness() connector.Boundedness {
	if s.n < 0 {
		return connector.Unbounded
	}
	return connector.Bounded
}

func (s *Source[T]) check() error {
	if s.err != nil {
		return s.err
	}
	return s.opts.Validate()
}

// Splits returns one split per subtask: contiguous ranges of indexes for a
// bounded source (empty ones left out), interleaved ones for an unbounded
// source.
func (s *Source[T]) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if parallelism < 1 {
		return nil, fmt.Errorf("datagen: parallelism must be >= 1, got %d", parallelism)
	}
	p := int64(parallelism)
	var splits []connector.SplitState
	if s.n < 0 {
		for k := range p {
			splits = append(splits, span{start: k, end: unboundedEnd, step: p}.splitState(splitID(k)))
		}
		return splits, nil
	}
	base, extra := s.n/p, s.n%p
	lo := int64(0)
	for k := range p {
		size := base
		if k < extra {
			size++
		}
		if size == 0 {
			break // ranges only get smaller from here
		}
		splits = append(splits, span{start: lo, end: lo + size, step: 1}.splitState(splitID(k)))
		lo += size
	}
	return splits, nil
}

// NewReader returns the reader of one subtask.
func (s *Source[T]) NewReader(ctx connector.ReaderContext) (connector.Reader[T], error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("datagen: invalid reader context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	opts := s.opts
	opts.EnsureDefaults()
	r := &reader[T]{
		gen:      s.gen,
		fill:     s.fill,
		clearBuf: typeinfo.HoldsPointers[T](),
		n:        s.n,
		batch:    opts.BatchSize,
		ids:      make(map[string]bool),
	}
	if opts.RecordsPerSecond > 0 {
		// Each subtask gets an equal share of the rate. A rate so high that
		// a record is due every less than a nanosecond is no limit at all.
		r.interval = durationFromSeconds(float64(ctx.Parallelism) / opts.RecordsPerSecond)
	}
	return r, nil
}

// unboundedEnd is the end of an unbounded span in a split's Data.
const unboundedEnd = -1

// span is the set of indexes of a split: start, start+step, … up to end
// (exclusive), or forever when end is unboundedEnd.
type span struct {
	start, end, step int64
}

const spanLen = 24

func splitID(k int64) string { return fmt.Sprintf("range-%d", k) }

func (s span) splitState(id string) connector.SplitState {
	data := make([]byte, 0, spanLen)
	data = binary.BigEndian.AppendUint64(data, uint64(s.start))
	data = binary.BigEndian.AppendUint64(data, uint64(s.end))
	data = binary.BigEndian.AppendUint64(data, uint64(s.step))
	return connector.SplitState{ID: id, Data: data}
}

// limit is the exclusive upper bound of the span's indexes.
func (s span) limit() int64 {
	if s.end == unboundedEnd {
		return math.MaxInt64
	}
	return s.end
}

// decodeSplit checks a split state against a source of n records (negative:
// unbounded) and returns its span and next index.
func decodeSplit(st connector.SplitState, n int64) (span, int64, error) {
	if len(st.Data) != spanLen {
		return span{}, 0, fmt.Errorf("split %q: Data has %d bytes, want %d (start, end, step); was the state written by another source?", st.ID, len(st.Data), spanLen)
	}
	s := span{
		start: int64(binary.BigEndian.Uint64(st.Data[0:])),
		end:   int64(binary.BigEndian.Uint64(st.Data[8:])),
		step:  int64(binary.BigEndian.Uint64(st.Data[16:])),
	}
	switch {
	case s.start < 0 || s.step < 1 || (s.end != unboundedEnd && s.end < s.start):
		return span{}, 0, fmt.Errorf("split %q: malformed range start=%d end=%d step=%d", st.ID, s.start, s.end, s.step)
	case n >= 0 && (s.end == unboundedEnd || s.end > n):
		return span{}, 0, fmt.Errorf("split %q: range [%d, %d) does not fit a source of %d records", st.ID, s.start, s.end, n)
	case n < 0 && s.end != unboundedEnd:
		return span{}, 0, fmt.Errorf("split %q: bounded range [%d, %d) given to an unbounded source", st.ID, s.start, s.end)
	}
	next := s.start
	switch len(st.Position) {
	case 0:
	case 8:
		next = int64(binary.BigEndian.Uint64(st.Position))
	default:
		return span{}, 0, fmt.Errorf("split %q: Position has %d bytes, want 8 (the next index) or none", st.ID, len(st.Position))
	}
	if next < s.start || next > s.limit() || (next-s.start)%s.step != 0 {
		return span{}, 0, fmt.Errorf("split %q: position %d is not an index of range start=%d end=%d step=%d", st.ID, next, s.start, s.end, s.step)
	}
	return s, next, nil
}

func encodePosition(next int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(next))
}
