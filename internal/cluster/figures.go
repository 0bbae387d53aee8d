package cluster

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/metrics"
)

// ErrBadFigures marks a TaskManager's report of subtask figures that
// Figures refuses because it is malformed (not because it is stale).
var ErrBadFigures = errors.New("bad subtask figures")

// SubtaskFigures are one subtask's figures as its TaskManager last
// reported them (metrics.TaskSnapshot, pb.SubtaskMetrics), counted from
// the start of its attempt.
type SubtaskFigures struct {
	RecordsIn, RecordsOut     int64
	BackPressured, Idle, Busy time.Duration
	// BackPressuredRatio is the recent share of time (0 to 1) spent
	// backpressured.
	BackPressuredRatio float64
	// Operators are the chain's operator names, head first;
	// OperatorRecordsIn and OperatorRecordsOut are indexed alike.
	Operators                             []string
	OperatorRecordsIn, OperatorRecordsOut []int64
	// InputWatermark is the watermark of the subtask's inputs (for a
	// source, the one its reader generated), OutputWatermark the last it
	// sent downstream, in epoch milliseconds: metrics.MinWatermark before
	// the first, the largest int64 at the end of input. Each only rises
	// within an attempt: the runtime stores one only when it advances
	// (watermark.Output.Advanced).
	InputWatermark, OutputWatermark int64
	// BytesIn and BytesOut are the payload bytes the subtask's network
	// channels to and from other TaskManagers received and sent; a channel
	// to a subtask on the same TaskManager moves Go values and no bytes.
	BytesIn, BytesOut int64
}

// noFigures are the figures of a subtask that has not reported: every
// counter 0, no watermark.
var noFigures = SubtaskFigures{InputWatermark: metrics.MinWatermark, OutputWatermark: metrics.MinWatermark}

// Figures is the JobManager's store of one job's subtask figures, as the
// TaskManagers report them on their task streams (Flink's MetricStore,
// which its MetricFetcher fills from the TaskManagers). It is a pure
// core: reports in, figures out, no clock and no I/O; the caller
// serializes the calls (jobRun.mu). The zero Figures has no attempt
// placed and refuses every report.
//
// It holds the figures of one attempt, the latest placed: Placed forgets
// those of the previous attempt, and every subtask of the new one reads 0
// until its TaskManager reports (as Flink's REST shows the current
// execution attempt's metrics, and a restarted task counts from 0).
// Between an attempt's failure and the placement of the next, its
// subtasks keep the figures they last reported, the final ones of
// subtasks whose TaskManager sent them before the attempt ended: they
// never go backwards within the attempt shown. A report of another
// attempt, of a task that is not a subtask of the attempt's plan, or
// whose counters are negative, or whose counters or watermarks are lower
// than those held, is refused (a TaskManager sends each subtask's figures
// in order, so only a bug or a stale message can be lower).
type Figures struct {
	placed      bool
	attempt     int
	parallelism map[int]int // vertex id → its subtasks in the attempt
	subtasks    map[string]SubtaskFigures
}

// Placed starts attempt, whose plan gives each vertex id its parallelism:
// the previous attempt's figures are forgotten.
func (f *Figures) Placed(attempt int, parallelism map[int]int) {
	f.placed, f.attempt = true, attempt
	f.parallelism = make(map[int]int, len(parallelism))
	for v, n := range parallelism {
		f.parallelism[v] = n
	}
	f.subtasks = map[string]SubtaskFigures{}
}

// Attempt is the attempt whose figures are held; false before the first
// Placed.
func (f *Figures) Attempt() (int, bool) { return f.attempt, f.placed }

// Report takes the figures of task ("<vertex>-<subtask>") in attempt.
// A stale report (another attempt) is refused with an error that does
// not wrap ErrBadFigures; a malformed one with one that does.
func (f *Figures) Report(attempt int, task string, s SubtaskFigures) error {
	switch {
	case !f.placed:
		return fmt.Errorf("figures of task %s of attempt %d: no attempt is placed", task, attempt)
	case attempt != f.attempt:
		return fmt.Errorf("figures of task %s of attempt %d: the current attempt is %d", task, attempt, f.attempt)
	}
	v, sub, err := parseTask(task)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadFigures, err)
	}
	n, ok := f.parallelism[v]
	switch {
	case !ok:
		return fmt.Errorf("%w: task %s: attempt %d has no vertex %d", ErrBadFigures, task, attempt, v)
	case sub >= n:
		return fmt.Errorf("%w: task %s: vertex %d has %d subtasks in attempt %d", ErrBadFigures, task, v, n, attempt)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("%w: task %s: %v", ErrBadFigures, task, err)
	}
	if old, ok := f.subtasks[task]; ok {
		if err := s.notBelow(old); err != nil {
			return fmt.Errorf("%w: task %s of attempt %d: %v", ErrBadFigures, task, attempt, err)
		}
	}
	f.subtasks[task] = s
	return nil
}

