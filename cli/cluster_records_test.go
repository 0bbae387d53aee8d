package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/rest"
)

// TestClusterRecordCounts: wordcount on a JobManager and two TaskManagers
// of one slot each. Once the job finished, the JobManager's REST API
// reports the records each subtask read and wrote, as the TaskManagers
// sent them (Flink's MetricFetcher): the source vertex (lines ->
// tokenize) wrote every word, its source operator every line; the keyed
// vertex (count -> out) read every word, each of its two subtasks a part
// (the source's one file is one split, which one subtask reads); the
// vertex's figures are its subtasks' sums, in GET /jobs/{id},
// /jobs/{id}/vertices/{vid} and .../taskmanagers alike.
func TestClusterRecordCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	const lines = 20_000
	input := wordsInput(t, dir, lines)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	for _, n := range wordTotals(string(text)) {
		words += n
	}
	c := startCluster(t, 2, 1)
	stdout, stderr, code := runWeir(t, append(wordCountArgs(input, filepath.Join(dir, "out"), filepath.Join(dir, "ck")), "--jobmanager", c.rpc, "--detached")...)
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("weir run --detached: exit %d, stdout %q\nstderr %s", code, stdout, stderr)
	}
	if st := waitJob(t, c.client(""), id, time.Minute, func(s cluster.JobStatus) bool { return s.Terminal() }); st.State != "FINISHED" {
		t.Fatalf("job ended %+v\n%s", st, c.logs())
	}

	var job rest.JobDetailsInfo
	getJSON(t, c.url+"/jobs/"+id, &job)
	if len(job.Vertices) != 2 {
		t.Fatalf("GET /jobs/%s: %d vertices, want 2: %+v", id, len(job.Vertices), job.Vertices)
	}
	src, keyed := job.Vertices[0], job.Vertices[1]
	if !strings.HasPrefix(src.Name, "lines") || !strings.HasPrefix(keyed.Name, "count") {
		t.Fatalf("vertices %q and %q, want the source's then the keyed one", src.Name, keyed.Name)
	}
	type want struct{ read, write int64 }
	for _, tc := range []struct {
		v    rest.JobVertexDetails
		want want
		ops  []rest.JobVertexOperator
	}{
		{src, want{0, int64(words)}, []rest.JobVertexOperator{{Name: "lines", WriteRecords: lines}, {Name: "tokenize", ReadRecords: lines, WriteRecords: int64(words)}}},
		{keyed, want{int64(words), 0}, []rest.JobVertexOperator{{Name: "count", ReadRecords: int64(words), WriteRecords: int64(words)}, {Name: "out", ReadRecords: int64(words)}}},
	} {
		v := tc.v
		if got := (want{v.Metrics.ReadRecords, v.Metrics.WriteRecords}); got != tc.want {
			t.Errorf("vertex %s (%s): read %d, wrote %d records; want %d and %d", v.ID, v.Name, got.read, got.write, tc.want.read, tc.want.write)
		}
		if !slices.Equal(v.Operators, tc.ops) {
			t.Errorf("vertex %s (%s): operators %+v, want %+v", v.ID, v.Name, v.Operators, tc.ops)
		}
		// The subtasks sum to the vertex; each of the keyed vertex did a
		// part.
		var detail rest.JobVertexDetailsInfo
		getJSON(t, fmt.Sprintf("%s/jobs/%s/vertices/%s", c.url, id, v.ID), &detail)
		var sum want
		tms := map[string]want{}
		for _, s := range detail.Subtasks {
			m := s.Metrics
			if (tc.want.read > 0 && m.ReadRecords == 0) || !m.ReadRecordsComplete || !m.WriteRecordsComplete {
				t.Errorf("vertex %s subtask %d on %s: %+v", v.ID, s.Subtask, s.TaskManagerID, m)
			}
			sum.read += m.ReadRecords
			sum.write += m.WriteRecords
			w := tms[s.TaskManagerID]
			tms[s.TaskManagerID] = want{w.read + m.ReadRecords, w.write + m.WriteRecords}
		}
		if len(detail.Subtasks) != 2 || sum != tc.want {
			t.Errorf("GET .../vertices/%s: %d subtasks summing to %+v, want 2 summing to %+v", v.ID, len(detail.Subtasks), sum, tc.want)
		}
		// Grouped by TaskManager: one subtask on each, the same figures.
		var byTM rest.JobVertexTaskManagersInfo
		getJSON(t, fmt.Sprintf("%s/jobs/%s/vertices/%s/taskmanagers", c.url, id, v.ID), &byTM)
		if len(byTM.TaskManagers) != 2 {
			t.Errorf("GET .../vertices/%s/taskmanagers: %d TaskManagers, want 2", v.ID, len(byTM.TaskManagers))
		}
		for _, g := range byTM.TaskManagers {
			if got := (want{g.Metrics.ReadRecords, g.Metrics.WriteRecords}); got != tms[g.TaskManagerID] || !slices.Contains(c.tmIDs, g.TaskManagerID) {
				t.Errorf("vertex %s on TaskManager %s: %+v, its subtasks' sum %+v", v.ID, g.TaskManagerID, got, tms[g.TaskManagerID])
			}
		}
	}
}

// TestClusterRecordCountsWhileRunning: wordcount reading its demo text
// again and again (--repeat-rate) on TaskManagers that report every 50 ms
// (--metrics-report-interval): while the job runs, the keyed vertex's
// read-records in GET /jobs/{id} are above 0 and grow from one read to a
// later one; after the cancel they are no lower than the last seen while
// it ran (the TaskManagers' final report).
func TestClusterRecordCountsWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	jm, rpc, url := startJobManager(t)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	for range 2 {
		c.addTaskManager(nil, "--slots", "1", "--metrics-report-interval", "50ms")
	}
	c.waitRegistered(2)
	stdout, stderr, code := runWeir(t, "run", "wordcount", "--repeat-rate", "2000", "--output", filepath.Join(dir, "out"),
		"--parallelism", "2", "--checkpoint-interval", "200ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", rpc, "--detached")
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("weir run --detached: exit %d, stdout %q\nstderr %s", code, stdout, stderr)
	}
	read := func() (rest.JobStatus, int64) {
		var job rest.JobDetailsInfo
		getJSON(t, url+"/jobs/"+id, &job)
		if len(job.Vertices) != 2 {
			t.Fatalf("GET /jobs/%s: %d vertices, want 2", id, len(job.Vertices))
		}
		return job.State, job.Vertices[1].Metrics.ReadRecords
	}
	waitRead := func(what string, cond func(rest.JobStatus, int64) bool) int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, n := read()
			if cond(st, n) {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: job %s, read-records %d after 30s\n%s", what, st, n, c.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := waitRead("records while running", func(st rest.JobStatus, n int64) bool { return st == rest.JobRunning && n > 0 })
	last := waitRead("more records while running", func(st rest.JobStatus, n int64) bool { return st == rest.JobRunning && n > first })
	if err := c.client("").Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c.client(""), id, time.Minute, func(s cluster.JobStatus) bool { return s.Terminal() }); st.State != "CANCELED" {
		t.Fatalf("job ended %+v", st)
	}
	if _, n := read(); n < last {
		t.Errorf("after the cancel the keyed vertex read %d records, fewer than the %d seen while it ran", n, last)
	}
}
