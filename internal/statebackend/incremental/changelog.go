package incremental

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

// materialization is a native checkpoint uploaded to shared/.
type materialization struct {
	id    int64                  // the checkpoint at whose barrier it was taken
	cut   int64                  // the first log segment after it
	files []checkpoint.StateFile // every file, shared
	size  int64
	data  map[string]sharedFile // its data files by local name (the next one reuses them)
	store storage.Store
	fresh []string // objects it uploaded (not reused)
	// base is the materialization whose data files it reuses (background
	// materializations): it may be referred to only while base is the
	// confirmed checkpoint's.
	base *materialization
}

// clCheckpoint is what one checkpoint of this instance lists.
type clCheckpoint struct {
	id   int64
	mat  *materialization
	segs map[int64]checkpoint.StateFile // segment seq -> its upload
}

// changelogState is the changelog side of one instance. Everything but the
// background materialization and the asynchronous parts runs on the task
// goroutine; what they share is under mu.
type changelogState struct {
	inc    *incrementalState // names, directories, the file system; its restore
	opts   ChangelogOptions
	now    func() time.Time
	logger *slog.Logger
	ctx    context.Context

	log        *pebble.Changelog         // nil until the first materialization
	local      []pebble.ChangelogSegment // closed segments not yet removed, by seq
	matSeq     int64                     // materializations taken
	lastMat    time.Time                 // when the last one was taken
	inflight   *materialization          // referred to by pending checkpoint inflightBy only
	inflightBy int64
	confirmed  *clCheckpoint // the last checkpoint known complete
	// inUse holds, for each checkpoint taken and not yet known complete or
	// aborted, the first segment its asynchronous part may read: the local
	// segments from there on stay until it is known done.
	inUse map[int64]int64
	// resetAt is the first segment of the current log: a materialization
	// cut before it (the log failed and started over since) is never
	// referred to again, its log has a hole.
	resetAt int64

	mu       sync.Mutex
	pending  map[int64]*clCheckpoint
	ready    *materialization // uploaded, not referred to yet
	running  bool
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	bgErr    error
	matBytes int64 // uploaded by materializations, background and synchronous
	bgMats   int   // background materializations uploaded
	// onMaterialized, when set (tests), is told of each background
	// materialization uploaded, under mu.
	onMaterialized func()
}

func newChangelogState(ctx context.Context, inc *incrementalState, opts Options) *changelogState {
	return &changelogState{inc: inc, opts: opts.Changelog, now: opts.Clock, logger: opts.Logger, ctx: ctx,
		pending: make(map[int64]*clCheckpoint), inUse: make(map[int64]int64), onMaterialized: opts.OnMaterialized}
}

func (s *changelogState) logDir() string { return filepath.Join(s.inc.localDir, "changelog") }

func (s *changelogState) matDir(n int64) string {
	return filepath.Join(s.inc.localDir, "mat-"+strconv.FormatInt(n, 10))
}

// materializedBytes returns the bytes uploaded by materializations so far.
func (s *changelogState) materializedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.matBytes
}

