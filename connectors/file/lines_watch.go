package file

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weirstream/weir/connector"
)

// watchedFile is a file of a watched directory that a reader has seen.
type watchedFile struct {
	path string
	// offset is the byte offset after the last complete line emitted.
	offset int64
	// dev and ino identify the file, to tell a file replaced under its
	// name, or renamed, from one that grew. Zero when unknown.
	dev, ino uint64
	// active is set when the file may hold unread lines.
	active bool
}

// watchReader follows a directory. The contract assigns splits once, at
// the start, so each reader lists the directory itself and takes the
// files whose name hashes to its subtask (FNV-1a of the base name modulo
// the parallelism): no two readers take one file, and a file stays with
// its reader for as long as the parallelism stays.
type watchReader struct {
	dir       string
	opts      LinesOptions
	subtask   int
	par       int
	logger    *slog.Logger
	files     map[string]*watchedFile // by path
	nextList  time.Time
	timer     *time.Timer
	br        *bufio.Reader
	long      []byte
	closed    bool
	listedYet bool
}

func newWatchReader(dir string, opts LinesOptions, ctx connector.ReaderContext) *watchReader {
	logger := ctx.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &watchReader{dir: dir, opts: opts, subtask: ctx.Subtask, par: ctx.Parallelism, logger: logger,
		files: map[string]*watchedFile{}}
}

// ownerOf is the subtask that reads the file of the given base name.
func ownerOf(name string, parallelism int) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(parallelism))
}

// matches reports whether the reader reads the file of the given base
// name. Names starting with "." are never read: they are files being
// written (those of this package's sinks among them).
func (r *watchReader) matches(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	if r.opts.Glob == "" {
		return !strings.HasPrefix(name, "_")
	}
	ok, _ := filepath.Match(r.opts.Glob, name)
	return ok
}

func (r *watchReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	for _, st := range splits {
		if len(st.Data) == 0 {
			return fmt.Errorf("file source: split %q: Data is empty, want a file path", st.ID)
		}
		wf := &watchedFile{path: string(st.Data), active: true}
		switch len(st.Position) {
		case 0:
		case 24:
			wf.offset = int64(binary.BigEndian.Uint64(st.Position))
			wf.dev = binary.BigEndian.Uint64(st.Position[8:])
			wf.ino = binary.BigEndian.Uint64(st.Position[16:])
		default:
			return fmt.Errorf("file source: split %q: Position has %d bytes, want 24 (offset, device, inode) in watch mode", st.ID, len(st.Position))
		}
		if o := ownerOf(filepath.Base(wf.path), r.par); o != r.subtask {
			return fmt.Errorf("file source: watched file %q belongs to subtask %d of %d, not %d: a watched directory must be restored with the parallelism its checkpoint was taken with",
				wf.path, o, r.par, r.subtask)
		}
		r.files[wf.path] = wf
	}
	return nil
}

// NoMoreSplits does nothing: a watching reader finds its files itself.
func (r *watchReader) NoMoreSplits() {}

// list reads the directory and updates the files this reader owns.
func (r *watchReader) list() error {
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file source: watched directory %q no longer exists: it must stay while the job runs", r.dir)
	}
	if err != nil {
		return fmt.Errorf("file source: list watched directory: %w", err)
	}
	present := make(map[string]bool, len(entries))
	byInode := map[[2]uint64]*watchedFile{}
	for _, wf := range r.files {
		if wf.ino != 0 {
			byInode[[2]uint64{wf.dev, wf.ino}] = wf
		}
	}
	for _, e := range entries {
		name := e.Name()
		if !r.matches(name) || ownerOf(name, r.par) != r.subtask {
			continue
		}
		p := filepath.Join(r.dir, name)
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return fmt.Errorf("file source: %w", err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		present[p] = true
		dev, ino := fileID(info)
		wf := r.files[p]
		if wf == nil {
			if old := byInode[[2]uint64{dev, ino}]; old != nil && ino != 0 && old.path != p {
				if err := r.changed(old, fmt.Sprintf("was renamed to %q", p)); err != nil {
					return err
				}
			}
			wf = &watchedFile{path: p, dev: dev, ino: ino}
			r.files[p] = wf
		}
		switch {
		case wf.ino == 0:
			wf.dev, wf.ino = dev, ino // restored from a position without one
		case wf.dev != dev || wf.ino != ino:
			if err := r.changed(wf, "was replaced by another file of the same name"); err != nil {
				return err
			}
			wf.dev, wf.ino = dev, ino
		}
		if info.Size() < wf.offset {
			if err := r.changed(wf, fmt.Sprintf("was truncated to %d bytes after %d were read", info.Size(), wf.offset)); err != nil {
				return err
			}
		}
		if info.Size() > wf.offset {
			wf.active = true
		}
	}
	for p := range r.files {
		if !present[p] {
			delete(r.files, p) // deleted: if it comes back, it is new
		}
	}
	return nil
}

