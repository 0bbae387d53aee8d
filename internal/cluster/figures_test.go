package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestFigures runs the scripts under testdata/figures: the JobManager's
// store of a job's subtask figures. Commands:
//
//	placed attempt=N vertices=V:P,...   attempt N placed, vertex V with P subtasks
//	report attempt=N task=T in=I out=O [ops=a:i:o,...] [ratio=R]
//	                                    a TaskManager's figures of task T
//
// report prints "ok", "stale: <error>" or "bad: <error>" (an error
// wrapping ErrBadFigures). Every command then prints the attempt held and
// each subtask's records in and out (and its operators', when it has
// some).
func TestFigures(t *testing.T) {
	datadriven.Walk(t, "testdata/figures", func(t *testing.T, path string) {
		var f Figures
		var plan map[int]int
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var b strings.Builder
			var attempt int
			td.ScanArgs(t, "attempt", &attempt)
			switch td.Cmd {
			case "placed":
				var vs string
				td.ScanArgs(t, "vertices", &vs)
				plan = map[int]int{}
				for _, p := range strings.Split(vs, ",") {
					v, n, _ := strings.Cut(p, ":")
					plan[atoi(t, v)] = atoi(t, n)
				}
				f.Placed(attempt, plan)
			case "report":
				var task string
				var in, out int64
				td.ScanArgs(t, "task", &task)
				td.ScanArgs(t, "in", &in)
				td.ScanArgs(t, "out", &out)
				s := SubtaskFigures{RecordsIn: in, RecordsOut: out}
				if td.HasArg("ops") {
					var ops string
					td.ScanArgs(t, "ops", &ops)
					for _, op := range strings.Split(ops, ",") {
						parts := strings.Split(op, ":")
						s.Operators = append(s.Operators, parts[0])
						if len(parts) > 1 {
							s.OperatorRecordsIn = append(s.OperatorRecordsIn, int64(atoi(t, parts[1])))
						}
						if len(parts) > 2 {
							s.OperatorRecordsOut = append(s.OperatorRecordsOut, int64(atoi(t, parts[2])))
						}
					}
				}
				if td.HasArg("ratio") {
					var r string
					td.ScanArgs(t, "ratio", &r)
					var err error
					if s.BackPressuredRatio, err = strconv.ParseFloat(r, 64); err != nil {
						t.Fatal(err)
					}
				}
				switch err := f.Report(attempt, task, s); {
				case err == nil:
					b.WriteString("ok\n")
				case errors.Is(err, ErrBadFigures):
					fmt.Fprintf(&b, "bad: %v\n", err)
				default:
					fmt.Fprintf(&b, "stale: %v\n", err)
				}
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			a, ok := f.Attempt()
			if !ok {
				b.WriteString("no attempt\n")
				return b.String()
			}
			fmt.Fprintf(&b, "attempt %d\n", a)
			for _, v := range slices.Sorted(maps.Keys(plan)) {
				for s := range plan[v] {
					fs := f.Subtask(v, s)
					fmt.Fprintf(&b, "  %d-%d in=%d out=%d", v, s, fs.RecordsIn, fs.RecordsOut)
					for i, op := range fs.Operators {
						fmt.Fprintf(&b, " %s:%d:%d", op, fs.OperatorRecordsIn[i], fs.OperatorRecordsOut[i])
					}
					b.WriteString("\n")
				}
			}
			return b.String()
		})
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
