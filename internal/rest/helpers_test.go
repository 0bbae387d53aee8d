package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fixture's epoch; the server's clock reads t0+2m.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func msAt(d time.Duration) int64 { return at(d).UnixMilli() }

// fixture builds a JobManager with two jobs:
//
//   - "wordcount" (RUNNING since t0): checkpoint 1 completed, 2 failed,
//     savepoint 3 completed, checkpoint 4 in progress;
//   - "etl" (FINISHED), restored from savepoint 7, with two failures.
func fixture() (*resttest.JobManager, *resttest.Job, *resttest.Job) {
	jm := resttest.NewJobManager()
	clock := func() time.Time { return at(2 * time.Minute) }
	wc := resttest.NewJob("wordcount", "WordCount")
	wc.SetClock(clock)
	wc.SetStart(t0)
	sub := func(task string, ack time.Duration, size int64, align time.Duration) jobmaster.SubtaskStats {
		return jobmaster.SubtaskStats{Task: task, AckTime: at(ack), Sync: 5 * time.Millisecond, Async: 20 * time.Millisecond,
			Alignment: align, StartDelay: time.Millisecond, StateSize: size, CheckpointedSize: size / 4} // incremental
	}
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 1, Status: jobmaster.Completed,
		TriggerTime: at(10 * time.Second), EndTime: at(10500 * time.Millisecond), Duration: 500 * time.Millisecond,
		StateSize: 3072, CheckpointedSize: 768, NumTasks: 4, Path: "file:///ckpt/wordcount/chk-1",
		Subtasks: []jobmaster.SubtaskStats{
			sub("1-0", 10200*time.Millisecond, 1000, 0),
			sub("1-1", 10100*time.Millisecond, 1000, 0),
			sub("2-0", 10500*time.Millisecond, 500, 30*time.Millisecond),
			sub("2-1", 10400*time.Millisecond, 572, 10*time.Millisecond),
		}})
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 2, Status: jobmaster.Failed,
		TriggerTime: at(20 * time.Second), EndTime: at(80 * time.Second), Duration: time.Minute,
		StateSize: 1000, CheckpointedSize: 250, NumTasks: 4, Path: "file:///ckpt/wordcount/chk-2",
		FailureReason: "checkpoint expired before completing",
		Subtasks:      []jobmaster.SubtaskStats{sub("1-0", 20100*time.Millisecond, 1000, 0)}})
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 3, Savepoint: true, Status: jobmaster.Completed,
		TriggerTime: at(30 * time.Second), EndTime: at(31 * time.Second), Duration: time.Second,
		StateSize: 4000, CheckpointedSize: 4000, NumTasks: 4, Path: "file:///sp/savepoint-abc123"})
	wc.AddCheckpoint(jobmaster.CheckpointStats{ID: 4, Status: jobmaster.InProgress,
		TriggerTime: at(40 * time.Second), NumTasks: 4, Path: "file:///ckpt/wordcount/chk-4",
		Subtasks: []jobmaster.SubtaskStats{sub("1-0", 40300*time.Millisecond, 10, 0)}})

	etl := resttest.NewJob("etl", "ETL")
	etl.SetClock(clock)
	etl.SetStart(t0)
	etl.SetRestore(7, "file:///sp/savepoint-777777", t0, 0)
	etl.AddException(rest.ExceptionInfo{Time: at(5 * time.Second), Name: "*errors.errorString",
		Message: "boom", Task: "count -> Sink: out (1/2)"})
	etl.AddException(rest.ExceptionInfo{Time: at(50 * time.Second), Name: "*fmt.wrapError",
		Message: "sink commit failed: disk full"})
	etl.SetStatus(rest.JobFinished)
	jm.Add(wc, etl)
	return jm, wc, etl
}

// testServer is a server on a random loopback port.
type testServer struct {
	*rest.Server
	url   string
	token string
}

// startServer runs a real server for jm; Cleanup closes it and checks that
// Serve returned nil.
func startServer(t testing.TB, jm rest.JobManager, opts rest.Options) *testServer {
	t.Helper()
	opts.Address = "127.0.0.1:0"
	if opts.Now == nil {
		opts.Now = func() time.Time { return at(2 * time.Minute) }
	}
	srv, err := rest.New(jm, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", opts.Address)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(context.Background(), ln) }()
	<-srv.Ready()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: srv, url: "http://" + srv.Addr().String(), token: opts.Token}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (s *testServer) do(t testing.TB, method, path, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if method != "GET" && method != "HEAD" {
		req.Header.Set("Content-Type", "application/json") // as every client must (guard.go)
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
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// decode decodes r's body into a new T.
func decode[T any](t testing.TB, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return v
}

// absent, as a value in an expectation, asks for the key to be missing.
const absent = "$absent"

// checkJSON fails unless got holds every value of want (a JSON document):
// objects match when got has each of want's keys with matching values (and
// lacks the keys whose value is "$absent"); arrays when they have the same
// length and matching elements.
func checkJSON(t testing.TB, got []byte, want string) {
	t.Helper()
	if want == "" {
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %s: %v", want, err)
	}
	if msg := subset("$", g, w); msg != "" {
		t.Errorf("%s\ngot: %s", msg, got)
	}
}

func subset(path string, got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want an object", path, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if wv == absent {
				if ok {
					return fmt.Sprintf("%s: has key %q, want none", path, k)
				}
				continue
			}
			if !ok {
				return fmt.Sprintf("%s: missing key %q", path, k)
			}
			if msg := subset(path+"."+k, gv, wv); msg != "" {
				return msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %v, want %d elements", path, got, len(w))
		}
		for i := range w {
			if msg := subset(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); msg != "" {
				return msg
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s: got %v, want %v", path, got, want)
		}
	}
	return ""
}

// errorsOf returns the messages of an error body, failing if it is not one.
func errorsOf(t testing.TB, r response) string {
	t.Helper()
	var e rest.ErrorResponse
	if err := json.NewDecoder(bytes.NewReader(r.body)).Decode(&e); err != nil || len(e.Errors) == 0 {
		t.Fatalf("not an error body: %s", r.body)
	}
	return strings.Join(e.Errors, "; ")
}

// waitOperation polls a status path until it reports COMPLETED.
func waitOperation(t testing.TB, s *testServer, path string) rest.AsynchronousOperationResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.do(t, "GET", path, "")
		if r.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
		res := decode[rest.AsynchronousOperationResult](t, r)
		if res.Status.ID == rest.StatusCompleted {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %s after 10s", path, res.Status.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
