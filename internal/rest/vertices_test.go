package rest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// placedJob is a job of two vertices of parallelism 2 whose subtasks run
// on two TaskManagers: vertex 1's on tm-a and tm-b, vertex 2's both on
// tm-b, one of them finished; vertex 3 does not say where its subtasks run.
// Vertex 1's subtasks report watermarks (subtask 1 none yet), vertex 2's
// do not.
func placedJob() *resttest.JobManager {
	jm := resttest.NewJobManager()
	j := resttest.NewJob("placed", "Placed")
	j.SetClock(func() time.Time { return at(2 * time.Minute) })
	run := func(tm, ep string, start time.Duration, in int64) rest.SubtaskInfo {
		return rest.SubtaskInfo{Status: rest.TaskRunning, Attempt: 1, TaskManager: tm, Endpoint: ep, StartTime: at(start),
			Metrics: rest.IOMetrics{ReadRecords: in, WriteRecords: 2 * in, BytesUnknown: true}}
	}
	done := run("tm-b", "10.0.0.2:7000", 0, 5)
	done.Status, done.EndTime = rest.TaskFinished, at(90*time.Second)
	src0, src1 := run("tm-a", "10.0.0.1:7000", 10*time.Second, 10), run("tm-b", "10.0.0.2:7000", 20*time.Second, 20)
	src0.Watermarks, src0.InputWatermark, src0.OutputWatermark = true, 1_700_000_004_000, 1_700_000_000_000
	src1.Watermarks, src1.InputWatermark, src1.OutputWatermark = true, rest.NoWatermark, rest.NoWatermark
	j.SetVertices([]rest.VertexInfo{
		{ID: "1", Name: "Source: events", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskRunning, StartTime: t0,
			Subtasks: []rest.SubtaskInfo{src0, src1}},
		{ID: "2", Name: "count -> Sink: out", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskRunning, StartTime: t0,
			Subtasks: []rest.SubtaskInfo{run("tm-b", "10.0.0.2:7000", 30*time.Second, 1), done}},
		{ID: "3", Name: "unplaced", Parallelism: 1, MaxParallelism: 128, Status: rest.TaskScheduled},
	})
	jm.Add(j)
	return jm
}

