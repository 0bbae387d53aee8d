package snapshot

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Segment is a closed segment of an instance's local changelog: the writes
// between two cuts.
type Segment struct {
	Seq  int64
	Size int64
}

// File is an object in the job's shared directory, with the local name it
// has in a checkpoint (a pebble file, or a changelog segment's name).
type File struct {
	Name string
	SharedFile
}

// MatFiles is what the upload of a materialization did.
type MatFiles struct {
	Files []File                // every file, in the order a handle lists them; all shared
	Data  map[string]SharedFile // its data files by local name: the next materialization refers to them
	Fresh []string              // the objects it uploaded (the others it refers to)
}

// Materialization is a native checkpoint of an instance's state uploaded to
// the shared directory: the log segments from Cut on replay exactly on top
// of it.
type Materialization struct {
	Seq   int64 // its local number: the directory mat-<Seq>
	ID    int64 // the checkpoint at whose barrier it was taken
	Cut   int64 // the first log segment after it
	Store any   // the checkpoint storage it was uploaded to (compared with ==)
	// Base is the materialization whose data files it refers to
	// (background ones: the confirmed checkpoint's when it was taken); 0
	// for one taken synchronously, which its own checkpoint lists at once.
	Base int64
	MatFiles
}

// Size is the bytes of its files.
func (m *Materialization) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// ChangelogOptions are the materialization triggers of a ChangelogLedger.
type ChangelogOptions struct {
	// Interval is the time, in nanoseconds of the caller's clock, between
	// two materializations; <= 0: no interval trigger.
	Interval int64
	// LogRatio triggers a materialization when the log since the last one
	// exceeds this fraction of its size; <= 0: no size trigger.
	LogRatio float64
}

// ChangelogLedger is the task-side ledger of one operator instance's
// changelog checkpoints (Flink's FLIP-158): which materialization and which
// log segments a checkpoint refers to, which of them it uploads, when a
// materialization is taken and when it may be referred to, and which local
// segments and directories may go. It does no I/O and reads no clock: each
// event comes in through Step, and what the caller must do comes back as
// actions, in order. Step is not safe for concurrent use: the caller
// serializes the events (the asynchronous parts and the background
// materialization report theirs under the caller's lock).
//
// Rules:
//
//   - A checkpoint refers to a materialization whose log since its cut is
//     whole, and to the segments from that cut to its own; the segments
//     its base (the last checkpoint known complete) lists are referred to,
//     the others uploaded. With no such materialization (the first
//     checkpoint, the first after a restore or after the log failed) it
//     takes one synchronously, uploaded by its own asynchronous part.
//   - A background materialization reuses the data files of the confirmed
//     checkpoint's materialization. Once uploaded it is referred to by the
//     next checkpoint only, and by others once that one is known complete.
//     If the confirmed materialization changes before it is referred to, or
//     the log fails after its cut, it is dropped: the base no longer lists
//     the files it reuses (the job master may delete them), or its log has
//     a hole.
//   - The base only grows: a completion confirms a checkpoint only if it
//     is newer than the confirmed one and refers to a materialization at
//     least as new.
//   - Local segments go once they are older than the confirmed
//     materialization's cut and no upload under way reads them (one of a
//     checkpoint a completion subsumed included); the segment a failed
//     write left goes at once.
type ChangelogLedger struct {
	opts ChangelogOptions

	logStart int64     // the first segment of the current log
	local    []Segment // closed segments not yet removed, by Seq
	matSeq   int64     // materializations taken
	lastMat  int64     // when the last one was taken (the caller's clock)
	anyMat   bool

	confirmed *clCheckpoint // the last checkpoint known complete
	restored  Upload        // the checkpoint restored (until one is confirmed)
	// inflight is a background materialization referred to by the pending
	// checkpoint inflightBy only.
	inflight   *Materialization
	inflightBy int64
	ready      *Materialization // uploaded, not referred to yet
	running    *Materialization // being uploaded in the background (no files yet)
	// taken holds, for each checkpoint taken and not yet uploaded, known
	// complete or aborted, what its asynchronous part refers to; inUse,
	// until its upload ended or its asynchronous part was released, the
	// first segment it reads (the local segments from there on stay).
	taken   map[int64]*taking
	inUse   map[int64]int64
	pending map[int64]*clCheckpoint // uploaded, not yet known complete or aborted
	syncDir map[int64]int64         // checkpoint -> its synchronous materialization, until released
}

