package weir

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

// Changelog-based incremental checkpoints of the pebble backend
// (Options.Checkpointing.Changelog; Flink's FLIP-158, state.changelog.*):
//
//   - The backend appends every write to its database to a local log
//     (pebble.Changelog), from the first materialization on.
//   - A materialization is a native pebble checkpoint (hard links) taken at
//     a checkpoint's barrier, at the same instant as that checkpoint's cut
//     of the log: the log segments after it replay exactly on top of it.
//     All its files go to <job>/shared/ (its data files that the previous
//     materialization uploaded are referred to, not uploaded again).
//   - The synchronous part of a checkpoint cuts the log (Rotate: flush the
//     write buffer, open the next segment); the asynchronous part uploads
//     the new segments to shared/. The handle lists the files of the last
//     materialization and then the segments written since it
//     (KeyedStateHandle.Changelog of them), each with size and CRC.
//   - Periodically (MaterializationInterval) or when the log since the last
//     materialization outgrows MaterializationLogRatio of the state, a
//     checkpoint's synchronous part also takes a materialization, whose
//     upload runs in the background, not as part of any checkpoint. The
//     first checkpoint that starts after the upload finished refers to it
//     and to the segments after it only. Its bytes are reported apart
//     (logged, and counted in materializedBytes).
//   - The first checkpoint (and the first after a restore) has no
//     materialization to refer to: it takes one synchronously, uploaded in
//     its own asynchronous part (as an incremental checkpoint does).
//
// Which files a checkpoint may refer to follows the rules of the job
// master's shared-state registry (internal/jobmaster/shared.go): a task
// refers only to files listed by its base (the last checkpoint it knows
// complete), plus what it uploads for this checkpoint. A background
// materialization is therefore referred to, until a checkpoint referring to
// it is known complete, by that one checkpoint only: if that checkpoint
// aborts, the registry deletes the materialization's new files and the
// task drops it (the next checkpoints refer to the previous
// materialization and its segments, kept until a newer one is confirmed).
// A background materialization reuses the data files of the confirmed
// checkpoint's materialization; if a checkpoint with a newer one completes
// while it uploads (two checkpoints under way each took a materialization
// of their own), the base no longer lists those files and the registry may
// delete them: it is then dropped, never referred to.
// Segments are reused only once a checkpoint listing them completed; a
// segment uploaded for a checkpoint that did not complete is uploaded
// again, under another name, by the next one.
//
// A materialization uploaded but never referred to by a checkpoint (the
// task closed first) is deleted by the task when it closes; if the process
// dies instead, its files stay under shared/ until the job master sweeps
// shared/ of what no retained checkpoint lists (at the end of the attempt,
// or when the next process starts: sharedInit).
//
// Restore downloads the materialization of each handle, and its segments
// (each checked against its size and CRC: a damaged or missing segment
// makes the checkpoint skipped like any damaged checkpoint), replays the
// segments on it, and then restores the native checkpoints as the
// incremental mode does — rescaling included: the replayed database of a
// handle holds all its key groups, and the restore keeps those of the
// subtask. Local recovery is not supported in this mode.

// ChangelogOptions configures changelog-based incremental checkpoints
// (Options.Checkpointing.Changelog), as Flink's state.changelog.* options.
type ChangelogOptions struct {
	// Enabled turns the changelog on (Flink's state.changelog.enabled): each
	// checkpoint uploads the writes made since the previous one, whatever
	// the database compacted, and the state is materialized (a native
	// checkpoint uploaded in the background) from time to time. Needs
	// StateBackend "pebble" and Incremental. Default: false.
	Enabled bool
	// MaterializationInterval is the time between two materializations
	// (Flink's state.changelog.periodic-materialize.interval): at the first
	// checkpoint after it elapsed since the last one started, a new one is
	// taken. Default (0): 10 minutes. Negative: only the size trigger.
	MaterializationInterval time.Duration
	// MaterializationLogRatio triggers a materialization when the log
	// since the last one exceeds this fraction of the last
	// materialization's size: it bounds the log a restore replays and the
	// storage the log takes. Default (0): 0.5. Negative: only the interval.
	MaterializationLogRatio float64
}

// Defaults of ChangelogOptions.
const (
	defaultMaterializationInterval = 10 * time.Minute
	defaultMaterializationLogRatio = 0.5
)

