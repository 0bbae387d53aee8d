package weir_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/connectors/print"
	"github.com/weirstream/weir/internal/rest"
)

// restJob starts an unbounded keyed count (source -> parse, keyed reduce ->
// sink: two vertices), rate-limited so that it runs until cancelled, and a
// REST server for it on a free port. mutate adjusts the options.
func restJob(t *testing.T, id string, mutate func(*weir.Options), mapFn func(int64) int64) (*weir.JobClient, string) {
	t.Helper()
	opts := weir.Options{Parallelism: 2, JobID: id}
	if mutate != nil {
		mutate(&opts)
	}
	if mapFn == nil {
		mapFn = func(i int64) int64 { return i }
	}
	env := weir.NewEnvironment(opts)
	env.FromSource("numbers", datagen.Generator(-1, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: 20000, BatchSize: 100})).
		Map("parse", mapFn).
		KeyBy(func(i int64) int64 { return i % 10 }).
		Reduce("sum", func(a, b int64) int64 { return a + b }).
		SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
	ctx, cancel := context.WithCancel(context.Background())
	job, err := env.ExecuteAsync(ctx, "rest-"+id)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		job.Wait()
	})
	return job, serveREST(t, job)
}

// serveREST serves the REST API for jobs on a free loopback port and
// returns its base URL; the server stops at the end of the test. Savepoints
// may go under the temporary directory (where t.TempDir is).
func serveREST(t *testing.T, jobs ...*weir.JobClient) string {
	t.Helper()
	srv, err := weir.NewRESTServer(weir.RESTOptions{Address: "127.0.0.1:0", SavepointAllowedRoots: []string{os.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := srv.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	}
	return "http://" + srv.Addr().String()
}

func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json") // the server refuses state changes without it
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	code, b := call(t, "GET", url, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
	return v
}

// eventually polls cond every few milliseconds until it holds or 20s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestRESTServesARealJob(t *testing.T) {
	t.Parallel()
	job, base := restJob(t, "real", nil, nil)
	jobURL := base + "/jobs/real"

	jobs := getJSON[rest.JobIDsWithStatus](t, base+"/jobs")
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != "real" {
		t.Fatalf("GET /jobs = %+v, want the job real", jobs)
	}
	var d rest.JobDetailsInfo
	eventually(t, "records to flow through both vertices", func() bool {
		d = getJSON[rest.JobDetailsInfo](t, jobURL)
		return len(d.Vertices) == 2 && d.Vertices[0].Metrics.WriteRecords > 0 && d.Vertices[1].Metrics.ReadRecords > 0
	})
	if d.State != rest.JobRunning || d.Name != "rest-real" {
		t.Errorf("job state %s name %q, want RUNNING rest-real", d.State, d.Name)
	}
	src, cnt := d.Vertices[0], d.Vertices[1]
	if src.Name != "numbers -> parse" || cnt.Name != "sum -> out" {
		t.Errorf("vertex names %q, %q", src.Name, cnt.Name)
	}
	if src.Parallelism != 2 || src.Status != rest.TaskRunning || src.Tasks[rest.TaskRunning] != 2 || src.StartTime <= 0 {
		t.Errorf("source vertex %+v: want 2 running subtasks with a start time", src)
	}
	if src.Metrics.ReadRecords != 0 || cnt.Metrics.WriteRecords != 0 || src.Metrics.WriteBytesComplete {
		t.Errorf("a source reads nothing, a sink sends nothing, bytes are not counted: %+v / %+v", src.Metrics, cnt.Metrics)
	}
	if len(d.Plan.Nodes) != 2 || len(d.Plan.Nodes[1].Inputs) != 1 || d.Plan.Nodes[1].Inputs[0].ID != src.ID || d.Plan.Nodes[1].Inputs[0].ShipStrategy != "HASH" {
		t.Errorf("plan %+v: want the count fed by the source through HASH", d.Plan)
	}
	if d.MaxParallelism != 128 {
		t.Errorf("maxParallelism %d, want 128", d.MaxParallelism)
	}

	// A checkpoint through the API lands in the job's statistics.
	code, b := call(t, "POST", jobURL+"/checkpoints", "")
	if code != http.StatusAccepted {
		t.Fatalf("POST checkpoints: %d %s", code, b)
	}
	var trig rest.TriggerResponse
	if err := json.Unmarshal(b, &trig); err != nil {
		t.Fatal(err)
	}
	var op rest.AsynchronousOperationResult
	eventually(t, "the checkpoint to complete", func() bool {
		op = getJSON[rest.AsynchronousOperationResult](t, jobURL+"/checkpoints/"+trig.RequestID)
		return op.Status.ID == rest.StatusCompleted
	})
	if op.Operation == nil || op.Operation.CheckpointID == nil || op.Operation.FailureCause != nil {
		t.Fatalf("checkpoint operation %+v: want a checkpoint id", op.Operation)
	}
	cid := *op.Operation.CheckpointID
	stats := getJSON[rest.CheckpointingStatistics](t, jobURL+"/checkpoints")
	if stats.Counts.Completed != 1 || stats.Latest.Completed == nil || stats.Latest.Completed.ID != cid {
		t.Errorf("checkpoint statistics %+v: want checkpoint %d completed", stats.Counts, cid)
	}
	det := getJSON[rest.CheckpointStatistics](t, fmt.Sprintf("%s/checkpoints/details/%d", jobURL, cid))
	if det.NumAcknowledgedSubtasks != 4 || len(det.Tasks) != 2 {
		t.Errorf("checkpoint details: %d subtasks acknowledged in %d vertices, want 4 in 2", det.NumAcknowledgedSubtasks, len(det.Tasks))
	}
	sub := getJSON[rest.TaskCheckpointStatisticsWithSubtaskDetails](t, fmt.Sprintf("%s/checkpoints/details/%d/subtasks/%s", jobURL, cid, cnt.ID))
	if len(sub.Subtasks) != 2 || sub.Subtasks[0].Status != "completed" || sub.Subtasks[0].CompletedSubtaskCheckpoint.StateSize <= 0 {
		t.Errorf("subtasks of the count: %+v, want 2 completed with keyed state", sub.Subtasks)
	}
	cfg := getJSON[rest.CheckpointConfig](t, jobURL+"/checkpoints/config")
	if cfg.Mode != "exactly_once" || cfg.StateBackend != "heap" || cfg.MaxConcurrent != 1 {
		t.Errorf("checkpoint config %+v", cfg)
	}
	tms := getJSON[rest.TaskManagersInfo](t, base+"/taskmanagers")
	if len(tms.TaskManagers) != 1 || tms.TaskManagers[0].SlotsNumber != 2 || tms.TaskManagers[0].FreeSlots != 0 || tms.TaskManagers[0].Hardware.CPUCores < 1 {
		t.Errorf("taskmanagers %+v: want one with 2 slots in use", tms)
	}
	ov := getJSON[rest.ClusterOverview](t, base+"/overview")
	if ov.JobsRunning != 1 || ov.SlotsTotal != 2 {
		t.Errorf("overview %+v", ov)
	}
	exc := getJSON[rest.JobExceptionsInfo](t, jobURL+"/exceptions")
	if len(exc.History.Entries) != 0 || exc.RootException != nil {
		t.Errorf("a healthy job has no exceptions: %+v", exc)
	}

	// Cancel through the API.
	if code, b := call(t, "PATCH", jobURL+"?mode=cancel", ""); code != http.StatusAccepted {
		t.Fatalf("PATCH cancel: %d %s", code, b)
	}
	<-job.Done()
	d = getJSON[rest.JobDetailsInfo](t, jobURL)
	if d.State != rest.JobCanceled || d.EndTime <= 0 {
		t.Errorf("after cancel: state %s end %d, want CANCELED with an end time", d.State, d.EndTime)
	}
	for _, v := range d.Vertices {
		if v.Status != rest.TaskCanceled || v.EndTime <= 0 {
			t.Errorf("vertex %s after cancel: %s end %d, want CANCELED with an end time", v.Name, v.Status, v.EndTime)
		}
	}
	if code, b := call(t, "PATCH", jobURL+"?mode=cancel", ""); code != http.StatusConflict {
		t.Errorf("cancelling an ended job: %d %s, want 409", code, b)
	}
}

// TestOperatorRecordsOfARealJob: every operator of a chain reports its
// records in and out, in GET /jobs/{id} and in Prometheus, exactly.
func TestOperatorRecordsOfARealJob(t *testing.T) {
	t.Parallel()
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, JobID: "ops"})
	env.FromSource("numbers", datagen.Generator(1000, func(i int64) int64 { return i })).
		Map("double", func(i int64) int64 { return 2 * i }).
		Filter("keep", func(i int64) bool { return i%8 == 0 }).
		Rebalance().
		FlatMap("twice", func(i int64, out weir.Collector[int64]) { out.Collect(i); out.Collect(-i) }).
		SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
	job, err := env.ExecuteAsync(context.Background(), "rest-ops")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	base := serveREST(t, job)
	d := getJSON[rest.JobDetailsInfo](t, base+"/jobs/ops")
	want := [][]rest.JobVertexOperator{
		{{Name: "numbers", ReadRecords: 0, WriteRecords: 1000}, {Name: "double", ReadRecords: 1000, WriteRecords: 1000}, {Name: "keep", ReadRecords: 1000, WriteRecords: 250}},
		{{Name: "twice", ReadRecords: 250, WriteRecords: 500}, {Name: "out", ReadRecords: 500, WriteRecords: 0}},
	}
	if len(d.Vertices) != len(want) {
		t.Fatalf("%d vertices, want %d: %+v", len(d.Vertices), len(want), d.Vertices)
	}
	for i, v := range d.Vertices {
		if !slices.Equal(v.Operators, want[i]) {
			t.Errorf("vertex %q operators %+v, want %+v", v.Name, v.Operators, want[i])
		}
	}
	if d.Vertices[0].Metrics.WriteRecords != 250 || d.Vertices[1].Metrics.ReadRecords != 250 {
		t.Errorf("vertex figures %+v / %+v: want 250 records between them", d.Vertices[0].Metrics, d.Vertices[1].Metrics)
	}
	fams := scrape(t, base)
	for _, c := range []struct {
		name, op string
		want     float64
	}{
		{"weir_taskmanager_job_task_operator_numRecordsIn", "double", 1000},
		{"weir_taskmanager_job_task_operator_numRecordsOut", "keep", 250},
		{"weir_taskmanager_job_task_operator_numRecordsIn", "twice", 250},
		{"weir_taskmanager_job_task_operator_numRecordsOut", "twice", 500},
		{"weir_taskmanager_job_task_operator_numRecordsOut", "out", 0},
	} {
		if v, ok := sample(fams, c.name, map[string]string{"job_id": "ops", "operator_name": c.op}); !ok || v != c.want {
			t.Errorf("%s{operator_name=%q} = %v (present %v), want %v", c.name, c.op, v, ok, c.want)
		}
	}
}