type taking struct {
	mat  *Materialization // for a synchronous one: no files until uploaded
	sync bool
}

// clCheckpoint is what one uploaded checkpoint lists.
type clCheckpoint struct {
	id   int64
	mat  *Materialization
	segs map[int64]File // segment seq -> its object
}

// NewChangelogLedger returns the ledger of an instance.
func NewChangelogLedger(opts ChangelogOptions) *ChangelogLedger {
	return &ChangelogLedger{opts: opts, taken: make(map[int64]*taking), inUse: make(map[int64]int64),
		pending: make(map[int64]*clCheckpoint), syncDir: make(map[int64]int64)}
}

// ChangelogEvent is an input of a ChangelogLedger.
type ChangelogEvent interface{ changelogEvent() }

// LogCut: the synchronous part of checkpoint ID cut the log (after the
// backend's write-back cache reached it). Closed: the segment Seg closed
// (Size 0: it is empty). Failed: a write to the open segment Seg.Seq failed
// since the last cut, so the log has a hole. Neither: no log is open.
type LogCut struct {
	ID     int64
	Closed bool
	Failed bool
	Seg    Segment
}

// SnapshotTaken: checkpoint ID's synchronous part runs now (Now, in
// nanoseconds of the caller's clock), its target is Store, and the log is
// open from segment Cut on (the writes before the barrier are before Cut).
type SnapshotTaken struct {
	ID    int64
	Store any
	Cut   int64
	Now   int64
}

// MaterializationFailed: the materialization Seq could not be taken, or
// its background upload failed (its uploads were deleted).
type MaterializationFailed struct{ Seq int64 }

// MaterializationReady: the background materialization Seq is uploaded.
type MaterializationReady struct {
	Seq int64
	MatFiles
}

// CheckpointUploaded: checkpoint ID's asynchronous part uploaded what its
// Refer said (and reads no local file any more): Mat, the files of its
// synchronous materialization if it took one; Segments, every segment it
// lists by seq.
type CheckpointUploaded struct {
	ID       int64
	Mat      MatFiles
	Segments map[int64]File
}

// SnapshotReleased: checkpoint ID's asynchronous part ended (uploaded or
// failed) or was abandoned.
type SnapshotReleased struct{ ID int64 }

// CheckpointComplete: checkpoint ID is known complete.
type CheckpointComplete struct{ ID int64 }

// CheckpointAborted: checkpoint ID is known aborted.
type CheckpointAborted struct{ ID int64 }

// Restored: the instance restored checkpoint ID from Store; Data are the
// shared files of its adopted handle. The first checkpoint's synchronous
// materialization refers to them instead of uploading them again.
type Restored struct {
	ID    int64
	Store any
	Data  map[string]SharedFile
}

// Closed: the instance closes; no background materialization runs any
// more.
type Closed struct{}

func (LogCut) changelogEvent()                {}
func (SnapshotTaken) changelogEvent()         {}
func (MaterializationFailed) changelogEvent() {}
func (MaterializationReady) changelogEvent()  {}
func (CheckpointUploaded) changelogEvent()    {}
func (SnapshotReleased) changelogEvent()      {}
func (CheckpointComplete) changelogEvent()    {}
func (CheckpointAborted) changelogEvent()     {}
func (Restored) changelogEvent()              {}
func (Closed) changelogEvent()                {}

// ChangelogAction is what the caller of a ChangelogLedger carries out.
type ChangelogAction interface {
	changelogAction()
	String() string
}

// RemoveSegments: remove the local files of these segments.
type RemoveSegments struct{ Seqs []int64 }

// CloseLog: detach the failed log from the backend and close it.
type CloseLog struct{}

