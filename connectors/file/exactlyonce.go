package file

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirstream/weir/connector"
)

var (
	_ connector.Sink[string]      = (*ExactlyOnceSink[string])(nil)
	_ connector.Committer         = (*ExactlyOnceSink[string])(nil)
	_ connector.RollbackCommitter = (*ExactlyOnceSink[string])(nil)
	_ connector.Writer[string]    = (*exactlyOnceWriter[string])(nil)
	_ connector.PreCommitter      = (*exactlyOnceWriter[string])(nil)
)

// ErrPendingFileLost is returned (wrapped) by Commit when neither the
// pending file of a committable nor its final file exists: the records it
// held are lost. It happens when something other than the sink removed or
// renamed files of the directory (or, with ExactlyOnceOptions.NoSync, after
// an operating-system crash). Retrying does not help.
var ErrPendingFileLost = errors.New("file sink: pending file lost")

// ExactlyOnceOptions configures an ExactlyOnceSink. The zero value gives the
// defaults.
type ExactlyOnceOptions struct {
	// BufferSize is the size in bytes of each writer's buffer, in
	// [1, MaxWriteBufferSize]; lines reach the in-progress file when it is
	// full and on Flush. Default 0: DefaultWriteBufferSize (64 KiB).
	BufferSize int
	// NoSync skips every fsync: of the file at pre-commit, and of the
	// directory after a pre-commit, a commit or a cleanup. Faster, but an
	// operating-system crash (not a process crash) may then lose committed
	// or pre-committed data. Default false: sync.
	NoSync bool
	// KeepRolledBack moves the part files that RollBackAfter undoes into
	// the subdirectory RolledBackDirName of the sink's directory (readers
	// skip it: its name starts with "."), instead of removing them.
	// Default false: removed (the restored job writes their records
	// again).
	KeepRolledBack bool
}

