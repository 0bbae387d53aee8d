package incremental

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/statebackend/snapshot"
	"github.com/weirstream/weir/internal/storage"
)

// changelogState is the changelog side of one instance: it carries out
// what its ledger (snapshot.ChangelogLedger, the pure core that decides
// which materialization and segments a checkpoint refers to and uploads,
// when to materialize, and what may go) returns. The log and the
// synchronous parts run on the task goroutine; the asynchronous parts and
// the background materialization report to the ledger under mu, and carry
// out its answers outside it.
type changelogState struct {
	inc    *incrementalState // names, directories, the file system; its restore
	now    func() time.Time
	logger *slog.Logger
	ctx    context.Context

	log *pebble.Changelog // task goroutine; nil while no log is open

	mu       sync.Mutex
	ledger   *snapshot.ChangelogLedger
	cancel   context.CancelFunc // the background materialization's
	bg       sync.WaitGroup
	bgErr    error // the last background materialization's failure (tests)
	matBytes int64 // uploaded by materializations, background and synchronous
	bgMats   int   // background materializations uploaded
	// onMaterialized, when set (tests), is told of each background
	// materialization uploaded, under mu.
	onMaterialized func()
}

func newChangelogState(ctx context.Context, inc *incrementalState, opts Options) *changelogState {
	co := snapshot.ChangelogOptions{Interval: int64(opts.Changelog.MaterializationInterval), LogRatio: opts.Changelog.MaterializationLogRatio}
	return &changelogState{inc: inc, now: opts.Clock, logger: opts.Logger, ctx: ctx,
		ledger: snapshot.NewChangelogLedger(co), onMaterialized: opts.OnMaterialized}
}

func (s *changelogState) logDir() string { return filepath.Join(s.inc.localDir, "changelog") }

func (s *changelogState) segmentPath(seq int64) string {
	return filepath.Join(s.logDir(), pebble.ChangelogSegmentName(seq))
}

func (s *changelogState) matDir(n int64) string {
	return filepath.Join(s.inc.localDir, "mat-"+strconv.FormatInt(n, 10))
}

// step feeds the ledger one event.
func (s *changelogState) step(e snapshot.ChangelogEvent) []snapshot.ChangelogAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Step(e)
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
	return s.ledger.Pending()
}

// snapshot runs the synchronous part of checkpoint id in changelog mode:
// it cuts the log, then carries out the ledger's plan.
func (s *changelogState) snapshot(b Backend, id int64, t Target) (Snapshot, error) {
	fail := func(err error) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("changelog checkpoint %d: %w", id, err)
	}
	if err := s.cutLog(b, id); err != nil {
		return fail(err)
	}
	sharedDir := path.Join(path.Dir(t.Dir), storage.SharedDirName)
	var plan snapshot.Refer
	for _, a := range s.step(snapshot.SnapshotTaken{ID: id, Store: t.Store, Cut: s.log.Seq(), Now: s.now().UnixNano()}) {
		switch a := a.(type) {
		case snapshot.Refer:
			plan = a
		case snapshot.Materialize:
			dir := s.matDir(a.Seq)
			if err := s.takeNative(b, id, dir); err != nil {
				s.do(s.step(snapshot.MaterializationFailed{Seq: a.Seq}))
				if !a.Background {
					return fail(err)
				}
				s.logger.Warn("changelog: cannot take a materialization", "checkpoint", id, "err", err)
				continue
			}
			if a.Background {
				s.materialize(id, a, dir, t.Store, sharedDir)
			}
		default:
			s.do([]snapshot.ChangelogAction{a})
		}
	}
	return Snapshot{
		Async: func(ctx context.Context, st *checkpoint.SubtaskState) (int64, error) {
			return s.upload(ctx, st, t.Store, sharedDir, plan)
		},
		Release: func() { s.do(s.step(snapshot.SnapshotReleased{ID: id})) },
	}, nil
}

