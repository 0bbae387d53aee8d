package cli

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/testutil/certtest"
)

// connRecorder listens on a free loopback port and counts the connections
// made to it: the S3 endpoint a hostile request names.
func connRecorder(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), conns
}

// send sends one request with the headers given (Host among them) and
// returns the status and the error text of the answer.
func send(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e rest.ErrorResponse
	json.Unmarshal(b, &e)
	return resp.StatusCode, strings.Join(e.Errors, "; ")
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestRunRefusesHostileRESTRequests sends the hostile requests of issue 25
// to a real `weir run wordcount` (S3 credentials in its environment): each
// is refused with its status, nothing is written outside the allowed
// root, nothing connects to the endpoint a request names, and the job runs
// on; then the allowed savepoint and stop work.
func TestRunRefusesHostileRESTRequests(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWEIRTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "weir-test-secret")
	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	// A link inside the allowed root that leads out of it.
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(allowed, "link")); err != nil {
		t.Fatal(err)
	}
	endpoint, conns := connRecorder(t)
	w := startWordCount(t, "--repeat-rate", "2000", "--checkpoint-interval", "300ms",
		"--checkpoint-dir", dir+"/ckpt", "--output", dir+"/out", "--rest-address", "127.0.0.1:0",
		"--savepoint-allowed-roots", allowed)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(w.url, "http://"))
	waitRunning(t, w)

	js := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
		code                     int
		msg                      string
	}{
		{"relative target leaving its root", "POST", "/jobs/wordcount/savepoints", `{"target-directory":"../../escape"}`, js, 403,
			"a relative target lies under the job's savepoint directory, and the job has none (start it with weir run --savepoint-dir"},
		{"absolute target elsewhere", "POST", "/jobs/wordcount/savepoints", `{"target-directory":"` + dir + `/escape"}`, js, 403, "allowed: " + allowed},
		{"stop into .. out of the root", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"` + allowed + `/../escape"}`, js, 403, "outside the allowed savepoint roots"},
		{"file URL elsewhere", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"file://` + dir + `/escape", "drain": true}`, js, 403, "outside"},
		{"/etc", "POST", "/jobs/wordcount/savepoints", `{"target-directory":"/etc", "cancel-job": true}`, js, 403, "outside"},
		{"through a link out of the root", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"` + allowed + `/link/x"}`, js, 403, "a symbolic link leads it out"},
		{"S3 endpoint of the request", "POST", "/jobs/wordcount/savepoints", `{"target-directory":"s3://bucket/x?endpoint=` + endpoint + `&secure=false"}`, js, 403, "may not set S3 parameters"},
		{"S3 stop with an endpoint", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"s3://bucket/x?endpoint=http://` + endpoint + `"}`, js, 403, "may not set S3 parameters"},
		{"S3 bucket outside the roots", "POST", "/jobs/wordcount/savepoints", `{"target-directory":"s3://bucket/x"}`, js, 403, "outside"},
		{"no target, no savepoint directory", "POST", "/jobs/wordcount/savepoints", `{}`, js, 400, "--savepoint-dir"},
		{"the issue's cross-origin stop", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"` + allowed + `/x"}`,
			map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403, `origin "http://evil.example" is refused`},
		{"a text/plain stop", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"` + allowed + `/x"}`, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type: application/json"},
		{"a cancel without a content type", "PATCH", "/jobs/wordcount?mode=cancel", ``, nil, 415, "Content-Type: application/json"},
		{"a cross-site cancel", "PATCH", "/jobs/wordcount?mode=cancel", ``, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site: cross-site"},
		{"a rebound stop", "POST", "/jobs/wordcount/stop", `{"targetDirectory":"` + allowed + `/x"}`,
			map[string]string{"Content-Type": "application/json", "Host": "rebind.example:" + port}, 403, "is not this server's"},
		{"a rebound read", "GET", "/jobs/wordcount", ``, map[string]string{"Host": "rebind.example:" + port}, 403, "127.0.0.1:" + port},
	} {
		code, msg := send(t, c.method, w.url+c.path, c.body, c.header)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %q; want %d with %q", c.name, code, msg, c.code, c.msg)
		}
		if strings.Contains(msg, "weir-test-secret") {
			t.Errorf("%s: the answer names the credentials: %s", c.name, msg)
		}
	}

	// A checkpoint after the requests: the job runs on, and whatever they
	// might have started has had its chance.
	if out, _, err := runClient("checkpoint", "wordcount", "--jobmanager", w.url); err != nil {
		t.Fatalf("checkpoint after the hostile requests: %v", err)
	} else if !strings.HasPrefix(out, "Checkpoint ") {
		t.Fatalf("checkpoint printed %q", out)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"allowed", "ckpt", "out", "outside"}) {
		t.Errorf("after the hostile requests %s holds %q, want only allowed, ckpt, out and outside", dir, got)
	}
	if got := append(entries(t, allowed), entries(t, outside)...); !slices.Equal(got, []string{"link"}) {
		t.Errorf("after the hostile requests the allowed root and the link's target hold %q, want only the link", got)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the endpoint a request named", n)
	}

	// What is allowed works, through the client.
	out, _, err := runClient("savepoint", "wordcount", "--dir", allowed+"/mine", "--jobmanager", w.url)
	if err != nil {
		t.Fatalf("savepoint under the allowed root: %v", err)
	}
	if !regexp.MustCompile(`completed: (file://)?` + regexp.QuoteMeta(allowed) + `/mine/savepoint-`).MatchString(out) {
		t.Errorf("savepoint printed %q", out)
	}
	if _, _, err := runClient("savepoint", "wordcount", "--dir", "/etc", "--jobmanager", w.url); err == nil ||
		!strings.Contains(err.Error(), `savepoint target refused: "/etc"`) {
		t.Errorf("weir savepoint --dir /etc: %v; want the refusal", err)
	}
	// The stop by a plain request: `weir stop` polls for the result, and
	// the REST server of this version ends with the job (issue 26).
	if code, msg := send(t, "POST", w.url+"/jobs/wordcount/stop", `{"targetDirectory":"`+allowed+`"}`, js); code != http.StatusAccepted {
		t.Fatalf("stop into the allowed root: %d %s", code, msg)
	}
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run still runs 30s after the stop; stderr:\n%s", w.stderr.String())
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"allowed", "ckpt", "out", "outside"}) {
		t.Errorf("at the end %s holds %q, want allowed, ckpt, out and outside", dir, got)
	}
	if got := entries(t, outside); len(got) != 0 {
		t.Errorf("at the end the link's target holds %q", got)
	}
	var savepoints []string
	for _, e := range append(entries(t, allowed), entries(t, allowed+"/mine")...) {
		if strings.HasPrefix(e, "savepoint-") {
			savepoints = append(savepoints, e)
		}
	}
	if len(savepoints) != 2 {
		t.Errorf("savepoints under %s: %q, want the savepoint's and the stop's", allowed, savepoints)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the endpoint a request named", n)
	}
}

