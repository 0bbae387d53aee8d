package weir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/statebackend/snapshot"
	"github.com/weirstream/weir/internal/storage"
)

// Incremental checkpoints of the pebble backend (Options.Checkpointing.
// Incremental), as Flink's incremental RocksDB checkpoints:
//
//   - Synchronous part (task goroutine): a native pebble checkpoint of the
//     database into <LocalStateDir>/<job>/local/<uid>-<subtask>/chk-<n>,
//     with hard links (pebble.Backend.SnapshotIncremental).
//   - Asynchronous part: the data files (sstables) that the base — the last
//     checkpoint this operator instance knows complete — uploaded are
//     referred to where they are in <job>/shared/; the others are uploaded
//     there under unique names (<uid>-<subtask>-<instance>-c<n>-<file>),
//     and the small MANIFEST, OPTIONS and marker files go into chk-<n>/.
//     The handle (checkpoint.IncrementalBackend) lists every file with its
//     size and CRC, and its base.
//   - NotifyCheckpointComplete(n) makes n's files the base of the next
//     checkpoints; only complete checkpoints' files are reused, so files of
//     an aborted checkpoint are never referred to. The job master's
//     shared-state registry deletes shared files no checkpoint needs.
//   - Restore downloads each overlapping handle's files into a local
//     directory (or, with LocalRecovery, links them from the local copy of
//     the same checkpoint when every file matches its size and CRC) and
//     opens them (pebble.Backend.RestoreNative). The adopted checkpoint's
//     shared files become the base: they are not uploaded again.
//
// Savepoints are always full, canonical snapshots.

// uploadWorkers is the number of files uploaded or downloaded at once by
// one operator instance.
const uploadWorkers = 4

// incrementalState is the incremental-checkpoint side of one pebble keyed
// operator instance. complete, aborted, snapshot and restore run on the task
// goroutine; the asynchronous part records its uploads under mu.
type incrementalState struct {
	groups    keygroup.Range
	localDir  string // <stateDir>/local/<uid>-<subtask>
	prefix    string // <uid>-<subtask>, for object names
	instance  string // random, unique per backend instance
	keepLocal bool   // LocalRecovery

	// mu guards ledger, the pure core that decides the base, the
	// pending checkpoints and the local directories to remove
	// (internal/statebackend/snapshot): this type carries out its answers.
	mu     sync.Mutex
	ledger *snapshot.Ledger
}

// sharedFile is a data file in <job>/shared/.
type sharedFile = snapshot.SharedFile

func newIncrementalState(env *opEnv) *incrementalState {
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := fmt.Sprintf("%s-%d", unsafeName.ReplaceAllString(env.uid, "_"), env.subtask)
	return &incrementalState{
		groups:    env.keyGroups,
		localDir:  filepath.Join(env.stateDir, "local", prefix),
		prefix:    prefix,
		instance:  hex.EncodeToString(b[:]),
		keepLocal: env.localRecovery,
		ledger:    snapshot.NewLedger(env.localRecovery),
	}
}

func (s *incrementalState) checkpointDir(id int64) string {
	return filepath.Join(s.localDir, "chk-"+strconv.FormatInt(id, 10))
}

// isDataFile tells the immutable data files of a pebble checkpoint, which
// are shared, from the files rewritten by every checkpoint.
func isDataFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// snapshot runs the synchronous part of incremental checkpoint id.
func (s *incrementalState) snapshot(take func(id int64, dir string) ([]string, error), id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	dir := s.checkpointDir(id)
	if err := os.MkdirAll(s.localDir, 0o755); err != nil {
		return runtime.OperatorSnapshot{}, fmt.Errorf("incremental checkpoint %d: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil { // left by an earlier attempt
		return runtime.OperatorSnapshot{}, fmt.Errorf("incremental checkpoint %d: %w", id, err)
	}
	if _, err := take(id, dir); err != nil {
		return runtime.OperatorSnapshot{}, err
	}
	base := s.base()
	return runtime.OperatorSnapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			return s.upload(ctx, id, dir, base, opts, st)
		},
		Release: func() {
			s.mu.Lock()
			remove := s.ledger.Released(id)
			s.mu.Unlock()
			if remove {
				_ = os.RemoveAll(dir)
			}
		},
	}, nil
}