// cutLog cuts the log at the barrier of checkpoint id, after the writes
// still in the backend's write-back cache reached the database (and the
// log), and opens a new log when the ledger says so (the first cut, and
// the first after the log failed).
func (s *changelogState) cutLog(b Backend, id int64) error {
	if err := b.FlushWriteCache(); err != nil {
		return err
	}
	e := snapshot.LogCut{ID: id}
	if s.log != nil {
		seg, err := b.CutChangelog()
		if err != nil {
			// A log with a hole in it cannot be replayed.
			s.logger.Warn("changelog: the local log failed; this checkpoint materializes the state and a new log starts", "checkpoint", id, "err", err)
			e.Failed, e.Seg = true, snapshot.Segment{Seq: s.log.Seq()}
		} else {
			e.Closed, e.Seg = true, snapshot.Segment{Seq: seg.Seq, Size: seg.Size}
		}
	}
	for _, a := range s.step(e) {
		switch a := a.(type) {
		case snapshot.CloseLog:
			b.SetChangelog(nil)
			_ = s.log.Close()
			s.log = nil
		case snapshot.OpenLog:
			if a.Clear {
				if err := s.inc.fs.RemoveAll(s.logDir()); err != nil {
					return err
				}
			}
			log, err := pebble.OpenChangelog(s.inc.fs, s.logDir(), a.First)
			if err != nil {
				return err
			}
			s.log = log
			b.SetChangelog(log)
		default:
			s.do([]snapshot.ChangelogAction{a})
		}
	}
	return nil
}

// do carries out the ledger's actions that need neither the backend nor
// the log.
func (s *changelogState) do(acts []snapshot.ChangelogAction) {
	for _, a := range acts {
		switch a := a.(type) {
		case snapshot.RemoveSegments:
			for _, seq := range a.Seqs {
				_ = s.inc.fs.Remove(s.segmentPath(seq))
			}
		case snapshot.DropMaterialization:
			store := a.Mat.Store.(storage.Store)
			for _, o := range a.Mat.Fresh {
				_ = store.Delete(context.WithoutCancel(s.ctx), o)
			}
			s.logger.Info("changelog: materialization dropped", "checkpoint", a.Mat.ID, "reason", a.Why)
		case snapshot.RemoveMaterializationDir:
			_ = s.inc.fs.RemoveAll(s.matDir(a.Seq))
		case snapshot.RemoveLocal:
			s.removeLocal()
		default:
			panic(fmt.Sprintf("changelog: action %v out of place", a))
		}
	}
}

