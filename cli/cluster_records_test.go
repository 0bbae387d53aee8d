package cli

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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
	id := submitDetached(t, append(wordCountArgs(input, filepath.Join(dir, "out"), filepath.Join(dir, "ck")), "--jobmanager", c.rpc)...)
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
	id := submitDetached(t, "run", "wordcount", "--repeat-rate", "2000", "--output", filepath.Join(dir, "out"),
		"--parallelism", "2", "--checkpoint-interval", "200ms", "--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", rpc)
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

// TestClusterTaskFigures: the Nexmark job's q5 (event time: the watermark
// trails the bids' times by 4 s and jumps to the end at the end of input;
// two keyed shuffles) at parallelism 2 on a JobManager and two
// TaskManagers of one slot each, which serve their own /metrics
// (--metrics-address): subtask s of every vertex runs on one TaskManager,
// so each shuffle's channels between subtasks 0 and 1 cross TCP and those
// within one TaskManager stay in process. Once the job finished:
//   - the bytes the subtasks wrote equal, in sum, the bytes they read
//     (every TCP channel delivered what it sent, an in-process one counts
//     none), above 0: every source subtask wrote bytes, every subtask of
//     the first keyed vertex read some;
//   - each TaskManager's /metrics has Flink's task metrics
//     (weir_taskmanager_job_task_numRecordsIn, numRecordsOut, numBytesIn,
//     numBytesOut, the accumulated times, currentInputWatermark,
//     currentOutputWatermark) of exactly the subtasks REST places on it,
//     labelled with the job, the vertex, the subtask, the attempt and its
//     tm_id, whose counts are those REST reports;
//   - GET /jobs/{id}/vertices/{vid}/watermarks gives every subtask's
//     input and output watermark at the end of input, none at
//     NoWatermark, and so does each TaskManager's /metrics.
func TestClusterTaskFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	jm, rpc, url := startJobManager(t)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	metricsAddr := map[string]string{} // TaskManager id → its /metrics address
	for range 2 {
		addr := freeAddr(t)
		i := c.addTaskManager(nil, "--slots", "1", "--metrics-address", addr)
		metricsAddr[c.tmIDs[i]] = addr
	}
	c.waitRegistered(2)
	id := submitDetached(t, "run", "nexmark", "--query", "q5", "--events", "20000", "--parallelism", "2",
		"--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", rpc)
	if st := waitJob(t, c.client(""), id, time.Minute, func(s cluster.JobStatus) bool { return s.Terminal() }); st.State != "FINISHED" {
		t.Fatalf("job ended %+v\n%s", st, c.logs())
	}

	var job rest.JobDetailsInfo
	getJSON(t, url+"/jobs/"+id, &job)
	if len(job.Vertices) < 2 {
		t.Fatalf("GET /jobs/%s: %d vertices, want a source and keyed ones: %+v", id, len(job.Vertices), job.Vertices)
	}
	// Every subtask as REST reports it, and which TaskManager runs it.
	type subtask struct {
		vertex, name string
		index        int
		info         rest.SubtaskExecutionAttemptDetailsInfo
	}
	var subtasks []subtask
	var read, written int64
	for vi, v := range job.Vertices {
		var detail rest.JobVertexDetailsInfo
		getJSON(t, fmt.Sprintf("%s/jobs/%s/vertices/%s", url, id, v.ID), &detail)
		if len(detail.Subtasks) != 2 || detail.Subtasks[0].TaskManagerID == detail.Subtasks[1].TaskManagerID {
			t.Fatalf("vertex %s (%s): subtasks %+v, want 2 on two TaskManagers", v.ID, v.Name, detail.Subtasks)
		}
		var vread, vwritten int64
		for _, s := range detail.Subtasks {
			m := s.Metrics
			subtasks = append(subtasks, subtask{v.ID, v.Name, s.Subtask, s})
			if !m.ReadBytesComplete || !m.WriteBytesComplete || m.ReadBytes < 0 || m.WriteBytes < 0 {
				t.Errorf("vertex %s subtask %d: bytes %+v, want counted", v.ID, s.Subtask, m)
			}
			switch {
			case vi == 0 && m.WriteBytes == 0:
				t.Errorf("source subtask %d (%s) wrote no bytes: its channel to the other TaskManager's subtask crosses TCP (%+v)", s.Subtask, v.Name, m)
			case vi == 1 && m.ReadBytes == 0:
				t.Errorf("keyed subtask %d (%s) read no bytes: its channel from the other TaskManager's source crosses TCP (%+v)", s.Subtask, v.Name, m)
			}
			if (m.ReadBytes > 0 && m.ReadRecords == 0) || (m.WriteBytes > 0 && m.WriteRecords == 0) {
				t.Errorf("vertex %s subtask %d: bytes without records: %+v", v.ID, s.Subtask, m)
			}
			read += m.ReadBytes
			written += m.WriteBytes
			vread += m.ReadBytes
			vwritten += m.WriteBytes
		}
		if v.Metrics.ReadBytes != vread || v.Metrics.WriteBytes != vwritten {
			t.Errorf("vertex %s: read %d and wrote %d bytes, its subtasks %d and %d", v.ID, v.Metrics.ReadBytes, v.Metrics.WriteBytes, vread, vwritten)
		}
	}
	if read != written || read == 0 {
		t.Errorf("the subtasks wrote %d bytes and read %d: want the same, above 0", written, read)
	}
	t.Logf("%d vertices; %d bytes crossed between the TaskManagers", len(job.Vertices), written)

	// Each TaskManager's own /metrics: its subtasks' figures, as REST has
	// them.
	families := map[string]map[string]*dto.MetricFamily{}
	for tm, addr := range metricsAddr {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(httpGet(t, "http://"+addr+"/metrics")))
		if err != nil {
			t.Fatalf("TaskManager %s: parse /metrics: %v", tm, err)
		}
		families[tm] = fams
	}
	const task = "weir_taskmanager_job_task_"
	for tm, fams := range families {
		mine := 0
		for _, s := range subtasks {
			if s.info.TaskManagerID == tm {
				mine++
			}
		}
		for _, name := range []string{"numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut", "accumulatedBusyTimeMs", "currentInputWatermark", "currentOutputWatermark"} {
			if n := len(fams[task+name].GetMetric()); n != mine {
				t.Errorf("TaskManager %s: %d series of %s%s, want one per subtask it ran (%d)", tm, n, task, name, mine)
			}
		}
	}
	for _, s := range subtasks {
		fams := families[s.info.TaskManagerID]
		labels := map[string]string{"job_id": id, "job_name": "nexmark", "task_id": s.vertex, "task_name": s.name,
			"subtask_index": strconv.Itoa(s.index), "task_attempt_num": strconv.Itoa(s.info.Attempt), "tm_id": s.info.TaskManagerID}
		m := s.info.Metrics
		for _, tc := range []struct {
			name string
			want float64
		}{
			{"numRecordsIn", float64(m.ReadRecords)}, {"numRecordsOut", float64(m.WriteRecords)},
			{"numBytesIn", float64(m.ReadBytes)}, {"numBytesOut", float64(m.WriteBytes)},
			{"currentInputWatermark", math.MaxInt64}, {"currentOutputWatermark", math.MaxInt64},
		} {
			got, ok := seriesValue(fams[task+tc.name], labels)
			if !ok || got != tc.want {
				t.Errorf("TaskManager %s: %s%s%v = %v (found %v), want %v (REST's)", s.info.TaskManagerID, task, tc.name, labels, got, ok, tc.want)
			}
		}
	}

	// The watermarks in REST, as Flink serves them.
	for _, v := range job.Vertices {
		var wms []rest.Metric
		getJSON(t, fmt.Sprintf("%s/jobs/%s/vertices/%s/watermarks", url, id, v.ID), &wms)
		want := []rest.Metric{
			{ID: "0.currentInputWatermark", Value: "9223372036854775807"}, {ID: "0.currentOutputWatermark", Value: "9223372036854775807"},
			{ID: "1.currentInputWatermark", Value: "9223372036854775807"}, {ID: "1.currentOutputWatermark", Value: "9223372036854775807"},
		}
		if !slices.Equal(wms, want) {
			t.Errorf("GET .../vertices/%s/watermarks (%s) = %+v, want every subtask's at the end of input %+v", v.ID, v.Name, wms, want)
		}
	}
}