// OpenLog: open a new log at segment First and attach it (Clear: remove
// what the log directory holds first).
type OpenLog struct {
	First int64
	Clear bool
}

// Materialize: take the native checkpoint of materialization Seq now, into
// its local directory (a failure is reported with MaterializationFailed).
// A synchronous one is uploaded by the checkpoint's asynchronous part
// (Refer.Sync, reusing Refer.BaseData); a background one (Background) is
// uploaded now, referring to the data files of Reuse (those of checkpoint
// ReuseFrom) instead of uploading them again, and reported with
// MaterializationReady or MaterializationFailed.
type Materialize struct {
	Seq        int64
	Background bool
	Reuse      map[string]SharedFile
	ReuseFrom  int64
}

// Refer is what checkpoint ID's asynchronous part does: upload the
// synchronous materialization Sync (Mat nil), or refer to Mat; then list
// Segments, referring to those Held by the base and uploading the others.
// Its handle's base is BaseID.
type Refer struct {
	ID       int64
	Mat      *Materialization
	Sync     int64
	Segments []Segment
	Held     map[int64]File
	BaseID   int64
	BaseData map[string]SharedFile // what a synchronous materialization refers to
}

// DropMaterialization: delete the objects Mat uploaded (Fresh); nothing
// refers to it and nothing will.
type DropMaterialization struct {
	Mat *Materialization
	Why string
}

// RemoveMaterializationDir: remove the local directory of materialization
// Seq (its upload ended).
type RemoveMaterializationDir struct{ Seq int64 }

// RemoveLocal: remove the log directory and every materialization
// directory (the instance closes).
type RemoveLocal struct{}

func (RemoveSegments) changelogAction()           {}
func (CloseLog) changelogAction()                 {}
func (OpenLog) changelogAction()                  {}
func (Materialize) changelogAction()              {}
func (Refer) changelogAction()                    {}
func (DropMaterialization) changelogAction()      {}
func (RemoveMaterializationDir) changelogAction() {}
func (RemoveLocal) changelogAction()              {}

func (a RemoveSegments) String() string { return fmt.Sprintf("remove-segments %v", a.Seqs) }
func (CloseLog) String() string         { return "close-log" }
func (a OpenLog) String() string {
	if a.Clear {
		return fmt.Sprintf("open-log first=%d clear", a.First)
	}
	return fmt.Sprintf("open-log first=%d", a.First)
}
func (a Materialize) String() string {
	kind := "sync"
	if a.Background {
		kind = "background"
	}
	s := fmt.Sprintf("materialize mat %d %s", a.Seq, kind)
	if a.Reuse != nil {
		s += fmt.Sprintf(" reusing chk %d [%s]", a.ReuseFrom, strings.Join(slices.Sorted(maps.Keys(a.Reuse)), " "))
	}
	return s
}
func (a Refer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refer chk %d: ", a.ID)
	if a.Mat == nil {
		fmt.Fprintf(&b, "upload mat %d", a.Sync)
		if a.BaseData != nil {
			fmt.Fprintf(&b, " reusing [%s]", strings.Join(slices.Sorted(maps.Keys(a.BaseData)), " "))
		}
	} else {
		fmt.Fprintf(&b, "mat %d (chk %d, cut %d)", a.Mat.Seq, a.Mat.ID, a.Mat.Cut)
	}
	if len(a.Segments) > 0 {
		b.WriteString(" + segments [")
		for i, s := range a.Segments {
			if i > 0 {
				b.WriteByte(' ')
			}
			if _, ok := a.Held[s.Seq]; ok {
				fmt.Fprintf(&b, "%d held", s.Seq)
			} else {
				fmt.Fprintf(&b, "%d upload", s.Seq)
			}
		}
		b.WriteByte(']')
	}
	if a.BaseID != 0 {
		fmt.Fprintf(&b, "; base chk %d", a.BaseID)
	} else {
		b.WriteString("; no base")
	}
	return b.String()
}
func (a DropMaterialization) String() string {
	return fmt.Sprintf("drop mat %d (chk %d): %s; delete %v", a.Mat.Seq, a.Mat.ID, a.Why, a.Mat.Fresh)
}
func (a RemoveMaterializationDir) String() string { return fmt.Sprintf("remove-mat-dir %d", a.Seq) }
func (RemoveLocal) String() string                { return "remove-local" }

