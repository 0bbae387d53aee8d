package file

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Source[string]  = (*LinesSource)(nil)
	_ connector.SplitDiscoverer = (*LinesSource)(nil)
)

// Defaults of LinesOptions.
const (
	DefaultReadBufferSize = 1 << 20
	DefaultBatchSize      = 1024
)

// Limits of LinesOptions.
const (
	MinReadBufferSize = 16 // bufio's own minimum
	MaxReadBufferSize = 1 << 30
	MaxBatchSize      = 1 << 16
)

// LinesOptions configures a LinesSource. The zero value gives the defaults.
type LinesOptions struct {
	// BufferSize is the size in bytes of each reader's read buffer, in
	// [MinReadBufferSize, MaxReadBufferSize]. Longer lines are still read
	// whole. Default 0: DefaultReadBufferSize (1 MiB).
	BufferSize int
	// BatchSize is the most lines a reader emits in one Poll, in
	// [1, MaxBatchSize]. Default 0: DefaultBatchSize (1024).
	BatchSize int
	// Watch, when positive, makes the source follow a directory: it lists
	// the directory this often, reads new files and the lines appended to
	// files it read before, and never ends. See the package documentation.
	// Default 0: read what is there and end.
	Watch time.Duration
	// Glob selects the files of a watched directory by base name
	// (path/filepath.Match syntax); names starting with "." are skipped
	// whatever the glob. Default "": every name not starting with "." or
	// "_" (as in the bounded mode).
	Glob string
	// OnChange says what a watched file that was truncated, replaced by
	// another file under its name, or renamed, means. Default ChangeFails.
	OnChange OnChange
}

// OnChange is what a watched source does with a file that changed other
// than by growing.
type OnChange int

const (
	// ChangeFails fails the job with an error naming the file.
	ChangeFails OnChange = iota
	// ChangeIsNewFile reads the file again from its start, as a new file,
	// and logs a warning: its lines are then read twice.
	ChangeIsNewFile
)

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *LinesOptions) EnsureDefaults() *LinesOptions {
	if o.BufferSize == 0 {
		o.BufferSize = DefaultReadBufferSize
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
// Zero fields are valid: they stand for their defaults.
func (o *LinesOptions) Validate() error {
	if o.BufferSize != 0 && (o.BufferSize < MinReadBufferSize || o.BufferSize > MaxReadBufferSize) {
		return fmt.Errorf("file source: LinesOptions.BufferSize must be in [%d, %d] (0 means %d), got %d",
			MinReadBufferSize, MaxReadBufferSize, DefaultReadBufferSize, o.BufferSize)
	}
	if o.BatchSize < 0 || o.BatchSize > MaxBatchSize {
		return fmt.Errorf("file source: LinesOptions.BatchSize must be in [1, %d] (0 means %d), got %d",
			MaxBatchSize, DefaultBatchSize, o.BatchSize)
	}
	if o.Watch < 0 {
		return fmt.Errorf("file source: LinesOptions.Watch must be >= 0 (0: do not watch), got %v", o.Watch)
	}
	if _, err := filepath.Match(o.Glob, ""); err != nil {
		return fmt.Errorf("file source: LinesOptions.Glob %q: %v", o.Glob, err)
	}
	if o.OnChange != ChangeFails && o.OnChange != ChangeIsNewFile {
		return fmt.Errorf("file source: LinesOptions.OnChange %d is unknown: use ChangeFails or ChangeIsNewFile", o.OnChange)
	}
	return nil
}

// LinesSource is a bounded source of the lines of a file or of the files of
// a directory. See the package documentation.
type LinesSource struct {
	path string
	opts LinesOptions
}

// Lines returns a source of the lines of the file at path or, if path is a
// directory, of its regular files in name order.
func Lines(path string) *LinesSource {
	return &LinesSource{path: path}
}

// WithOptions returns a copy of s configured by opts. Invalid options are
// reported by Splits and NewReader.
func (s *LinesSource) WithOptions(opts LinesOptions) *LinesSource {
	c := *s
	c.opts = opts
	return &c
}

// Boundedness reports Bounded, or Unbounded when the source watches a
// directory.
func (s *LinesSource) Boundedness() connector.Boundedness {
	if s.opts.Watch > 0 {
		return connector.Unbounded
	}
	return connector.Bounded
}

// DiscoversSplits reports whether the source watches a directory: its
// readers then find files as they appear (connector.SplitDiscoverer).
func (s *LinesSource) DiscoversSplits() bool { return s.opts.Watch > 0 }

// SplitOwner is the owner rule of a watched directory's files: FNV-1a of
// the base name modulo the parallelism.
func (s *LinesSource) SplitOwner(splitID string, parallelism int) int {
	return watchOwner(splitID, parallelism)
}

// Splits returns one split per file, in name order. It does not depend on
// parallelism.
func (s *LinesSource) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	if parallelism < 1 {
		return nil, fmt.Errorf("file source: parallelism must be >= 1, got %d", parallelism)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	info, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("file source: path %q does not exist: %w", s.path, err)
	case err != nil:
		return nil, fmt.Errorf("file source: %w", err)
	case s.opts.Watch > 0 && !info.IsDir():
		return nil, fmt.Errorf("file source: %q is not a directory: only a directory can be watched", s.path)
	case s.opts.Watch > 0:
		// Each reader finds its own files: see watchReader.
		return nil, nil
	case info.Mode().IsRegular():
		return []connector.SplitState{fileSplit(s.path)}, nil
	case !info.IsDir():
		return nil, fmt.Errorf("file source: %q is neither a regular file nor a directory (mode %v)", s.path, info.Mode())
	}
	entries, err := os.ReadDir(s.path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("file source: list directory: %w", err)
	}
	var splits []connector.SplitState
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		p := filepath.Join(s.path, e.Name())
		// Stat rather than e.Type(), so that a symbolic link to a file
		// counts as the file.
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("file source: %w", err)
		}
		if info.Mode().IsRegular() {
			splits = append(splits, fileSplit(p))
		}
	}
	return splits, nil
}

