package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// TestBrowserSubtaskPlacement: the job view shows the TaskManager and the
// endpoint of each subtask (GET /jobs/{id}/vertices/{vid}), and says
// "(unassigned)" of a subtask not placed.
func TestBrowserSubtaskPlacement(t *testing.T) {
	b := newBrowser(t, 60*time.Second)
	jm := resttest.NewJobManager()
	job := resttest.NewJob("counts", "counts")
	start := time.Now().Add(-time.Minute)
	on := func(tm, ep string) rest.SubtaskInfo {
		return rest.SubtaskInfo{Status: rest.TaskRunning, Attempt: 1, TaskManager: tm, Endpoint: ep, StartTime: start}
	}
	job.SetVertices([]rest.VertexInfo{
		{ID: "0", Name: "Source: events", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskRunning, StartTime: start,
			Subtasks: []rest.SubtaskInfo{on("tm-a", "127.0.0.1:7001"), on("tm-b", "127.0.0.1:7002")}},
		{ID: "1", Name: "count -> Sink: out", Parallelism: 2, MaxParallelism: 128, Status: rest.TaskScheduled, StartTime: start,
			Inputs:   []rest.VertexInput{{Source: "0", ShipStrategy: "HASH"}},
			Subtasks: []rest.SubtaskInfo{on("tm-b", "127.0.0.1:7002"), {Status: rest.TaskScheduled, Attempt: 1}}},
	})
	jm.Add(job)
	srv, err := rest.New(jm, rest.Options{RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, srv)
	b.do(t, "open the job", chromedp.Navigate(url+"/#/jobs/counts"))
	row := func(v, s, tm string) string {
		return `document.querySelector('#subtasks-body tr[data-vertex-id="` + v + `"][data-subtask="` + s + `"][data-taskmanager-id="` + tm + `"]')`
	}
	b.waitFor(t, "subtask 0 of the source is on tm-a", row("0", "0", "tm-a")+`?.textContent.includes("127.0.0.1:7001")`)
	b.waitFor(t, "subtask 1 of the source is on tm-b", row("0", "1", "tm-b")+`?.textContent.includes("127.0.0.1:7002")`)
	b.waitFor(t, "subtask 0 of the count is on tm-b", row("1", "0", "tm-b")+` !== null`)
	b.waitFor(t, "subtask 1 of the count is not placed", row("1", "1", "(unassigned)")+`?.textContent.includes("SCHEDULED")`)
	if got := evaluate[string](t, b, row("0", "1", "tm-b")+`.textContent`); !contains(got, "2/2", "RUNNING", "tm-b", "127.0.0.1:7002") {
		t.Errorf("the source's second subtask shows %q", got)
	}
	if n := evaluate[int](t, b, `document.querySelectorAll("#subtasks-body tr").length`); n != 4 {
		t.Errorf("%d subtask rows, want 4", n)
	}
	b.checkNoPageErrors(t)
}
