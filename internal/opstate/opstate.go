package opstate

import (
	"maps"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Redistribute returns subtask s's (of par) share of the
// operator state old, the snapshots of the old subtasks indexed by old
// subtask, as Flink's RoundRobinOperatorStateRepartitioner does:
//
//   - even split: with the same parallelism each subtask gets its own
//     elements; otherwise the elements of all old subtasks, in subtask
//     order, are cut into par contiguous chunks of nearly equal size, the
//     first len%par one element longer, and subtask s gets chunk s;
//   - union: every subtask gets the elements of all old subtasks, in
//     subtask order;
//   - broadcast: every subtask gets one copy, old subtask s%len(old)'s (or
//     the first old subtask's that has the state).
//
// Every state of old appears in the result, possibly empty, so that its
// mode survives a subtask that has no elements of it.
func Redistribute(old []checkpoint.SubtaskState, par, s int) ([]checkpoint.ListState, []checkpoint.BroadcastState) {
	type list struct {
		union bool
		per   [][][]byte // entries by old subtask
	}
	lists := map[string]*list{}
	bcast := map[string][][]checkpoint.MapEntry{}
	has := map[string][]bool{}
	for i, st := range old {
		for _, l := range st.Lists {
			e := lists[l.Name]
			if e == nil {
				e = &list{union: l.Union, per: make([][][]byte, len(old))}
				lists[l.Name] = e
			}
			e.per[i] = append(e.per[i], l.Entries...)
		}
		for _, b := range st.Broadcast {
			if bcast[b.Name] == nil {
				bcast[b.Name] = make([][]checkpoint.MapEntry, len(old))
				has[b.Name] = make([]bool, len(old))
			}
			bcast[b.Name][i] = b.Entries
			has[b.Name][i] = true
		}
	}
	var outL []checkpoint.ListState
	for _, name := range slices.Sorted(maps.Keys(lists)) {
		e := lists[name]
		ls := checkpoint.ListState{Name: name, Union: e.union}
		switch {
		case e.union:
			for _, p := range e.per {
				ls.Entries = append(ls.Entries, p...)
			}
		case len(old) == par:
			ls.Entries = e.per[s]
		default:
			var all [][]byte
			for _, p := range e.per {
				all = append(all, p...)
			}
			base, rem := len(all)/par, len(all)%par
			start := s*base + min(s, rem)
			n := base
			if s < rem {
				n++
			}
			ls.Entries = all[start : start+n : start+n]
		}
		outL = append(outL, ls)
	}
	var outB []checkpoint.BroadcastState
	for _, name := range slices.Sorted(maps.Keys(bcast)) {
		from := s % len(old)
		if !has[name][from] {
			from = slices.Index(has[name], true)
		}
		outB = append(outB, checkpoint.BroadcastState{Name: name, Entries: bcast[name][from]})
	}
	return outL, outB
}