// RolledBackDirName is the subdirectory where KeepRolledBack moves the part
// files a rollback undid.
const RolledBackDirName = ".rolled-back"

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *ExactlyOnceOptions) EnsureDefaults() *ExactlyOnceOptions {
	if o.BufferSize == 0 {
		o.BufferSize = DefaultWriteBufferSize
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
// Zero fields are valid: they stand for their defaults.
func (o *ExactlyOnceOptions) Validate() error {
	if o.BufferSize < 0 || o.BufferSize > MaxWriteBufferSize {
		return fmt.Errorf("file sink: ExactlyOnceOptions.BufferSize must be in [1, %d] (0 means %d), got %d",
			MaxWriteBufferSize, DefaultWriteBufferSize, o.BufferSize)
	}
	return nil
}

// ExactlyOnceFileName is the name of the file that holds the records a
// subtask wrote, in an attempt of a job, before the barrier of a checkpoint
// (and after that of the subtask's previous non-empty checkpoint). It becomes
// visible when the checkpoint completes.
func ExactlyOnceFileName(subtask, attempt int, checkpointID int64) string {
	return fmt.Sprintf("part-%05d-%04d-%010d", subtask, attempt, checkpointID)
}

const (
	hiddenPartPrefix = ".part-"
	inProgressSuffix = ".inprogress"
	pendingSuffix    = ".pending"
)

// pendingFileName is the hidden name a file has between its pre-commit and
// its commit.
func pendingFileName(final string) string { return "." + final + pendingSuffix }

// inProgressFileName is the hidden name of the file a writer is filling.
// The token, random per writer, keeps two writers apart even when a runtime
// hands both the same attempt.
func inProgressFileName(subtask, attempt int, token string) string {
	return fmt.Sprintf("%s%05d-%04d-%s%s", hiddenPartPrefix, subtask, attempt, token, inProgressSuffix)
}

// parseHiddenPart returns the subtask of a name made by inProgressFileName
// (suffix inProgressSuffix) or pendingFileName (suffix pendingSuffix), and
// false for any other name, so that cleaning never touches files the sink
// did not make.
func parseHiddenPart(name, suffix string) (subtask int, ok bool) {
	rest, ok := strings.CutPrefix(name, hiddenPartPrefix)
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutSuffix(rest, suffix); !ok {
		return 0, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 || !isDigits(fields[0]) || !isDigits(fields[1]) {
		return 0, false
	}
	// A pending name ends with a checkpoint id, an in-progress name with a
	// writer's token.
	if last := fields[2]; suffix == pendingSuffix && !isDigits(last) || !isLowerHex(last) {
		return 0, false
	}
	subtask, err := strconv.Atoi(fields[0])
	return subtask, err == nil
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func isLowerHex(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdef") == ""
}

// committable is what PreCommit returns, as JSON. It lists every file the
// writer pre-committed and could not see committed yet, its own file last:
// the records of a checkpoint that was aborted after its pre-commit are thus
// committed with the next checkpoint that completes, which is what the
// sources' positions in that checkpoint require.
type committable struct {
	Version int           `json:"v"`
	Files   []pendingFile `json:"files"`
}

const committableVersion = 1

// pendingFile is a pre-committed file: names relative to the sink's
// directory, and the size it must have.
type pendingFile struct {
	Pending string `json:"pending"`
	Final   string `json:"final"`
	Bytes   int64  `json:"bytes"`
}

func decodeCommittable(data []byte) (committable, error) {
	var c committable
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("committable is not one of the exactly-once file sink: %w", err)
	}
	if c.Version != committableVersion {
		return c, fmt.Errorf("committable has version %d, this sink reads version %d", c.Version, committableVersion)
	}
	for _, f := range c.Files {
		if err := f.check(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// check rejects names that would reach outside the directory, a final name
// that readers would skip, and a pending name that readers would not.
func (f pendingFile) check() error {
	for _, name := range []string{f.Pending, f.Final} {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("committable names file %q, which is not a plain file name", name)
		}
	}
	if strings.HasPrefix(f.Final, ".") || strings.HasPrefix(f.Final, "_") {
		return fmt.Errorf("committable names final file %q, which readers would skip (it starts with %q)", f.Final, f.Final[:1])
	}
	if !strings.HasPrefix(f.Pending, ".") {
		return fmt.Errorf("committable names pending file %q, which readers would not skip", f.Pending)
	}
	if f.Bytes < 0 {
		return fmt.Errorf("committable gives file %q a negative size %d", f.Final, f.Bytes)
	}
	return nil
}

// ExactlyOnceSink writes records as lines of files that become visible only
// when the checkpoint that pre-committed them completes. See the package
// documentation. It is safe for concurrent use: writers of several subtasks
// and Commit calls may run at the same time.
type ExactlyOnceSink[T any] struct {
	dir    string
	format func(T) string
	opts   ExactlyOnceOptions
	fs     sinkFS
}

// ExactlyOnce returns an exactly-once sink that writes each string record as
// one line to files in dir.
func ExactlyOnce(dir string, opts ExactlyOnceOptions) *ExactlyOnceSink[string] {
	return ExactlyOnceOf(dir, func(s string) string { return s }, opts)
}

// ExactlyOnceOf returns an exactly-once sink that writes each record as the
// line format(record) to files in dir. format may be called concurrently by
// several subtasks.
func ExactlyOnceOf[T any](dir string, format func(T) string, opts ExactlyOnceOptions) *ExactlyOnceSink[T] {
	return &ExactlyOnceSink[T]{dir: dir, format: format, opts: opts, fs: osFS{}}
}

func (s *ExactlyOnceSink[T]) sync() bool { return !s.opts.NoSync }

// NewWriter creates dir if needed, removes the in-progress files that
// writers of earlier attempts left there for this subtask to clean (those of
// every subtask k with k % Parallelism == Subtask, so that none is missed
// after a change of parallelism), and opens a new in-progress file. It never
// removes pending files: a restored checkpoint may still commit them.
func (s *ExactlyOnceSink[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	if s.format == nil {
		return nil, errors.New("file sink: ExactlyOnceOf needs a non-nil format function")
	}
	if s.dir == "" {
		return nil, errors.New("file sink: ExactlyOnce needs a directory, got \"\"")
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism || ctx.Attempt < 0 {
		return nil, fmt.Errorf("file sink: invalid writer context: subtask %d of parallelism %d, attempt %d", ctx.Subtask, ctx.Parallelism, ctx.Attempt)
	}
	opts := s.opts
	opts.EnsureDefaults()
	logger := ctx.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := s.fs.MkdirAll(s.dir); err != nil {
		return nil, fmt.Errorf("file sink: cannot create directory %q: %w", s.dir, err)
	}
	if err := s.removeInProgress(ctx.Subtask, ctx.Parallelism, logger); err != nil {
		return nil, err
	}
	w := &exactlyOnceWriter[T]{
		sink:           s,
		subtask:        ctx.Subtask,
		attempt:        ctx.Attempt,
		token:          hex.EncodeToString(randomBytes(8)),
		logger:         logger,
		bw:             bufio.NewWriterSize(nil, opts.BufferSize),
		lastCheckpoint: -1,
	}
	// Open the first file now rather than on the first Write, so that a
	// directory the sink cannot write to fails the job at once.
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails
	return b
}

// removeInProgress removes the in-progress files of the subtasks that
// subtask cleans for parallelism.
func (s *ExactlyOnceSink[T]) removeInProgress(subtask, parallelism int, logger *slog.Logger) error {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("file sink: cannot list directory %q: %w", s.dir, err)
	}
	removed := false
	for _, e := range entries {
		k, ok := parseHiddenPart(e.Name(), inProgressSuffix)
		if !ok || k%parallelism != subtask {
			continue
		}
		if err := s.fs.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: cannot remove the in-progress file of an earlier attempt in directory %q: %w", s.dir, err)
		}
		removed = true
		logger.Info("file sink: removed the in-progress file of an earlier attempt", "subtask", subtask, "file", e.Name())
	}
	if removed && s.sync() {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("file sink: sync directory %q: %w", s.dir, err)
		}
	}
	return nil
}

// Commit renames the pending files of the committables to their final
// names and then syncs the directory. Committables with empty Data (the nil
// of an empty pre-commit) commit nothing.
//
// Commit is idempotent: a file whose final name exists with the size the
// committable gives, and whose pending file is gone, was committed before
// and is left alone. A file whose pending and final names both exist is
// not overwritten but reported: the final name holds a file this
// committable did not write. A file of which neither exists is reported
// with ErrPendingFileLost. Commit goes on with the other files after an
// error and returns all errors joined; calling it again after the cause is
// fixed commits the rest.
func (s *ExactlyOnceSink[T]) Commit(ctx context.Context, committables []connector.Committable) error {
	var errs []error
	touched := false
	for _, cm := range committables {
		if len(cm.Data) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("file sink: commit: %w", err))
			break
		}
		c, err := decodeCommittable(cm.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("file sink: commit checkpoint %d of subtask %d: %w", cm.CheckpointID, cm.Subtask, err))
			continue
		}
		for _, f := range c.Files {
			if err := s.commitFile(f); err != nil {
				errs = append(errs, fmt.Errorf("file sink: commit checkpoint %d of subtask %d in directory %q: %w", cm.CheckpointID, cm.Subtask, s.dir, err))
				continue
			}
			touched = true
		}
	}
	// Sync also when every file was committed before: the process that
	// renamed them may have died before its own sync.
	if touched && s.sync() {
		if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("file sink: commit: sync directory %q: %w", s.dir, err))
		}
	}
	return errors.Join(errs...)
}

