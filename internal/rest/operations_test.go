package rest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// trigger POSTs and returns the request id of the 202 answer.
func trigger(t *testing.T, s *testServer, path, body string) string {
	t.Helper()
	r := s.do(t, "POST", path, body)
	if r.code != http.StatusAccepted {
		t.Fatalf("POST %s: %d %s", path, r.code, r.body)
	}
	id := decode[rest.TriggerResponse](t, r).RequestID
	if len(id) != 32 {
		t.Fatalf("request id %q is not 32 hex digits", id)
	}
	return id
}

func TestCheckpointTrigger(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	wc.Hold()
	id := trigger(t, s, "/jobs/wordcount/checkpoints", "")
	r := s.do(t, "GET", "/jobs/wordcount/checkpoints/"+id, "")
	checkJSON(t, r.body, `{"status":{"id":"IN_PROGRESS"},"operation":"$absent"}`)
	// The same id is not a savepoint request.
	if r := s.do(t, "GET", "/jobs/wordcount/savepoints/"+id, ""); r.code != http.StatusNotFound {
		t.Errorf("savepoint status of a checkpoint request: %d", r.code)
	}
	wc.Release()
	res := waitOperation(t, s, "/jobs/wordcount/checkpoints/"+id)
	if res.Operation == nil || res.Operation.CheckpointID == nil || *res.Operation.CheckpointID != 5 {
		t.Fatalf("operation %+v, want checkpoint 5", res.Operation)
	}
	r = s.do(t, "GET", "/jobs/wordcount/checkpoints/details/5", "")
	checkJSON(t, r.body, `{"id":5,"status":"COMPLETED","num_acknowledged_subtasks":4,"state_size":6144}`)
	r = s.do(t, "GET", "/jobs/wordcount/checkpoints", "")
	checkJSON(t, r.body, `{"counts":{"completed":3},"latest":{"completed":{"id":5}}}`)
	// Retained is 1: checkpoint 1 was subsumed.
	r = s.do(t, "GET", "/jobs/wordcount/checkpoints/details/1", "")
	checkJSON(t, r.body, `{"id":1,"discarded":true}`)
}

func TestCheckpointTriggerIdempotent(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	wc.Hold()
	tid := strings.Repeat("0f", 16)
	body := `{"triggerId":"` + tid + `","checkpointType":"configured"}`
	if id := trigger(t, s, "/jobs/wordcount/checkpoints", body); id != tid {
		t.Fatalf("request id %s, want the trigger id %s", id, tid)
	}
	if id := trigger(t, s, "/jobs/wordcount/checkpoints", body); id != tid {
		t.Fatalf("retry: request id %s, want %s", id, tid)
	}
	wc.Release()
	waitOperation(t, s, "/jobs/wordcount/checkpoints/"+tid)
	if sum, _ := wc.Checkpoints(); sum.Completed != 3 || sum.InProgress != 1 {
		t.Errorf("summary %+v: the retry took a second checkpoint", sum)
	}
}

func TestCheckpointFailure(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	wc.FailOperations(errors.New("declined by task 2-1"))
	id := trigger(t, s, "/jobs/wordcount/checkpoints", "{}")
	res := waitOperation(t, s, "/jobs/wordcount/checkpoints/"+id)
	if res.Operation == nil || res.Operation.FailureCause == nil || res.Operation.CheckpointID != nil {
		t.Fatalf("operation %+v, want a failure cause only", res.Operation)
	}
	if got := res.Operation.FailureCause.StackTrace; got != "declined by task 2-1" {
		t.Errorf("failure %q", got)
	}
}