func (s *changelogState) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// snapshot runs the synchronous part of checkpoint id in changelog mode.
func (s *changelogState) snapshot(b Backend, id int64, t Target) (Snapshot, error) {
	fail := func(err error) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("changelog checkpoint %d: %w", id, err)
	}
	fs := s.inc.fs
	cut, err := s.cutLog(b, id)
	if err != nil {
		return fail(err)
	}

	s.mu.Lock()
	ready, bgErr := s.ready, s.bgErr
	s.bgErr = nil
	var stale *materialization
	if ready != nil && (s.confirmed == nil || ready.base != s.confirmed.mat) {
		// It reuses the data files of a materialization that is no longer
		// the confirmed one (a checkpoint with a newer one completed while
		// it uploaded): the base does not list them, so the job master may
		// delete them. Dropped; the next trigger takes another.
		stale, s.ready = ready, nil
	}
	if ready != nil && stale == nil && s.inflight == nil && ready.store == t.Store {
		s.ready = nil
	} else {
		ready = nil
	}
	s.mu.Unlock()
	if stale != nil {
		s.deleteFresh(stale) // referred to by nothing
	}
	if bgErr != nil {
		s.logger.Warn("changelog: a background materialization failed; the next one is tried at the next trigger", "err", bgErr)
	}
	if ready != nil && !s.usable(ready) {
		s.deleteFresh(ready) // taken before the log failed: the log after it has a hole
		ready = nil
	}

	// The materialization this checkpoint refers to: one whose log since
	// its cut is all here.
	var mat *materialization
	syncMat := false
	switch {
	case ready != nil:
		mat = ready
		s.inflight, s.inflightBy = ready, id
	case s.confirmed != nil && s.confirmed.mat.store == t.Store && s.usable(s.confirmed.mat):
		mat = s.confirmed.mat
	default:
		syncMat = true
	}

	// The reuse base: the files of the last checkpoint known complete.
	var baseID int64
	var baseData map[string]sharedFile
	var baseSegs map[int64]checkpoint.StateFile
	if s.confirmed != nil && s.confirmed.mat.store == t.Store {
		baseID, baseData, baseSegs = s.confirmed.id, s.confirmed.mat.data, s.confirmed.segs
	} else {
		if up := s.inc.base(); up.Files != nil && up.Store == any(t.Store) {
			baseID, baseData = up.ID, up.Files
		}
	}
	sharedDir := path.Join(path.Dir(t.Dir), storage.SharedDirName)

	var syncDir string
	if syncMat {
		s.matSeq++
		syncDir = s.matDir(s.matSeq)
		if err := s.takeNative(b, id, syncDir); err != nil {
			return fail(err)
		}
		s.lastMat = s.now()
	}
	var segs []pebble.ChangelogSegment
	if !syncMat {
		s.inUse[id] = mat.cut
		for _, seg := range s.local {
			if seg.Seq >= mat.cut && seg.Seq < cut {
				segs = append(segs, seg)
			}
		}
	}
	s.maybeMaterialize(b, id, cut, t.Store, sharedDir)

	return Snapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			return s.upload(ctx, st, clUpload{id: id, target: t, sharedDir: sharedDir, mat: mat, syncDir: syncDir, cut: cut,
				segs: segs, baseID: baseID, baseData: baseData, baseSegs: baseSegs})
		},
		Release: func() {
			if syncDir != "" {
				_ = fs.RemoveAll(syncDir)
			}
		},
	}, nil
}

// cutLog cuts the log at the barrier of checkpoint id, after the writes
// still in the backend's write-back cache reached the database (and the
// log), and returns the first segment after the cut. The first cut, and
// the first after the log failed, opens a new log.
func (s *changelogState) cutLog(b Backend, id int64) (int64, error) {
	fs := s.inc.fs
	if err := b.FlushWriteCache(); err != nil {
		return 0, err
	}
	if s.log != nil {
		seg, err := b.CutChangelog()
		switch {
		case err != nil:
			// A log with a hole in it cannot be replayed: drop it, and
			// start over from a materialization taken now.
			s.logger.Warn("changelog: the local log failed; this checkpoint materializes the state and a new log starts", "checkpoint", id, "err", err)
			s.resetLog(b)
		case seg.Size > 0:
			s.local = append(s.local, seg)
		default:
			_ = fs.Remove(seg.Path)
		}
	}
	if s.log == nil {
		if s.resetAt == 0 {
			if err := fs.RemoveAll(s.logDir()); err != nil {
				return 0, err
			}
		}
		log, err := pebble.OpenChangelog(fs, s.logDir(), s.resetAt)
		if err != nil {
			return 0, err
		}
		s.log = log
		b.SetChangelog(log)
	}
	return s.log.Seq(), nil
}