// Pending returns the number of checkpoints uploaded and not yet known
// complete or aborted.
func (l *ChangelogLedger) Pending() int { return len(l.pending) }

// Step feeds one event and returns the actions to carry out, in order.
func (l *ChangelogLedger) Step(e ChangelogEvent) []ChangelogAction {
	switch e := e.(type) {
	case LogCut:
		return l.cut(e)
	case SnapshotTaken:
		return l.snapshot(e)
	case MaterializationFailed:
		if l.running != nil && l.running.Seq == e.Seq {
			l.running = nil
		}
		for id, seq := range l.syncDir {
			if seq == e.Seq {
				delete(l.syncDir, id)
			}
		}
		return []ChangelogAction{RemoveMaterializationDir{Seq: e.Seq}}
	case MaterializationReady:
		return l.materialized(e)
	case CheckpointUploaded:
		l.uploaded(e)
		return l.doneReading(e.ID)
	case SnapshotReleased:
		return l.doneReading(e.ID)
	case CheckpointComplete:
		return l.complete(e.ID)
	case CheckpointAborted:
		l.aborted(e.ID)
		return nil
	case Restored:
		l.restored = Upload{ID: e.ID, Store: e.Store, Files: e.Data}
		return nil
	case Closed:
		var out []ChangelogAction
		if l.ready != nil {
			out = append(out, DropMaterialization{Mat: l.ready, Why: "never referred to"})
			l.ready = nil
		}
		return append(out, RemoveLocal{})
	}
	panic(fmt.Sprintf("snapshot: unknown changelog event %T", e))
}

func (l *ChangelogLedger) cut(e LogCut) []ChangelogAction {
	var out []ChangelogAction
	switch {
	case e.Failed:
		// A log with a hole cannot be replayed: the next one starts after
		// it, and no materialization cut before it is referred to again
		// (the next checkpoint materializes synchronously). Its closed
		// segments stay while checkpoints under way read them.
		l.logStart = e.Seg.Seq + 1
		out = append(out, CloseLog{}, RemoveSegments{Seqs: []int64{e.Seg.Seq}})
		if d := l.dropReady("taken before the log failed"); d != nil {
			out = append(out, d)
		}
	case e.Closed && e.Seg.Size > 0:
		l.local = append(l.local, e.Seg)
		return nil
	case e.Closed:
		return []ChangelogAction{RemoveSegments{Seqs: []int64{e.Seg.Seq}}}
	}
	// No log open: the first cut, one after a failure, or one after an
	// open that failed.
	return append(out, OpenLog{First: l.logStart, Clear: l.logStart == 0})
}

// usable reports whether the log since m's cut is whole.
func (l *ChangelogLedger) usable(m *Materialization) bool { return m.Cut >= l.logStart }

