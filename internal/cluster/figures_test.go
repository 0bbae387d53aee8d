package cluster

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/metrics"
)

// TestFigures runs the scripts under testdata/figures: the JobManager's
// store of a job's subtask figures. Commands:
//
//	placed attempt=N vertices=V:P,...   attempt N placed, vertex V with P subtasks
//	report attempt=N task=T in=I out=O [ops=a:i:o,...] [ratio=R]
//	       [wm=IN:OUT] [bytes=IN:OUT]
//	                                    a TaskManager's figures of task T;
//	                                    watermarks are milliseconds, "none"
//	                                    (the default) or "end"
//
// report prints "ok", "stale: <error>" or "bad: <error>" (an error
// wrapping ErrBadFigures). Every command then prints the attempt held and
// each subtask's records in and out (and its operators', when it has
// some; its watermarks and bytes, when it has any).
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
				s := SubtaskFigures{RecordsIn: in, RecordsOut: out, InputWatermark: metrics.MinWatermark, OutputWatermark: metrics.MinWatermark}
				if td.HasArg("wm") {
					var wm string
					td.ScanArgs(t, "wm", &wm)
					i, o, _ := strings.Cut(wm, ":")
					s.InputWatermark, s.OutputWatermark = parseWatermark(t, i), parseWatermark(t, o)
				}
				if td.HasArg("bytes") {
					var bs string
					td.ScanArgs(t, "bytes", &bs)
					i, o, _ := strings.Cut(bs, ":")
					s.BytesIn, s.BytesOut = int64(atoi(t, i)), int64(atoi(t, o))
				}
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
					if fs.InputWatermark != metrics.MinWatermark || fs.OutputWatermark != metrics.MinWatermark {
						fmt.Fprintf(&b, " wm=%s:%s", watermarkString(fs.InputWatermark), watermarkString(fs.OutputWatermark))
					}
					if fs.BytesIn != 0 || fs.BytesOut != 0 {
						fmt.Fprintf(&b, " bytes=%d:%d", fs.BytesIn, fs.BytesOut)
					}
					b.WriteString("\n")
				}
			}
			return b.String()
		})
	})
}

// parseWatermark reads a script's watermark: "none", "end" or
// milliseconds.
func parseWatermark(t *testing.T, s string) int64 {
	t.Helper()
	switch s {
	case "none":
		return metrics.MinWatermark
	case "end":
		return math.MaxInt64
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
