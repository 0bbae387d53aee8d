package web_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// seen is a request the REST server answered, as recorded by recorder.
type seen struct {
	method, path, origin, site, contentType string
	code                                    int
}

// recorder wraps a handler and records every request and its status.
type recorder struct {
	h  http.Handler
	mu sync.Mutex
	rq []seen
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	rc.h.ServeHTTP(sw, r)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.rq = append(rc.rq, seen{r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Content-Type"), sw.code})
}

// stateChanges are the recorded requests other than GET and HEAD.
func (rc *recorder) stateChanges() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []seen
	for _, s := range rc.rq {
		if s.method != "GET" && s.method != "HEAD" {
			out = append(out, s)
		}
	}
	return out
}

func (rc *recorder) reset() {
	rc.mu.Lock()
	rc.rq = nil
	rc.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

// TestBrowserCrossSite: on the default loopback server without a token,
// a page of another origin that makes the browser send a stop, cancel or
// savepoint gets nothing done, and neither does a DNS-rebinding page; the
// dashboard's own buttons (checkpoint, savepoint, cancel) still work, and
// their requests are same-origin JSON.
func TestBrowserCrossSite(t *testing.T) {
	b := newBrowser(t, 90*time.Second)
	jm := resttest.NewJobManager()
	job := jm.Add(resttest.NewJob("wordcount", "WordCount"))
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0", RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{h: srv.Handler()}
	hs := &http.Server{Handler: rec}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	base := "http://" + ln.Addr().String()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	// The hostile page, at another origin (another port of the same host):
	// a no-cors stop as text/plain (what a form or a simple fetch can
	// send), a JSON cancel (the browser must ask first: a preflight the
	// server does not grant), and a savepoint through "localhost", which is
	// yet another origin.
	evil := http.NewServeMux()
	evil.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>cute cats</title><script>
const api = %q, local = %q;
Promise.allSettled([
  fetch(api + "/jobs/wordcount/stop", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"targetDirectory":"/tmp/x"}'}),
  fetch(api + "/jobs/wordcount?mode=cancel", {method: "PATCH", headers: {"Content-Type": "application/json"}, body: "{}"}),
  fetch(local + "/jobs/wordcount/savepoints", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"target-directory":"/tmp/x"}'}),
]).then(() => { document.title = "done"; });
</script>`, base, "http://localhost:"+port)
	})
	evilLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	evilSrv := &http.Server{Handler: evil}
	go evilSrv.Serve(evilLn)
	t.Cleanup(func() { evilSrv.Close() })

	b.do(t, "open the hostile page", chromedp.Navigate("http://"+evilLn.Addr().String()+"/"))
	b.waitFor(t, "the hostile page's requests settled", `document.title === "done"`)
	hostile := rec.stateChanges()
	var posts int
	for _, s := range hostile {
		switch {
		case s.method == "OPTIONS": // the preflight of the JSON cancel; never granted
			if s.code < 400 {
				t.Errorf("preflight %+v was answered %d", s, s.code)
			}
		case s.code != http.StatusForbidden:
			t.Errorf("hostile request %+v answered %d, want 403", s, s.code)
		default:
			posts++
		}
		if s.method == "PATCH" {
			t.Errorf("the browser sent the JSON cancel %+v: the preflight should have stopped it", s)
		}
	}
	if posts != 2 {
		t.Errorf("the server refused %d hostile POSTs, want the 2 no-cors ones; saw %+v", posts, hostile)
	}

	// A page that reaches the server under its own host name (DNS
	// rebinding) is same-origin to the browser; the Host header gives it
	// away.
	rec.reset()
	b.do(t, "open the rebinding page", chromedp.Navigate("http://rebind.example:"+port+"/"))
	b.waitFor(t, "the server refuses the rebound host", `document.body.textContent.includes("is not this server's")`)
	evaluate[bool](t, b, `(fetch("/jobs/wordcount/stop", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(() => { document.title = "rebound"; }), true)`)
	b.waitFor(t, "the rebound stop was answered", `document.title === "rebound"`)
	for _, s := range rec.stateChanges() {
		if s.code != http.StatusForbidden {
			t.Errorf("rebound request %+v answered %d, want 403", s, s.code)
		}
	}
	if st, n := job.Status(), job.Cancels(); st != rest.JobRunning || n != 0 {
		t.Fatalf("after the hostile pages the job is %s, cancelled %d times", st, n)
	}
	if _, hist := job.Checkpoints(); len(hist) != 0 {
		t.Fatalf("after the hostile pages the job has %d checkpoints or savepoints: %+v", len(hist), hist)
	}

	// The dashboard's own buttons.
	rec.reset()
	b.do(t, "open the job", chromedp.Navigate(base+"/#/jobs/wordcount/checkpoints"))
	b.waitFor(t, "the buttons show", `document.getElementById("trigger-checkpoint") !== null`)
	b.do(t, "trigger a checkpoint", chromedp.Click(chromedp.ID("trigger-checkpoint")))
	b.waitFor(t, "the checkpoint completes", `document.getElementById("op-status").dataset.state === "completed" && document.getElementById("op-status").dataset.kind === "checkpoint"`)
	b.do(t, "take a savepoint", chromedp.SendKeys(chromedp.ID("savepoint-dir"), "nightly"), chromedp.Click(chromedp.ID("trigger-savepoint")))
	b.waitFor(t, "the savepoint completes", `document.getElementById("op-status").dataset.state === "completed" && document.getElementById("op-status").dataset.kind === "savepoint"`)
	if got := evaluate[string](t, b, `document.getElementById("op-status").textContent`); !strings.Contains(got, "/tmp/savepoints/nightly/savepoint-") {
		t.Errorf("savepoint status %q, want it under the job's savepoint directory", got)
	}
	b.do(t, "a savepoint outside the roots", chromedp.SetValue(chromedp.ID("savepoint-dir"), "/etc"), chromedp.Click(chromedp.ID("trigger-savepoint")))
	b.waitFor(t, "it is refused with the roots", `document.getElementById("op-status").dataset.state === "failed" && document.getElementById("op-status").textContent.includes("allowed: /tmp/savepoints")`)
	b.do(t, "cancel", chromedp.Click(chromedp.ID("cancel-job")))
	b.waitFor(t, "the confirmation opens", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-cancel")))
	b.waitFor(t, "the job shows CANCELED", `document.getElementById("job-status").textContent === "CANCELED"`)

	var kinds []string
	for _, s := range rec.stateChanges() {
		kinds = append(kinds, fmt.Sprintf("%s %s %d", s.method, s.path, s.code))
		if s.origin != base || s.site != "same-origin" || !strings.HasPrefix(s.contentType, "application/json") {
			t.Errorf("the dashboard's request %+v: want Origin %s, Sec-Fetch-Site same-origin, JSON", s, base)
		}
	}
	want := []string{"POST /jobs/wordcount/checkpoints 202", "POST /jobs/wordcount/savepoints 202", "POST /jobs/wordcount/savepoints 403", "PATCH /jobs/wordcount 202"}
	if strings.Join(kinds, "; ") != strings.Join(want, "; ") {
		t.Errorf("the dashboard's state changes: %q, want %q", kinds, want)
	}
	if n := job.Cancels(); n != 1 {
		t.Errorf("the dashboard's cancel reached the job %d times, want 1", n)
	}
	b.checkNoPageErrors(t)
}