// upload is the asynchronous part: it uploads what base does not hold and
// records the handle. It returns the bytes uploaded.
func (s *incrementalState) upload(ctx context.Context, id int64, dir string, base snapshot.Upload, opts *runtime.BarrierOptions, st *checkpoint.SubtaskState) (int64, error) {
	sharedDir := path.Join(path.Dir(opts.Dir), storage.SharedDirName)
	reuse := base.Files != nil && base.Store == any(opts.Store)
	h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: s.groups.Start, EndGroup: s.groups.End}
	var reusable map[string]sharedFile
	if reuse {
		h.Base = base.ID
		reusable = base.Files
	}
	up, err := s.uploadDir(ctx, dir, reusable, opts.Store, sharedDir, func(name string, data bool) string {
		if data {
			return path.Join(sharedDir, fmt.Sprintf("%s-%s-c%d-%s", s.prefix, s.instance, id, name))
		}
		return path.Join(opts.Dir, s.prefix+"-"+name)
	})
	if err != nil {
		return 0, fmt.Errorf("incremental checkpoint %d: %w", id, err)
	}
	for _, f := range up.files {
		h.Size += f.Size
	}
	h.Files = up.files
	if s.keepLocal {
		// Best effort: without the record, a local restore reads every
		// file to check its CRC instead.
		_ = writeLocalRecord(dir, up.files)
	}
	st.Keyed = append(st.Keyed, h)
	s.mu.Lock()
	s.ledger.Uploaded(snapshot.Upload{ID: id, Store: opts.Store, Files: up.data})
	s.mu.Unlock()
	return up.written, nil
}

// dirUpload is what uploadDir did with a local native checkpoint.
type dirUpload struct {
	files   []checkpoint.StateFile // every file, in directory order
	data    map[string]sharedFile  // its data files by local name
	fresh   []string               // objects uploaded now (not reused)
	written int64                  // bytes uploaded now
}

// uploadDir uploads the native checkpoint in dir to store: a data file
// that reusable holds under sharedDir is referred to where it is; every
// other file goes to objectFor(name, isDataFile(name)), which is shared
// when it lies in sharedDir. On an error, up.fresh still lists what it
// uploaded.
func (s *incrementalState) uploadDir(ctx context.Context, dir string, reusable map[string]sharedFile, store storage.Store, sharedDir string, objectFor func(name string, data bool) string) (dirUpload, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dirUpload{}, err
	}
	up := dirUpload{files: make([]checkpoint.StateFile, len(entries)), data: make(map[string]sharedFile)}
	type job struct {
		i            int
		name, object string
		data, shared bool
	}
	var jobs []job
	for i, e := range entries {
		name := e.Name()
		data := isDataFile(name)
		if f, ok := reusable[name]; ok && data && path.Dir(f.Object) == sharedDir {
			up.files[i] = checkpoint.StateFile{Name: name, Path: sharedPath(f.Object), Size: f.Size, CRC: f.CRC, Shared: true}
			up.data[name] = f
			continue
		}
		if !e.Type().IsRegular() {
			return dirUpload{}, fmt.Errorf("%s is not a regular file", filepath.Join(dir, name))
		}
		object := objectFor(name, data)
		jobs = append(jobs, job{i: i, name: name, object: object, data: data, shared: path.Dir(object) == sharedDir})
	}
	var mu sync.Mutex
	cs := storage.CheckpointStorage{Store: store}
	err = parallel(ctx, len(jobs), func(ctx context.Context, j int) error {
		jb := jobs[j]
		size, crc, err := cs.UploadStateFile(ctx, path.Dir(jb.object), path.Base(jb.object), filepath.Join(dir, jb.name))
		if err != nil {
			return err
		}
		p := path.Base(jb.object)
		if jb.shared {
			p = sharedPath(jb.object)
		}
		mu.Lock()
		defer mu.Unlock()
		up.files[jb.i] = checkpoint.StateFile{Name: jb.name, Path: p, Size: size, CRC: crc, Shared: jb.shared}
		if jb.data && jb.shared {
			up.data[jb.name] = sharedFile{Object: jb.object, Size: size, CRC: crc}
		}
		up.fresh = append(up.fresh, jb.object)
		up.written += size
		return nil
	})
	return up, err
}

// sharedPath is the path of a shared object relative to a checkpoint
// directory: checkpoint directories and shared/ are siblings.
func sharedPath(object string) string {
	return "../" + storage.SharedDirName + "/" + path.Base(object)
}

// base returns the upload the next checkpoint refers to.
func (s *incrementalState) base() snapshot.Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Base()
}

// complete makes checkpoint id's files the base, once id is known complete.
func (s *incrementalState) complete(id int64) {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Complete(id, local)
	s.mu.Unlock()
	s.removeLocal(remove)
}

