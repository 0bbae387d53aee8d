package cli

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/weirstream/weir/internal/rest"
)

// TestRunRESTSubtasksLocal: weir run in local mode serves where each
// subtask runs: all on the embedded TaskManager "local", each with its
// status and attempt (GET /jobs/wordcount/vertices/{vid}).
func TestRunRESTSubtasksLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := startWordCount(t, "--repeat-rate", "500", "--parallelism", "2", "--output", dir+"/out", "--rest-address", "127.0.0.1:0")
	waitRunning(t, w)
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(w.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var d rest.JobDetailsInfo
	get("/jobs/wordcount", &d)
	if len(d.Vertices) == 0 {
		t.Fatal("no vertices")
	}
	for _, v := range d.Vertices {
		var vd rest.JobVertexDetailsInfo
		get("/jobs/wordcount/vertices/"+v.ID, &vd)
		if len(vd.Subtasks) != v.Parallelism {
			t.Errorf("vertex %s: %d subtasks, parallelism %d", v.ID, len(vd.Subtasks), v.Parallelism)
		}
		for i, s := range vd.Subtasks {
			if s.Subtask != i || s.TaskManagerID != "local" || s.Host != "localhost" || s.Status != rest.TaskRunning || s.StartTime <= 0 {
				t.Errorf("vertex %s subtask %d: %+v, want RUNNING on the embedded TaskManager", v.ID, i, s)
			}
		}
		var tms rest.JobVertexTaskManagersInfo
		get("/jobs/wordcount/vertices/"+v.ID+"/taskmanagers", &tms)
		if len(tms.TaskManagers) != 1 || tms.TaskManagers[0].TaskManagerID != "local" || len(tms.TaskManagers[0].Subtasks) != v.Parallelism {
			t.Errorf("vertex %s by TaskManager: %+v", v.ID, tms.TaskManagers)
		}
	}
}
