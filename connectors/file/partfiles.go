package file

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[string]   = (*PartFileSink[string])(nil)
	_ connector.Writer[string] = (*partFileWriter[string])(nil)
)

// DefaultWriteBufferSize is the default of Options.BufferSize.
const DefaultWriteBufferSize = 64 << 10

// MaxWriteBufferSize is the largest accepted Options.BufferSize.
const MaxWriteBufferSize = 1 << 30

// Options configures a PartFileSink. The zero value gives the defaults.
type Options struct {
	// BufferSize is the size in bytes of each writer's buffer, in
	// [1, MaxWriteBufferSize]; lines reach the file when it is full and on
	// Flush. Default 0: DefaultWriteBufferSize (64 KiB).
	BufferSize int
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.BufferSize == 0 {
		o.BufferSize = DefaultWriteBufferSize
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
// Zero fields are valid: they stand for their defaults.
func (o *Options) Validate() error {
	if o.BufferSize < 0 || o.BufferSize > MaxWriteBufferSize {
		return fmt.Errorf("file sink: Options.BufferSize must be in [1, %d] (0 means %d), got %d",
			MaxWriteBufferSize, DefaultWriteBufferSize, o.BufferSize)
	}
	return nil
}

// PartFileName is the name of the part file of a subtask in an attempt of a
// job.
func PartFileName(subtask, attempt int) string {
	return fmt.Sprintf("part-%05d-%04d", subtask, attempt)
}

// PartFileSink writes records as lines of one part file per subtask. See the
// package documentation.
type PartFileSink[T any] struct {
	dir    string
	format func(T) string
	opts   Options
}

// PartFiles returns a sink that writes each string record as one line to
// the part files in dir.
func PartFiles(dir string, opts Options) *PartFileSink[string] {
	return PartFilesOf(dir, func(s string) string { return s }, opts)
}

// PartFilesOf returns a sink that writes each record as the line
// format(record) to the part files in dir. format may be called
// concurrently by several subtasks.
func PartFilesOf[T any](dir string, format func(T) string, opts Options) *PartFileSink[T] {
	return &PartFileSink[T]{dir: dir, format: format, opts: opts}
}

// NewWriter creates dir if needed and creates, or truncates, the subtask's
// part file for this attempt.
func (s *PartFileSink[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	if s.format == nil {
		return nil, errors.New("file sink: PartFilesOf needs a non-nil format function")
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism || ctx.Attempt < 0 {
		return nil, fmt.Errorf("file sink: invalid writer context: subtask %d of parallelism %d, attempt %d", ctx.Subtask, ctx.Parallelism, ctx.Attempt)
	}
	opts := s.opts
	opts.EnsureDefaults()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: cannot create directory %q: %w", s.dir, err)
	}
	path := filepath.Join(s.dir, PartFileName(ctx.Subtask, ctx.Attempt))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: cannot create a part file in directory %q: %w", s.dir, err)
	}
	return &partFileWriter[T]{
		format: s.format,
		file:   f,
		bw:     bufio.NewWriterSize(f, opts.BufferSize),
	}, nil
}

type partFileWriter[T any] struct {
	format func(T) string
	file   *os.File
	bw     *bufio.Writer
	closed bool
}

var errWriterClosed = errors.New("file sink: writer is closed")

func (w *partFileWriter[T]) Write(rec T) error {
	if w.closed {
		return errWriterClosed
	}
	w.bw.WriteString(w.format(rec))
	// bufio.Writer keeps its first error and returns it from every later
	// call, so checking the last one is enough.
	if err := w.bw.WriteByte('\n'); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// Flush writes the buffered lines to the file and, at the end of input,
// syncs the file to disk.
func (w *partFileWriter[T]) Flush(endOfInput bool) error {
	if w.closed {
		return errWriterClosed
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if endOfInput {
		if err := w.file.Sync(); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
	}
	return nil
}

// Close closes the file without flushing the buffer.
func (w *partFileWriter[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.file.Close(); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}