// aborted forgets checkpoint id.
func (s *incrementalState) aborted(id int64) {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Aborted(id, local)
	s.mu.Unlock()
	s.removeLocal(remove)
}

// close removes the local checkpoints, but, with LocalRecovery, the
// base's and newer ones: one of them may have completed at the job master
// without the notice having reached this task before it closed (a failure
// in between), and the restore takes it. A local copy is used only after
// every file is checked against the checkpoint's metadata; the next
// completion removes the others.
func (s *incrementalState) close() {
	local := s.localCheckpoints()
	s.mu.Lock()
	remove := s.ledger.Close(local)
	s.mu.Unlock()
	s.removeLocal(remove)
	if !s.keepLocal {
		_ = os.Remove(s.localDir) // only if empty
	}
}

// pending returns the number of checkpoints uploaded and not yet known
// complete or aborted.
func (s *incrementalState) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ledger.Pending())
}

// localCheckpoints lists the ids of the local checkpoint directories.
func (s *incrementalState) localCheckpoints() []int64 {
	entries, err := os.ReadDir(s.localDir)
	if err != nil {
		return nil
	}
	var ids []int64
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), "chk-")
		id, err := strconv.ParseInt(digits, 10, 64)
		if ok && err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// removeLocal removes the local checkpoint directories of ids.
func (s *incrementalState) removeLocal(ids []int64) {
	for _, id := range ids {
		_ = os.RemoveAll(s.checkpointDir(id))
	}
}

// restoreStats says how an incremental restore got its files (tests).
type restoreStats struct {
	local      int   // handles restored from the local copy
	downloaded int   // handles downloaded
	bytes      int64 // bytes downloaded
	replayed   int   // changelog segments replayed
}

// restore loads the incremental handles into the backend through
// restoreNative; workDir is a directory of the backend's own (on the same
// device as its database).
//
// A handle with changelog segments (KeyedStateHandle.Changelog) is
// downloaded whole, never restored locally, and replay applies its
// segments, in order, to its native checkpoint before the restore.
func (s *incrementalState) restore(ctx context.Context, from *jobmaster.Restored, handles []checkpoint.KeyedStateHandle, workDir string,
	restoreNative func([]pebble.NativeCheckpoint) (int, error), replay func(dir string, segments []string) error) (restoreStats, error) {
	var stats restoreStats
	var cps []pebble.NativeCheckpoint
	defer func() {
		for _, cp := range cps {
			_ = os.RemoveAll(cp.Dir) // those not adopted
		}
	}()
	for i, h := range handles {
		if !h.Incremental() {
			return stats, fmt.Errorf("checkpoint %s mixes incremental and full keyed state handles for one operator", from.Dir)
		}
		dir := filepath.Join(workDir, fmt.Sprintf("restore-%d", i))
		if err := os.RemoveAll(dir); err != nil {
			return stats, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return stats, err
		}
		if h.Changelog == 0 && s.restoreLocal(from, h, dir) {
			stats.local++
		} else {
			n, err := download(ctx, from, h, dir)
			if err != nil {
				return stats, fmt.Errorf("download key groups [%d, %d): %w", h.StartGroup, h.EndGroup, err)
			}
			stats.downloaded++
			stats.bytes += n
		}
		if h.Changelog != 0 {
			if err := replayHandle(h, dir, replay); err != nil {
				return stats, fmt.Errorf("key groups [%d, %d): %w", h.StartGroup, h.EndGroup, err)
			}
			stats.replayed += h.Changelog
		}
		cps = append(cps, pebble.NativeCheckpoint{Dir: dir, Groups: keygroup.Range{Start: h.StartGroup, End: h.EndGroup}})
	}
	base, err := restoreNative(cps)
	if err != nil {
		return stats, err
	}
	if base < 0 || from.Metadata.Kind != checkpoint.KindCheckpoint {
		return stats, nil
	}
	up := snapshot.Upload{ID: from.Metadata.ID, Store: from.Store, Files: make(map[string]sharedFile)}
	for _, f := range handles[base].Files {
		if !f.Shared {
			continue
		}
		object, err := storage.ResolveStatePath(from.Dir, f.Path, false)
		if err != nil {
			return stats, err
		}
		up.Files[f.Name] = sharedFile{Object: object, Size: f.Size, CRC: f.CRC}
	}
	s.mu.Lock()
	s.ledger.Restored(up)
	s.mu.Unlock()
	return stats, nil
}