func (l *ChangelogLedger) snapshot(e SnapshotTaken) []ChangelogAction {
	var out []ChangelogAction
	c := l.confirmed
	ref := Refer{ID: e.ID}
	// The reuse base: the files of the last checkpoint known complete, or
	// of the one restored.
	switch {
	case c != nil && c.mat.Store == e.Store:
		ref.BaseID, ref.BaseData, ref.Held = c.id, c.mat.Data, c.segs
	case c == nil && l.restored.Files != nil && l.restored.Store == e.Store:
		ref.BaseID, ref.BaseData = l.restored.ID, l.restored.Files
	}
	// The materialization it refers to: one whose log since its cut is
	// all here.
	switch {
	case l.ready != nil && l.ready.Store == e.Store:
		ref.Mat = l.ready
		l.inflight, l.inflightBy, l.ready = l.ready, e.ID, nil
	case c != nil && c.mat.Store == e.Store && l.usable(c.mat):
		ref.Mat = c.mat
	default:
		l.matSeq++
		l.lastMat, l.anyMat = e.Now, true
		ref.Sync = l.matSeq
		l.syncDir[e.ID] = ref.Sync
		l.taken[e.ID] = &taking{sync: true, mat: &Materialization{Seq: ref.Sync, ID: e.ID, Cut: e.Cut, Store: e.Store}}
		ref.Held = nil // it lists no segment
		return append(out, Materialize{Seq: ref.Sync}, ref)
	}
	l.taken[e.ID] = &taking{mat: ref.Mat}
	l.inUse[e.ID] = ref.Mat.Cut
	for _, s := range l.local {
		if s.Seq >= ref.Mat.Cut && s.Seq < e.Cut {
			ref.Segments = append(ref.Segments, s)
		}
	}
	out = append(out, ref)
	if m := l.maybeMaterialize(e); m != nil {
		out = append(out, *m)
	}
	return out
}

// maybeMaterialize starts a background materialization at the cut of
// checkpoint e.ID when one is due and none is under way or waiting.
func (l *ChangelogLedger) maybeMaterialize(e SnapshotTaken) *Materialize {
	c := l.confirmed
	if c == nil || c.mat.Store != e.Store || !l.usable(c.mat) || l.inflight != nil || l.running != nil || l.ready != nil {
		return nil
	}
	var logSize int64
	for _, s := range l.local {
		if s.Seq >= c.mat.Cut {
			logSize += s.Size
		}
	}
	if logSize == 0 {
		return nil // nothing changed since the last one
	}
	due := l.opts.Interval > 0 && (!l.anyMat || e.Now-l.lastMat >= l.opts.Interval)
	big := l.opts.LogRatio > 0 && float64(logSize) > l.opts.LogRatio*float64(c.mat.Size())
	if !due && !big {
		return nil
	}
	l.matSeq++
	l.lastMat, l.anyMat = e.Now, true
	l.running = &Materialization{Seq: l.matSeq, ID: e.ID, Cut: e.Cut, Store: e.Store, Base: c.mat.Seq}
	return &Materialize{Seq: l.matSeq, Background: true, Reuse: c.mat.Data, ReuseFrom: c.id}
}

func (l *ChangelogLedger) materialized(e MaterializationReady) []ChangelogAction {
	out := []ChangelogAction{RemoveMaterializationDir{Seq: e.Seq}}
	m := l.running
	if m == nil || m.Seq != e.Seq {
		panic(fmt.Sprintf("snapshot: materialization %d reported uploaded, but none of that number is under way", e.Seq))
	}
	l.running = nil
	m.MatFiles = e.MatFiles
	l.ready = m
	if d := l.dropStale(); d != nil {
		out = append(out, d)
	}
	return out
}

// dropStale drops the ready materialization if it may no longer be
// referred to: it reuses the data files of a materialization that is no
// longer the confirmed one (a checkpoint with a newer one completed while
// it uploaded), which the base does not list, so the job master may
// delete them; or its log has a hole.
func (l *ChangelogLedger) dropStale() ChangelogAction {
	switch {
	case l.ready == nil:
		return nil
	case !l.usable(l.ready):
		return l.dropReady("taken before the log failed")
	case l.confirmed == nil || l.ready.Base != l.confirmed.mat.Seq:
		return l.dropReady("its base is no longer the confirmed materialization")
	}
	return nil
}

func (l *ChangelogLedger) dropReady(why string) ChangelogAction {
	if l.ready == nil {
		return nil
	}
	d := DropMaterialization{Mat: l.ready, Why: why}
	l.ready = nil
	return d
}

func (l *ChangelogLedger) uploaded(e CheckpointUploaded) {
	t, ok := l.taken[e.ID]
	if !ok {
		return // known complete or aborted meanwhile: nothing refers to it
	}
	delete(l.taken, e.ID)
	m := t.mat
	if t.sync {
		m.MatFiles = e.Mat
	}
	l.pending[e.ID] = &clCheckpoint{id: e.ID, mat: m, segs: e.Segments}
}

