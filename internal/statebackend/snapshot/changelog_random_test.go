package snapshot

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestChangelogLedgerRandom drives the ledger through random runs of an
// instance and its job master: checkpoints taken while others are under
// way, uploads in any order (some failing), completions that subsume
// earlier checkpoints and aborts, notifications that arrive late,
// background materializations finishing (or failing) at any point, failed
// log writes, failed opens of a new log and failed native checkpoints.
// clDriver checks the invariants at every step; at the end, once every
// notification arrived and a last checkpoint completed, nothing is
// pending and no local segment older than the confirmed
// materialization's cut is left.
func TestChangelogLedgerRandom(t *testing.T) {
	const seeds, steps = 400, 80
	for seed := range seeds {
		if msg, trace := clRandomRun(uint64(seed), steps); msg != "" {
			t.Fatalf("seed %d: %s\ntrace:\n%s", seed, msg, trace)
		}
	}
}

func clRandomRun(seed uint64, steps int) (string, string) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ratio := []float64{0, 0.5, 2}[rng.IntN(3)]
	d := newClDriver(ChangelogOptions{Interval: int64(1 + rng.IntN(4)), LogRatio: ratio})
	var trace strings.Builder
	fail := ""
	d.errorf = func(format string, args ...any) {
		if fail == "" {
			fail = fmt.Sprintf(format, args...)
		}
	}
	log := func(what string, acts []ChangelogAction) {
		fmt.Fprintf(&trace, "%s\n", what)
		for _, a := range acts {
			fmt.Fprintf(&trace, "  %s\n", a)
		}
		fmt.Fprintf(&trace, "  => %s\n", d.l)
	}

	// The database's live files: a flush adds one, a compaction replaces
	// some; a native checkpoint holds those live at its barrier.
	var live []string
	fileNo := 0
	newFile := func() string { fileNo++; return fmt.Sprintf("%06d.sst", fileNo) }
	filesAt := map[int64][]string{} // checkpoint -> the files of a materialization taken at it
	var (
		next          int64 = 1
		now           int64
		taken         []int64 // snapshot taken, asynchronous part under way
		acked         []int64 // uploaded and acknowledged, not completed or aborted
		lastCompleted int64
		notes         []ChangelogEvent // notifications not yet delivered
		running       int64            // background materialization under way
	)
	remove := func(ids []int64, id int64) []int64 {
		return slices.DeleteFunc(ids, func(x int64) bool { return x == id })
	}
	snapshot := func() {
		id := next
		next++
		now++
		live = append(live, newFile()) // the write-back cache and memtable flushed
		if rng.IntN(4) == 0 && len(live) > 2 {
			live = append(live[2:], newFile()) // a compaction
		}
		var acts []ChangelogAction
		switch {
		case d.open < 0:
			acts = d.cutNoLog(id)
		case rng.IntN(12) == 0:
			acts = d.cutFailed(id)
		default:
			size := int64(rng.IntN(50))
			if rng.IntN(5) == 0 {
				size = 0
			}
			acts = d.cutClosed(id, size)
		}
		log(fmt.Sprintf("cut %d (open now %d)", id, d.open), acts)
		for _, a := range acts {
			if _, ok := a.(OpenLog); ok && rng.IntN(15) == 0 {
				// The new log cannot be opened: the checkpoint declines;
				// the next cut opens one.
				d.open = -1
				fmt.Fprintf(&trace, "  open fails: checkpoint %d declines\n", id)
				notes = append(notes, CheckpointAborted{ID: id})
				return
			}
		}
		acts = d.snapshot(id, "s", now)
		log(fmt.Sprintf("snapshot %d", id), acts)
		filesAt[id] = append(slices.Clone(live), "MANIFEST")
		for _, a := range acts {
			m, ok := a.(Materialize)
			if !ok {
				continue
			}
			if rng.IntN(20) == 0 {
				acts := d.apply(MaterializationFailed{Seq: m.Seq})
				log(fmt.Sprintf("materialization %d cannot be taken", m.Seq), acts)
				if !m.Background {
					notes = append(notes, CheckpointAborted{ID: id})
					return
				}
				continue
			}
			if m.Background {
				running = m.Seq
			}
		}
		taken = append(taken, id)
	}
	upload := func() {
		id := taken[rng.IntN(len(taken))]
		taken = remove(taken, id)
		if rng.IntN(15) == 0 {
			log(fmt.Sprintf("upload %d fails", id), d.apply(SnapshotReleased{ID: id}))
			notes = append(notes, CheckpointAborted{ID: id})
			return
		}
		log(fmt.Sprintf("uploaded %d", id), d.uploaded(id, filesAt[id]))
		log(fmt.Sprintf("released %d", id), d.apply(SnapshotReleased{ID: id}))
		if id > lastCompleted {
			acked = append(acked, id)
		}
	}
	complete := func(latest bool) {
		id := acked[rng.IntN(len(acked))]
		if latest {
			id = slices.Max(acked)
		}
		lastCompleted = id
		acked = slices.DeleteFunc(acked, func(x int64) bool { return x <= id })
		notes = append(notes, CheckpointComplete{ID: id})
	}
	abort := func() {
		id := acked[rng.IntN(len(acked))]
		acked = remove(acked, id)
		notes = append(notes, CheckpointAborted{ID: id})
	}
	deliver := func() {
		e := notes[0]
		notes = notes[1:]
		log(fmt.Sprintf("notify %#v", e), d.apply(e))
	}
	materialized := func() {
		seq := running
		running = 0
		if rng.IntN(8) == 0 {
			log(fmt.Sprintf("materialization %d fails", seq), d.apply(MaterializationFailed{Seq: seq}))
			return
		}
		files := filesAt[d.bgAt[seq]]
		log(fmt.Sprintf("materialization %d ready", seq), d.ready(seq, files))
	}

	for range steps {
		if fail != "" {
			break
		}
		switch r := rng.IntN(100); {
		case r < 30:
			snapshot()
		case r < 55 && len(taken) > 0:
			upload()
		case r < 70 && len(acked) > 0:
			complete(false)
		case r < 75 && len(acked) > 0:
			abort()
		case r < 90 && len(notes) > 0:
			deliver()
		case running != 0:
			materialized()
		}
	}
	// Quiesce: every upload ends, every notification arrives, and a last
	// checkpoint completes.
	for fail == "" && (len(taken) > 0 || len(notes) > 0 || running != 0) {
		switch {
		case running != 0:
			materialized()
		case len(taken) > 0:
			upload()
		default:
			deliver()
		}
	}
	for range 3 {
		if fail != "" {
			break
		}
		snapshot()
		for fail == "" && len(taken) > 0 {
			upload()
		}
		if len(acked) > 0 {
			complete(true)
		}
		for fail == "" && len(notes) > 0 {
			deliver()
		}
		if running != 0 {
			materialized()
		}
	}
	if fail == "" {
		if n := d.l.Pending(); n != 0 {
			fail = fmt.Sprintf("%d checkpoints pending after every notification arrived", n)
		} else if c := d.l.confirmed; c != nil {
			for s := range d.local {
				if s < c.mat.Cut {
					fail = fmt.Sprintf("local segment %d left, older than the confirmed materialization's cut %d (local %v)",
						s, c.mat.Cut, slices.Sorted(maps.Keys(d.local)))
					break
				}
			}
		}
	}
	if fail == "" {
		log("close", d.apply(Closed{}))
	}
	return fail, trace.String()
}
