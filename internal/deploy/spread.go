package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// Slots is what one worker offers a job: its id, the address of its data
// plane, and how many task slots it has free.
type Slots struct {
	Worker, DataAddress string
	Free                int
}

// Spread places plan on workers with slot sharing as in Flink: a slot runs
// one subtask of each vertex (subtask s of every vertex shares slot s), so
// a job needs as many slots as its highest parallelism. The slots are taken
// round-robin over the workers sorted by id (the first slot of each worker,
// then the second of each, ...), so subtasks spread evenly over workers and
// the result depends only on the input. A worker whose slots are not used
// is left out of the placement.
//
// Too few free slots is an error saying how many are wanted and how many
// there are (a scheduler turns it into a wait with a timeout). A worker
// listed twice, without an id or data address, or with a negative number of
// slots is an error naming it.
func Spread(plan Plan, workers []Slots) (Placement, error) {
	need := 0
	for _, v := range plan.Vertices {
		if v.Parallelism < 1 {
			return Placement{}, fmt.Errorf("deploy: vertex %d (%s) of job %q has parallelism %d; want at least 1", v.ID, v.Name, plan.Job, v.Parallelism)
		}
		need = max(need, v.Parallelism)
	}
	ws := slices.Clone(workers)
	slices.SortFunc(ws, func(a, b Slots) int { return strings.Compare(a.Worker, b.Worker) })
	free := 0
	for i, w := range ws {
		switch {
		case w.Worker == "":
			return Placement{}, fmt.Errorf("deploy: a worker without an id (data address %q)", w.DataAddress)
		case i > 0 && ws[i-1].Worker == w.Worker:
			return Placement{}, fmt.Errorf("deploy: worker %q is listed twice", w.Worker)
		case w.DataAddress == "":
			return Placement{}, fmt.Errorf("deploy: worker %q has no data address", w.Worker)
		case w.Free < 0:
			return Placement{}, fmt.Errorf("deploy: worker %q has %d free slots; want 0 or more", w.Worker, w.Free)
		}
		free += w.Free
	}
	if free < need {
		return Placement{}, fmt.Errorf("deploy: job %q: waiting for %d slots, %d registered (one slot per subtask of its highest parallelism; %d workers)", plan.Job, need, free, len(ws))
	}
	// slots[k] is the worker of slot k: round-robin over the workers.
	slots := make([]string, 0, need)
	for round := 0; len(slots) < need; round++ {
		for _, w := range ws {
			if w.Free > round && len(slots) < need {
				slots = append(slots, w.Worker)
			}
		}
	}
	p := Placement{Workers: map[string]string{}, Subtasks: make([][]string, len(plan.Vertices))}
	for _, w := range ws {
		if slices.Contains(slots, w.Worker) {
			p.Workers[w.Worker] = w.DataAddress
		}
	}
	for i, v := range plan.Vertices {
		if v.ID != i {
			return Placement{}, fmt.Errorf("deploy: vertex %d (%s) of job %q has id %d; the plan's vertices must be in id order", i, v.Name, plan.Job, v.ID)
		}
		p.Subtasks[i] = slots[:v.Parallelism:v.Parallelism]
	}
	return p, nil
}
