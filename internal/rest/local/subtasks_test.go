package local

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/rest"
)

// TestVertexSubtasksOnTheEmbeddedTaskManager: in local mode every subtask
// runs on the one embedded TaskManager, with its own status, times,
// records and watermarks (none before the first), in the attempt of the
// job's current tasks.
func TestVertexSubtasksOnTheEmbeddedTaskManager(t *testing.T) {
	j := NewJob("a", "a", twoVertices())
	start := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	var tasks []*metrics.Task
	src := metrics.NewTask("0-0", "0", "source", 0, 1, []string{"source"})
	src.Start(start)
	src.SetStatus(metrics.Finished, start.Add(time.Second))
	src.RecordsOut.Add(7)
	src.InputWatermark.Store(1_700_000_004_000)
	src.OutputWatermark.Store(1_700_000_000_000)
	tasks = append(tasks, src)
	for s := range 3 {
		m := metrics.NewTask("1-"+string(rune('0'+s)), "1", "map", s, 3, []string{"map"})
		m.Start(start)
		m.SetStatus(metrics.Running, start)
		m.RecordsIn.Add(int64(s))
		tasks = append(tasks, m)
	}
	j.Metrics().SetTasks(2, tasks)
	vs := j.Vertices(128)
	if len(vs) != 2 || len(vs[0].Subtasks) != 1 || len(vs[1].Subtasks) != 3 {
		t.Fatalf("vertices %+v: want 1 and 3 subtasks", vs)
	}
	got := vs[0].Subtasks[0]
	got.StartTime, got.EndTime = got.StartTime.UTC(), got.EndTime.UTC()
	if want := (rest.SubtaskInfo{Status: rest.TaskFinished, Attempt: 2, TaskManager: "local", Endpoint: "localhost",
		StartTime: start, EndTime: start.Add(time.Second), Metrics: rest.IOMetrics{WriteRecords: 7, BusyTime: time.Second, BytesUnknown: true},
		Watermarks: true, InputWatermark: 1_700_000_004_000, OutputWatermark: 1_700_000_000_000}); got != want {
		t.Errorf("source subtask %+v\nwant %+v", got, want)
	}
	for s, st := range vs[1].Subtasks {
		if st.Status != rest.TaskRunning || st.TaskManager != TaskManagerID || st.Attempt != 2 || st.Metrics.ReadRecords != int64(s) ||
			!st.Watermarks || st.InputWatermark != rest.NoWatermark || st.OutputWatermark != rest.NoWatermark {
			t.Errorf("map subtask %d: %+v", s, st)
		}
	}
}