// restoreLocal fills dir from the local copy of the checkpoint restored,
// if local recovery is on and the copy holds exactly the handle's files,
// each with its size and CRC.
//
// The data files are not read: they are immutable hard links of the
// database's files, and pebble checks its blocks' checksums as it reads
// them. A data file is trusted when the record written with the checkpoint
// (writeLocalRecord) gives it the handle's size and CRC and the file still
// has the size and modification time recorded; the small MANIFEST, OPTIONS
// and marker files, and every file of a copy without a record, are read
// and checked against the CRC. Any mismatch means a download.
func (s *incrementalState) restoreLocal(from *jobmaster.Restored, h checkpoint.KeyedStateHandle, dir string) bool {
	if !s.keepLocal || from.Metadata.Kind != checkpoint.KindCheckpoint ||
		h.StartGroup != s.groups.Start || h.EndGroup != s.groups.End {
		return false
	}
	local := s.checkpointDir(from.Metadata.ID)
	entries, err := os.ReadDir(local)
	if err != nil {
		return false
	}
	record, _ := readLocalRecord(local) // nil if missing or unreadable: check every CRC
	n := len(entries)
	if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == localRecordName }) {
		n--
	}
	if n != len(h.Files) {
		return false
	}
	for _, f := range h.Files {
		name := filepath.Join(local, f.Name)
		if r, ok := record[f.Name]; ok && isDataFile(f.Name) {
			if r.size != f.Size || r.crc != f.CRC || !r.sameFile(name) {
				return false
			}
			continue
		}
		if ok, _ := fileMatches(name, f.Size, f.CRC); !ok {
			return false
		}
	}
	for _, f := range h.Files {
		src, dst := filepath.Join(local, f.Name), filepath.Join(dir, f.Name)
		// Data files never change: a hard link is a copy. The others are
		// rewritten by the database opened on them: copied.
		if isDataFile(f.Name) && os.Link(src, dst) == nil {
			continue
		}
		if err := copyFile(src, dst); err != nil {
			_ = os.RemoveAll(dir)
			_ = os.MkdirAll(dir, 0o755)
			return false
		}
	}
	return true
}

// localRecordName is the file, in a local checkpoint directory, that
// records its data files as the asynchronous part uploaded them.
const localRecordName = ".weir-local-files"

// localFile is a data file of a local checkpoint as recorded.
type localFile struct {
	size  int64
	crc   uint32 // of the bytes uploaded (or referred to) for it
	mtime int64  // UnixNano of the local file
}

// sameFile reports whether the file name still has the recorded size and
// modification time: it is the file recorded, not one truncated, rewritten
// or put in its place since.
func (r localFile) sameFile(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == r.size && fi.ModTime().UnixNano() == r.mtime
}

// writeLocalRecord records the data files of the local checkpoint in dir
// with the size and CRC of the checkpoint's handle and the size and
// modification time they have now, one "name size crc mtime" line each. It
// is written after the upload, which computed the CRCs from the files.
func writeLocalRecord(dir string, files []checkpoint.StateFile) error {
	var b strings.Builder
	for _, f := range files {
		if !isDataFile(f.Name) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		if fi.Size() != f.Size {
			return fmt.Errorf("%s: %d bytes, uploaded %d", f.Name, fi.Size(), f.Size)
		}
		fmt.Fprintf(&b, "%s %d %d %d\n", f.Name, f.Size, f.CRC, fi.ModTime().UnixNano())
	}
	tmp := filepath.Join(dir, localRecordName+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, localRecordName))
}

// readLocalRecord reads what writeLocalRecord wrote in dir.
func readLocalRecord(dir string) (map[string]localFile, error) {
	data, err := os.ReadFile(filepath.Join(dir, localRecordName))
	if err != nil {
		return nil, err
	}
	out := make(map[string]localFile)
	for line := range strings.Lines(string(data)) {
		var name string
		var f localFile
		if _, err := fmt.Sscanf(line, "%s %d %d %d\n", &name, &f.size, &f.crc, &f.mtime); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", localRecordName, line, err)
		}
		out[name] = f
	}
	return out, nil
}