// commitFile commits one file. Several Commit calls may commit the same
// file at the same time: since a rename is atomic, at least one of the two
// names exists at every instant unless the file is lost, and a name gone
// once never comes back; the order of the checks below relies on that.
func (s *ExactlyOnceSink[T]) commitFile(f pendingFile) error {
	pending := filepath.Join(s.dir, f.Pending)
	final := filepath.Join(s.dir, f.Final)
	info, err := s.fs.Lstat(pending)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s.checkCommitted(f)
	case err != nil:
		return err
	case !info.Mode().IsRegular() || info.Size() != f.Bytes:
		return fmt.Errorf("pending file %q has %d bytes (mode %v), the committable expects a regular file of %d bytes; it was changed after its pre-commit, so it is not committed",
			f.Pending, info.Size(), info.Mode(), f.Bytes)
	}
	if _, err := s.fs.Lstat(final); err == nil {
		if _, err := s.fs.Lstat(pending); errors.Is(err, fs.ErrNotExist) {
			return s.checkCommitted(f) // renamed meanwhile by another Commit
		}
		return fmt.Errorf("final file %q exists already, and so does pending file %q: the final name holds a file this committable did not write, and the sink does not overwrite it; move the other file away (was the directory shared with another sink or job?) and commit again",
			f.Final, f.Pending)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.fs.Rename(pending, final); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s.checkCommitted(f) // renamed meanwhile by another Commit
		}
		return err
	}
	return nil
}

