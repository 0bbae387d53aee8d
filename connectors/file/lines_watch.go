package file

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// watchReader follows a directory. Each reader lists the directory itself
// and takes the files the source's owner rule gives its subtask (FNV-1a of
// the base name modulo the parallelism, LinesSource.SplitOwner); the
// runtime deals restored files by the same rule, so no two readers take
// one file, at any parallelism (connector.SplitDiscoverer).
type watchReader struct {
	dir       string
	opts      LinesOptions
	subtask   int
	par       int
	logger    *slog.Logger
	claims    *connector.SplitClaims  // the IDs of files
	files     map[string]*watchedFile // by path; the files claims holds
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
		claims: connector.NewSplitClaims(ctx, watchOwner), files: map[string]*watchedFile{}}
}

// A watched file's split ID is watchFilePrefix followed by its path. The
// IDs of the one split per reader that checkpoints of earlier versions
// held are "watch:DIR:SUBTASK".
const (
	watchFilePrefix   = "watch-file:"
	legacyWatchPrefix = "watch:"
)

func watchFileID(path string) string { return watchFilePrefix + path }

// watchOwner is the owner rule of a watched directory's files: FNV-1a of
// the file's base name modulo the parallelism. A legacy split stays with
// the subtask that wrote it (its restore at another parallelism is
// refused by AddSplits).
func watchOwner(id string, parallelism int) int {
	if path, ok := strings.CutPrefix(id, watchFilePrefix); ok {
		return connector.HashOwner(filepath.Base(path), parallelism)
	}
	if rest, ok := strings.CutPrefix(id, legacyWatchPrefix); ok {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			if n, err := strconv.Atoi(rest[i+1:]); err == nil && n >= 0 {
				return n % parallelism
			}
		}
	}
	return connector.HashOwner(id, parallelism)
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

// watchState is the Data of the one split of a watching reader of an
// earlier version: whose state it is. Its Position lists the reader's
// files (see encodeFiles).
type watchState struct {
	Dir         string `json:"dir"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
}

// AddSplits takes the restored files of this reader: one split per file
// (Data the path, Position its offset and identity), dealt by the owner
// rule. The one split per reader of an earlier version's checkpoint is
// taken at the parallelism it was written with, and refused at another.
func (r *watchReader) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	for _, st := range splits {
		if path, ok := strings.CutPrefix(st.ID, watchFilePrefix); ok {
			if err := r.claims.Assigned(st.ID); err != nil {
				return fmt.Errorf("file source: %w", err)
			}
			wf, err := decodeFile(path, st.Position)
			if err != nil {
				return fmt.Errorf("file source: split %q: %w", st.ID, err)
			}
			wf.active = true
			r.files[path] = wf
			continue
		}
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
			if err := r.claims.Assigned(watchFileID(wf.path)); err != nil {
				return fmt.Errorf("file source: %w", err)
			}
			wf.active = true
			r.files[wf.path] = wf
		}
	}
	return nil
}

// encodeFile is the Position of a watched file's split.
func encodeFile(wf *watchedFile) []byte {
	b := binary.AppendUvarint(nil, uint64(wf.offset))
	b = binary.AppendUvarint(b, wf.dev)
	return binary.AppendUvarint(b, wf.ino)
}

func decodeFile(path string, b []byte) (*watchedFile, error) {
	wf := &watchedFile{path: path}
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errBadWatchPosition
		}
		v[i], b = x, b[n:]
	}
	if len(b) != 0 || v[0] > 1<<62 {
		return nil, errBadWatchPosition
	}
	wf.offset, wf.dev, wf.ino = int64(v[0]), v[1], v[2]
	return wf, nil
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
		p := filepath.Join(r.dir, name)
		if !r.matches(name) || !r.claims.Owns(watchFileID(p)) {
			continue
		}
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
			r.claims.Claim(watchFileID(p)) // new: from its first byte
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
			r.claims.Forget(watchFileID(p))
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
		r.claims.Forget(watchFileID(wf.path))
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

// Snapshot returns a split for every file the reader has seen, read to its
// end or not, with its offset and identity: a restored reader, at any
// parallelism, neither reads them again nor misses their new lines, and a
// file missing from the checkpoint is new.
func (r *watchReader) Snapshot(int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	out := make([]connector.SplitState, 0, len(r.files))
	for _, p := range slices.Sorted(maps.Keys(r.files)) {
		out = append(out, connector.SplitState{ID: watchFileID(p), Data: []byte(p), Position: encodeFile(r.files[p])})
	}
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