// TestRESTBadInputOnARealJob sends malformed bodies, unknown ids and wrong
// methods to every endpoint of a running job: each gets a 4xx JSON error.
func TestRESTBadInputOnARealJob(t *testing.T) {
	t.Parallel()
	_, base := restJob(t, "bad", nil, nil)
	j := base + "/jobs/bad"
	cases := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/jobs/nope", "", 404},
		{"GET", "/jobs/nope/checkpoints", "", 404},
		{"POST", "/jobs/nope/checkpoints", "", 404},
		{"PATCH", "/jobs/nope?mode=cancel", "", 404},
		{"GET", "/jobs/nope/exceptions", "", 404},
		{"GET", "/jobs/nope/checkpoints/config", "", 404},
		{"POST", "/jobs/nope/savepoints", "", 404},
		{"POST", "/jobs/nope/stop", "", 404},
		{"DELETE", "/jobs/bad", "", 405},
		{"PUT", "/jobs/bad/checkpoints", "", 405},
		{"POST", "/jobs", "", 405},
		{"POST", "/overview", "", 405},
		{"DELETE", "/taskmanagers", "", 405},
		{"GET", "/jobs/bad/checkpoints/details/999999", "", 404},
		{"GET", "/jobs/bad/checkpoints/details/abc", "", 400},
		{"GET", "/jobs/bad/checkpoints/details/-1", "", 400},
		{"GET", "/jobs/bad/checkpoints/details/999999/subtasks/1", "", 404},
		{"GET", "/jobs/bad/checkpoints/00000000000000000000000000000000", "", 404},
		{"GET", "/jobs/bad/savepoints/zzz", "", 400},
		{"GET", "/jobs/bad/savepoints/00000000000000000000000000000000", "", 404},
		{"GET", "/jobs/bad/exceptions?maxExceptions=x", "", 400},
		{"PATCH", "/jobs/bad?mode=explode", "", 400},
		{"POST", "/jobs/bad/checkpoints", "{", 400},
		{"POST", "/jobs/bad/checkpoints", `{"checkpointType":"INCREMENTAL_OF_NOTHING"}`, 400},
		{"POST", "/jobs/bad/checkpoints", `{"unknown":1}`, 400},
		{"POST", "/jobs/bad/checkpoints", `[]`, 400},
		{"POST", "/jobs/bad/savepoints", `{"target-directory": 5}`, 400},
		{"POST", "/jobs/bad/savepoints", `{} {}`, 400},
		{"POST", "/jobs/bad/stop", `not json`, 400},
		{"POST", "/jobs/bad/stop", `{"drain": "yes"}`, 400},
		{"GET", "/no/such/path", "", 404},
		{"GET", "/metrics/extra", "", 404},
	}
	for _, c := range cases {
		code, b := call(t, c.method, base+c.path, c.body)
		var e rest.ErrorResponse
		if code != c.want || json.Unmarshal(b, &e) != nil || len(e.Errors) == 0 || e.Errors[0] == "" {
			t.Errorf("%s %s %q: %d %s, want %d with a JSON error", c.method, c.path, c.body, code, b, c.want)
		}
	}
	// The job still runs after all that (it may still be starting: the
	// requests take a few milliseconds).
	eventually(t, "the job running after bad requests", func() bool {
		return getJSON[rest.JobDetailsInfo](t, j).State == rest.JobRunning
	})
}