func (o *ChangelogOptions) ensureDefaults() {
	if o.MaterializationInterval == 0 {
		o.MaterializationInterval = defaultMaterializationInterval
	}
	if o.MaterializationLogRatio == 0 {
		o.MaterializationLogRatio = defaultMaterializationLogRatio
	}
}

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

// changelogState is the changelog side of one pebble keyed operator
// instance. Everything but the background materialization and the
// asynchronous parts runs on the task goroutine; what they share is under
// mu.
type changelogState struct {
	inc    *incrementalState // names and directories; its restore
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

func newChangelogState(env *opEnv, inc *incrementalState, opts ChangelogOptions) *changelogState {
	opts.ensureDefaults()
	ctx := env.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	logger := env.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &changelogState{inc: inc, opts: opts, now: time.Now, logger: logger, ctx: ctx,
		pending: make(map[int64]*clCheckpoint), inUse: make(map[int64]int64)}
	if t := env.test; t != nil && t.onMaterialized != nil {
		uid, subtask := env.uid, env.subtask
		s.onMaterialized = func() { t.onMaterialized(uid, subtask) }
	}
	return s
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

// snapshot runs the synchronous part of checkpoint id in changelog mode.
func (s *changelogState) snapshot(b changelogBackend, id int64, opts *runtime.BarrierOptions) (runtime.OperatorSnapshot, error) {
	fail := func(err error) (runtime.OperatorSnapshot, error) {
		return runtime.OperatorSnapshot{}, fmt.Errorf("changelog checkpoint %d: %w", id, err)
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
	if ready != nil && stale == nil && s.inflight == nil && ready.store == opts.Store {
		s.ready = nil
	} else {
		ready = nil
	}
	s.mu.Unlock()
	if stale != nil {
		for _, o := range stale.fresh { // referred to by nothing
			_ = stale.store.Delete(context.Background(), o)
		}
	}
	if bgErr != nil {
		s.logger.Warn("changelog: a background materialization failed; the next one is tried at the next trigger", "err", bgErr)
	}

	// The materialization this checkpoint refers to.
	var mat *materialization
	syncMat := false
	switch {
	case ready != nil:
		mat = ready
		s.inflight, s.inflightBy = ready, id
	case s.confirmed != nil && s.confirmed.mat.store == opts.Store:
		mat = s.confirmed.mat
	default:
		syncMat = true
	}

	// Cut the log at the barrier, after the writes still in the backend's
	// write-back cache reached the database (and the log).
	if err := b.FlushWriteCache(); err != nil {
		return fail(err)
	}
	if s.log == nil {
		if err := os.RemoveAll(s.logDir()); err != nil {
			return fail(err)
		}
		log, err := pebble.OpenChangelog(s.logDir(), 0)
		if err != nil {
			return fail(err)
		}
		s.log = log
		b.SetChangelog(log)
	} else {
		seg, err := b.CutChangelog()
		if err != nil {
			return fail(err)
		}
		if seg.Size > 0 {
			s.local = append(s.local, seg)
		} else {
			_ = os.Remove(seg.Path)
		}
	}
	cut := s.log.Seq()

	// The reuse base: the files of the last checkpoint known complete.
	var baseID int64
	var baseData map[string]sharedFile
	var baseSegs map[int64]checkpoint.StateFile
	if s.confirmed != nil && s.confirmed.mat.store == opts.Store {
		baseID, baseData, baseSegs = s.confirmed.id, s.confirmed.mat.data, s.confirmed.segs
	} else {
		if up := s.inc.base(); up.Files != nil && up.Store == any(opts.Store) {
			baseID, baseData = up.ID, up.Files
		}
	}
	sharedDir := path.Join(path.Dir(opts.Dir), storage.SharedDirName)

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
	s.maybeMaterialize(b, id, cut, opts.Store, sharedDir)

	return runtime.OperatorSnapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			var written int64
			m := mat
			if syncMat {
				var err error
				m, written, err = s.inc.uploadMaterialization(ctx, syncDir, baseData, opts.Store, sharedDir, fmt.Sprintf("m%d", id))
				if err != nil {
					return 0, fmt.Errorf("changelog checkpoint %d: materialization: %w", id, err)
				}
				m.id, m.cut = id, cut
				s.mu.Lock()
				s.matBytes += written
				s.mu.Unlock()
			}
			cp := &clCheckpoint{id: id, mat: m, segs: make(map[int64]checkpoint.StateFile, len(segs))}
			files := slices.Clone(m.files)
			h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: s.inc.groups.Start, EndGroup: s.inc.groups.End,
				Base: baseID, Changelog: len(segs)}
			uploads := make([]checkpoint.StateFile, len(segs))
			cs := storage.CheckpointStorage{Store: opts.Store}
			var mu sync.Mutex
			err := parallel(ctx, len(segs), func(ctx context.Context, i int) error {
				seg := segs[i]
				if f, ok := baseSegs[seg.Seq]; ok {
					uploads[i] = f
					return nil
				}
				name := fmt.Sprintf("%s-%s-c%d-%s", s.inc.prefix, s.inc.instance, id, pebble.ChangelogSegmentName(seg.Seq))
				size, crc, err := cs.UploadStateFile(ctx, sharedDir, name, seg.Path)
				if err != nil {
					return err
				}
				uploads[i] = checkpoint.StateFile{Name: pebble.ChangelogSegmentName(seg.Seq), Path: sharedPath(path.Join(sharedDir, name)),
					Size: size, CRC: crc, Shared: true}
				mu.Lock()
				written += size
				mu.Unlock()
				return nil
			})
			if err != nil {
				return 0, fmt.Errorf("changelog checkpoint %d: upload the log: %w", id, err)
			}
			for i, seg := range segs {
				cp.segs[seg.Seq] = uploads[i]
			}
			files = append(files, uploads...)
			for _, f := range files {
				h.Size += f.Size
			}
			h.Files = files
			st.Keyed = append(st.Keyed, h)
			s.mu.Lock()
			s.pending[id] = cp
			s.mu.Unlock()
			return written, nil
		},
		Release: func() {
			if syncDir != "" {
				_ = os.RemoveAll(syncDir)
			}
		},
	}, nil
}