// checkCommitted decides, once the pending file of f is gone, whether f was
// committed: its final file must exist with the committed size.
func (s *ExactlyOnceSink[T]) checkCommitted(f pendingFile) error {
	info, err := s.fs.Lstat(filepath.Join(s.dir, f.Final))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: neither pending file %q nor final file %q exists, so its %d bytes of records are lost; were files of the directory removed or renamed by something other than this sink?",
			ErrPendingFileLost, f.Pending, f.Final, f.Bytes)
	case err != nil:
		return err
	case !info.Mode().IsRegular() || info.Size() != f.Bytes:
		return fmt.Errorf("final file %q has %d bytes (mode %v), the committable expects a regular file of %d bytes: it was changed after its commit, or not written by this committable",
			f.Final, info.Size(), info.Mode(), f.Bytes)
	}
	return nil
}

// RollBackAfter undoes what checkpoints with ids above checkpointID
// committed: the part files whose name (ExactlyOnceFileName) carries such
// an id, which only a checkpoint completed after checkpointID can have
// committed — a restore from checkpointID replays their records. They are
// removed, or moved to RolledBackDirName with KeepRolledBack; other files
// are left alone. It returns the number of files undone.
func (s *ExactlyOnceSink[T]) RollBackAfter(ctx context.Context, checkpointID int64) (int, error) {
	entries, err := s.fs.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("file sink: roll back: cannot list directory %q: %w", s.dir, err)
	}
	var errs []error
	undone := 0
	for _, e := range entries {
		id, ok := parseFinalPart(e.Name())
		if !ok || id <= checkpointID {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("file sink: roll back: %w", err))
			break
		}
		from := filepath.Join(s.dir, e.Name())
		if s.opts.KeepRolledBack {
			to := filepath.Join(s.dir, RolledBackDirName, e.Name())
			if err := s.fs.MkdirAll(filepath.Dir(to)); err != nil {
				errs = append(errs, fmt.Errorf("file sink: roll back: %w", err))
				break
			}
			if _, err := s.fs.Lstat(to); err == nil {
				to += "." + hex.EncodeToString(randomBytes(4))
			}
			err = s.fs.Rename(from, to)
		} else {
			err = s.fs.Remove(from)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("file sink: roll back part file %q of checkpoint %d (after %d) in directory %q: %w", e.Name(), id, checkpointID, s.dir, err))
			continue
		}
		undone++
	}
	if undone > 0 && s.sync() {
		if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("file sink: roll back: sync directory %q: %w", s.dir, err))
		}
	}
	return undone, errors.Join(errs...)
}

// parseFinalPart returns the checkpoint id of a name made by
// ExactlyOnceFileName, and false for any other name.
func parseFinalPart(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "part-")
	if !ok {
		return 0, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 || len(fields[0]) < 5 || len(fields[1]) < 4 || len(fields[2]) < 10 ||
		!isDigits(fields[0]) || !isDigits(fields[1]) || !isDigits(fields[2]) {
		return 0, false
	}
	id, err := strconv.ParseInt(fields[2], 10, 64)
	return id, err == nil
}