// TestRESTExceptionsAndRestarts: a failure shows in the exceptions, newest
// first, with the task that failed, and the job is RUNNING again after its
// restart.
func TestRESTExceptionsAndRestarts(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	_, base := restJob(t, "flaky", func(o *weir.Options) { o.Restart = "fixed-delay:attempts=3,delay=1ms" },
		func(i int64) int64 {
			if i == 500 && failed.CompareAndSwap(false, true) {
				panic("record 500 is cursed")
			}
			return i
		})
	j := base + "/jobs/flaky"
	var exc rest.JobExceptionsInfo
	eventually(t, "the failure to be reported", func() bool {
		exc = getJSON[rest.JobExceptionsInfo](t, j+"/exceptions")
		return len(exc.History.Entries) > 0
	})
	e := exc.History.Entries[0]
	if e.ExceptionName != "panic" || !strings.Contains(e.Stacktrace, "record 500 is cursed") || e.TaskName == nil || !strings.HasPrefix(*e.TaskName, "parse (") {
		t.Errorf("exception %+v (task %v): want the panic of parse", e, e.TaskName)
	}
	eventually(t, "the job to run again", func() bool {
		d := getJSON[rest.JobDetailsInfo](t, j)
		return d.State == rest.JobRunning && d.Vertices[0].Status == rest.TaskRunning
	})
}

