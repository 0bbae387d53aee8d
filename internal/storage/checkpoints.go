package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Names of the checkpoint layout (DESIGN.md §7), relative to a store's root:
//
//	<job-id>/chk-<n>/_metadata       the commit point of checkpoint n
//	<job-id>/chk-<n>/<files>         state files of checkpoint n only
//	<job-id>/shared/                 files shared by incremental checkpoints
//	<job-id>/taskowned/              files owned by tasks
//	savepoint-<n>-<6 hex>/           a savepoint, in its own store
const (
	MetadataName   = "_metadata"
	SharedDirName  = "shared"
	TaskOwnedName  = "taskowned"
	checkpointPref = "chk-"
	savepointPref  = "savepoint-"
)

var (
	// ErrNoCheckpoint is returned by Latest when the job has no usable
	// checkpoint.
	ErrNoCheckpoint = errors.New("storage: no completed checkpoint")

	// ErrCorruptState is wrapped when a state file or inline state does not
	// have the size or the CRC its handle records.
	ErrCorruptState = errors.New("storage: corrupt state")

	// ErrExists is wrapped by WriteMetadata when the directory already holds
	// a _metadata: a checkpoint id was about to be reused.
	ErrExists = errors.New("storage: already exists")

	// ErrIncomplete is wrapped, with ErrNotFound, for a checkpoint
	// directory without _metadata: one that never completed (aborted, or in
	// flight when its process died), as opposed to a damaged one.
	ErrIncomplete = errors.New("incomplete")

	// ErrNotCheckpoint is wrapped by ResolveRestore when the path names no
	// usable checkpoint or savepoint.
	ErrNotCheckpoint = errors.New("not a weir checkpoint or savepoint")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b: the CRC of
// checkpoint.KeyedStateHandle, for files and inline state alike.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// CheckpointStorage lays out the checkpoints of one job in a Store. Methods
// that take a dir work on any directory of the Store (a checkpoint's or a
// savepoint's, as CheckpointDir, Latest or ResolveRestore give), so a
// CheckpointStorage over a savepoint target serves savepoints too.
//
// JobID is the job's directory in the Store: a valid object name, usually
// the job id alone, or empty when the Store's root is itself the job
// directory (as ResolveRestore returns for a checkpoint).
type CheckpointStorage struct {
	Store Store
	JobID string
}

// JobDir is the directory of the job's checkpoints ("" when JobID is empty).
func (s CheckpointStorage) JobDir() string { return s.JobID }

// CheckpointDir is the directory of checkpoint id: "<job>/chk-<id>".
func (s CheckpointStorage) CheckpointDir(id int64) string {
	return join(s.JobID, checkpointPref+strconv.FormatInt(id, 10))
}

// SharedDir is the directory of files shared by incremental checkpoints.
func (s CheckpointStorage) SharedDir() string { return join(s.JobID, SharedDirName) }

// TaskOwnedDir is the directory of files owned by tasks.
func (s CheckpointStorage) TaskOwnedDir() string { return join(s.JobID, TaskOwnedName) }

// SavepointDir returns a new savepoint directory name under base (a
// directory of the savepoint store, "" for its root):
// "savepoint-<id>-<6 random hex digits>". The random part keeps two
// savepoints of the same checkpoint id (after a restore, or of two jobs
// sharing a target) apart; WriteMetadata refuses the unlikely collision.
func SavepointDir(base string, id int64) string {
	return join(strings.TrimSuffix(base, "/"), fmt.Sprintf("%s%d-%06x", savepointPref, id, rand.Uint32()&0xffffff))
}

// ParseCheckpointDir returns the id of a checkpoint directory name
// ("chk-7", or ".../chk-7").
func ParseCheckpointDir(dir string) (id int64, ok bool) {
	digits, ok := strings.CutPrefix(path.Base(dir), checkpointPref)
	if !ok || digits == "" || digits[0] == '0' || digits[0] == '+' {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// WriteMetadata writes dir/_metadata: the commit point of the checkpoint in
// dir. The write is atomic and durable (Store.Create/Commit); when it
// returns an error the checkpoint is not complete, and whatever was written
// stays invisible. It refuses to replace an existing _metadata (ErrExists):
// checkpoint ids never repeat.
func (s CheckpointStorage) WriteMetadata(ctx context.Context, dir string, m *checkpoint.Metadata) error {
	b, err := checkpoint.EncodeMetadata(m)
	if err != nil {
		return err
	}
	name := join(dir, MetadataName)
	switch _, err := s.Store.Stat(ctx, name); {
	case err == nil:
		return fmt.Errorf("write %s: %w", name, ErrExists)
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("write %s: %w", name, err)
	}
	w, err := s.Store.Create(ctx, name)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer w.Abort()
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReadMetadata reads and decodes dir/_metadata. Errors wrap ErrNotFound
// when there is none, and checkpoint.ErrCorruptMetadata (and the other
// DecodeMetadata sentinels) when it does not decode.
func (s CheckpointStorage) ReadMetadata(ctx context.Context, dir string) (*checkpoint.Metadata, error) {
	name := join(dir, MetadataName)
	b, err := readAll(ctx, s.Store, name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	m, err := checkpoint.DecodeMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return m, nil
}

func readAll(ctx context.Context, st Store, name string) ([]byte, error) {
	r, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Discard removes the checkpoint in dir: its _metadata first, so that a
// discard cut short never leaves something that looks complete, then every
// file under dir.
func (s CheckpointStorage) Discard(ctx context.Context, dir string) error {
	if err := s.Store.Delete(ctx, join(dir, MetadataName)); err != nil {
		return fmt.Errorf("discard %s: %w", dir, err)
	}
	if err := s.Store.DeletePrefix(ctx, dir); err != nil {
		return fmt.Errorf("discard %s: %w", dir, err)
	}
	return nil
}

// WriteStateFile writes the state file dir/name with write, computing its
// size and CRC-32C on the way (the values of its KeyedStateHandle). The file
// is committed only if write returns nil; on any error nothing is visible.
func (s CheckpointStorage) WriteStateFile(ctx context.Context, dir, name string, write func(io.Writer) error) (size int64, crc uint32, err error) {
	full := join(dir, name)
	w, err := s.Store.Create(ctx, full)
	if err != nil {
		return 0, 0, fmt.Errorf("write state file %s: %w", full, err)
	}
	defer w.Abort()
	cw := &checksumWriter{w: w}
	if err := write(cw); err != nil {
		return 0, 0, fmt.Errorf("write state file %s: %w", full, err)
	}
	if err := w.Commit(); err != nil {
		return 0, 0, fmt.Errorf("write state file %s: %w", full, err)
	}
	return cw.size, cw.crc, nil
}

type checksumWriter struct {
	w    io.Writer
	size int64
	crc  uint32
}

func (c *checksumWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.size += int64(n)
	return n, err
}

// UploadStateFile writes the local file at localPath as the state file
// dir/name, as WriteStateFile does (atomically, with its size and CRC).
func (s CheckpointStorage) UploadStateFile(ctx context.Context, dir, name, localPath string) (size int64, crc uint32, err error) {
	return s.WriteStateFile(ctx, dir, name, func(w io.Writer) error {
		f, err := os.Open(localPath)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}

// ReadStateFile reads the whole state file dir/name and checks it against
// the size and CRC-32C of its handle: a mismatch gives an error wrapping
// ErrCorruptState, a missing file one wrapping ErrNotFound. Prefer it to
// OpenStateFile for restoring: nothing is used before it is verified.
func (s CheckpointStorage) ReadStateFile(ctx context.Context, dir, name string, size int64, crc uint32) ([]byte, error) {
	r, err := s.OpenStateFile(ctx, dir, name, size, crc)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, size) // OpenStateFile checked the size: it is the file's
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	// The verifying reader judges the CRC at EOF, which ReadFull may not
	// have reached (or may have hidden): ask for it.
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("read state file %s: %w: more than %d bytes", join(dir, name), ErrCorruptState, size)
		}
		return nil, err
	}
	return b, nil
}

// OpenStateFile opens the state file dir/name for streaming. A size
// mismatch is reported at once; the reader then checks the CRC-32C as the
// bytes go by and returns an error wrapping ErrCorruptState instead of
// io.EOF at the end if it does not match — so a caller must read to EOF
// before trusting anything it read.
func (s CheckpointStorage) OpenStateFile(ctx context.Context, dir, name string, size int64, crc uint32) (io.ReadCloser, error) {
	full := join(dir, name)
	got, err := s.Store.Stat(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", full, err)
	}
	if got != size {
		return nil, fmt.Errorf("read state file %s: %w: %d bytes, want %d", full, ErrCorruptState, got, size)
	}
	r, err := s.Store.Open(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", full, err)
	}
	return &verifyingReader{r: r, name: full, size: size, crc: crc}, nil
}

type verifyingReader struct {
	r    io.ReadCloser
	name string
	size int64
	crc  uint32
	n    int64
	sum  uint32
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.sum = crc32.Update(v.sum, castagnoli, p[:n])
	v.n += int64(n)
	switch {
	case v.n > v.size:
		return n, fmt.Errorf("read state file %s: %w: more than %d bytes", v.name, ErrCorruptState, v.size)
	case err == io.EOF && v.n != v.size:
		return n, fmt.Errorf("read state file %s: %w: %d bytes, want %d", v.name, ErrCorruptState, v.n, v.size)
	case err == io.EOF && v.sum != v.crc:
		return n, fmt.Errorf("read state file %s: %w: checksum %08x, want %08x", v.name, ErrCorruptState, v.sum, v.crc)
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.r.Close() }

// Verify checks that every piece of state m refers to is there and intact:
// inline state and state files (relative to dir) must have the size and the
// CRC-32C of their handles. Files are read in full. A savepoint must be
// self-contained: its files must lie inside dir. Errors wrap ErrNotFound for
// a missing file and ErrCorruptState for a damaged one or a bad path.
func (s CheckpointStorage) Verify(ctx context.Context, dir string, m *checkpoint.Metadata) error {
	return s.verify(ctx, dir, m, true)
}

func (s CheckpointStorage) verify(ctx context.Context, dir string, m *checkpoint.Metadata, deep bool) error {
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			for i, h := range st.Keyed {
				if err := s.verifyHandle(ctx, dir, m.Kind, h, deep); err != nil {
					return fmt.Errorf("operator %q subtask %d keyed handle %d: %w", op.UID, st.Subtask, i, err)
				}
			}
			if c := st.Channels; c != nil {
				h := checkpoint.KeyedStateHandle{Path: c.Path, Inline: c.Inline, Size: c.Size, CRC: c.CRC}
				if err := s.verifyHandle(ctx, dir, m.Kind, h, deep); err != nil {
					return fmt.Errorf("operator %q subtask %d channel state: %w", op.UID, st.Subtask, err)
				}
			}
		}
	}
	return nil
}

func (s CheckpointStorage) verifyHandle(ctx context.Context, dir string, kind checkpoint.Kind, h checkpoint.KeyedStateHandle, deep bool) error {
	if h.Incremental() {
		if len(h.Files) == 0 {
			return fmt.Errorf("incremental state: %w: no files", ErrCorruptState)
		}
		var total int64
		for _, f := range h.Files {
			if err := s.verifyFile(ctx, dir, kind, f.Path, f.Size, f.CRC, deep); err != nil {
				return err
			}
			total += f.Size
		}
		if total != h.Size {
			return fmt.Errorf("incremental state: %w: its files hold %d bytes, the handle says %d", ErrCorruptState, total, h.Size)
		}
		return nil
	}
	if h.Path == "" {
		switch {
		case int64(len(h.Inline)) != h.Size:
			return fmt.Errorf("inline state: %w: %d bytes, want %d", ErrCorruptState, len(h.Inline), h.Size)
		case Checksum(h.Inline) != h.CRC:
			return fmt.Errorf("inline state: %w: checksum %08x, want %08x", ErrCorruptState, Checksum(h.Inline), h.CRC)
		}
		return nil
	}
	return s.verifyFile(ctx, dir, kind, h.Path, h.Size, h.CRC, deep)
}

// verifyFile checks the state file at path p, relative to dir, against its
// size and CRC-32C.
func (s CheckpointStorage) verifyFile(ctx context.Context, dir string, kind checkpoint.Kind, p string, size int64, crc uint32, deep bool) error {
	name, err := resolveStatePath(dir, p, kind == checkpoint.KindSavepoint)
	if err != nil {
		return err
	}
	got, err := s.Store.Stat(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("state file %s missing: %w", p, err)
	case err != nil:
		return fmt.Errorf("state file %s: %w", p, err)
	case got != size:
		return fmt.Errorf("state file %s: %w: %d bytes, want %d", p, ErrCorruptState, got, size)
	case !deep:
		return nil
	}
	r, err := s.Store.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("state file %s: %w", p, err)
	}
	defer r.Close()
	hash := crc32.New(castagnoli)
	n, err := io.Copy(hash, r)
	switch {
	case err != nil:
		return fmt.Errorf("state file %s: %w", p, err)
	case n != size:
		return fmt.Errorf("state file %s: %w: read %d bytes, want %d", p, ErrCorruptState, n, size)
	case hash.Sum32() != crc:
		return fmt.Errorf("state file %s: %w: checksum %08x, want %08x", p, ErrCorruptState, hash.Sum32(), crc)
	}
	return nil
}

// ResolveStatePath returns the store name of a state file's path p
// (KeyedStateHandle.Path, StateFile.Path), relative to the checkpoint
// directory dir: a checkpoint may refer to files outside its directory
// (../shared/…), a savepoint (selfContained) may not. Errors wrap
// ErrCorruptState.
func ResolveStatePath(dir, p string, selfContained bool) (string, error) {
	return resolveStatePath(dir, p, selfContained)
}

// SharedRefs returns the store names of the shared files m refers to (the
// shared files of its incremental keyed state handles, resolved against
// dir, m's directory), sorted and without duplicates.
func SharedRefs(dir string, m *checkpoint.Metadata) ([]string, error) {
	var out []string
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			for _, h := range st.Keyed {
				names, err := HandleSharedRefs(dir, h)
				if err != nil {
					return nil, fmt.Errorf("operator %q subtask %d: %w", op.UID, st.Subtask, err)
				}
				out = append(out, names...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// HandleSharedRefs returns the store names of the shared files of h, an
// incremental handle of the checkpoint in dir (none for other handles).
func HandleSharedRefs(dir string, h checkpoint.KeyedStateHandle) ([]string, error) {
	var out []string
	for _, f := range h.Files {
		if !f.Shared {
			continue
		}
		name, err := resolveStatePath(dir, f.Path, false)
		if err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

// resolveStatePath returns the store name of a handle's path, relative to
// dir. A checkpoint may refer to files outside its directory within the
// store (../shared/… later); a savepoint may not.
func resolveStatePath(dir, p string, selfContained bool) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return "", fmt.Errorf("state file %q: %w: not a relative path", p, ErrCorruptState)
	}
	name := path.Join(dir, p)
	switch {
	case selfContained && !under(name, dir):
		return "", fmt.Errorf("state file %q: %w: a savepoint must hold only files inside its own directory", p, ErrCorruptState)
	case name == "." || name == ".." || strings.HasPrefix(name, "../"):
		return "", fmt.Errorf("state file %q: %w: outside the storage root", p, ErrCorruptState)
	}
	if err := validName(name); err != nil {
		return "", fmt.Errorf("state file %q: %w: %v", p, ErrCorruptState, err)
	}
	return name, nil
}

// Checkpoints returns the ids of the job's checkpoint directories that hold
// at least one object, complete or not, in ascending order.
func (s CheckpointStorage) Checkpoints(ctx context.Context) ([]int64, error) {
	names, err := s.Store.List(ctx, s.JobID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %q: %w", s.JobID, err)
	}
	var ids []int64
	for _, name := range names {
		rel := name
		if s.JobID != "" {
			rel = strings.TrimPrefix(name, s.JobID+"/")
		}
		first, _, ok := strings.Cut(rel, "/")
		if !ok {
			continue
		}
		if id, ok := ParseCheckpointDir(first); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// MaxCheckpointID returns the highest checkpoint id with a directory in the
// store, complete or not, 0 if none. A restarted job must number its
// checkpoints above it: an id whose files may exist must never be reused.
func (s CheckpointStorage) MaxCheckpointID(ctx context.Context) (int64, error) {
	ids, err := s.Checkpoints(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[len(ids)-1], nil
}

// Latest finds the newest checkpoint to restore from: the highest chk-n
// whose _metadata decodes and whose state is all there and intact (Verify).
// Newer checkpoints that fail are skipped, and skipped lists each with the
// reason ("chk-7: …: checksum mismatch"), newest first: a caller logs them,
// never drops them silently. An incomplete checkpoint (no _metadata: aborted,
// or in flight when the job failed) is skipped and listed too.
//
// Only damage is skipped. An error reading the store (a timeout, a denied
// permission) ends the search with that error: falling back to an older
// checkpoint than the newest complete one would replay records whose
// effects exactly-once sinks already committed. ErrNoCheckpoint means no
// usable checkpoint exists.
func (s CheckpointStorage) Latest(ctx context.Context) (dir string, m *checkpoint.Metadata, skipped []error, err error) {
	return s.latest(ctx, true)
}

// LatestQuick is Latest with a shallow check of each candidate: its
// metadata is read and verified, and each state file it names must exist
// with the recorded size, but no state file is read. A job master uses it to
// restart from a checkpoint it saw complete in this process (restoring
// reads, and checks, the files anyway), where Latest would read every state
// file once more before the restore downloads it — for a large state on a
// remote store, most of the time to recover.
func (s CheckpointStorage) LatestQuick(ctx context.Context) (dir string, m *checkpoint.Metadata, skipped []error, err error) {
	return s.latest(ctx, false)
}

func (s CheckpointStorage) latest(ctx context.Context, deep bool) (dir string, m *checkpoint.Metadata, skipped []error, err error) {
	ids, err := s.Checkpoints(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	for _, id := range slices.Backward(ids) {
		dir := s.CheckpointDir(id)
		m, err := s.check(ctx, dir, id, deep)
		if err == nil {
			return dir, m, skipped, nil
		}
		if !isDamage(err) {
			return "", nil, skipped, fmt.Errorf("latest checkpoint: chk-%d: %w", id, err)
		}
		skipped = append(skipped, fmt.Errorf("chk-%d: %w", id, err))
	}
	return "", nil, skipped, fmt.Errorf("%w for job %q in %s", ErrNoCheckpoint, s.JobID, s.Store.URL())
}

// check reads and verifies the checkpoint in dir; deep reads every state
// file for its checksum, otherwise only their sizes are checked.
func (s CheckpointStorage) check(ctx context.Context, dir string, id int64, deep bool) (*checkpoint.Metadata, error) {
	m, err := s.ReadMetadata(ctx, dir)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: no %s: %w", ErrIncomplete, MetadataName, err)
	}
	if err != nil {
		return nil, err
	}
	if id != 0 && m.ID != id {
		return nil, fmt.Errorf("%w: %s holds checkpoint %d", checkpoint.ErrCorruptMetadata, MetadataName, m.ID)
	}
	if err := s.verify(ctx, dir, m, deep); err != nil {
		return nil, err
	}
	return m, nil
}

// Damaged returns the errors of skipped (as Latest returns them) that are
// about checkpoints that completed and cannot be restored: not those of
// incomplete ones (ErrIncomplete), which never committed anything.
func Damaged(skipped []error) []error {
	var out []error
	for _, err := range skipped {
		if !errors.Is(err, ErrIncomplete) {
			out = append(out, err)
		}
	}
	return out
}

// isDamage tells errors that make a checkpoint unusable from errors of the
// store itself.
func isDamage(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorruptState) ||
		errors.Is(err, checkpoint.ErrCorruptMetadata) || errors.Is(err, checkpoint.ErrNotMetadata) ||
		errors.Is(err, checkpoint.ErrUnsupportedMetadataVersion)
}

// ResolveRestore opens what `--restore PATH` names: a checkpoint directory,
// a savepoint directory, or the _metadata file in one, as a plain path, a
// file:// URL or a memory:// URL. It returns a store rooted at the parent of
// that directory (for a checkpoint, its job directory, where shared files
// live), the directory's name in it, and its verified metadata. An error
// reads "PATH is not a weir checkpoint or savepoint: why" and wraps
// ErrNotCheckpoint, plus ErrBadURL, ErrNotFound, ErrCorruptState or the
// metadata sentinels as the case may be.
func ResolveRestore(ctx context.Context, restorePath string) (Store, string, *checkpoint.Metadata, error) {
	fail := func(format string, args ...any) (Store, string, *checkpoint.Metadata, error) {
		return nil, "", nil, fmt.Errorf("%s is %w: %w", restorePath, ErrNotCheckpoint, fmt.Errorf(format, args...))
	}
	loc, err := parseLocation(restorePath)
	if err != nil {
		return fail("%w", err)
	}
	parent, base, ok := loc.parent()
	if ok && base == MetadataName {
		parent, base, ok = parent.parent()
	}
	if !ok {
		return fail("the root of a store, not a checkpoint directory")
	}
	store, err := parent.open()
	if err != nil {
		return fail("%w", err)
	}
	if err := validName(base); err != nil {
		return fail("%w", err)
	}
	cs := CheckpointStorage{Store: store}
	id, _ := ParseCheckpointDir(base)
	m, err := cs.check(ctx, base, id, true)
	if errors.Is(err, ErrNotFound) {
		// Say which of "nothing there", "a file" and "a directory without
		// metadata" it is: the fix differs.
		if _, serr := store.Stat(ctx, base); serr == nil {
			return fail("a file, not a checkpoint directory or its %s", MetadataName)
		}
		if names, lerr := store.List(ctx, base); lerr == nil && len(names) == 0 {
			return fail("no such directory: %w", ErrNotFound)
		}
	}
	if err != nil {
		return fail("%w", err)
	}
	return store, base, m, nil
}