func TestSavepointTrigger(t *testing.T) {
	tests := []struct {
		name, path, body string
		location         string // prefix
		failure          string
		status           rest.JobStatus // afterwards
	}{
		{"into a directory", "/jobs/wordcount/savepoints", `{"target-directory":"s3://bkt/sp"}`, "s3://bkt/sp/savepoint-", "", rest.JobRunning},
		{"default directory", "/jobs/wordcount/savepoints", ``, "file:///tmp/savepoints/savepoint-", "", rest.JobRunning},
		{"and cancel", "/jobs/wordcount/savepoints", `{"target-directory":"/sp","cancel-job":true,"formatType":"CANONICAL"}`, "/sp/savepoint-", "", rest.JobFinished},
		{"stop", "/jobs/wordcount/stop", `{"targetDirectory":"/sp"}`, "/sp/savepoint-", "", rest.JobFinished},
		{"stop, default directory", "/jobs/wordcount/stop", ``, "file:///tmp/savepoints/savepoint-", "", rest.JobFinished},
		{"stop and drain", "/jobs/draining/stop", `{"drain":true}`, "file:///tmp/savepoints/savepoint-", "", rest.JobFinished},
		{"no default, an allowed root", "/jobs/nodir/stop", `{"targetDirectory":"/sp/x"}`, "/sp/x/savepoint-", "", rest.JobFinished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jm, wc, _ := fixture()
			nodir := resttest.NewJob("nodir", "no savepoint dir")
			nodir.SetCheckpointConfig(rest.CheckpointConfigInfo{CheckpointStorage: "memory://"})
			jm.Add(nodir, resttest.NewJob("draining", "Draining").Drainable())
			s := startServer(t, jm, rest.Options{SavepointAllowedRoots: []string{"s3://bkt/sp", "/sp"}})
			id := trigger(t, s, tt.path, tt.body)
			job := strings.Split(tt.path, "/")[2]
			res := waitOperation(t, s, "/jobs/"+job+"/savepoints/"+id)
			op := res.Operation
			switch {
			case op == nil:
				t.Fatal("no operation in a completed result")
			case tt.failure != "" && (op.FailureCause == nil || !strings.Contains(op.FailureCause.StackTrace, tt.failure)):
				t.Fatalf("failure %+v, want %q", op.FailureCause, tt.failure)
			case tt.failure == "" && (op.Location == nil || !strings.HasPrefix(*op.Location, tt.location)):
				t.Fatalf("operation %+v, want location %s…", op, tt.location)
			}
			j, _ := jm.Job(job)
			if got := j.Status(); got != tt.status {
				t.Errorf("job status %s, want %s", got, tt.status)
			}
			_ = wc
		})
	}
}

func TestCancel(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	r := s.do(t, "PATCH", "/jobs/wordcount?mode=cancel", "")
	if r.code != http.StatusAccepted {
		t.Fatalf("PATCH: %d %s", r.code, r.body)
	}
	checkJSON(t, r.body, `{}`)
	if wc.Cancels() != 1 || wc.Status() != rest.JobCanceled {
		t.Fatalf("cancels %d, status %s", wc.Cancels(), wc.Status())
	}
	r = s.do(t, "GET", "/overview", "")
	checkJSON(t, r.body, `{"jobs-running":0,"jobs-cancelled":1,"jobs-finished":1}`)
	// Without a mode, PATCH cancels too (Flink's default).
	other := jm.Add(resttest.NewJob("other", "Other"))
	if r := s.do(t, "PATCH", "/jobs/other", ""); r.code != http.StatusAccepted || other.Status() != rest.JobCanceled {
		t.Fatalf("PATCH without mode: %d %s, status %s", r.code, r.body, other.Status())
	}
}

func TestOperationsAreBounded(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{MaxOperations: 2})
	wc.Hold()
	first := trigger(t, s, "/jobs/wordcount/checkpoints", "")
	trigger(t, s, "/jobs/wordcount/savepoints", "")
	r := s.do(t, "POST", "/jobs/wordcount/checkpoints", "")
	if r.code != http.StatusTooManyRequests {
		t.Fatalf("third operation: %d %s, want 429", r.code, r.body)
	}
	if msg := errorsOf(t, r); !strings.Contains(msg, "2 operations are in progress") {
		t.Errorf("error %q", msg)
	}
	wc.Release()
	waitOperation(t, s, "/jobs/wordcount/checkpoints/"+first)
	third := trigger(t, s, "/jobs/wordcount/checkpoints", "")
	// The oldest finished result made room.
	if r := s.do(t, "GET", "/jobs/wordcount/checkpoints/"+first, ""); r.code != http.StatusNotFound {
		t.Errorf("evicted result: %d %s", r.code, r.body)
	}
	waitOperation(t, s, "/jobs/wordcount/checkpoints/"+third)
}