// clUpload is what the asynchronous part of a changelog checkpoint
// uploads and lists.
type clUpload struct {
	id        int64
	target    Target
	sharedDir string
	mat       *materialization // nil: syncDir holds a materialization to upload
	syncDir   string
	cut       int64
	segs      []pebble.ChangelogSegment // the log since mat's cut
	baseID    int64
	baseData  map[string]sharedFile
	baseSegs  map[int64]checkpoint.StateFile
}

// upload is the asynchronous part of a changelog checkpoint: the
// synchronous materialization if it took one, the segments its base does
// not hold; it appends the handle to st and returns the bytes uploaded.
func (s *changelogState) upload(ctx context.Context, st *checkpoint.SubtaskState, u clUpload) (int64, error) {
	var written int64
	m := u.mat
	if u.syncDir != "" {
		var err error
		m, written, err = s.inc.uploadMaterialization(ctx, u.syncDir, u.baseData, u.target.Store, u.sharedDir, fmt.Sprintf("m%d", u.id))
		if err != nil {
			return 0, fmt.Errorf("changelog checkpoint %d: materialization: %w", u.id, err)
		}
		m.id, m.cut = u.id, u.cut
		s.mu.Lock()
		s.matBytes += written
		s.mu.Unlock()
	}
	cp := &clCheckpoint{id: u.id, mat: m, segs: make(map[int64]checkpoint.StateFile, len(u.segs))}
	files := slices.Clone(m.files)
	h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: s.inc.groups.Start, EndGroup: s.inc.groups.End,
		Base: u.baseID, Changelog: len(u.segs)}
	uploads := make([]checkpoint.StateFile, len(u.segs))
	var mu sync.Mutex
	err := s.inc.parallel(ctx, len(u.segs), func(ctx context.Context, i int) error {
		seg := u.segs[i]
		if f, ok := u.baseSegs[seg.Seq]; ok {
			uploads[i] = f
			return nil
		}
		object := path.Join(u.sharedDir, fmt.Sprintf("%s-%s-c%d-%s", s.inc.prefix, s.inc.instance, u.id, pebble.ChangelogSegmentName(seg.Seq)))
		size, crc, err := s.inc.uploadFile(ctx, u.target.Store, object, seg.Path)
		if err != nil {
			return err
		}
		uploads[i] = checkpoint.StateFile{Name: pebble.ChangelogSegmentName(seg.Seq), Path: sharedPath(object),
			Size: size, CRC: crc, Shared: true}
		mu.Lock()
		written += size
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("changelog checkpoint %d: upload the log: %w", u.id, err)
	}
	for i, seg := range u.segs {
		cp.segs[seg.Seq] = uploads[i]
	}
	files = append(files, uploads...)
	for _, f := range files {
		h.Size += f.Size
	}
	h.Files = files
	st.Keyed = append(st.Keyed, h)
	s.mu.Lock()
	s.pending[u.id] = cp
	s.mu.Unlock()
	return written, nil
}

// usable reports whether the log since m's cut is whole.
func (s *changelogState) usable(m *materialization) bool { return m.cut >= s.resetAt }

// resetLog drops the failed log: the next one starts after its segments
// (the closed ones stay while checkpoints under way read them).
func (s *changelogState) resetLog(b Backend) {
	b.SetChangelog(nil)
	s.resetAt = s.log.Seq() + 1
	_ = s.log.Close()
	s.log = nil
}

// deleteFresh deletes the objects m uploaded, referred to by nothing.
func (s *changelogState) deleteFresh(m *materialization) {
	for _, o := range m.fresh {
		_ = m.store.Delete(s.ctx, o)
	}
}

func (s *changelogState) takeNative(b Backend, id int64, dir string) error {
	if err := s.inc.fs.MkdirAll(s.inc.localDir, 0o755); err != nil {
		return fmt.Errorf("local state directory: %w", err)
	}
	if err := s.inc.fs.RemoveAll(dir); err != nil {
		return err
	}
	_, err := b.SnapshotIncremental(id, dir)
	return err
}