func TestVertexSubtasks(t *testing.T) {
	s := startServer(t, placedJob(), rest.Options{})
	now := msAt(2 * time.Minute)
	tests := []struct {
		name, path string
		want       string // a JSON subset of the 200 answer
	}{
		{"subtasks on two TaskManagers", "/jobs/placed/vertices/1", T(`{"id":"1","name":"Source: events","parallelism":2,"maxParallelism":128,"now":%[2]d,
			"subtasks":[
			 {"subtask":0,"status":"RUNNING","attempt":1,"host":"10.0.0.1","endpoint":"10.0.0.1:7000","taskmanager-id":"tm-a",
			  "start-time":%[3]d,"end-time":-1,"duration":110000,"metrics":{"read-records":10,"write-records":20,"read-bytes-complete":false}},
			 {"subtask":1,"status":"RUNNING","attempt":1,"host":"10.0.0.2","endpoint":"10.0.0.2:7000","taskmanager-id":"tm-b"}]}`,
			now, msAt(10*time.Second))},
		{"versioned", "/v1/jobs/placed/vertices/2", `{"id":"2","subtasks":[{"taskmanager-id":"tm-b"},{"status":"FINISHED","end-time":` +
			T("%[2]d", msAt(90*time.Second)) + `,"duration":90000}]}`},
		{"not placed", "/jobs/placed/vertices/3", `{"subtasks":[{"subtask":0,"status":"SCHEDULED","host":"(unassigned)","endpoint":"(unassigned)","taskmanager-id":"(unassigned)","start-time":-1}]}`},
		{"by TaskManager", "/jobs/placed/vertices/1/taskmanagers", `{"id":"1","name":"Source: events","taskmanagers":[
			{"taskmanager-id":"tm-a","host":"10.0.0.1","endpoint":"10.0.0.1:7000","status":"RUNNING","subtasks":[0],
			 "status-counts":{"RUNNING":1,"FINISHED":0},"metrics":{"read-records":10}},
			{"taskmanager-id":"tm-b","subtasks":[1],"metrics":{"read-records":20}}]}`},
		{"one TaskManager, summed", "/jobs/placed/vertices/2/taskmanagers", T(`{"taskmanagers":[
			{"taskmanager-id":"tm-b","status":"RUNNING","subtasks":[0,1],"start-time":%[1]d,"end-time":-1,
			 "status-counts":{"RUNNING":1,"FINISHED":1},"metrics":{"read-records":6,"write-records":12}}]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, "GET", tt.path, "")
			if r.code != 200 {
				t.Fatalf("GET %s: %d %s", tt.path, r.code, r.body)
			}
			checkJSON(t, r.body, tt.want)
		})
	}
}

// TestVertexWatermarks: GET .../watermarks is Flink's list of metrics,
// each subtask's input watermark and weir's output watermark beside it,
// Long.MIN_VALUE before the first; a vertex whose job does not report its
// subtasks' watermarks has none listed.
func TestVertexWatermarks(t *testing.T) {
	s := startServer(t, placedJob(), rest.Options{})
	for _, tt := range []struct {
		path string
		want []rest.Metric
	}{
		{"/jobs/placed/vertices/1/watermarks", []rest.Metric{
			{ID: "0.currentInputWatermark", Value: "1700000004000"}, {ID: "0.currentOutputWatermark", Value: "1700000000000"},
			{ID: "1.currentInputWatermark", Value: "-9223372036854775808"}, {ID: "1.currentOutputWatermark", Value: "-9223372036854775808"}}},
		{"/v1/jobs/placed/vertices/2/watermarks", []rest.Metric{}},
		{"/jobs/placed/vertices/3/watermarks", []rest.Metric{}},
	} {
		r := s.do(t, "GET", tt.path, "")
		if r.code != 200 {
			t.Fatalf("GET %s: %d %s", tt.path, r.code, r.body)
		}
		if got := decode[[]rest.Metric](t, r); got == nil || !slices.Equal(got, tt.want) {
			t.Errorf("GET %s = %+v (%s), want %+v", tt.path, got, r.body, tt.want)
		}
	}
}

// TestVertexBadRequests: an unknown vertex, of a known or an unknown job,
// is 404 with a message naming the job's vertices.
func TestVertexBadRequests(t *testing.T) {
	s := startServer(t, placedJob(), rest.Options{})
	tests := []struct {
		name, method, path string
		code               int
		msg                string
	}{
		{"unknown vertex", "GET", "/jobs/placed/vertices/9", 404, `vertex "9" not found in job "placed": its vertices are 1, 2, 3 (see GET /jobs/placed)`},
		{"non-numeric vertex", "GET", "/jobs/placed/vertices/abc", 404, `vertex "abc" not found in job "placed": a vertex id is a number, one of 1, 2, 3`},
		{"negative vertex", "GET", "/jobs/placed/vertices/-1/taskmanagers", 404, `vertex "-1" not found in job "placed": its vertices are 1, 2, 3`},
		{"unknown vertex's taskmanagers", "GET", "/jobs/placed/vertices/abc/taskmanagers", 404, `a vertex id is a number`},
		{"unknown job", "GET", "/jobs/nope/vertices/1", 404, `job "nope" not found`},
		{"unknown job's taskmanagers", "GET", "/jobs/nope/vertices/1/taskmanagers", 404, `job "nope" not found`},
		{"unknown vertex's watermarks", "GET", "/jobs/placed/vertices/7/watermarks", 404, `vertex "7" not found in job "placed"`},
		{"unknown vertex subpath", "GET", "/jobs/placed/vertices/1/nope", 404, "no such path"},
		{"no vertex", "GET", "/jobs/placed/vertices/", 404, "no such path"},
		{"post", "POST", "/jobs/placed/vertices/1", 405, "method POST is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, tt.method, tt.path, "")
			if r.code != tt.code {
				t.Fatalf("%s %s: %d, want %d: %s", tt.method, tt.path, r.code, tt.code, r.body)
			}
			e := decode[rest.ErrorResponse](t, r)
			if len(e.Errors) != 1 || !strings.Contains(e.Errors[0], tt.msg) {
				t.Errorf("%s %s: %v, want %q", tt.method, tt.path, e.Errors, tt.msg)
			}
		})
	}
}
