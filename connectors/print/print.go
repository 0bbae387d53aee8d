package print

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[int]        = (*Printer[int])(nil)
	_ connector.Writer[int]      = (*printWriter[int])(nil)
	_ connector.BatchWriter[int] = (*printWriter[int])(nil)
)

// writeMu serializes the writes of every print sink in the process, so that
// lines stay whole whatever writer the sinks share.
var writeMu sync.Mutex

// Options configures a print sink. The zero value gives the defaults.
type Options[T any] struct {
	// Format turns a record into the text of its line. Default nil:
	// fmt.Sprint(record), that is the %v verb.
	Format func(T) string
	// Identifier names the sink in the prefix of its lines, "name> " or
	// "name:3> ". It must not contain a line break. Default "": no name.
	Identifier string
	// NoPrefix drops the prefix of the lines entirely. Default false: lines
	// start with the identifier and, when the parallelism is above one, the
	// 1-based subtask number.
	NoPrefix bool
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *Options[T]) EnsureDefaults() *Options[T] {
	if o.Format == nil {
		o.Format = func(rec T) string { return fmt.Sprint(rec) }
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
func (o *Options[T]) Validate() error {
	if strings.ContainsAny(o.Identifier, "\r\n") {
		return fmt.Errorf("print sink: Options.Identifier must not contain a line break, got %q", o.Identifier)
	}
	return nil
}

// Printer is the print sink. See the package documentation.
type Printer[T any] struct {
	w    io.Writer
	opts Options[T]
}

// Sink returns a sink that prints each record as a line to w, or to
// os.Stdout if w is nil.
func Sink[T any](w io.Writer, opts Options[T]) *Printer[T] {
	if w == nil {
		w = os.Stdout
	}
	return &Printer[T]{w: w, opts: opts}
}

// NewWriter returns the writer of one subtask.
func (p *Printer[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := p.opts.Validate(); err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("print sink: invalid writer context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	opts := p.opts
	opts.EnsureDefaults()
	return &printWriter[T]{
		w:      p.w,
		format: opts.Format,
		prefix: linePrefix(opts, ctx.Subtask, ctx.Parallelism),
	}, nil
}

// linePrefix follows Flink's PrintSinkOutputWriter.
func linePrefix[T any](opts Options[T], subtask, parallelism int) string {
	if opts.NoPrefix {
		return ""
	}
	prefix := opts.Identifier
	if parallelism > 1 {
		if prefix != "" {
			prefix += ":"
		}
		prefix += strconv.Itoa(subtask + 1)
	}
	if prefix != "" {
		prefix += "> "
	}
	return prefix
}

type printWriter[T any] struct {
	w      io.Writer
	format func(T) string
	prefix string
	// line is reused from record to record.
	line   []byte
	closed bool
}

var errClosed = errors.New("print sink: writer is closed")

// Write prints the record's line with one call of the underlying writer.
func (p *printWriter[T]) Write(rec T) error {
	if p.closed {
		return errClosed
	}
	p.line = append(p.line[:0], p.prefix...)
	p.line = append(p.line, p.format(rec)...)
	p.line = append(p.line, '\n')
	writeMu.Lock()
	_, err := p.w.Write(p.line)
	writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("print sink: %w", err)
	}
	return nil
}

// WriteBatch prints the lines of recs with one call of the underlying
// writer, so that they stay together and cost one write (one system call
// on an unbuffered file) instead of one per record.
func (p *printWriter[T]) WriteBatch(recs []T) error {
	if p.closed {
		return errClosed
	}
	p.line = p.line[:0]
	for _, rec := range recs {
		p.line = append(p.line, p.prefix...)
		p.line = append(p.line, p.format(rec)...)
		p.line = append(p.line, '\n')
	}
	writeMu.Lock()
	_, err := p.w.Write(p.line)
	writeMu.Unlock()
	if cap(p.line) > maxLineBuffer {
		p.line = nil // a batch of long lines: do not keep its buffer
	}
	if err != nil {
		return fmt.Errorf("print sink: %w", err)
	}
	return nil
}

// maxLineBuffer is the largest line buffer a writer keeps between batches.
const maxLineBuffer = 1 << 20

// Flush flushes the underlying writer if it has a Flush method (as a
// *bufio.Writer has); lines are otherwise written at once.
func (p *printWriter[T]) Flush(endOfInput bool) error {
	if p.closed {
		return errClosed
	}
	f, ok := p.w.(interface{ Flush() error })
	if !ok {
		return nil
	}
	writeMu.Lock()
	err := f.Flush()
	writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("print sink: flush: %w", err)
	}
	return nil
}

// Close marks the writer closed; it does not close the underlying writer,
// which the sink does not own.
func (p *printWriter[T]) Close() error {
	p.closed = true
	return nil
}