func fileSplit(path string) connector.SplitState {
	return connector.SplitState{ID: path, Data: []byte(path)}
}

// NewReader returns the reader of one subtask.
func (s *LinesSource) NewReader(ctx connector.ReaderContext) (connector.Reader[string], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("file source: invalid reader context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	opts := s.opts
	opts.EnsureDefaults()
	if opts.Watch > 0 {
		return newWatchReader(s.path, opts, ctx), nil
	}
	return &linesReader{
		bufferSize: opts.BufferSize,
		batch:      opts.BatchSize,
		ids:        make(map[string]bool),
	}, nil
}

// fileCursor is a split being read.
type fileCursor struct {
	id, path string
	// offset is the byte offset of the next unread line.
	offset int64
}

type linesReader struct {
	bufferSize int
	batch      int

	// splits holds the unfinished splits in the order they were assigned;
	// Poll reads the first one, through file and br once it is open.
	splits []*fileCursor
	ids    map[string]bool
	noMore bool
	file   *os.File
	br     *bufio.Reader
	// long accumulates a line longer than the buffer.
	long []byte
	// wake is closed when AddSplits or NoMoreSplits ends a wait for splits.
	wake chan struct{}

	closed bool
}

var errClosed = errors.New("file source: reader is closed")

// ready is returned by Available when Poll can make progress now.
var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (r *linesReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	// Check every split before taking any, so that a bad one leaves the
	// reader as it was.
	cursors := make([]*fileCursor, 0, len(splits))
	seen := make(map[string]bool, len(splits))
	for _, st := range splits {
		if r.ids[st.ID] || seen[st.ID] {
			return fmt.Errorf("file source: split %q assigned twice", st.ID)
		}
		seen[st.ID] = true
		c, err := decodeFileSplit(st)
		if err != nil {
			return fmt.Errorf("file source: add splits: %w", err)
		}
		cursors = append(cursors, c)
	}
	for _, c := range cursors {
		r.ids[c.id] = true
	}
	r.splits = append(r.splits, cursors...)
	r.wakeUp()
	return nil
}

func decodeFileSplit(st connector.SplitState) (*fileCursor, error) {
	if len(st.Data) == 0 {
		return nil, fmt.Errorf("split %q: Data is empty, want a file path", st.ID)
	}
	c := &fileCursor{id: st.ID, path: string(st.Data)}
	switch len(st.Position) {
	case 0:
	case 8:
		c.offset = int64(binary.BigEndian.Uint64(st.Position))
		if c.offset < 0 {
			return nil, fmt.Errorf("split %q: negative offset %d", st.ID, c.offset)
		}
	default:
		return nil, fmt.Errorf("split %q: Position has %d bytes, want 8 (a byte offset) or none", st.ID, len(st.Position))
	}
	return c, nil
}

func (r *linesReader) NoMoreSplits() {
	r.noMore = true
	r.wakeUp()
}

func (r *linesReader) wakeUp() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func (r *linesReader) Poll(out connector.Emitter[string]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	for emitted := 0; emitted < r.batch && len(r.splits) > 0; {
		if r.file == nil {
			if err := r.open(r.splits[0]); err != nil {
				return connector.EndOfInput, err
			}
		}
		line, ok, err := r.readLine(r.splits[0])
		if err != nil {
			return connector.EndOfInput, err
		}
		if !ok {
			r.finishSplit()
			continue
		}
		out.Emit(line)
		emitted++
	}
	// Finish a split whose last line was just emitted, so that Snapshot
	// leaves it out and the reader ends without another Poll.
	if r.file != nil {
		if _, err := r.br.Peek(1); err == io.EOF {
			r.finishSplit()
		}
	}
	switch {
	case len(r.splits) > 0:
		return connector.MoreAvailable, nil
	case r.noMore:
		return connector.EndOfInput, nil
	default:
		return connector.NothingAvailable, nil
	}
}

// open opens the split's file at its offset.
func (r *linesReader) open(c *fileCursor) error {
	// Errors of os.File methods name the path already.
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	info, err := f.Stat()
	if err == nil && info.Size() < c.offset {
		err = fmt.Errorf("file %q has %d bytes, fewer than the offset %d to resume from; was it changed after the checkpoint?", c.path, info.Size(), c.offset)
	}
	if err == nil && c.offset > 0 {
		_, err = f.Seek(c.offset, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("file source: %w", err)
	}
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, r.bufferSize)
	} else {
		r.br.Reset(f)
	}
	r.file = f
	return nil
}