// maybeMaterialize starts a background materialization at the cut of
// checkpoint id when one is due and none is under way or waiting.
func (s *changelogState) maybeMaterialize(b Backend, id, cut int64, store storage.Store, sharedDir string) {
	c := s.confirmed
	if c == nil || c.mat.store != store || s.inflight != nil || !s.usable(c.mat) {
		return
	}
	s.mu.Lock()
	busy := s.running || s.ready != nil
	s.mu.Unlock()
	if busy {
		return
	}
	var logSize int64
	for _, seg := range s.local {
		if seg.Seq >= c.mat.cut {
			logSize += seg.Size
		}
	}
	if logSize == 0 {
		return // nothing changed since the last one
	}
	due := s.opts.MaterializationInterval > 0 && s.now().Sub(s.lastMat) >= s.opts.MaterializationInterval
	big := s.opts.MaterializationLogRatio > 0 && float64(logSize) > s.opts.MaterializationLogRatio*float64(c.mat.size)
	if !due && !big {
		return
	}
	s.matSeq++
	dir := s.matDir(s.matSeq)
	if err := s.takeNative(b, id, dir); err != nil {
		s.logger.Warn("changelog: cannot take a materialization", "checkpoint", id, "err", err)
		_ = s.inc.fs.RemoveAll(dir)
		return
	}
	s.lastMat = s.now()
	base, baseMat := c.mat.data, c.mat
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.running, s.cancel = true, cancel
	s.mu.Unlock()
	start := s.now()
	s.bg.Go(func() {
		defer cancel()
		defer s.inc.fs.RemoveAll(dir)
		m, written, err := s.inc.uploadMaterialization(ctx, dir, base, store, sharedDir, fmt.Sprintf("m%d", id))
		s.mu.Lock()
		defer s.mu.Unlock()
		s.running = false
		if err != nil {
			s.bgErr = err
			return
		}
		m.id, m.cut, m.base = id, cut, baseMat
		s.ready = m
		s.matBytes += written
		s.bgMats++
		if s.onMaterialized != nil {
			s.onMaterialized()
		}
		s.logger.Info("changelog: materialization uploaded", "checkpoint", id, "uploadedBytes", written,
			"stateBytes", m.size, "logBytes", logSize, "duration", s.now().Sub(start))
	})
}

// uploadMaterialization uploads the native checkpoint in dir to sharedDir,
// referring to the data files of base instead of uploading them again, and
// returns it with the bytes uploaded.
func (s *incrementalState) uploadMaterialization(ctx context.Context, dir string, base map[string]sharedFile, store storage.Store, sharedDir, tag string) (*materialization, int64, error) {
	up, err := s.uploadDir(ctx, dir, base, store, sharedDir, func(name string, _ bool) string {
		return path.Join(sharedDir, fmt.Sprintf("%s-%s-%s-%s", s.prefix, s.instance, tag, name))
	})
	if err != nil {
		for _, o := range up.fresh { // referred to by nothing
			_ = store.Delete(context.WithoutCancel(ctx), o)
		}
		return nil, 0, err
	}
	m := &materialization{store: store, data: up.data, files: up.files, fresh: up.fresh}
	for _, f := range m.files {
		m.size += f.Size
	}
	return m, up.written, nil
}

// complete records that checkpoint id completed.
func (s *changelogState) complete(id int64) {
	s.mu.Lock()
	cp := s.pending[id]
	for p := range s.pending {
		if p <= id {
			delete(s.pending, p)
		}
	}
	s.mu.Unlock()
	for p := range s.inUse {
		if p <= id {
			delete(s.inUse, p)
		}
	}
	// cp becomes the base unless it refers to an older materialization
	// than the base (it was taken before the base's completion was known):
	// the base must only grow, and what it lists stays reusable.
	if c := s.confirmed; cp != nil && (c == nil || cp.id > c.id && cp.mat.id >= c.mat.id) {
		if c == nil || cp.mat != c.mat {
			// A newer materialization is confirmed: the segments before
			// its cut are needed by no checkpoint this instance takes.
			s.dropLocal(cp.mat.cut)
		}
		s.confirmed = cp
	}
	if s.inflight != nil && s.inflightBy <= id && (cp == nil || cp.mat != s.inflight) {
		s.inflight = nil // its checkpoint was subsumed: its files may be gone
	}
	if cp != nil && cp.mat == s.inflight {
		s.inflight = nil // confirmed
	}
}

