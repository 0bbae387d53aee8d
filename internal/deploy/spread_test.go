package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestSpread runs the scripts of testdata/spread: each case lists the
// plan's vertices ("vertex NAME PARALLELISM [source]") and the workers'
// slots ("worker ID ADDRESS FREE"), and shows the placement or the error.
// Every placement printed also passes Check and puts subtask s of every
// vertex on the same worker (slot sharing).
func TestSpread(t *testing.T) {
	datadriven.RunTest(t, "testdata/spread", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "spread" {
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
		}
		plan := Plan{Job: "j"}
		var workers []Slots
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			switch {
			case f[0] == "vertex" && len(f) >= 3:
				par, err := strconv.Atoi(f[2])
				if err != nil {
					t.Fatalf("%s: %v", td.Pos, err)
				}
				plan.Vertices = append(plan.Vertices, Vertex{ID: len(plan.Vertices), Name: f[1], Parallelism: par, Source: len(f) > 3 && f[3] == "source"})
			case f[0] == "worker" && len(f) == 4:
				free, err := strconv.Atoi(f[3])
				if err != nil {
					t.Fatalf("%s: %v", td.Pos, err)
				}
				addr := f[2]
				if addr == "-" {
					addr = ""
				}
				id := f[1]
				if id == "-" {
					id = ""
				}
				workers = append(workers, Slots{Worker: id, DataAddress: addr, Free: free})
			default:
				t.Fatalf("%s: bad line %q", td.Pos, line)
			}
		}
		in := slices.Clone(workers)
		p, err := Spread(plan, workers)
		if !slices.Equal(in, workers) {
			t.Fatalf("%s: Spread changed its input", td.Pos)
		}
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		if err := p.Check(plan); err != nil {
			t.Fatalf("%s: the placement fails Check: %v", td.Pos, err)
		}
		var widest []string
		for _, row := range p.Subtasks {
			if len(row) > len(widest) {
				widest = row
			}
		}
		for v, row := range p.Subtasks {
			if !slices.Equal(row, widest[:len(row)]) {
				t.Fatalf("%s: vertex %d is placed on %v, the widest vertex on %v: slots are not shared", td.Pos, v, row, widest)
			}
		}
		// Deterministic: the same input in another order gives the same.
		rev := slices.Clone(workers)
		slices.Reverse(rev)
		if q, err := Spread(plan, rev); err != nil || fmt.Sprint(q) != fmt.Sprint(p) {
			t.Fatalf("%s: Spread of the workers in reverse order gives %v, %v", td.Pos, q, err)
		}
		var b strings.Builder
		for _, w := range slices.Sorted(maps.Keys(p.Workers)) {
			fmt.Fprintf(&b, "%s: %s\n", w, p.Workers[w])
		}
		for _, v := range plan.Vertices {
			fmt.Fprintf(&b, "%d %s: %s\n", v.ID, v.Name, strings.Join(p.Subtasks[v.ID], " "))
		}
		return b.String()
	})
}
