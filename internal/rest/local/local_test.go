package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/runtime"
)

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		total, free int64
	}{
		{"linux", "MemTotal:       16384 kB\nMemFree:          100 kB\nMemAvailable:    8192 kB\n", 16384 << 10, 8192 << 10},
		{"no MemAvailable (old kernels)", "MemTotal: 4 kB\n", 4 << 10, 0},
		{"unreadable lines skipped", "garbage\nMemTotal:\nMemTotal: x kB\nMemTotal: 8 kB\n", 8 << 10, 0},
		{"no MemTotal", "MemAvailable: 8 kB\n", 0, 8 << 10},
		{"empty", "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total, free := parseMeminfo(strings.NewReader(tt.text))
			if total != tt.total || free != tt.free {
				t.Fatalf("parseMeminfo = %d, %d; want %d, %d", total, free, tt.total, tt.free)
			}
		})
	}
}

func TestMemoryInfo(t *testing.T) {
	total, free := MemoryInfo()
	if total <= 0 || free < 0 || free > total {
		t.Fatalf("MemoryInfo = %d total, %d free: want 0 < free <= total", total, free)
	}
}

func TestExceptionOf(t *testing.T) {
	at := time.Unix(100, 0)
	panicErr := &runtime.OperatorError{Operator: "map", Subtask: 0, Parallelism: 1, Err: &runtime.PanicError{Value: "x", Stack: "goroutine 1"}}
	opErr := &runtime.OperatorError{Operator: "count", Subtask: 1, Parallelism: 4, Err: fmt.Errorf("state: %w", fs.ErrNotExist)}
	tests := []struct {
		name string
		err  error
		want rest.ExceptionInfo
	}{
		{"plain", errors.New("boom"), rest.ExceptionInfo{Time: at, Name: "*errors.errorString", Message: "boom"}},
		{"an operator's, named by its innermost cause", opErr,
			rest.ExceptionInfo{Time: at, Task: "count (2/4)", Name: "*errors.errorString", Message: opErr.Error()}},
		{"a panic, with its stack", panicErr,
			rest.ExceptionInfo{Time: at, Task: "map (1/1)", Name: "panic", Message: panicErr.Error() + "\n\ngoroutine 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExceptionOf(tt.err, at)
			if got != tt.want {
				t.Fatalf("ExceptionOf = %+v\nwant          %+v", got, tt.want)
			}
		})
	}
}

// twoVertices is a source (parallelism 1) feeding a map (parallelism 3).
func twoVertices() *graph.JobGraph {
	return &graph.JobGraph{
		Vertices: []graph.Vertex{
			{ID: 0, Name: "source", Parallelism: 1},
			{ID: 1, Name: "map", Parallelism: 3},
		},
	}
}

func TestJobStatus(t *testing.T) {
	tests := []struct {
		name   string
		events func(j *Job)
		want   rest.JobStatus
		failed int // exceptions listed
	}{
		{"created", func(*Job) {}, rest.JobCreated, 0},
		{"running", func(j *Job) { j.Deployed(1, nil) }, rest.JobRunning, 0},
		{"restarting", func(j *Job) { j.Deployed(1, nil); j.Failed(errors.New("x"), true) }, rest.JobRestarting, 1},
		{"failing", func(j *Job) { j.Deployed(1, nil); j.Failed(errors.New("x"), false) }, rest.JobFailing, 1},
		{"finished", func(j *Job) { j.Deployed(1, nil); j.Ended(nil) }, rest.JobFinished, 0},
		{"cancelling", func(j *Job) { j.Deployed(1, nil); j.RequestCancel() }, rest.JobCancelling, 0},
		{"canceled", func(j *Job) { j.RequestCancel(); j.Ended(context.Canceled) }, rest.JobCanceled, 0},
		{"cancel after the end changes nothing", func(j *Job) { j.Ended(nil); j.RequestCancel() }, rest.JobFinished, 0},
		{"failed after an attempt's failure: listed once", func(j *Job) { j.Failed(errors.New("x"), false); j.Ended(errors.New("x")) }, rest.JobFailed, 1},
		{"failed outside an attempt: the job's own", func(j *Job) { j.Ended(errors.New("restore")) }, rest.JobFailed, 1},
		{"a deployment after the end stays ended", func(j *Job) { j.Ended(nil); j.Deployed(2, nil) }, rest.JobFinished, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJob("id", "name", twoVertices())
			tt.events(j)
			st, end := j.Status()
			if st != tt.want {
				t.Fatalf("status %s, want %s", st, tt.want)
			}
			if st.Terminal() == end.IsZero() {
				t.Fatalf("status %s with end time %v", st, end)
			}
			if n := len(j.Exceptions()); n != tt.failed {
				t.Fatalf("%d exceptions, want %d", n, tt.failed)
			}
		})
	}
}

func TestExceptionsBoundedNewestFirst(t *testing.T) {
	j := NewJob("id", "name", twoVertices())
	for i := range MaxExceptions + 5 {
		j.Failed(fmt.Errorf("failure %d", i), true)
	}
	ex := j.Exceptions()
	if len(ex) != MaxExceptions || ex[0].Message != fmt.Sprintf("failure %d", MaxExceptions+4) {
		t.Fatalf("%d exceptions, newest %q: want %d, newest first", len(ex), ex[0].Message, MaxExceptions)
	}
}

func TestStopSavepoint(t *testing.T) {
	j := NewJob("id", "name", twoVertices())
	j.StoppedWith("/sp/1", errors.New("failed"))
	if p := j.StopSavepoint(); p != "" {
		t.Fatalf("a failed stop recorded %q", p)
	}
	j.StoppedWith("/sp/2", nil)
	if p := j.StopSavepoint(); p != "/sp/2" {
		t.Fatalf("StopSavepoint = %q, want /sp/2", p)
	}
}

func TestVerticesAndTaskManager(t *testing.T) {
	running := NewJob("a", "a", twoVertices())
	running.Deployed(1, nil)
	ended := NewJob("b", "b", twoVertices())
	ended.Ended(context.Canceled)
	vs := ended.Vertices(128)
	if len(vs) != 2 || vs[1].Name != "map" || vs[1].Parallelism != 3 || vs[1].MaxParallelism != 128 {
		t.Fatalf("vertices %+v", vs)
	}
	for _, v := range vs {
		if v.Status != rest.TaskCanceled || v.EndTime.IsZero() {
			t.Fatalf("vertex %s of a cancelled job without figures: %s at %v, want CANCELED with the job's end", v.Name, v.Status, v.EndTime)
		}
	}
	if v := running.Vertices(128)[0]; v.Status != rest.TaskCreated {
		t.Fatalf("vertex of a running job without figures: %s, want CREATED", v.Status)
	}
	tm := TaskManager([]*Job{running, ended})
	if tm.Slots != 6 || tm.FreeSlots != 3 || tm.CPUCores <= 0 || tm.PhysicalMemory <= 0 {
		t.Fatalf("TaskManager = %+v: want 6 slots (3 per job), 3 free (the ended job's)", tm)
	}
	if tm := TaskManager(nil); tm.Slots != 1 || tm.FreeSlots != 1 {
		t.Fatalf("TaskManager without jobs = %d slots, %d free; want 1, 1", tm.Slots, tm.FreeSlots)
	}
}
