package snapshot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestChangelogLedger runs the scripts under testdata/changelog. Commands:
//
//	new [interval=D] [ratio=F]     a ledger (D a Go duration; default: no trigger)
//	cut id=N                       checkpoint N's cut: no log is open
//	cut id=N seg=S size=B          the cut closed segment S of B bytes
//	cut id=N seg=S failed          a write to the open segment S failed
//	snapshot id=N cut=C [now=D] [store=X]  checkpoint N's synchronous part
//	uploaded id=N [files=a.sst,b]  its asynchronous part ended (files: those
//	                               of its synchronous materialization)
//	released id=N                  its asynchronous part was released
//	ready seq=S files=a.sst,b      the background materialization S uploaded
//	mat-failed seq=S               materialization S failed
//	complete id=N | abort id=N     notifications
//	restored id=N files=a.sst [store=X]
//	close
//
// Each command prints the actions, one a line, then the ledger's state.
// The driver (clDriver) checks the ledger's invariants at every step.
func TestChangelogLedger(t *testing.T) {
	datadriven.Walk(t, "testdata/changelog", func(t *testing.T, path string) {
		d := newClDriver(ChangelogOptions{})
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			d.errorf = func(format string, args ...any) { t.Errorf("%s: %s", td.Pos, fmt.Sprintf(format, args...)) }
			return d.run(t, td)
		})
	})
}

// clDriver feeds a ChangelogLedger as the incremental lifecycle does and
// checks, at every step:
//
//   - the rule the job master's shared-state registry deletes files by: a
//     checkpoint lists only objects its base lists, or objects no earlier
//     checkpoint listed;
//   - a checkpoint's log is whole: it lists every non-empty segment from
//     its materialization's cut to its own cut, and no write failed in
//     between;
//   - a segment is uploaded only while its local file is there, and the
//     open segment is never removed.
//
// It names objects as the lifecycle does: m<N>-<file> for a
// materialization taken at checkpoint N, c<N>-log-<S> for a segment
// uploaded by checkpoint N; reused objects keep their name.
type clDriver struct {
	l      *ChangelogLedger
	errorf func(format string, args ...any)

	plans  map[int64]Refer
	cuts   map[int64]int64 // checkpoint -> its cut
	bgAt   map[int64]int64 // background materialization -> the checkpoint it was taken at
	bg     map[int64]Materialize
	local  map[int64]bool     // segment files on disk
	sizes  map[int64]int64    // closed segments' sizes
	failed map[int64]bool     // segments a write failed in
	open   int64              // the open segment (-1: no log)
	lists  map[int64][]string // checkpoint -> the objects it lists
	first  map[string]int64   // object -> the first checkpoint listing it
	known  map[int64]bool     // checkpoints notified complete, and the one restored
}

func newClDriver(o ChangelogOptions) *clDriver {
	return &clDriver{l: NewChangelogLedger(o), plans: map[int64]Refer{}, cuts: map[int64]int64{}, bgAt: map[int64]int64{},
		bg: map[int64]Materialize{}, local: map[int64]bool{}, sizes: map[int64]int64{}, failed: map[int64]bool{}, open: -1,
		lists: map[int64][]string{}, first: map[string]int64{}, known: map[int64]bool{}}
}