// Cleanup removes from the directory every pending file that no committable
// of keep names, and every in-progress file. Files the sink did not name
// are left alone. Committables with empty Data are ignored; if one cannot
// be decoded, Cleanup removes nothing.
//
// Cleanup must not run while a writer of the sink is open: it would remove
// the writer's in-progress file, and the pending files of the checkpoints it
// pre-committed but that keep does not list. The runtime calls it after a
// restore, once the committables of the restored checkpoint are committed
// and before the new writers are created, with keep holding those
// committables (or none); and may call it after the job ended.
func (s *ExactlyOnceSink[T]) Cleanup(ctx context.Context, keep []connector.Committable) error {
	kept := make(map[string]bool)
	for _, cm := range keep {
		if len(cm.Data) == 0 {
			continue
		}
		c, err := decodeCommittable(cm.Data)
		if err != nil {
			return fmt.Errorf("file sink: cleanup: committable of checkpoint %d of subtask %d: %w", cm.CheckpointID, cm.Subtask, err)
		}
		for _, f := range c.Files {
			kept[f.Pending] = true
		}
	}
	entries, err := s.fs.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("file sink: cleanup: cannot list directory %q: %w", s.dir, err)
	}
	var errs []error
	removed := false
	for _, e := range entries {
		name := e.Name()
		_, pending := parseHiddenPart(name, pendingSuffix)
		_, inProgress := parseHiddenPart(name, inProgressSuffix)
		if !pending && !inProgress || kept[name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("file sink: cleanup: %w", err))
			break
		}
		if err := s.fs.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("file sink: cleanup of directory %q: %w", s.dir, err))
			continue
		}
		removed = true
	}
	if removed && s.sync() {
		if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("file sink: cleanup: sync directory %q: %w", s.dir, err))
		}
	}
	return errors.Join(errs...)
}

type exactlyOnceWriter[T any] struct {
	sink    *ExactlyOnceSink[T]
	subtask int
	attempt int
	token   string
	logger  *slog.Logger

	// file is the in-progress file, nil between a pre-commit and the next
	// Write; path is its name while it exists, "" once it is renamed.
	file sinkFile
	path string
	bw   *bufio.Writer
	// size counts the bytes written to the in-progress file, buffered or
	// not.
	size int64
	// outstanding lists the files this writer pre-committed and has not
	// seen committed yet.
	outstanding    []pendingFile
	lastCheckpoint int64
	// err, once set, is returned by every call but Close: after a failed
	// write or pre-commit the content of the transaction is unknown.
	err    error
	closed bool
}

func (w *exactlyOnceWriter[T]) fail(err error) error {
	w.err = err
	return err
}

// open creates a new in-progress file.
func (w *exactlyOnceWriter[T]) open() error {
	dir := w.sink.dir
	path := filepath.Join(dir, inProgressFileName(w.subtask, w.attempt, w.token))
	f, err := w.sink.fs.Create(path)
	if err != nil {
		return fmt.Errorf("file sink: cannot create an in-progress file in directory %q: %w", dir, err)
	}
	w.file, w.path, w.size = f, path, 0
	w.bw.Reset(f)
	return nil
}

func (w *exactlyOnceWriter[T]) usable() error {
	if w.closed {
		return errWriterClosed
	}
	return w.err
}

func (w *exactlyOnceWriter[T]) Write(rec T) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.file == nil {
		if err := w.open(); err != nil {
			return w.fail(err)
		}
	}
	line := w.sink.format(rec)
	w.bw.WriteString(line)
	// bufio.Writer keeps its first error and returns it from every later
	// call, so checking the last one is enough.
	if err := w.bw.WriteByte('\n'); err != nil {
		return w.fail(fmt.Errorf("file sink: write %q: %w", w.path, err))
	}
	w.size += int64(len(line)) + 1
	return nil
}

// Flush writes the buffered lines to the in-progress file. They stay
// invisible: only a pre-commit and its commit make them visible, also at the
// end of input.
func (w *exactlyOnceWriter[T]) Flush(endOfInput bool) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.file == nil {
		return nil
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("file sink: write %q: %w", w.path, err))
	}
	return nil
}

