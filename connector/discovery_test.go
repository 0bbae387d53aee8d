package connector

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestAssignSplits(t *testing.T) {
	states := func(ids ...string) []SplitState {
		out := make([]SplitState, len(ids))
		for i, id := range ids {
			out[i] = SplitState{ID: id}
		}
		return out
	}
	byLength := func(id string, p int) int { return len(id) % p }
	tests := []struct {
		name   string
		splits []SplitState
		par    int
		owner  func(string, int) int
		want   string // the IDs of each subtask, "|" between subtasks
		err    string
	}{
		{name: "round robin", splits: states("a", "b", "c", "d", "e"), par: 2, want: "a,c,e|b,d"},
		{name: "by owner", splits: states("a", "bb", "ccc", "dddd"), par: 3, owner: byLength, want: "ccc|a,dddd|bb"},
		{name: "more subtasks than splits", splits: states("a"), par: 3, want: "a||"},
		{name: "duplicate", splits: states("a", "b", "a"), par: 2, err: `split "a" appears twice`},
		{name: "owner out of range", splits: states("a"), par: 2, owner: func(string, int) int { return 2 }, err: "subtask 2, outside [0, 2)"},
		{name: "negative owner", splits: states("a"), par: 2, owner: func(string, int) int { return -1 }, err: "subtask -1, outside"},
		{name: "no subtask", splits: states("a"), par: 0, err: "parallelism 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssignSplits(tc.splits, tc.par, tc.owner)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(got))
			for s, sps := range got {
				var ids []string
				for _, sp := range sps {
					ids = append(ids, sp.ID)
				}
				parts[s] = strings.Join(ids, ",")
			}
			if g := strings.Join(parts, "|"); g != tc.want {
				t.Fatalf("assigned %q, want %q", g, tc.want)
			}
		})
	}
}