// fileMatches reports whether the file has the size and CRC-32C given.
func fileMatches(name string, size int64, crc uint32) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	return err == nil && n == size && h.Sum32() == crc, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// download fetches the files of h into dir, checking each file's size and
// CRC, and returns the bytes read.
func download(ctx context.Context, from *jobmaster.Restored, h checkpoint.KeyedStateHandle, dir string) (int64, error) {
	cs := storage.CheckpointStorage{Store: from.Store}
	selfContained := from.Metadata.Kind == checkpoint.KindSavepoint
	var mu sync.Mutex
	var total int64
	err := parallel(ctx, len(h.Files), func(ctx context.Context, i int) error {
		f := h.Files[i]
		if f.Name == "" || f.Name != filepath.Base(f.Name) || strings.HasPrefix(f.Name, ".") {
			return fmt.Errorf("%w: file name %q", storage.ErrCorruptState, f.Name)
		}
		name, err := storage.ResolveStatePath(from.Dir, f.Path, selfContained)
		if err != nil {
			return err
		}
		r, err := cs.OpenStateFile(ctx, path.Dir(name), path.Base(name), f.Size, f.CRC)
		if err != nil {
			return err
		}
		defer r.Close()
		out, err := os.Create(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		n, err := io.Copy(out, r) // the reader checks the CRC at EOF
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		mu.Lock()
		total += n
		mu.Unlock()
		return nil
	})
	return total, err
}

// parallel runs fn for 0..n-1 on up to uploadWorkers goroutines and
// returns the first error; the others see their context cancelled.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(n, uploadWorkers) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel(err) })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

// --- keyedEnv's side ----------------------------------------------------------

// snapshotIncremental is keyedEnv.snapshot for incremental checkpoints.
func (k *keyedEnv[K]) snapshotIncremental(id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	b, ok := k.backend.(*pebble.Backend[K])
	if !ok {
		return runtime.OperatorSnapshot{}, fmt.Errorf("incremental checkpoints need the pebble backend, not %s", k.backend.Kind())
	}
	if k.cl != nil {
		return k.cl.snapshot(b, id, opts)
	}
	return k.inc.snapshot(b.SnapshotIncremental, id, opts)
}

// hasIncremental reports whether the restored state has incremental handles.
func (k *keyedEnv[K]) hasIncremental() bool {
	r := k.env.restored
	return r != nil && slices.ContainsFunc(r.keyed, checkpoint.KeyedStateHandle.Incremental)
}

// restoreIncremental loads incremental handles into the pebble backend.
func (k *keyedEnv[K]) restoreIncremental() error {
	r := k.env.restored
	b, ok := k.backend.(*pebble.Backend[K])
	if !ok || r.from == nil {
		return fmt.Errorf("restore keyed state: checkpoint %s holds incremental pebble state (Options.Checkpointing.Incremental); restore it with Options.StateBackend \"pebble\", or restore a savepoint, which any backend reads", restoreDir(r))
	}
	inc := k.inc
	if inc == nil { // restoring an incremental checkpoint without taking any
		inc = newIncrementalState(k.env)
	}
	stats, err := inc.restore(k.env.ctx, r.from, r.keyed, filepath.Dir(b.Dir()), b.RestoreNative, b.ReplayChangelog)
	if err != nil {
		return fmt.Errorf("restore keyed state: %w", err)
	}
	k.restoreStats = stats
	if t := k.env.test; t != nil && t.onRestore != nil {
		t.onRestore(k.env.jobID, k.env.uid, k.env.subtask, stats)
	}
	k.env.logger.Info("restored incremental keyed state", "checkpoint", r.from.Metadata.ID,
		"local", stats.local, "downloaded", stats.downloaded, "bytes", stats.bytes, "changelogSegments", stats.replayed)
	return nil
}

func restoreDir(r *restoredState) string {
	if r.from != nil {
		return r.from.Dir
	}
	return "(unknown)"
}

// pendingCheckpoints returns the number of checkpoints taken that the
// keyed state does not yet know complete or aborted (tests: it stays
// bounded when notifications arrive).
func (k *keyedEnv[K]) pendingCheckpoints() int {
	switch {
	case k.cl != nil:
		k.cl.mu.Lock()
		defer k.cl.mu.Unlock()
		return len(k.cl.pending)
	case k.inc != nil:
		return k.inc.pendingCount()
	}
	return 0
}

// NotifyKeyedComplete and NotifyKeyedAborted implement runtime.KeyedState:
// they pass checkpoint notifications to the incremental (or changelog)
// state.
func (k *keyedEnv[K]) NotifyKeyedComplete(id int64) error {
	switch {
	case k.cl != nil:
		k.cl.complete(id)
	case k.inc != nil:
		k.inc.complete(id)
	}
	return nil
}

func (k *keyedEnv[K]) NotifyKeyedAborted(id int64) error {
	switch {
	case k.cl != nil:
		k.cl.aborted(id)
	case k.inc != nil:
		k.inc.aborted(id)
	}
	return nil
}