// changelogBackend is what the changelog mode needs of the pebble backend.
type changelogBackend interface {
	SnapshotIncremental(id int64, dir string) ([]string, error)
	SetChangelog(c *pebble.Changelog)
	FlushWriteCache() error
	CutChangelog() (pebble.ChangelogSegment, error)
}

func (s *changelogState) takeNative(b changelogBackend, id int64, dir string) error {
	if err := os.MkdirAll(s.inc.localDir, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	_, err := b.SnapshotIncremental(id, dir)
	return err
}

// maybeMaterialize starts a background materialization at the cut of
// checkpoint id when one is due and none is under way or waiting.
func (s *changelogState) maybeMaterialize(b changelogBackend, id, cut int64, store storage.Store, sharedDir string) {
	c := s.confirmed
	if c == nil || c.mat.store != store || s.inflight != nil {
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
		_ = os.RemoveAll(dir)
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
		defer os.RemoveAll(dir)
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
			_ = os.Remove(seg.Path)
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
	_ = os.RemoveAll(s.logDir())
	entries, _ := os.ReadDir(s.inc.localDir)
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), "mat-"); ok {
			if _, err := strconv.Atoi(n); err == nil {
				_ = os.RemoveAll(filepath.Join(s.inc.localDir, e.Name()))
			}
		}
	}
	_ = os.Remove(s.inc.localDir) // only if empty
}

// replayHandle moves the changelog segments of h, downloaded into dir, out
// of it and replays them on the native checkpoint left in dir.
func replayHandle(h checkpoint.KeyedStateHandle, dir string, replay func(dir string, segments []string) error) error {
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
	if err := os.RemoveAll(logDir); err != nil {
		return err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(logDir)
	var segs []string
	last := int64(-1)
	for _, f := range h.Files[n:] {
		seq, ok := pebble.ParseChangelogSegmentName(f.Name)
		if !ok || seq <= last {
			return fmt.Errorf("%w: changelog segment %q out of order or misnamed", storage.ErrCorruptState, f.Name)
		}
		last = seq
		p := filepath.Join(logDir, f.Name)
		if err := os.Rename(filepath.Join(dir, f.Name), p); err != nil {
			return err
		}
		segs = append(segs, p)
	}
	return replay(dir, segs)
}