func TestRESTServerAddressInUse(t *testing.T) {
	t.Parallel()
	a, err := weir.NewRESTServer(weir.RESTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	b, err := weir.NewRESTServer(weir.RESTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Listen(a.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "already in use") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Listen on a busy address: %v, want a one-line 'already in use' error", err)
	}
}

func TestRESTServerOptionsRejected(t *testing.T) {
	t.Parallel()
	for _, o := range []weir.RESTOptions{
		{Address: "0.0.0.0:8081"}, // off loopback without a token
		{Address: "nonsense"},
		{Handlers: map[string]http.Handler{"GET /metrics": http.NotFoundHandler()}},
		{Handlers: map[string]http.Handler{"/jobs/x": http.NotFoundHandler()}},
	} {
		if _, err := weir.NewRESTServer(o); err == nil {
			t.Errorf("NewRESTServer(%+v) accepted", o)
		}
	}
}

// scrape fetches /metrics and parses it.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, b := call(t, "GET", base+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample is the value of the series of family name whose labels include
// want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, found
}

func TestPrometheusMetricsOfARealJob(t *testing.T) {
	t.Parallel()
	job, base := restJob(t, "prom", nil, nil)
	jl := map[string]string{"job_id": "prom", "job_name": "rest-prom"}
	src := map[string]string{"job_id": "prom", "task_name": "numbers -> parse"}
	var first float64
	eventually(t, "records out of the source", func() bool {
		v, ok := sample(scrape(t, base), "weir_taskmanager_job_task_numRecordsOut", src)
		first = v
		return ok && v > 0
	})
	fams := scrape(t, base)
	if v, ok := sample(fams, "weir_jobmanager_job_lastCompletedCheckpointId", jl); !ok || v != -1 {
		t.Errorf("lastCompletedCheckpointId before any checkpoint: %v %v, want -1", v, ok)
	}
	for _, name := range []string{"weir_taskmanager_job_task_backPressuredTimeMsPerSecond", "weir_taskmanager_job_task_busyTimeMsPerSecond"} {
		if v, ok := sample(fams, name, src); !ok || v < 0 || v > 2000 {
			t.Errorf("%s = %v %v: want a figure per subtask in [0, 1000]", name, v, ok)
		}
	}
	id, err := job.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "records to keep flowing", func() bool {
		v, _ := sample(scrape(t, base), "weir_taskmanager_job_task_numRecordsOut", src)
		return v > first
	})
	fams = scrape(t, base)
	checks := []struct {
		name string
		ok   func(float64) bool
	}{
		{"weir_jobmanager_job_numberOfCompletedCheckpoints", func(v float64) bool { return v == 1 }},
		{"weir_jobmanager_job_numberOfFailedCheckpoints", func(v float64) bool { return v == 0 }},
		{"weir_jobmanager_job_lastCompletedCheckpointId", func(v float64) bool { return v == float64(id) }},
		{"weir_jobmanager_job_lastCheckpointDuration", func(v float64) bool { return v >= 0 }},
		{"weir_jobmanager_job_lastCheckpointFullSize", func(v float64) bool { return v > 0 }},
		{"weir_jobmanager_job_lastCheckpointSize", func(v float64) bool { return v > 0 }},
		{"weir_jobmanager_job_lastCheckpointRestoreTimestamp", func(v float64) bool { return v == -1 }},
		{"weir_jobmanager_job_uptime", func(v float64) bool { return v > 0 }},
	}
	for _, c := range checks {
		if v, ok := sample(fams, c.name, jl); !ok || !c.ok(v) {
			t.Errorf("%s = %v (present %v)", c.name, v, ok)
		}
	}
	count := map[string]string{"job_id": "prom", "task_name": "sum -> out"}
	if v, ok := sample(fams, "weir_taskmanager_job_task_numRecordsIn", count); !ok || v <= 0 {
		t.Errorf("numRecordsIn of the count = %v %v", v, ok)
	}
	if v, ok := sample(fams, "weir_taskmanager_job_task_operator_numRecordsIn", map[string]string{"operator_name": "sum"}); !ok || v <= 0 {
		t.Errorf("operator numRecordsIn of sum = %v %v", v, ok)
	}
	if v, ok := sample(fams, "weir_taskmanager_job_task_checkpointedStateSize", count); !ok || v <= 0 {
		t.Errorf("state size of the count = %v %v", v, ok)
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// TestPrometheusWatermarks: a job with event time reports its watermarks
// and their lag, on /metrics and in REST (GET .../watermarks, as Flink's).
func TestPrometheusWatermarks(t *testing.T) {
	t.Parallel()
	env := weir.NewEnvironment(weir.Options{Parallelism: 1, JobID: "wm"})
	start := time.Now().UnixMilli()
	env.FromSource("events", datagen.Generator(-1, func(i int64) int64 { return start + i }).
		WithOptions(datagen.Options{RecordsPerSecond: 5000, BatchSize: 50}),
		weir.ForMonotonousTimestamps[int64]().WithTimestampAssigner(func(v int64, _ int64) int64 { return v })).
		KeyBy(func(i int64) int64 { return i % 3 }).
		Reduce("sum", func(a, b int64) int64 { return a + b }).
		SinkTo("out", print.Sink(io.Discard, print.Options[int64]{}))
	ctx, cancel := context.WithCancel(context.Background())
	job, err := env.ExecuteAsync(ctx, "wm")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	base := serveREST(t, job)
	sum := map[string]string{"task_name": "sum -> out"}
	eventually(t, "the count's input watermark", func() bool {
		fams := scrape(t, base)
		wm, ok := sample(fams, "weir_taskmanager_job_task_currentInputWatermark", sum)
		lag, lok := sample(fams, "weir_taskmanager_job_task_watermarkLag", sum)
		return ok && lok && wm >= float64(start) && lag > -60000 && lag < 60000
	})
	var vid string
	for _, v := range getJSON[rest.JobDetailsInfo](t, base+"/jobs/wm").Vertices {
		if v.Name == "sum -> out" {
			vid = v.ID
		}
	}
	eventually(t, "the count's input watermark in REST", func() bool {
		wms := getJSON[[]rest.Metric](t, base+"/jobs/wm/vertices/"+vid+"/watermarks")
		if len(wms) != 2 || wms[0].ID != "0.currentInputWatermark" || wms[1].ID != "0.currentOutputWatermark" {
			t.Fatalf("GET /jobs/wm/vertices/%s/watermarks = %+v, want subtask 0's input and output watermarks", vid, wms)
		}
		in, err := strconv.ParseInt(wms[0].Value, 10, 64)
		return err == nil && in >= start && in < time.Now().Add(time.Minute).UnixMilli()
	})
}

// pollOperation polls an asynchronous operation's status until it
// completed.
func pollOperation(t *testing.T, url string) rest.AsynchronousOperationResult {
	t.Helper()
	var op rest.AsynchronousOperationResult
	eventually(t, "operation "+url, func() bool {
		op = getJSON[rest.AsynchronousOperationResult](t, url)
		return op.Status.ID == rest.StatusCompleted
	})
	return op
}

// TestRESTSavepointAndStopOnARealJob: the remaining endpoints of a real
// job: /config, /jobs/overview, the /v1 prefix, savepoints, stop with a
// savepoint.
func TestRESTSavepointAndStopOnARealJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job, base := restJob(t, "sp", func(o *weir.Options) { o.Checkpointing.SavepointDir = dir + "/default" }, nil)
	j := base + "/jobs/sp"

	cfg := getJSON[rest.DashboardConfiguration](t, base+"/config")
	if cfg.RefreshInterval <= 0 || !cfg.Features.WebCancel {
		t.Errorf("config %+v", cfg)
	}
	// The job is CREATED until its tasks run: wait for RUNNING.
	var ov rest.MultipleJobsDetails
	eventually(t, "the job running", func() bool {
		ov = getJSON[rest.MultipleJobsDetails](t, base+"/jobs/overview")
		return len(ov.Jobs) == 1 && ov.Jobs[0].State == rest.JobRunning
	})
	if ov.Jobs[0].JID != "sp" || ov.Jobs[0].Tasks.Total != 4 {
		t.Errorf("jobs overview %+v", ov)
	}
	if v1 := getJSON[rest.JobDetailsInfo](t, base+"/v1/jobs/sp"); v1.JID != "sp" {
		t.Errorf("/v1/jobs/sp: %+v", v1)
	}

	// A savepoint into a directory of the request (relative: under the
	// default), then into the default.
	for _, c := range []struct{ body, want string }{
		{`{"target-directory": "asked"}`, dir + "/default/asked"},
		{"", dir + "/default"},
	} {
		code, b := call(t, "POST", j+"/savepoints", c.body)
		if code != http.StatusAccepted {
			t.Fatalf("POST savepoints %s: %d %s", c.body, code, b)
		}
		var trig rest.TriggerResponse
		json.Unmarshal(b, &trig)
		op := pollOperation(t, j+"/savepoints/"+trig.RequestID)
		if op.Operation == nil || op.Operation.Location == nil || !strings.Contains(*op.Operation.Location, c.want) {
			t.Fatalf("savepoint %s: %+v, want a location under %s", c.body, op.Operation, c.want)
		}
	}
	stats := getJSON[rest.CheckpointingStatistics](t, j+"/checkpoints")
	if stats.Latest.Savepoint == nil || !stats.Latest.Savepoint.IsSavepoint || stats.Counts.Completed != 2 {
		t.Errorf("after two savepoints: counts %+v latest savepoint %+v", stats.Counts, stats.Latest.Savepoint)
	}

	// Stop with a savepoint: the job ends FINISHED.
	code, b := call(t, "POST", j+"/stop", fmt.Sprintf(`{"targetDirectory": %q}`, dir+"/stop"))
	if code != http.StatusAccepted {
		t.Fatalf("POST stop: %d %s", code, b)
	}
	var trig rest.TriggerResponse
	json.Unmarshal(b, &trig)
	op := pollOperation(t, j+"/savepoints/"+trig.RequestID)
	if op.Operation == nil || op.Operation.Location == nil || !strings.Contains(*op.Operation.Location, dir+"/stop") {
		t.Fatalf("stop: %+v", op.Operation)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job after stop: %v", err)
	}
	d := getJSON[rest.JobDetailsInfo](t, j)
	if d.State != rest.JobFinished || d.Vertices[0].Status != rest.TaskFinished {
		t.Errorf("after stop: job %s, first vertex %s; want FINISHED", d.State, d.Vertices[0].Status)
	}
	// Operations on an ended job are refused, not crashed on.
	for _, path := range []string{"/checkpoints", "/savepoints", "/stop"} {
		code, b := call(t, "POST", j+path, "")
		if code < 400 || code >= 500 {
			t.Errorf("POST %s on a finished job: %d %s, want 4xx", path, code, b)
		}
	}
}

