package watermark

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestSplits runs the scripts in testdata/splits: the strategies and the
// per-split watermarks of one source subtask. Each command's output is what
// the subtask sends (see Output.String), then its state: watermark, status,
// and each split's watermark. Regenerate with
// `go test ./internal/watermark -run TestSplits -rewrite`.
//
//	new strategy=(bounded delay=ms | monotonous | none | punctuated every=n) [idleness=ms]
//	add split=id
//	event split=id ts=(ms, ...)      one record each, in order
//	periodic now=ms
//	finish split=id
//	end-of-input
func TestSplits(t *testing.T) {
	datadriven.Walk(t, "testdata/splits", func(t *testing.T, path string) {
		var s *Splits
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			a := scriptArgs{t: t, td: td}
			if td.Cmd != "new" && s == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			var outs []Output
			switch td.Cmd {
			case "new":
				var err error
				s, err = NewSplits(a.strategy())
				if err != nil {
					s = nil
					return "error: " + err.Error()
				}
				return "ok"
			case "add":
				out, err := s.AddSplit(a.str("split"))
				if err != nil {
					return "error: " + err.Error()
				}
				outs = append(outs, out)
			case "event":
				id := a.str("split")
				for _, ts := range a.list("ts") {
					outs = append(outs, s.OnEvent(id, parseWatermark(t, ts)))
				}
			case "periodic":
				outs = append(outs, s.Periodic(a.int64("now")))
			case "finish":
				outs = append(outs, s.FinishSplit(a.str("split")))
			case "end-of-input":
				outs = append(outs, s.EndOfInput())
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var splits []string
			for _, id := range s.IDs() {
				st, _ := s.Split(id)
				splits = append(splits, id+"="+st.String())
			}
			return printOutputs(outs, s.Watermark(), s.Idle(), strings.Join(splits, " "))
		})
	})
}

// TestMerger runs the scripts in testdata/merger: the watermark of a task
// merged from its input channels. Each command's output is what the task
// sends, then its state: watermark, status, and each channel's state.
// Regenerate with `go test ./internal/watermark -run TestMerger -rewrite`.
//
//	new channels=n
//	watermark ch=n ts=(ms | min | max)
//	status ch=n (idle | active)
//	end ch=n
func TestMerger(t *testing.T) {
	datadriven.Walk(t, "testdata/merger", func(t *testing.T, path string) {
		var m *Merger
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			a := scriptArgs{t: t, td: td}
			if td.Cmd != "new" && m == nil {
				t.Fatalf("%s: run `new` first", td.Pos)
			}
			var out Output
			switch td.Cmd {
			case "new":
				var err error
				m, err = NewMerger(int(a.int64("channels")))
				if err != nil {
					m = nil
					return "error: " + err.Error()
				}
				return "ok"
			case "watermark":
				out = m.OnWatermark(int(a.int64("ch")), parseWatermark(t, a.str("ts")))
			case "status":
				switch {
				case td.HasArg("idle"):
					out = m.OnStatus(int(a.int64("ch")), Idle)
				case td.HasArg("active"):
					out = m.OnStatus(int(a.int64("ch")), Active)
				default:
					t.Fatalf("%s: status needs idle or active", td.Pos)
				}
			case "end":
				out = m.OnEndOfPartition(int(a.int64("ch")))
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			var chans []string
			for ch := range m.NumChannels() {
				chans = append(chans, fmt.Sprintf("%d=%s", ch, m.Channel(ch)))
			}
			return printOutputs([]Output{out}, m.Watermark(), m.Idle(), strings.Join(chans, " "))
		})
	})
}

// printOutputs prints what was sent, one item a line, then the state line.
func printOutputs(outs []Output, wm int64, idle bool, inputs string) string {
	var b strings.Builder
	for _, out := range outs {
		if !out.Empty() {
			b.WriteString(out.String())
			b.WriteString("\n")
		}
	}
	status := Active
	if idle {
		status = Idle
	}
	if inputs == "" {
		inputs = "-"
	}
	fmt.Fprintf(&b, "state: %s %s | %s", FormatWatermark(wm), status, inputs)
	return b.String()
}

// scriptArgs reads a datadriven command's key=value arguments.
type scriptArgs struct {
	t  *testing.T
	td *datadriven.TestData
}

func (a scriptArgs) str(key string) string {
	arg, ok := a.td.Arg(key)
	if !ok {
		a.t.Fatalf("%s: missing %s=", a.td.Pos, key)
	}
	return strings.Join(arg.Vals, ",")
}

func (a scriptArgs) list(key string) []string {
	arg, ok := a.td.Arg(key)
	if !ok {
		a.t.Fatalf("%s: missing %s=", a.td.Pos, key)
	}
	return arg.Vals
}

func (a scriptArgs) int64(key string) int64 {
	n, err := strconv.ParseInt(a.str(key), 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return n
}

func (a scriptArgs) strategy() Strategy {
	var s Strategy
	switch name := a.str("strategy"); name {
	case "bounded":
		s = BoundedOutOfOrderness(a.int64("delay"))
	case "monotonous":
		s = Monotonous()
	case "none":
		s = NoWatermarks()
	case "punctuated":
		every := a.int64("every")
		s = ForGenerator(func() Generator { return &punctuated{every: every} })
	case "zero":
	default:
		a.t.Fatalf("%s: unknown strategy %q", a.td.Pos, name)
	}
	if a.td.HasArg("idleness") {
		s = s.WithIdleness(a.int64("idleness"))
	}
	return s
}

func parseWatermark(t *testing.T, s string) int64 {
	switch s {
	case "min":
		return MinWatermark
	case "max":
		return MaxWatermark
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad watermark %q: %v", s, err)
	}
	return n
}

// punctuated is a custom generator for the scripts: a record whose timestamp
// is a multiple of every is a marker that carries the watermark ts-1, and
// one at MaxWatermark ends the split's event time; it emits nothing
// periodically.
type punctuated struct{ every int64 }

var _ Generator = (*punctuated)(nil)

func (g *punctuated) OnEvent(ts int64) (int64, bool) {
	if ts == MaxWatermark {
		return MaxWatermark, true
	}
	if ts != MinWatermark && ts%g.every == 0 {
		return ts - 1, true
	}
	return 0, false
}

func (g *punctuated) OnPeriodic() (int64, bool) { return 0, false }