// TestCloseCancelsOperations: an operation in progress when the server
// closes is cancelled and waited for (goleak checks nothing is left).
func TestCloseCancelsOperations(t *testing.T) {
	jm, wc, _ := fixture()
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	<-srv.Ready()
	s := &testServer{Server: srv, url: "http://" + srv.Addr().String()}
	wc.Hold()
	trigger(t, s, "/jobs/wordcount/checkpoints", "")
	cancel() // Serve stops, as with Close
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_, hist := wc.Checkpoints()
	if last := hist[len(hist)-1]; last.Status != "FAILED" || !strings.Contains(last.FailureReason, "context canceled") {
		t.Errorf("checkpoint %d: %s %q, want FAILED by cancellation", last.ID, last.Status, last.FailureReason)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Close() // idempotent
	if err := srv.Serve(context.Background()); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

func TestServeLifecycle(t *testing.T) {
	jm, _, _ := fixture()
	// Close before Serve: Serve refuses.
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := srv.Serve(context.Background()); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
	// Serving twice at once is refused; Close ends the first.
	srv, err = rest.New(jm, rest.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	<-srv.Ready()
	if err := srv.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("second Serve: %v", err)
	}
	srv.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	// A busy port is reported, naming the option.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err = rest.New(jm, rest.Options{Address: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "Options.Address") {
		t.Errorf("Serve on a busy port: %v", err)
	}
}

func TestAuthentication(t *testing.T) {
	jm, _, _ := fixture()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "weir_up 1") })
	s := startServer(t, jm, rest.Options{Token: "s3cret", Handlers: map[string]http.Handler{"GET /metrics": metrics}})
	tests := []struct {
		name, path, auth string
		code             int
	}{
		{"no header", "/jobs", "", 401},
		{"wrong token", "/jobs", "Bearer nope", 401},
		{"token prefix", "/jobs", "Bearer s3cre", 401},
		{"basic auth", "/jobs", "Basic czNjcmV0", 401},
		{"no scheme", "/jobs", "s3cret", 401},
		{"unknown path", "/nope", "", 401},
		{"mounted handler", "/metrics", "", 401},
		{"right token", "/jobs", "Bearer s3cret", 200},
		{"scheme in lower case", "/jobs", "bearer s3cret", 200},
		{"mounted handler with token", "/metrics", "Bearer s3cret", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.url+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("got %d, want %d", resp.StatusCode, tt.code)
			}
			if want := tt.code == 401; want != (resp.Header.Get("WWW-Authenticate") != "") {
				t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestMountedHandlers(t *testing.T) {
	jm, _, _ := fixture()
	dashboard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "dashboard "+r.URL.Path) })
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "weir_up 1") })
	s := startServer(t, jm, rest.Options{Handlers: map[string]http.Handler{"/": dashboard, "GET /metrics": metrics}})
	tests := []struct {
		method, path string
		code         int
		body         string // a prefix
	}{
		{"GET", "/", 200, "dashboard /"},
		{"GET", "/assets/app.js", 200, "dashboard /assets/app.js"},
		{"GET", "/metrics", 200, "weir_up 1"},
		{"POST", "/metrics", 200, "dashboard /metrics"}, // "/" takes every other method and path
		{"GET", "/jobs", 200, `{"jobs":`},
		{"GET", "/jobs/nope", 404, `{"errors":["job \"nope\" not found"]}`},
		{"GET", "/v1/nope", 404, `{"errors":`},
		{"DELETE", "/overview", 405, `{"errors":`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := s.do(t, tt.method, tt.path, "")
			if r.code != tt.code || !strings.HasPrefix(string(r.body), tt.body) {
				t.Fatalf("got %d %q, want %d %q…", r.code, r.body, tt.code, tt.body)
			}
		})
	}
	// Without a handler at "/", mounted handlers get JSON 404 and 405
	// answers, and "/" is the built-in dashboard (internal/web).
	s = startServer(t, jm, rest.Options{Handlers: map[string]http.Handler{"GET /metrics": metrics}})
	r := s.do(t, "POST", "/metrics", "")
	if r.code != 405 || r.header.Get("Allow") != "GET, HEAD" || !strings.Contains(errorsOf(t, r), "method POST is not allowed on /metrics") {
		t.Errorf("POST /metrics: %d %s (Allow %q)", r.code, r.body, r.header.Get("Allow"))
	}
	if r := s.do(t, "GET", "/", ""); r.code != 200 || !strings.Contains(string(r.body), "weir dashboard") {
		t.Errorf("GET /: %d %s", r.code, r.body)
	}
	if r := s.do(t, "GET", "/nope", ""); r.code != 404 || !strings.Contains(errorsOf(t, r), "no such path: /nope") {
		t.Errorf("GET /nope: %d %s", r.code, r.body)
	}
}

// panicky is a JobManager whose job panics: the server answers 500 and
// goes on serving.
type panicky struct{ *resttest.JobManager }

func (p panicky) Jobs() []rest.Job { panic("broken JobManager") }

func TestHandlerPanic(t *testing.T) {
	jm, _, _ := fixture()
	s := startServer(t, panicky{jm}, rest.Options{})
	r := s.do(t, "GET", "/jobs", "")
	if r.code != http.StatusInternalServerError || !strings.Contains(errorsOf(t, r), "internal error") {
		t.Fatalf("got %d %s", r.code, r.body)
	}
	if r := s.do(t, "GET", "/jobs/wordcount", ""); r.code != http.StatusOK {
		t.Fatalf("after a panic: %d %s", r.code, r.body)
	}
}