// TestRunRESTOverTLS: `weir run --rest-tls-cert/--rest-tls-key` serves
// HTTPS; the client trusts it with --ca-file, and refuses it without.
func TestRunRESTOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certs := certtest.WriteCA(t, dir)
	w := startWordCount(t, "--repeat-rate", "2000", "--output", dir+"/out", "--rest-address", "127.0.0.1:0",
		"--rest-tls-cert", certs.Cert, "--rest-tls-key", certs.Key, "--rest-token", "s3cret")
	if !strings.HasPrefix(w.url, "https://127.0.0.1:") {
		t.Fatalf("weir run printed the REST URL %s, want https://", w.url)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		stdout, _, err := runClient("list", "--jobmanager", w.url, "--ca-file", certs.CA, "--token", "s3cret")
		if err != nil {
			t.Fatalf("list over TLS: %v", err)
		}
		if strings.Contains(stdout, "RUNNING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list over TLS never showed the job running:\n%s", stdout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	localhost := strings.Replace(w.url, "127.0.0.1", "localhost", 1)
	if _, _, err := runClient("info", "wordcount", "--jobmanager", localhost, "--ca-file", certs.CA, "--token", "s3cret"); err != nil {
		t.Errorf("info over TLS via localhost: %v", err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"list", "--jobmanager", w.url, "--token", "s3cret"}, "certificate"},
		{[]string{"list", "--jobmanager", strings.Replace(w.url, "https://", "http://", 1), "--token", "s3cret"}, "JobManager"},
		{[]string{"list", "--jobmanager", w.url, "--ca-file", filepath.Join(dir, "none.pem")}, "--ca-file"},
		{[]string{"list", "--jobmanager", w.url, "--ca-file", certs.Key}, "holds no PEM certificate"},
		{[]string{"list", "--jobmanager", strings.Replace(w.url, "https://", "http://", 1), "--ca-file", certs.CA}, "applies to an https:// --jobmanager"},
	} {
		if _, _, err := runClient(c.args...); err == nil || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("weir %s: %v; want a one-line error with %q", strings.Join(c.args, " "), err, c.msg)
		}
	}
	if _, _, err := runClient("cancel", "wordcount", "--jobmanager", w.url, "--ca-file", certs.CA, "--token", "s3cret"); err != nil {
		t.Fatalf("cancel over TLS: %v", err)
	}
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("weir run still runs 30s after cancel; stderr:\n%s", w.stderr.String())
	}
}
