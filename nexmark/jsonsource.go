package nexmark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/weirstream/weir/connector"
)

var _ connector.Source[Event] = (*jsonFileSource)(nil)

// jsonReadBufferSize is the read buffer of a JSON-lines reader; longer lines
// are read too.
const jsonReadBufferSize = 256 << 10

// JSONFile returns a bounded source of the events in a file of JSON lines,
// one event per line as AppendJSON writes them (the output of
// weir nexmark gen). Blank lines are skipped. The file is one split whose
// position is the byte offset and number of the next line, so the source is
// exactly-once provided the file does not change. A line that ParseJSON
// rejects, such as the cut-off last line of a truncated file, fails the
// reader with an error that names the file, the line and the column.
// Events carry their DateTime as their timestamp.
func JSONFile(path string) connector.Source[Event] {
	return &jsonFileSource{path: path}
}

type jsonFileSource struct {
	path string
}

func (s *jsonFileSource) Boundedness() connector.Boundedness { return connector.Bounded }

func (s *jsonFileSource) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	if parallelism < 1 {
		return nil, fmt.Errorf("nexmark: parallelism must be >= 1, got %d", parallelism)
	}
	if _, err := os.Stat(s.path); err != nil {
		return nil, fmt.Errorf("nexmark: events file: %w", err)
	}
	return []connector.SplitState{{ID: s.path, Data: []byte(s.path)}}, nil
}

func (s *jsonFileSource) NewReader(ctx connector.ReaderContext) (connector.Reader[Event], error) {
	return &jsonReader{ids: make(map[string]bool)}, nil
}

// jsonCursor is a file being read.
type jsonCursor struct {
	id, path string
	// offset is the byte offset of the next unread line; line is the number
	// of lines before it.
	offset, line int64
}

type jsonReader struct {
	splits []*jsonCursor
	ids    map[string]bool
	noMore bool
	wake   chan struct{}

	// file and in read splits[0] when open.
	file   *os.File
	in     *bufio.Reader
	long   []byte
	parser jsonParser
	closed bool
}

func (r *jsonReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	cursors := make([]*jsonCursor, 0, len(splits))
	for _, st := range splits {
		if r.ids[st.ID] {
			return fmt.Errorf("nexmark: split %q assigned twice", st.ID)
		}
		c := &jsonCursor{id: st.ID, path: string(st.Data)}
		switch len(st.Position) {
		case 0:
		case 16:
			c.offset = int64(binary.BigEndian.Uint64(st.Position))
			c.line = int64(binary.BigEndian.Uint64(st.Position[8:]))
		default:
			return fmt.Errorf("nexmark: split %q: Position has %d bytes, want 16 (byte offset, line) or none", st.ID, len(st.Position))
		}
		if c.offset < 0 || c.line < 0 {
			return fmt.Errorf("nexmark: split %q: malformed position (offset %d, line %d)", st.ID, c.offset, c.line)
		}
		cursors = append(cursors, c)
	}
	for _, c := range cursors {
		r.ids[c.id] = true
		r.splits = append(r.splits, c)
	}
	r.wakeUp()
	return nil
}

func (r *jsonReader) NoMoreSplits() {
	r.noMore = true
	r.wakeUp()
}

func (r *jsonReader) wakeUp() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func (r *jsonReader) Poll(out connector.Emitter[Event]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	for emitted := 0; emitted < DefaultBatchSize && len(r.splits) > 0; {
		c := r.splits[0]
		if r.file == nil {
			if err := r.open(c); err != nil {
				return connector.EndOfInput, err
			}
		}
		line, n, err := r.readLine()
		if err == io.EOF {
			r.closeFile()
			r.splits = r.splits[1:]
			continue
		}
		if err != nil {
			return connector.EndOfInput, fmt.Errorf("nexmark: read %s: %w", c.path, err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			ev, err := r.parser.parse(line)
			if err != nil {
				return connector.EndOfInput, fmt.Errorf("nexmark: %s line %d: %w", c.path, c.line+1, err)
			}
			out.EmitAt(ev, ev.DateTime())
			emitted++
		}
		c.offset += int64(n)
		c.line++
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

func (r *jsonReader) open(c *jsonCursor) error {
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("nexmark: open events file: %w", err)
	}
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("nexmark: seek %s to %d: %w", c.path, c.offset, err)
	}
	r.file = f
	if r.in == nil {
		r.in = bufio.NewReaderSize(f, jsonReadBufferSize)
	} else {
		r.in.Reset(f)
	}
	return nil
}

// readLine returns the next line without its '\n' and the number of bytes
// it took, or io.EOF at the end of the file. The line is valid until the
// next call.
func (r *jsonReader) readLine() ([]byte, int, error) {
	chunk, err := r.in.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], chunk...)
		for err == bufio.ErrBufferFull {
			chunk, err = r.in.ReadSlice('\n')
			r.long = append(r.long, chunk...)
		}
		chunk = r.long
	}
	switch {
	case err == io.EOF && len(chunk) == 0:
		return nil, 0, io.EOF
	case err != nil && err != io.EOF:
		return nil, 0, err
	}
	n := len(chunk)
	return bytes.TrimSuffix(chunk, []byte{'\n'}), n, nil
}

func (r *jsonReader) closeFile() {
	if r.file != nil {
		r.file.Close()
		r.file = nil
	}
}

func (r *jsonReader) Available() <-chan struct{} {
	if len(r.splits) == 0 && !r.noMore {
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		return r.wake
	}
	return ready
}

func (r *jsonReader) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	states := make([]connector.SplitState, 0, len(r.splits))
	for _, c := range r.splits {
		pos := binary.BigEndian.AppendUint64(nil, uint64(c.offset))
		pos = binary.BigEndian.AppendUint64(pos, uint64(c.line))
		states = append(states, connector.SplitState{ID: c.id, Data: []byte(c.path), Position: pos})
	}
	return states, nil
}

func (r *jsonReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.closeFile()
	r.wakeUp()
	r.splits = nil
	return nil
}