// changed handles a file that changed other than by growing.
func (r *watchReader) changed(wf *watchedFile, what string) error {
	if r.opts.OnChange == ChangeFails {
		return fmt.Errorf("file source: watched file %q %s; files of a watched directory may only grow (or set LinesOptions.OnChange to ChangeIsNewFile)", wf.path, what)
	}
	r.logger.Warn("file source: watched file changed: reading it again as a new file", "file", wf.path, "change", what)
	wf.offset = 0
	wf.active = true
	return nil
}

func fileID(info fs.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}

func (r *watchReader) Poll(out connector.Emitter[string]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	now := time.Now()
	if !r.listedYet || !now.Before(r.nextList) {
		if err := r.list(); err != nil {
			return connector.EndOfInput, err
		}
		r.listedYet = true
		r.nextList = now.Add(r.opts.Watch)
	}
	paths := make([]string, 0, len(r.files))
	for p, wf := range r.files {
		if wf.active {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths) // name order, as in the bounded mode
	emitted := 0
	for _, p := range paths {
		if emitted >= r.opts.BatchSize {
			break
		}
		n, err := r.readFile(r.files[p], out, r.opts.BatchSize-emitted)
		if err != nil {
			return connector.EndOfInput, err
		}
		emitted += n
	}
	for _, wf := range r.files {
		if wf.active {
			return connector.MoreAvailable, nil
		}
	}
	return connector.NothingAvailable, nil
}

// readFile emits up to limit complete lines of wf from its offset. A last
// line without '\n' is left for a later Poll: it may still be written.
// The file stays active while lines may remain.
func (r *watchReader) readFile(wf *watchedFile, out connector.Emitter[string], limit int) (int, error) {
	f, err := os.Open(wf.path)
	if errors.Is(err, fs.ErrNotExist) {
		delete(r.files, wf.path)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("file source: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(wf.offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("file source: %w", err)
	}
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, r.opts.BufferSize)
	} else {
		r.br.Reset(f)
	}
	defer r.br.Reset(nil)
	n := 0
	for n < limit {
		line, ok, err := r.completeLine(wf)
		if err != nil {
			return n, err
		}
		if !ok {
			wf.active = false
			return n, nil
		}
		out.Emit(line)
		n++
	}
	return n, nil // limit reached: stays active
}

// completeLine reads the next line that ends in '\n'; at the end of the
// file it reports false and leaves the offset before the partial line.
func (r *watchReader) completeLine(wf *watchedFile) (string, bool, error) {
	r.long = r.long[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch err {
		case bufio.ErrBufferFull:
			r.long = append(r.long, chunk...)
			continue
		case io.EOF:
			return "", false, nil
		case nil:
		default:
			return "", false, fmt.Errorf("file source: %s after offset %d: %w", wf.path, wf.offset, err)
		}
		line := chunk
		if len(r.long) > 0 {
			r.long = append(r.long, chunk...)
			line = r.long
		}
		wf.offset += int64(len(line))
		return string(trimEOL(line)), true, nil
	}
}

// Available is ready while files have unread lines, and otherwise at the
// next listing of the directory.
func (r *watchReader) Available() <-chan struct{} {
	for _, wf := range r.files {
		if wf.active {
			return ready
		}
	}
	d := time.Until(r.nextList)
	if d <= 0 {
		return ready
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	c := make(chan struct{})
	r.timer = time.AfterFunc(d, func() { close(c) })
	return c
}

// Snapshot returns every file the reader has seen, with its offset and
// identity: a restored reader neither reads them again nor misses their
// new lines.
func (r *watchReader) Snapshot(int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	out := make([]connector.SplitState, 0, len(r.files))
	for _, wf := range r.files {
		pos := binary.BigEndian.AppendUint64(nil, uint64(wf.offset))
		pos = binary.BigEndian.AppendUint64(pos, wf.dev)
		pos = binary.BigEndian.AppendUint64(pos, wf.ino)
		out = append(out, connector.SplitState{ID: wf.path, Data: []byte(wf.path), Position: pos})
	}
	slices.SortFunc(out, func(a, b connector.SplitState) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (r *watchReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.files = nil
	return nil
}