// readLine reads the next line of the open split and advances its offset
// past it. It reports false at the end of the file.
func (r *linesReader) readLine(c *fileCursor) (string, bool, error) {
	r.long = r.long[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch err {
		case bufio.ErrBufferFull:
			r.long = append(r.long, chunk...)
			continue
		case nil, io.EOF:
		default:
			return "", false, fmt.Errorf("file source: after offset %d: %w", c.offset, err)
		}
		n := len(r.long) + len(chunk)
		if n == 0 { // only at EOF
			return "", false, nil
		}
		c.offset += int64(n)
		line := chunk
		if len(r.long) > 0 {
			r.long = append(r.long, chunk...)
			line = r.long
		}
		line = trimEOL(line)
		return string(line), true, nil
	}
}

// trimEOL drops a final "\n" and then a final "\r".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// finishSplit closes the first split's file and drops the split.
func (r *linesReader) finishSplit() {
	r.closeFile()
	r.splits = r.splits[1:]
}

func (r *linesReader) closeFile() {
	if r.file != nil {
		r.file.Close() // read-only: a close error loses nothing
		r.file = nil
		r.br.Reset(nil)
	}
}

// Available returns a channel closed by the next AddSplits or NoMoreSplits
// when the reader waits for splits, and a closed channel otherwise.
func (r *linesReader) Available() <-chan struct{} {
	if len(r.splits) == 0 && !r.noMore {
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		return r.wake
	}
	return ready
}

func (r *linesReader) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	states := make([]connector.SplitState, 0, len(r.splits))
	for _, c := range r.splits {
		states = append(states, connector.SplitState{
			ID:       c.id,
			Data:     []byte(c.path),
			Position: binary.BigEndian.AppendUint64(nil, uint64(c.offset)),
		})
	}
	return states, nil
}

func (r *linesReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.closeFile()
	r.wakeUp()
	r.splits = nil
	return nil
}