// Subtask returns the figures held for subtask sub of vertex v (counters
// 0 and no watermark when it has not reported in the attempt held).
func (f *Figures) Subtask(v, sub int) SubtaskFigures {
	if s, ok := f.subtasks[strconv.Itoa(v)+"-"+strconv.Itoa(sub)]; ok {
		return s
	}
	return noFigures
}

// parseTask splits a task id "<vertex>-<subtask>".
func parseTask(task string) (v, sub int, err error) {
	vs, ss, ok := strings.Cut(task, "-")
	if ok {
		v, err = strconv.Atoi(vs)
	}
	if ok && err == nil {
		sub, err = strconv.Atoi(ss)
	}
	if !ok || err != nil || v < 0 || sub < 0 {
		return 0, 0, fmt.Errorf("task %q is not named \"<vertex>-<subtask>\"", task)
	}
	return v, sub, nil
}

// check refuses negative counters and operator lists of unequal lengths.
func (s SubtaskFigures) check() error {
	if s.RecordsIn < 0 || s.RecordsOut < 0 || s.BackPressured < 0 || s.Idle < 0 || s.Busy < 0 {
		return fmt.Errorf("negative counters (records in %d, out %d, backpressured %v, idle %v, busy %v)",
			s.RecordsIn, s.RecordsOut, s.BackPressured, s.Idle, s.Busy)
	}
	if s.BytesIn < 0 || s.BytesOut < 0 {
		return fmt.Errorf("negative bytes (in %d, out %d)", s.BytesIn, s.BytesOut)
	}
	if !(s.BackPressuredRatio >= 0 && s.BackPressuredRatio <= 1) { // also NaN
		return fmt.Errorf("backpressured ratio %v is not in [0, 1]", s.BackPressuredRatio)
	}
	if len(s.OperatorRecordsIn) != len(s.Operators) || len(s.OperatorRecordsOut) != len(s.Operators) {
		return fmt.Errorf("%d operators with %d records-in and %d records-out counts", len(s.Operators), len(s.OperatorRecordsIn), len(s.OperatorRecordsOut))
	}
	for i := range s.Operators {
		if s.OperatorRecordsIn[i] < 0 || s.OperatorRecordsOut[i] < 0 {
			return fmt.Errorf("operator %q: negative counts (in %d, out %d)", s.Operators[i], s.OperatorRecordsIn[i], s.OperatorRecordsOut[i])
		}
	}
	return nil
}

// notBelow refuses figures of one attempt whose counters or watermarks
// went backwards.
func (s SubtaskFigures) notBelow(old SubtaskFigures) error {
	switch {
	case s.RecordsIn < old.RecordsIn || s.RecordsOut < old.RecordsOut:
		return fmt.Errorf("records went backwards (in %d after %d, out %d after %d)", s.RecordsIn, old.RecordsIn, s.RecordsOut, old.RecordsOut)
	case s.BytesIn < old.BytesIn || s.BytesOut < old.BytesOut:
		return fmt.Errorf("bytes went backwards (in %d after %d, out %d after %d)", s.BytesIn, old.BytesIn, s.BytesOut, old.BytesOut)
	case s.InputWatermark < old.InputWatermark:
		return fmt.Errorf("the input watermark went backwards (%s after %s)", watermarkString(s.InputWatermark), watermarkString(old.InputWatermark))
	case s.OutputWatermark < old.OutputWatermark:
		return fmt.Errorf("the output watermark went backwards (%s after %s)", watermarkString(s.OutputWatermark), watermarkString(old.OutputWatermark))
	}
	return nil
}

// watermarkString is a watermark in a message: "none" before the first,
// "end" at the end of input, else its milliseconds.
func watermarkString(wm int64) string {
	switch wm {
	case metrics.MinWatermark:
		return "none"
	case math.MaxInt64:
		return "end"
	}
	return strconv.FormatInt(wm, 10)
}