func TestSplitClaims(t *testing.T) {
	owner := func(id string, p int) int { return int(id[0]-'a') % p }
	c := NewSplitClaims(ReaderContext{Subtask: 1, Parallelism: 2}, owner)
	if err := c.Assigned("b1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Assigned("b1"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("second Assigned: %v, want given twice", err)
	}
	if err := c.Assigned("a1"); err == nil || !strings.Contains(err.Error(), "owner rule gives it to subtask 0") {
		t.Fatalf("Assigned of another's split: %v", err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"b1", false}, {"a2", false}, {"d1", true}, {"d1", false}} {
		if got := c.Claim(tc.id); got != tc.want {
			t.Fatalf("Claim(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	c.Forget("d1")
	if !c.Claim("d1") {
		t.Fatal("a forgotten split is not new when found again")
	}
}

// The model below checks the discovery rule as the runtime and a reader
// apply it: splits appear in an external system at random moments, grow,
// and readers discover them at random moments; checkpoints are taken at
// random moments, and the job is restored from random checkpoints at
// random parallelisms (also in the middle of the history, which then goes
// on). Every checkpoint of the history is finally restored at a random
// parallelism and drained: the committed output plus what the restored
// run emits must be every record of every split exactly once.

// world is the external system: split name -> its records (so far).
type world map[string]int

type modelReader struct {
	claims *SplitClaims
	pos    map[string]int // next record of each held split
}

func newModelReader(s, par int, assigned []SplitState) (*modelReader, error) {
	r := &modelReader{claims: NewSplitClaims(ReaderContext{Subtask: s, Parallelism: par}, HashOwner), pos: map[string]int{}}
	for _, sp := range assigned {
		if err := r.claims.Assigned(sp.ID); err != nil {
			return nil, err
		}
		r.pos[sp.ID] = int(binary.BigEndian.Uint32(sp.Position))
	}
	return r, nil
}

// discover claims the world's new splits of this reader, from their start.
func (r *modelReader) discover(w world) {
	for _, id := range slices.Sorted(maps.Keys(w)) {
		if r.claims.Claim(id) {
			r.pos[id] = 0
		}
	}
}

// poll emits up to n available records of one held split.
func (r *modelReader) poll(w world, pick, n int, emit func(string)) {
	ids := slices.Sorted(maps.Keys(r.pos))
	if len(ids) == 0 {
		return
	}
	id := ids[pick%len(ids)]
	for ; n > 0 && r.pos[id] < w[id]; n-- {
		emit(fmt.Sprintf("%s#%d", id, r.pos[id]))
		r.pos[id]++
	}
}

func (r *modelReader) snapshot() []SplitState {
	var out []SplitState
	for _, id := range slices.Sorted(maps.Keys(r.pos)) {
		out = append(out, SplitState{ID: id, Position: binary.BigEndian.AppendUint32(nil, uint32(r.pos[id]))})
	}
	return out
}

type modelCheckpoint struct {
	splits    []SplitState // gathered from every subtask
	committed []string     // the output committed with it
}

type modelJob struct {
	readers []*modelReader
	output  []string // committed output of the restored checkpoint + emitted since
}

// deploy starts a job at par from a checkpoint (nil: the first start, with
// the world's splits as Source.Splits lists them).
func deploy(w world, par int, from *modelCheckpoint) (*modelJob, error) {
	var splits []SplitState
	j := &modelJob{}
	if from == nil {
		for _, id := range slices.Sorted(maps.Keys(w)) {
			splits = append(splits, SplitState{ID: id, Position: binary.BigEndian.AppendUint32(nil, 0)})
		}
	} else {
		splits = from.splits
		j.output = slices.Clone(from.committed)
	}
	dealt, err := AssignSplits(splits, par, HashOwner)
	if err != nil {
		return nil, err
	}
	for s := range par {
		r, err := newModelReader(s, par, dealt[s])
		if err != nil {
			return nil, err
		}
		j.readers = append(j.readers, r)
	}
	return j, nil
}

func (j *modelJob) checkpoint() *modelCheckpoint {
	c := &modelCheckpoint{committed: slices.Clone(j.output)}
	for _, r := range j.readers {
		c.splits = append(c.splits, r.snapshot()...)
	}
	return c
}

// drain discovers and reads until nothing is left.
func (j *modelJob) drain(w world) {
	for _, r := range j.readers {
		r.discover(w)
		for id := range r.pos {
			for ; r.pos[id] < w[id]; r.pos[id]++ {
				j.output = append(j.output, fmt.Sprintf("%s#%d", id, r.pos[id]))
			}
		}
	}
}

func checkExactlyOnce(t *rapid.T, w world, got []string, what string) {
	var want []string
	for id, n := range w {
		for i := range n {
			want = append(want, fmt.Sprintf("%s#%d", id, i))
		}
	}
	slices.Sort(want)
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(got, want) {
		var dup, lost []string
		seen := map[string]int{}
		for _, g := range got {
			seen[g]++
			if seen[g] == 2 {
				dup = append(dup, g)
			}
		}
		for _, x := range want {
			if seen[x] == 0 {
				lost = append(lost, x)
			}
		}
		t.Fatalf("%s: %d records, want %d; duplicated %v, lost %v", what, len(got), len(want), dup, lost)
	}
}

func TestDiscoveryExactlyOnceAcrossRescales(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := world{}
		nsplits := 0
		addSplit := func() {
			w[fmt.Sprintf("split-%d", nsplits)] = rapid.IntRange(0, 5).Draw(t, "initial records")
			nsplits++
		}
		for range rapid.IntRange(0, 3).Draw(t, "splits at start") {
			addSplit()
		}
		job, err := deploy(w, rapid.IntRange(1, 5).Draw(t, "parallelism"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var checkpoints []*modelCheckpoint
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0:
				addSplit()
			case 1, 2:
				if len(w) > 0 {
					ids := slices.Sorted(maps.Keys(w))
					w[ids[rapid.IntRange(0, len(ids)-1).Draw(t, "grow")]] += rapid.IntRange(1, 4).Draw(t, "records")
				}
			case 3:
				job.readers[rapid.IntRange(0, len(job.readers)-1).Draw(t, "discoverer")].discover(w)
			case 4, 5, 6:
				r := job.readers[rapid.IntRange(0, len(job.readers)-1).Draw(t, "poller")]
				r.poll(w, rapid.IntRange(0, 10).Draw(t, "split"), rapid.IntRange(1, 3).Draw(t, "n"), func(s string) { job.output = append(job.output, s) })
			case 7, 8:
				checkpoints = append(checkpoints, job.checkpoint())
			case 9:
				// A failure or a stop with a rescale: restore from any
				// checkpoint taken so far (or start over without one).
				var from *modelCheckpoint
				if len(checkpoints) > 0 {
					from = checkpoints[rapid.IntRange(0, len(checkpoints)-1).Draw(t, "restore")]
				}
				if job, err = deploy(w, rapid.IntRange(1, 5).Draw(t, "new parallelism"), from); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Splits and records may also appear while no job runs.
		if rapid.Bool().Draw(t, "added while stopped") {
			addSplit()
		}
		job.drain(w)
		checkExactlyOnce(t, w, job.output, "the running job")
		for i, c := range checkpoints {
			j, err := deploy(w, rapid.IntRange(1, 5).Draw(t, "restore parallelism"), c)
			if err != nil {
				t.Fatal(err)
			}
			j.drain(w)
			checkExactlyOnce(t, w, j.output, fmt.Sprintf("restored from checkpoint %d of %d at parallelism %d", i, len(checkpoints), len(j.readers)))
		}
	})
}

// TestRoundRobinRestoreIsRefused shows what the rule prevents: a restore
// that dealt splits round-robin, as for a fixed split set, would give a
// split to a reader whose discovery does not own it, while its owner finds
// it again as new. SplitClaims.Assigned refuses such a split.
func TestRoundRobinRestoreIsRefused(t *testing.T) {
	var splits []SplitState
	for i := range 8 {
		splits = append(splits, SplitState{ID: fmt.Sprintf("split-%d", i)})
	}
	dealt, err := AssignSplits(splits, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for s, sps := range dealt {
		c := NewSplitClaims(ReaderContext{Subtask: s, Parallelism: 3}, HashOwner)
		for _, sp := range sps {
			if c.Assigned(sp.ID) != nil {
				refused++
			}
		}
	}
	if refused == 0 {
		t.Fatal("round-robin dealing matched the owner rule for every split: the test shows nothing")
	}
}