func (d *clDriver) run(t *testing.T, td *datadriven.TestData) string {
	var id, seq, size, cut int64
	var files, store, interval, now string
	var ratio float64
	for _, a := range td.CmdArgs {
		switch a.Key {
		case "id":
			td.ScanArgs(t, "id", &id)
		case "seg", "seq":
			td.ScanArgs(t, a.Key, &seq)
		case "size":
			td.ScanArgs(t, "size", &size)
		case "cut":
			td.ScanArgs(t, "cut", &cut)
		case "files":
			td.ScanArgs(t, "files", &files)
		case "store":
			td.ScanArgs(t, "store", &store)
		case "interval":
			td.ScanArgs(t, "interval", &interval)
		case "ratio":
			td.ScanArgs(t, "ratio", &ratio)
		case "now":
			td.ScanArgs(t, "now", &now)
		case "failed":
		default:
			t.Fatalf("%s: unknown argument %q", td.Pos, a.Key)
		}
	}
	dur := func(s string) int64 {
		if s == "" {
			return 0
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", td.Pos, err)
		}
		return int64(v)
	}
	var names []string
	if files != "" {
		names = strings.Split(files, ",")
	}
	var acts []ChangelogAction
	switch td.Cmd {
	case "new":
		errorf := d.errorf
		*d = *newClDriver(ChangelogOptions{Interval: dur(interval), LogRatio: ratio})
		d.errorf = errorf
		return d.l.String()
	case "cut":
		switch {
		case td.HasArg("failed"):
			// The driver's open segment is whatever the script says.
			d.open = seq
			acts = d.cutFailed(id)
		case td.HasArg("seg"):
			d.open = seq
			acts = d.cutClosed(id, size)
		default:
			d.open = -1
			acts = d.cutNoLog(id)
		}
	case "snapshot":
		if d.open != cut {
			t.Fatalf("%s: cut=%d, but the open segment is %d", td.Pos, cut, d.open)
		}
		acts = d.snapshot(id, store, dur(now))
	case "uploaded":
		acts = d.uploaded(id, names)
	case "released":
		acts = d.apply(SnapshotReleased{ID: id})
	case "ready":
		acts = d.ready(seq, names)
	case "mat-failed":
		acts = d.apply(MaterializationFailed{Seq: seq})
	case "complete":
		acts = d.apply(CheckpointComplete{ID: id})
	case "abort":
		acts = d.apply(CheckpointAborted{ID: id})
	case "restored":
		acts = d.restored(id, store, names)
	case "close":
		acts = d.apply(Closed{})
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	var b strings.Builder
	for _, a := range acts {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	b.WriteString(d.l.String())
	return b.String()
}

// apply steps the ledger and carries out the actions on the driver's
// model of the local disk.
func (d *clDriver) apply(e ChangelogEvent) []ChangelogAction {
	if c, ok := e.(CheckpointComplete); ok {
		d.known[c.ID] = true
	}
	acts := d.l.Step(e)
	for _, a := range acts {
		switch a := a.(type) {
		case RemoveSegments:
			for _, s := range a.Seqs {
				if s == d.open {
					d.errorf("the open segment %d is removed", s)
				}
				delete(d.local, s)
			}
		case CloseLog:
			d.open = -1
		case OpenLog:
			d.open = a.First
		case RemoveLocal:
			clear(d.local)
		}
	}
	return acts
}

func (d *clDriver) cutNoLog(id int64) []ChangelogAction {
	acts := d.apply(LogCut{ID: id})
	d.cuts[id] = d.open
	return acts
}

// cutClosed closes the open segment with size bytes.
func (d *clDriver) cutClosed(id, size int64) []ChangelogAction {
	seq := d.open
	d.local[seq], d.sizes[seq] = true, size
	d.open = seq + 1
	acts := d.apply(LogCut{ID: id, Closed: true, Seg: Segment{Seq: seq, Size: size}})
	d.cuts[id] = d.open
	return acts
}

// cutFailed fails the open segment.
func (d *clDriver) cutFailed(id int64) []ChangelogAction {
	seq := d.open
	d.local[seq], d.failed[seq] = true, true
	acts := d.apply(LogCut{ID: id, Failed: true, Seg: Segment{Seq: seq}})
	d.cuts[id] = d.open
	return acts
}

func (d *clDriver) snapshot(id int64, store any, now int64) []ChangelogAction {
	cut := d.cuts[id]
	if d.open < 0 {
		d.errorf("checkpoint %d: no log open after its cut", id)
	}
	acts := d.apply(SnapshotTaken{ID: id, Store: store, Cut: cut, Now: now})
	for _, a := range acts {
		switch a := a.(type) {
		case Refer:
			d.plans[id] = a
			if a.Mat != nil {
				d.checkLog(id, a.Mat.Cut, cut, a.Segments)
			}
		case Materialize:
			if a.Background {
				d.bg[a.Seq], d.bgAt[a.Seq] = a, id
			}
		}
	}
	return acts
}

// checkLog checks that segs are the whole log from from to cut.
func (d *clDriver) checkLog(id, from, cut int64, segs []Segment) {
	i := 0
	for s := from; s < cut; s++ {
		if d.failed[s] {
			d.errorf("checkpoint %d refers to a materialization cut at %d, but segment %d failed since", id, from, s)
		}
		if d.sizes[s] == 0 {
			continue // empty, or failed
		}
		if i >= len(segs) || segs[i].Seq != s {
			d.errorf("checkpoint %d (log from %d to %d) does not list segment %d: %v", id, from, cut, s, segs)
			return
		}
		i++
	}
	if i != len(segs) {
		d.errorf("checkpoint %d (log from %d to %d) lists segments %v", id, from, cut, segs)
	}
}

// uploaded is the end of checkpoint id's asynchronous part; files are
// those of its synchronous materialization.
func (d *clDriver) uploaded(id int64, files []string) []ChangelogAction {
	p, ok := d.plans[id]
	if !ok {
		d.errorf("no snapshot of checkpoint %d", id)
		return nil
	}
	e := CheckpointUploaded{ID: id, Segments: map[int64]File{}}
	var listed []string
	if p.Mat == nil {
		e.Mat = matFiles(files, p.BaseData, fmt.Sprintf("shared/m%d-", id))
		listed = objects(e.Mat.Files)
	} else {
		listed = objects(p.Mat.Files)
	}
	for _, s := range p.Segments {
		f, held := p.Held[s.Seq]
		if !held {
			if !d.local[s.Seq] {
				d.errorf("checkpoint %d uploads segment %d, whose local file was removed", id, s.Seq)
			}
			name := fmt.Sprintf("log-%d", s.Seq)
			f = File{Name: name, SharedFile: SharedFile{Object: fmt.Sprintf("shared/c%d-%s", id, name), Size: s.Size}}
		}
		e.Segments[s.Seq] = f
		listed = append(listed, f.Object)
	}
	d.checkBase(id, p.BaseID, listed)
	return d.apply(e)
}

func (d *clDriver) ready(seq int64, files []string) []ChangelogAction {
	m, ok := d.bg[seq]
	if !ok {
		d.errorf("no background materialization %d", seq)
		return nil
	}
	return d.apply(MaterializationReady{Seq: seq, MatFiles: matFiles(files, m.Reuse, fmt.Sprintf("shared/m%d-", d.bgAt[seq]))})
}

func (d *clDriver) restored(id int64, store any, files []string) []ChangelogAction {
	data := map[string]SharedFile{}
	var listed []string
	for _, n := range files {
		o := fmt.Sprintf("shared/c%d-%s", id, n)
		data[n] = SharedFile{Object: o}
		listed = append(listed, o)
	}
	d.checkBase(id, 0, listed)
	d.known[id] = true
	return d.apply(Restored{ID: id, Store: store, Data: data})
}

// checkBase records what checkpoint id lists and checks the registry's
// rule: an object an earlier checkpoint listed is listed by the base too.
func (d *clDriver) checkBase(id, base int64, listed []string) {
	if base != 0 && !d.known[base] {
		d.errorf("checkpoint %d's base %d is not known complete", id, base)
	}
	inBase := map[string]bool{}
	for _, o := range d.lists[base] {
		inBase[o] = true
	}
	for _, o := range listed {
		if first, ok := d.first[o]; ok && first != id && !inBase[o] {
			d.errorf("checkpoint %d (base %d) lists %s, which checkpoint %d listed and its base does not: the registry may have deleted it",
				id, base, o, first)
		}
		if _, ok := d.first[o]; !ok {
			d.first[o] = id
		}
	}
	d.lists[id] = listed
}

// matFiles is the upload of a materialization of these local files: the
// data files (.sst) reuse holds are referred to, the others uploaded under
// prefix.
func matFiles(names []string, reuse map[string]SharedFile, prefix string) MatFiles {
	m := MatFiles{Data: map[string]SharedFile{}}
	for _, n := range names {
		data := strings.HasSuffix(n, ".sst")
		f, ok := reuse[n]
		if !ok || !data {
			f = SharedFile{Object: prefix + n, Size: 1}
			m.Fresh = append(m.Fresh, f.Object)
		}
		if data {
			m.Data[n] = f
		}
		m.Files = append(m.Files, File{Name: n, SharedFile: f})
	}
	return m
}

func objects(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Object
	}
	return out
}