// TestRESTToken: with a token, every path (the API and /metrics) needs it.
func TestRESTToken(t *testing.T) {
	t.Parallel()
	job, _ := restJob(t, "tok", nil, nil)
	srv, err := weir.NewRESTServer(weir.RESTOptions{Address: "127.0.0.1:0", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddJob(job)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	defer func() { srv.Close(); <-served }()
	<-srv.Ready()
	base := "http://" + srv.Addr().String()
	for _, path := range []string{"/jobs", "/jobs/tok", "/metrics", "/overview"} {
		for _, auth := range []string{"", "Bearer wrong", "Basic s3cret"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with %q: %d, want 401", path, auth, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token: %d", path, resp.StatusCode)
		}
	}
}

// tally counts records per key.
type tally struct{ Key, N int64 }

// drainJob is a bounded, rate-limited job of n records with event time
// (record i at i ms) counted per key in tumbling event-time windows of an
// hour: all its records fall in one window per key, which fires only at
// the maximum watermark.
func drainJob(id string, n int64, rate float64, restore string) (*weir.Environment, *collect.Collector[tally]) {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2, JobID: id, Restore: restore})
	sink := collect.New[tally]()
	env.FromSource("numbers", datagen.Generator(n, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: rate, BatchSize: 100}),
		weir.ForMonotonousTimestamps[int64]().WithTimestampAssigner(func(i, _ int64) int64 { return i })).
		Map("tally", func(i int64) tally { return tally{Key: i % 3, N: 1} }).
		KeyBy(func(t tally) int64 { return t.Key }).
		Window(weir.TumblingEventTimeWindows(time.Hour)).
		Reduce("count", func(a, b tally) tally { return tally{Key: a.Key, N: a.N + b.N} }).
		SinkTo("out", sink)
	return env, sink
}