// upload is the asynchronous part of a changelog checkpoint: the
// synchronous materialization if it took one, the segments its base does
// not hold; it appends the handle to st and returns the bytes uploaded.
func (s *changelogState) upload(ctx context.Context, st *checkpoint.SubtaskState, store storage.Store, sharedDir string, p snapshot.Refer) (int64, error) {
	var written int64
	var mat snapshot.MatFiles
	if p.Mat != nil {
		mat = p.Mat.MatFiles
	} else {
		var err error
		mat, written, err = s.inc.uploadMaterialization(ctx, s.matDir(p.Sync), p.BaseData, store, sharedDir, fmt.Sprintf("m%d", p.ID))
		if err != nil {
			return 0, fmt.Errorf("changelog checkpoint %d: materialization: %w", p.ID, err)
		}
		s.mu.Lock()
		s.matBytes += written
		s.mu.Unlock()
	}
	segs := make([]snapshot.File, len(p.Segments))
	var mu sync.Mutex
	err := s.inc.parallel(ctx, len(p.Segments), func(ctx context.Context, i int) error {
		seg := p.Segments[i]
		if f, ok := p.Held[seg.Seq]; ok {
			segs[i] = f
			return nil
		}
		name := pebble.ChangelogSegmentName(seg.Seq)
		object := path.Join(sharedDir, fmt.Sprintf("%s-%s-c%d-%s", s.inc.prefix, s.inc.instance, p.ID, name))
		size, crc, err := s.inc.uploadFile(ctx, store, object, s.segmentPath(seg.Seq))
		if err != nil {
			return err
		}
		segs[i] = snapshot.File{Name: name, SharedFile: sharedFile{Object: object, Size: size, CRC: crc}}
		mu.Lock()
		written += size
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("changelog checkpoint %d: upload the log: %w", p.ID, err)
	}
	h := checkpoint.KeyedStateHandle{Backend: checkpoint.IncrementalBackend, StartGroup: s.inc.groups.Start, EndGroup: s.inc.groups.End,
		Base: p.BaseID, Changelog: len(segs)}
	bySeq := make(map[int64]snapshot.File, len(segs))
	add := func(f snapshot.File) {
		h.Files = append(h.Files, checkpoint.StateFile{Name: f.Name, Path: sharedPath(f.Object), Size: f.Size, CRC: f.CRC, Shared: true})
		h.Size += f.Size
	}
	for _, f := range mat.Files {
		add(f)
	}
	for i, f := range segs {
		bySeq[p.Segments[i].Seq] = f
		add(f)
	}
	st.Keyed = append(st.Keyed, h)
	// Its local files may go now: RemoveMaterializationDir, RemoveSegments.
	s.do(s.step(snapshot.CheckpointUploaded{ID: p.ID, Mat: mat, Segments: bySeq}))
	return written, nil
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

// materialize uploads the background materialization a, taken at the
// barrier of checkpoint id into dir, and reports it to the ledger.
func (s *changelogState) materialize(id int64, a snapshot.Materialize, dir string, store storage.Store, sharedDir string) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	start := s.now()
	s.bg.Go(func() {
		defer cancel()
		m, written, err := s.inc.uploadMaterialization(ctx, dir, a.Reuse, store, sharedDir, fmt.Sprintf("m%d", id))
		s.mu.Lock()
		var acts []snapshot.ChangelogAction
		if err != nil {
			s.bgErr = err
			acts = s.ledger.Step(snapshot.MaterializationFailed{Seq: a.Seq})
		} else {
			s.matBytes += written
			s.bgMats++
			acts = s.ledger.Step(snapshot.MaterializationReady{Seq: a.Seq, MatFiles: m})
			if s.onMaterialized != nil {
				s.onMaterialized()
			}
		}
		s.mu.Unlock()
		s.do(acts)
		if err != nil {
			s.logger.Warn("changelog: a background materialization failed; the next one is tried at the next trigger", "checkpoint", id, "err", err)
			return
		}
		var size int64
		for _, f := range m.Files {
			size += f.Size
		}
		s.logger.Info("changelog: materialization uploaded", "checkpoint", id, "uploadedBytes", written,
			"stateBytes", size, "duration", s.now().Sub(start))
	})
}

// uploadMaterialization uploads the native checkpoint in dir to sharedDir,
// referring to the data files of base instead of uploading them again, and
// returns its files with the bytes uploaded.
func (s *incrementalState) uploadMaterialization(ctx context.Context, dir string, base map[string]sharedFile, store storage.Store, sharedDir, tag string) (snapshot.MatFiles, int64, error) {
	up, err := s.uploadDir(ctx, dir, base, store, sharedDir, func(name string, _ bool) string {
		return path.Join(sharedDir, fmt.Sprintf("%s-%s-%s-%s", s.prefix, s.instance, tag, name))
	})
	if err != nil {
		for _, o := range up.fresh { // referred to by nothing
			_ = store.Delete(context.WithoutCancel(ctx), o)
		}
		return snapshot.MatFiles{}, 0, err
	}
	m := snapshot.MatFiles{Data: up.data, Fresh: up.fresh, Files: make([]snapshot.File, len(up.files))}
	for i, f := range up.files {
		// Every file of a materialization is in sharedDir.
		m.Files[i] = snapshot.File{Name: f.Name, SharedFile: sharedFile{Object: path.Join(sharedDir, path.Base(f.Path)), Size: f.Size, CRC: f.CRC}}
	}
	return m, up.written, nil
}

// complete records that checkpoint id completed.
func (s *changelogState) complete(id int64) { s.do(s.step(snapshot.CheckpointComplete{ID: id})) }

// aborted records that checkpoint id aborted.
func (s *changelogState) aborted(id int64) { s.do(s.step(snapshot.CheckpointAborted{ID: id})) }

// restored records the checkpoint restored: the first checkpoint's
// materialization refers to its data files.
func (s *changelogState) restored(up snapshot.Upload) {
	s.do(s.step(snapshot.Restored{ID: up.ID, Store: up.Store, Data: up.Files}))
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
	s.do(s.step(snapshot.Closed{}))
}

// removeLocal closes the log and removes its directory and every
// materialization directory.
func (s *changelogState) removeLocal() {
	if s.log != nil {
		_ = s.log.Close()
		s.log = nil
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
