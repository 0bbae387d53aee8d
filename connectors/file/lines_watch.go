package file

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"maps"
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

// watchState is the Data of a watching reader's one split: whose state
// it is. Its Position lists the reader's files (see encodeFiles).
type watchState struct {
	Dir         string `json:"dir"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
}

// AddSplits takes the state of a restored reader. Each reader snapshots
// exactly one split, so that a restore at the same parallelism hands each
// reader back its own (the runtime deals restored splits out in subtask
// order); another parallelism would move files to readers whose hash does
// not pick them, and is refused.
func (r *watchReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	for _, st := range splits {
		var ws watchState
		if err := json.Unmarshal(st.Data, &ws); err != nil || ws.Parallelism < 1 {
			return fmt.Errorf("file source: split %q is not the state of a watching reader: %v", st.ID, err)
		}
		if ws.Parallelism != r.par || ws.Subtask != r.subtask {
			return fmt.Errorf("file source: the checkpoint's watch state of %q is that of subtask %d of %d, given to subtask %d of %d: a watched directory must be restored with the parallelism its checkpoint was taken with",
				ws.Dir, ws.Subtask, ws.Parallelism, r.subtask, r.par)
		}
		files, err := decodeFiles(st.Position)
		if err != nil {
			return fmt.Errorf("file source: split %q: %w", st.ID, err)
		}
		for _, wf := range files {
			wf.active = true
			r.files[wf.path] = wf
		}
	}
	return nil
}

func encodeFiles(files map[string]*watchedFile) []byte {
	paths := slices.Sorted(maps.Keys(files))
	b := binary.AppendUvarint(nil, uint64(len(paths)))
	for _, p := range paths {
		wf := files[p]
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, uint64(wf.offset))
		b = binary.AppendUvarint(b, wf.dev)
		b = binary.AppendUvarint(b, wf.ino)
	}
	return b
}

var errBadWatchPosition = errors.New("malformed watch position")

func decodeFiles(b []byte) ([]*watchedFile, error) {
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errBadWatchPosition
		}
		b = b[n:]
		return v, nil
	}
	n, err := next()
	if err != nil || n > uint64(len(b)) {
		return nil, errBadWatchPosition
	}
	files := make([]*watchedFile, 0, n)
	for range n {
		l, err := next()
		if err != nil || l > uint64(len(b)) {
			return nil, errBadWatchPosition
		}
		wf := &watchedFile{path: string(b[:l])}
		b = b[l:]
		var off uint64
		if off, err = next(); err != nil {
			return nil, err
		}
		wf.offset = int64(off)
		if wf.dev, err = next(); err != nil {
			return nil, err
		}
		if wf.ino, err = next(); err != nil {
			return nil, err
		}
		files = append(files, wf)
	}
	if len(b) != 0 {
		return nil, errBadWatchPosition
	}
	return files, nil
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

// Snapshot returns one split that lists every file the reader has seen,
// with its offset and identity: a restored reader neither reads them again
// nor misses their new lines.
func (r *watchReader) Snapshot(int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	data, err := json.Marshal(watchState{Dir: r.dir, Subtask: r.subtask, Parallelism: r.par})
	if err != nil {
		return nil, err
	}
	return []connector.SplitState{{ID: fmt.Sprintf("watch:%s:%d", r.dir, r.subtask), Data: data, Position: encodeFiles(r.files)}}, nil
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