// seriesValue is the value of the one series of f whose labels are want
// (all of them, and no other), as a counter or a gauge.
func seriesValue(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if !maps.Equal(got, want) {
			continue
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// TestClusterWatermarksWhileRunning: the Nexmark job's q5 over a stream
// long enough to be running when read, on two TaskManagers that report
// every 50 ms: the keyed vertex's subtasks' input watermarks in GET
// .../watermarks are event times (neither NoWatermark nor the end of
// input) and advance from one read to a later one, and the TaskManager
// running subtask 0 exports an input watermark no older than the one
// REST showed before (the TaskManager's is the fresher figure).
func TestClusterWatermarksWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	jm, rpc, url := startJobManager(t)
	c := &testCluster{t: t, jm: jm, rpc: rpc, url: url}
	metricsAddr := map[string]string{}
	for range 2 {
		addr := freeAddr(t)
		i := c.addTaskManager(nil, "--slots", "1", "--metrics-address", addr, "--metrics-report-interval", "50ms")
		metricsAddr[c.tmIDs[i]] = addr
	}
	c.waitRegistered(2)
	id := submitDetached(t, "run", "nexmark", "--query", "q5", "--events", "1000000000", "--parallelism", "2",
		"--checkpoint-dir", filepath.Join(dir, "ck"), "--jobmanager", rpc)
	// inputWatermarks are the keyed vertex's (1) subtasks' input
	// watermarks in REST, while the job runs.
	inputWatermarks := func() (rest.JobStatus, []int64) {
		var job rest.JobDetailsInfo
		getJSON(t, url+"/jobs/"+id, &job)
		var wms []rest.Metric
		getJSON(t, url+"/jobs/"+id+"/vertices/1/watermarks", &wms)
		var in []int64
		for _, m := range wms {
			if strings.HasSuffix(m.ID, ".currentInputWatermark") {
				v, err := strconv.ParseInt(m.Value, 10, 64)
				if err != nil {
					t.Fatalf("watermark %+v: %v", m, err)
				}
				in = append(in, v)
			}
		}
		return job.State, in
	}
	wait := func(what string, cond func([]int64) bool) []int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, in := inputWatermarks()
			if st == rest.JobRunning && len(in) == 2 && cond(in) {
				return in
			}
			if st.Terminal() || time.Now().After(deadline) {
				t.Fatalf("%s: job %s, input watermarks %v\n%s", what, st, in, c.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventTime := func(wm int64) bool { return wm != rest.NoWatermark && wm != math.MaxInt64 }
	first := wait("event-time watermarks while running", func(in []int64) bool { return eventTime(in[0]) && eventTime(in[1]) })
	later := wait("later watermarks", func(in []int64) bool {
		return eventTime(in[0]) && eventTime(in[1]) && in[0] > first[0] && in[1] > first[1]
	})
	var detail rest.JobVertexDetailsInfo
	getJSON(t, url+"/jobs/"+id+"/vertices/1", &detail)
	tm := detail.Subtasks[0].TaskManagerID
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(httpGet(t, "http://"+metricsAddr[tm]+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range fams["weir_taskmanager_job_task_currentInputWatermark"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["job_id"] == id && labels["task_id"] == "1" && labels["subtask_index"] == "0" && labels["tm_id"] == tm {
			found = true
			if v := m.GetGauge().GetValue(); v < float64(later[0]) || v == math.MaxInt64 {
				t.Errorf("TaskManager %s: subtask 1-0's input watermark %v, older than the %d REST showed before", tm, v, later[0])
			}
		}
	}
	if !found {
		t.Errorf("TaskManager %s exports no input watermark of subtask 1-0", tm)
	}
	t.Logf("input watermarks %v, then %v", first, later)
	if err := c.client("").Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c.client(""), id, time.Minute, func(s cluster.JobStatus) bool { return s.Terminal() }); st.State != "CANCELED" {
		t.Errorf("job ended %+v", st)
	}
}

// submitDetached runs weir ARGS (a weir run command) --detached and
// returns the job id it prints.
func submitDetached(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := runWeir(t, append(args, "--detached")...)
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("weir run --detached: exit %d, stdout %q\nstderr %s", code, stdout, stderr)
	}
	return id
}