func (l *ChangelogLedger) complete(id int64) []ChangelogAction {
	var out []ChangelogAction
	cp := l.pending[id]
	for p := range l.pending {
		if p <= id {
			delete(l.pending, p)
		}
	}
	for p := range l.taken {
		if p <= id {
			delete(l.taken, p)
		}
	}
	// cp becomes the base unless it refers to an older materialization
	// than the base (it was taken before the base's completion was known):
	// the base must only grow, and what it lists stays reusable.
	if c := l.confirmed; cp != nil && (c == nil || cp.id > c.id && cp.mat.ID >= c.mat.ID) {
		l.confirmed = cp
		if c == nil || cp.mat != c.mat {
			if d := l.dropStale(); d != nil {
				out = append(out, d)
			}
		}
	}
	if l.confirmed != nil {
		// The segments before the confirmed materialization's cut are
		// needed by no checkpoint this instance takes from now on.
		if r := l.dropLocal(l.confirmed.mat.Cut); r != nil {
			out = append(out, r)
		}
	}
	if l.inflight != nil && (l.inflightBy <= id || cp != nil && cp.mat == l.inflight) {
		// Confirmed, or its checkpoint was subsumed: the files only that
		// checkpoint listed may be gone.
		l.inflight = nil
	}
	return out
}

func (l *ChangelogLedger) aborted(id int64) {
	delete(l.pending, id)
	delete(l.taken, id)
	if l.inflight != nil && l.inflightBy == id {
		// The registry deletes what only this checkpoint listed: the
		// materialization's new files. The next checkpoints refer to the
		// confirmed one again, whose segments are all still here.
		l.inflight = nil
	}
}

// doneReading is the end of checkpoint id's reading of local files (its
// upload ended, or its asynchronous part was released: the task releases
// it on every path but one, an unaligned checkpoint aborted while it waits
// for its channel state, after the upload): they may go.
func (l *ChangelogLedger) doneReading(id int64) []ChangelogAction {
	var out []ChangelogAction
	if seq, ok := l.syncDir[id]; ok {
		delete(l.syncDir, id)
		out = append(out, RemoveMaterializationDir{Seq: seq})
	}
	if _, ok := l.inUse[id]; ok {
		delete(l.inUse, id)
		if l.confirmed != nil {
			if r := l.dropLocal(l.confirmed.mat.Cut); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// dropLocal forgets the local segments below seq that no checkpoint under
// way may still read, and returns their removal.
func (l *ChangelogLedger) dropLocal(seq int64) ChangelogAction {
	for _, first := range l.inUse {
		seq = min(seq, first)
	}
	var gone []int64
	keep := l.local[:0]
	for _, s := range l.local {
		if s.Seq < seq {
			gone = append(gone, s.Seq)
		} else {
			keep = append(keep, s)
		}
	}
	l.local = keep
	if gone == nil {
		return nil
	}
	return RemoveSegments{Seqs: gone}
}

// String describes the ledger's state, for tests.
func (l *ChangelogLedger) String() string {
	var b strings.Builder
	if c := l.confirmed; c != nil {
		fmt.Fprintf(&b, "confirmed chk %d: mat %d segs %v", c.id, c.mat.Seq, slices.Sorted(maps.Keys(c.segs)))
	} else {
		b.WriteString("confirmed none")
	}
	fmt.Fprintf(&b, " | pending %v | local [", slices.Sorted(maps.Keys(l.pending)))
	for i, s := range l.local {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, s.Seq)
	}
	b.WriteByte(']')
	for _, m := range []struct {
		name string
		m    *Materialization
	}{{"running", l.running}, {"ready", l.ready}, {"inflight", l.inflight}} {
		if m.m != nil {
			fmt.Fprintf(&b, " | %s mat %d", m.name, m.m.Seq)
			if m.name == "inflight" {
				fmt.Fprintf(&b, " by chk %d", l.inflightBy)
			}
		}
	}
	return b.String()
}