// PreCommit turns the in-progress file, if it holds any record, into a
// pending file: flush, fsync, close, rename to its pending name, fsync the
// directory. The next record goes into a new in-progress file.
//
// The committable lists that file and every file this writer pre-committed
// earlier whose pending name still exists (its checkpoint was aborted, or
// is not committed yet). PreCommit returns nil when that list is empty: an
// empty checkpoint commits nothing.
func (w *exactlyOnceWriter[T]) PreCommit(checkpointID int64) ([]byte, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	if checkpointID < 0 {
		return nil, fmt.Errorf("file sink: PreCommit(%d): checkpoint ids must not be negative", checkpointID)
	}
	if checkpointID <= w.lastCheckpoint {
		return nil, fmt.Errorf("file sink: PreCommit(%d) after PreCommit(%d): checkpoint ids must increase", checkpointID, w.lastCheckpoint)
	}
	w.lastCheckpoint = checkpointID
	var files []pendingFile
	for _, f := range w.outstanding {
		_, err := w.sink.fs.Lstat(filepath.Join(w.sink.dir, f.Pending))
		if errors.Is(err, fs.ErrNotExist) {
			continue // committed (or lost, which its own Commit reports)
		}
		if err != nil {
			return nil, w.fail(fmt.Errorf("file sink: pre-commit checkpoint %d: %w", checkpointID, err))
		}
		files = append(files, f)
	}
	if w.size > 0 {
		f, err := w.seal(checkpointID)
		if err != nil {
			return nil, w.fail(fmt.Errorf("file sink: pre-commit checkpoint %d in directory %q: %w", checkpointID, w.sink.dir, err))
		}
		files = append(files, f)
	}
	w.outstanding = files
	if len(files) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(committable{Version: committableVersion, Files: files})
	if err != nil {
		return nil, w.fail(fmt.Errorf("file sink: pre-commit checkpoint %d: %w", checkpointID, err))
	}
	return data, nil
}

// seal makes the in-progress file the durable pending file of checkpoint id.
func (w *exactlyOnceWriter[T]) seal(id int64) (pendingFile, error) {
	fsys, dir := w.sink.fs, w.sink.dir
	f := pendingFile{Final: ExactlyOnceFileName(w.subtask, w.attempt, id), Bytes: w.size}
	f.Pending = pendingFileName(f.Final)
	// A final name taken already means an earlier run with the same attempt
	// committed this checkpoint id: refuse now, rather than fail every
	// commit of it (the sink never overwrites a final file).
	if _, err := fsys.Lstat(filepath.Join(dir, f.Final)); err == nil {
		return f, fmt.Errorf("final file %q exists already: an earlier run of subtask %d with attempt %d committed checkpoint %d; a restarted job must get a WriterContext.Attempt that no earlier run writing into this directory had",
			f.Final, w.subtask, w.attempt, id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if err := w.bw.Flush(); err != nil {
		return f, err
	}
	if w.sink.sync() {
		if err := w.file.Sync(); err != nil {
			return f, err
		}
	}
	err := w.file.Close()
	w.file = nil
	if err != nil {
		return f, err
	}
	// A pending file of the same name can only be an orphan of an earlier
	// run with the same attempt whose checkpoint never completed: replace
	// it.
	if err := fsys.Rename(w.path, filepath.Join(dir, f.Pending)); err != nil {
		return f, err
	}
	w.path, w.size = "", 0
	if w.sink.sync() {
		if err := fsys.SyncDir(dir); err != nil {
			return f, err
		}
	}
	w.logger.Debug("file sink: pre-committed", "subtask", w.subtask, "checkpoint", id, "file", f.Final, "bytes", f.Bytes)
	return f, nil
}

// Close closes and removes the in-progress file: records written since the
// last pre-commit are dropped (the source replays them after a restore).
// Pending files stay: their commit may still come.
func (w *exactlyOnceWriter[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.file != nil {
		w.file.Close() // its content is dropped: a close error loses nothing
		w.file = nil
	}
	if w.path != "" {
		err := w.sink.fs.Remove(w.path)
		w.path = ""
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: remove in-progress file: %w", err)
		}
	}
	return nil
}