func total(ts []tally) (n int64) {
	for _, t := range ts {
		n += t.N
	}
	return n
}

// TestRESTStopWithDrain: POST /jobs/{id}/stop with "drain": true fires the
// open event-time windows before the savepoint; without drain they stay
// in the savepoint and fire after a restore, at the end of the input.
// Either way every record is counted once.
func TestRESTStopWithDrain(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	for _, drain := range []bool{true, false} {
		t.Run(fmt.Sprintf("drain=%v", drain), func(t *testing.T) {
			dir := t.TempDir()
			id := fmt.Sprintf("drain-%v", drain)
			env, sink := drainJob(id, n, 20000, "")
			job, err := env.ExecuteAsync(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { job.Cancel(); job.Wait() })
			base := serveREST(t, job)
			// Enough records for every key to have reached the window: the
			// rate limiter's first batches can be a record or two, and a
			// stop right after the first would leave a key without a window.
			eventually(t, "records of every key to reach the window", func() bool {
				d := getJSON[rest.JobDetailsInfo](t, base+"/jobs/"+id)
				return len(d.Vertices) == 2 && d.Vertices[1].Metrics.ReadRecords >= 300
			})
			code, b := call(t, "POST", base+"/jobs/"+id+"/stop", fmt.Sprintf(`{"targetDirectory": %q, "drain": %v}`, dir, drain))
			if code != http.StatusAccepted {
				t.Fatalf("POST stop: %d %s", code, b)
			}
			var trig rest.TriggerResponse
			json.Unmarshal(b, &trig)
			op := pollOperation(t, base+"/jobs/"+id+"/savepoints/"+trig.RequestID)
			if op.Operation == nil || op.Operation.Location == nil {
				t.Fatalf("stop: %+v", op.Operation)
			}
			if err := job.Wait(); err != nil {
				t.Fatalf("job after stop: %v", err)
			}
			first := sink.Results()
			switch {
			case drain && (len(first) != 3 || total(first) <= 0 || total(first) >= n):
				t.Fatalf("drained: windows %+v, want one per key with part of the %d records", first, n)
			case !drain && len(first) != 0:
				t.Fatalf("stopped without drain: windows %+v fired, want none", first)
			}

			// The rest of the input, from the savepoint, unthrottled.
			env2, sink2 := drainJob(id, n, 0, *op.Operation.Location)
			if err := env2.Execute(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			after := sink2.Results()
			if len(after) != 3 || total(first)+total(after) != n {
				t.Errorf("after the restore: windows %+v (before the stop %+v), want one per key and %d records in all", after, first, n)
			}
		})
	}
}

// TestRESTStopWithDrainFailedSavepoint: when the savepoint of a stop with
// drain fails, the sources read on and the job keeps running.
func TestRESTStopWithDrainFailedSavepoint(t *testing.T) {
	t.Parallel()
	_, base := restJob(t, "drainfail", nil, nil)
	j := base + "/jobs/drainfail"
	written := func() int64 {
		d := getJSON[rest.JobDetailsInfo](t, j)
		return d.Vertices[0].Metrics.WriteRecords
	}
	eventually(t, "records to flow", func() bool { return written() > 0 })
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Allowed, but a file is where the directory would be: the savepoint fails.
	code, b := call(t, "POST", j+"/stop", fmt.Sprintf(`{"targetDirectory": %q, "drain": true}`, blocker+"/sp"))
	if code != http.StatusAccepted {
		t.Fatalf("POST stop: %d %s", code, b)
	}
	var trig rest.TriggerResponse
	json.Unmarshal(b, &trig)
	op := pollOperation(t, j+"/savepoints/"+trig.RequestID)
	if op.Operation == nil || op.Operation.FailureCause == nil {
		t.Fatalf("stop into a bad directory: %+v, want a failure", op.Operation)
	}
	after := written()
	eventually(t, "records to flow again", func() bool { return written() > after })
	if d := getJSON[rest.JobDetailsInfo](t, j); d.State != rest.JobRunning {
		t.Errorf("job state %s after a failed stop, want RUNNING", d.State)
	}
}