func TestOptionsValidate(t *testing.T) {
	h := http.NotFoundHandler()
	tests := []struct {
		name string
		opts rest.Options
		err  string // a substring; "" for valid
	}{
		{"defaults", rest.Options{}, ""},
		{"loopback", rest.Options{Address: "127.0.0.1:9000"}, ""},
		{"loopback v6", rest.Options{Address: "[::1]:0"}, ""},
		{"localhost", rest.Options{Address: "localhost:8081"}, ""},
		{"all interfaces with token", rest.Options{Address: ":8081", Token: "t"}, ""},
		{"public with token", rest.Options{Address: "10.1.2.3:8081", Token: "t"}, ""},
		{"all interfaces without token", rest.Options{Address: ":8081"}, "Options.Token is required"},
		{"any v4 without token", rest.Options{Address: "0.0.0.0:8081"}, "Options.Token is required"},
		{"public without token", rest.Options{Address: "10.1.2.3:8081"}, "Options.Token is required"},
		{"host name without token", rest.Options{Address: "jm.example.com:8081"}, "Options.Token is required"},
		{"no port", rest.Options{Address: "127.0.0.1"}, "Options.Address"},
		{"bad port", rest.Options{Address: "127.0.0.1:99999"}, "Options.Address"},
		{"token with space", rest.Options{Token: "a b"}, "Options.Token"},
		{"history", rest.Options{CheckpointHistory: -1}, "Options.CheckpointHistory"},
		{"operations", rest.Options{MaxOperations: -1}, "Options.MaxOperations"},
		{"body", rest.Options{MaxBodyBytes: -1}, "Options.MaxBodyBytes"},
		{"refresh", rest.Options{RefreshInterval: time.Microsecond}, "Options.RefreshInterval"},
		{"shutdown", rest.Options{ShutdownTimeout: -time.Second}, "Options.ShutdownTimeout"},
		{"nil handler", rest.Options{Handlers: map[string]http.Handler{"/": nil}}, `Options.Handlers["/"] is nil`},
		{"bad pattern", rest.Options{Handlers: map[string]http.Handler{"GET /{x": h}}, "not a valid ServeMux pattern"},
		{"API path", rest.Options{Handlers: map[string]http.Handler{"GET /jobs/{id}/flame": h}}, "belongs to the REST API"},
		{"API path with host", rest.Options{Handlers: map[string]http.Handler{"example.com/overview": h}}, "belongs to the REST API"},
		{"versioned path", rest.Options{Handlers: map[string]http.Handler{"/v1/ui/": h}}, "belongs to the REST API"},
		{"dashboard and metrics", rest.Options{Handlers: map[string]http.Handler{"/": h, "GET /metrics": h}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.EnsureDefaults()
			err := o.Validate()
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate: %v, want %q", err, tt.err)
			}
			_, err = rest.New(resttest.NewJobManager(), tt.opts)
			if (err == nil) != (tt.err == "") {
				t.Fatalf("New: %v, want %q", err, tt.err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	var o rest.Options
	o.EnsureDefaults()
	if o.Address != "127.0.0.1:8081" || o.CheckpointHistory != 10 || o.MaxOperations != 1000 ||
		o.MaxBodyBytes != 1<<20 || o.RefreshInterval != 3*time.Second || o.ShutdownTimeout != 5*time.Second ||
		o.Version == "" || o.Logger == nil || o.Now == nil {
		t.Fatalf("defaults: %+v", o)
	}
}

// TestAwaitAnswered: AwaitAnswered returns once every operation ended and
// a poll read its outcome, and not before.
func TestAwaitAnswered(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	// Nothing started: nothing to wait for.
	if err := s.AwaitAnswered(context.Background()); err != nil {
		t.Fatalf("no operation: %v", err)
	}
	wc.Hold()
	id := trigger(t, s, "/jobs/wordcount/savepoints", `{"target-directory":"/tmp/savepoints/sp"}`)
	answered := make(chan error, 1)
	go func() { answered <- s.AwaitAnswered(context.Background()) }()
	// In progress, then done but unread: still waiting.
	s.do(t, "GET", "/jobs/wordcount/savepoints/"+id, "")
	wc.Release()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-answered:
		t.Fatalf("AwaitAnswered returned %v before the outcome was read", err)
	default:
	}
	res := waitOperation(t, s, "/jobs/wordcount/savepoints/"+id)
	if res.Operation == nil || res.Operation.Location == nil {
		t.Fatalf("operation %+v", res.Operation)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitAnswered still waits after the outcome was read")
	}
	// An outcome nobody reads: the context bounds the wait.
	wc.Hold()
	trigger(t, s, "/jobs/wordcount/checkpoints", "")
	wc.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.AwaitAnswered(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unread outcome: %v, want the deadline", err)
	}
}