// aborted records that checkpoint id aborted.
func (s *changelogState) aborted(id int64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
	delete(s.inUse, id)
	if s.inflight != nil && s.inflightBy == id {
		// The registry deletes what only this checkpoint listed: the
		// materialization's new files. The next checkpoints refer to the
		// confirmed one again, whose segments are all still here.
		s.inflight = nil
	}
}

// dropLocal removes the local segments below seq that no checkpoint
// under way may still read.
func (s *changelogState) dropLocal(seq int64) {
	for _, first := range s.inUse {
		seq = min(seq, first)
	}
	keep := s.local[:0]
	for _, seg := range s.local {
		if seg.Seq < seq {
			_ = s.inc.fs.Remove(seg.Path)
		} else {
			keep = append(keep, seg)
		}
	}
	s.local = keep
}

// close stops a background materialization, deletes the files of one that
// no checkpoint referred to, and removes the local log.
func (s *changelogState) close() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.bg.Wait()
	s.mu.Lock()
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	if ready != nil {
		for _, o := range ready.fresh {
			_ = ready.store.Delete(context.Background(), o)
		}
	}
	if s.log != nil {
		_ = s.log.Close()
	}
	fs := s.inc.fs
	_ = fs.RemoveAll(s.logDir())
	names, _ := fs.List(s.inc.localDir)
	for _, name := range names {
		if n, ok := strings.CutPrefix(name, "mat-"); ok {
			if _, err := strconv.Atoi(n); err == nil {
				_ = fs.RemoveAll(filepath.Join(s.inc.localDir, name))
			}
		}
	}
	_ = fs.Remove(s.inc.localDir) // only if empty
}

// replayHandle moves the changelog segments of h, downloaded into dir, out
// of it and replays them on the native checkpoint left in dir.
func (s *incrementalState) replayHandle(h checkpoint.KeyedStateHandle, dir string, replay func(dir string, segments []string) error) error {
	n := len(h.Files) - h.Changelog
	if h.Changelog < 0 || n < 1 {
		return fmt.Errorf("%w: %d changelog segments in a handle of %d files", storage.ErrCorruptState, h.Changelog, len(h.Files))
	}
	if replay == nil {
		return fmt.Errorf("the checkpoint holds a changelog, which this backend cannot replay")
	}
	for _, f := range h.Files[:n] {
		if _, ok := pebble.ParseChangelogSegmentName(f.Name); ok {
			return fmt.Errorf("%w: changelog segment %s among the materialized files", storage.ErrCorruptState, f.Name)
		}
	}
	logDir := dir + "-log"
	if err := s.fs.RemoveAll(logDir); err != nil {
		return err
	}
	if err := s.fs.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("restore the changelog into %s: %w", logDir, err)
	}
	defer s.fs.RemoveAll(logDir)
	var segs []string
	last := int64(-1)
	for _, f := range h.Files[n:] {
		seq, ok := pebble.ParseChangelogSegmentName(f.Name)
		if !ok || seq <= last {
			return fmt.Errorf("%w: changelog segment %q out of order or misnamed", storage.ErrCorruptState, f.Name)
		}
		last = seq
		p := filepath.Join(logDir, f.Name)
		if err := s.fs.Rename(filepath.Join(dir, f.Name), p); err != nil {
			return err
		}
		segs = append(segs, p)
	}
	return replay(dir, segs)
}
