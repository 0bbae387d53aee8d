package rest_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/testutil/certtest"
)

// request is a request with headers of the test's choosing.
type request struct {
	method, path, body string
	header             map[string]string
	host               string // the Host header; "" for the server's address
}

func (s *testServer) send(t testing.TB, q request) response {
	t.Helper()
	var rd io.Reader
	if q.body != "" {
		rd = strings.NewReader(q.body)
	}
	req, err := http.NewRequest(q.method, s.url+q.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range q.header {
		req.Header.Set(k, v)
	}
	if q.host != "" {
		req.Host = q.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// TestCrossSiteRequestsRefused sends the requests a hostile web page can
// make a browser send (a form, a no-cors fetch, a DNS-rebinding page),
// and the server's own page's; the hostile ones change nothing.
func TestCrossSiteRequestsRefused(t *testing.T) {
	jm, wc, _ := fixture()
	s := startServer(t, jm, rest.Options{TrustedOrigins: []string{"https://proxy.example"}})
	own := strings.TrimPrefix(s.url, "http://")
	_, port, _ := net.SplitHostPort(own)
	js := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"Content-Type": "application/json"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	refused := []struct {
		name string
		req  request
		code int
		msg  string
	}{
		{"stop from another origin as text/plain (the issue's curl)", request{"POST", "/jobs/wordcount/stop", `{"targetDirectory":"/tmp/x"}`,
			map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, ""}, 403, `origin "http://evil.example" is refused`},
		{"stop as text/plain without an origin", request{"POST", "/jobs/wordcount/stop", `{}`, map[string]string{"Content-Type": "text/plain"}, ""}, 415, "Content-Type: application/json"},
		{"a form post", request{"POST", "/jobs/wordcount/stop", `a=b`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, ""}, 415, `it has "application/x-www-form-urlencoded"`},
		{"cancel without a content type", request{"PATCH", "/jobs/wordcount?mode=cancel", ``, nil, ""}, 415, "(it has none)"},
		{"checkpoint without a content type", request{"POST", "/jobs/wordcount/checkpoints", ``, nil, ""}, 415, "even with an empty body"},
		{"cancel from another origin, JSON", request{"PATCH", "/jobs/wordcount?mode=cancel", ``, with("Origin", "http://evil.example"), ""}, 403, "refused"},
		{"cancel from another port of the same host", request{"PATCH", "/jobs/wordcount?mode=cancel", ``, with("Origin", "http://127.0.0.1:1"), ""}, 403, "refused"},
		{"cancel from localhost while the page is 127.0.0.1", request{"PATCH", "/jobs/wordcount?mode=cancel", ``, with("Origin", "http://localhost:"+port), ""}, 403, "refused"},
		{"cancel from an opaque origin", request{"PATCH", "/jobs/wordcount?mode=cancel", ``, with("Origin", "null"), ""}, 403, `origin "null"`},
		{"savepoint, Sec-Fetch-Site cross-site", request{"POST", "/jobs/wordcount/savepoints", `{}`, with("Sec-Fetch-Site", "cross-site"), ""}, 403, "Sec-Fetch-Site: cross-site"},
		{"savepoint, Sec-Fetch-Site same-site", request{"POST", "/jobs/wordcount/savepoints", `{}`, with("Sec-Fetch-Site", "same-site"), ""}, 403, "another site"},
		{"DNS rebinding: a POST", request{"POST", "/jobs/wordcount/checkpoints", ``, js, "evil.example:" + port}, 403, `Host "evil.example:` + port + `" is not this server's`},
		{"DNS rebinding: a read", request{"GET", "/jobs", ``, nil, "evil.example:" + port}, 403, "127.0.0.1:" + port + ", localhost:" + port},
		{"DNS rebinding: the dashboard", request{"GET", "/", ``, nil, "evil.example:" + port}, 403, "is not this server's"},
		{"a loopback name at another port", request{"GET", "/jobs", ``, nil, "localhost:1"}, 403, "is not this server's"},
		{"no port", request{"GET", "/jobs", ``, nil, "127.0.0.1"}, 403, "is not this server's"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := s.send(t, c.req)
			if r.code != c.code || !strings.Contains(errorsOf(t, r), c.msg) {
				t.Fatalf("%d %s; want %d with %q", r.code, r.body, c.code, c.msg)
			}
		})
	}
	if st := wc.Status(); st != rest.JobRunning || wc.Cancels() != 0 {
		t.Fatalf("after the refused requests the job is %s with %d cancels", st, wc.Cancels())
	}
	if _, hist := wc.Checkpoints(); len(hist) != 4 {
		t.Fatalf("after the refused requests the job has %d checkpoints, want the fixture's 4", len(hist))
	}

	allowed := []struct {
		name string
		req  request
	}{
		{"a read, no headers", request{"GET", "/jobs", ``, nil, ""}},
		{"localhost at the port", request{"GET", "/jobs", ``, nil, "localhost:" + port}},
		{"LOCALHOST at the port", request{"GET", "/jobs", ``, nil, "LOCALHOST:" + port}},
		{"::1 at the port", request{"GET", "/jobs", ``, nil, "[::1]:" + port}},
		{"another loopback address", request{"GET", "/jobs", ``, nil, "127.0.0.2:" + port}},
		{"a cross-site read (its answer is not readable without CORS)", request{"GET", "/jobs", ``, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, ""}},
		{"the dashboard's own checkpoint", request{"POST", "/jobs/wordcount/checkpoints", `{}`, with("Origin", "http://"+own, "Sec-Fetch-Site", "same-origin"), ""}},
		{"a JSON content type with a charset", request{"POST", "/jobs/wordcount/checkpoints", ``, map[string]string{"Content-Type": "application/json; charset=utf-8"}, ""}},
		{"a trusted proxy's origin", request{"POST", "/jobs/wordcount/checkpoints", ``, with("Origin", "https://PROXY.example:443", "Sec-Fetch-Site", "cross-site"), ""}},
		{"the server's origin under localhost", request{"POST", "/jobs/wordcount/checkpoints", ``, with("Origin", "http://localhost:"+port), "localhost:" + port}},
		{"the dashboard's own cancel", request{"PATCH", "/jobs/wordcount?mode=cancel", `{}`, with("Origin", "http://"+own, "Sec-Fetch-Site", "same-origin"), ""}},
	}
	for _, c := range allowed {
		t.Run(c.name, func(t *testing.T) {
			if r := s.send(t, c.req); r.code != http.StatusOK && r.code != http.StatusAccepted {
				t.Fatalf("%d %s; want 200 or 202", r.code, r.body)
			}
		})
	}
	if wc.Cancels() != 1 {
		t.Errorf("the dashboard's cancel reached the job %d times, want 1", wc.Cancels())
	}
}

func TestSecurityHeaders(t *testing.T) {
	jm, _, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	for _, p := range []string{"/", "/jobs", "/nope"} {
		r := s.do(t, "GET", p, "")
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff"} {
			if got := r.header.Get(k); !strings.Contains(got, v) {
				t.Errorf("GET %s: %s %q, want %q", p, k, got, v)
			}
		}
	}
}

// TestNoHostCheckOffLoopback: a server on other addresses is reached under
// names it cannot know; its token protects it.
func TestNoHostCheckOffLoopback(t *testing.T) {
	jm, _, _ := fixture()
	srv, err := rest.New(jm, rest.Options{Address: "0.0.0.0:8081", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	req, _ := http.NewRequest("GET", "http://weir.example:8081/jobs", nil)
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

// TestSavepointTargetsRefused: targets outside the job's savepoint
// directory and the allowed roots get 403 naming the roots, malformed
// ones 400; none reaches the job.
func TestSavepointTargetsRefused(t *testing.T) {
	jm, wc, _ := fixture() // wordcount's savepoint directory: file:///tmp/savepoints
	s := startServer(t, jm, rest.Options{SavepointAllowedRoots: []string{"/srv/extra", "s3://bkt/sp?endpoint=minio.internal:9000"}})
	for _, c := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/jobs/wordcount/savepoints", `{"target-directory":"../../etc"}`, 403, "savepoint target refused: \"../../etc\": it is outside the allowed savepoint roots; allowed: /tmp/savepoints, /srv/extra, s3://bkt/sp"},
		{"/jobs/wordcount/stop", `{"targetDirectory":"../../etc"}`, 403, "allowed: /tmp/savepoints, /srv/extra, s3://bkt/sp"},
		{"/jobs/wordcount/stop", `{"targetDirectory":"/etc"}`, 403, "outside the allowed savepoint roots"},
		{"/jobs/wordcount/stop", `{"targetDirectory":"file:///etc"}`, 403, "outside"},
		{"/jobs/wordcount/stop", `{"targetDirectory":"/tmp/savepoints/../x", "drain": true}`, 403, "outside"},
		{"/jobs/wordcount/savepoints", `{"target-directory":"/srv/extra-evil"}`, 403, "outside"},
		{"/jobs/wordcount/savepoints", `{"target-directory":"s3://bkt/sp/x?endpoint=127.0.0.1:18199"}`, 403, "may not set S3 parameters"},
		{"/jobs/wordcount/savepoints", `{"target-directory":"s3://key:secret@bkt/sp/x"}`, 403, "credentials never come from a request"},
		{"/jobs/wordcount/savepoints", `{"target-directory":"s3://other/sp"}`, 403, "outside"},
		{"/jobs/wordcount/savepoints", `{"target-directory":"http://evil.example/x"}`, 400, `unknown scheme "http"`},
		{"/jobs/wordcount/savepoints", "{\"target-directory\":\"/tmp/savepoints/\\u0000\"}", 400, "control character"},
	} {
		r := s.do(t, "POST", c.path, c.body)
		if r.code != c.code || !strings.Contains(errorsOf(t, r), c.msg) {
			t.Errorf("POST %s %s: %d %s; want %d with %q", c.path, c.body, r.code, r.body, c.code, c.msg)
		}
		if strings.Contains(string(r.body), "minio.internal") || strings.Contains(string(r.body), "secret") {
			t.Errorf("POST %s %s: the answer names the operator's endpoint or the credentials: %s", c.path, c.body, r.body)
		}
	}
	if _, hist := wc.Checkpoints(); len(hist) != 4 || wc.Status() != rest.JobRunning {
		t.Fatalf("a refused target reached the job: %d checkpoints (want the fixture's 4), %s", len(hist), wc.Status())
	}
	// Inside the roots: relative ones under the job's directory; an S3
	// target gets its root's endpoint.
	for body, want := range map[string]string{
		`{"target-directory":"nightly"}`:           "/tmp/savepoints/nightly/savepoint-",
		`{"target-directory":"/srv/extra/a/../b"}`: "/srv/extra/b/savepoint-",
		`{"target-directory":"s3://bkt/sp/x"}`:     "s3://bkt/sp/x?endpoint=minio.internal:9000/savepoint-",
	} {
		id := trigger(t, s, "/jobs/wordcount/savepoints", body)
		res := waitOperation(t, s, "/jobs/wordcount/savepoints/"+id)
		if res.Operation == nil || res.Operation.Location == nil || !strings.HasPrefix(*res.Operation.Location, want) {
			t.Errorf("%s: %+v, want location %s…", body, res.Operation, want)
		}
	}

	// No savepoint directory and no root: say how to configure one.
	jm2, wc2, _ := fixture()
	wc2.SetCheckpointConfig(rest.CheckpointConfigInfo{CheckpointStorage: "memory://"})
	s2 := startServer(t, jm2, rest.Options{})
	for body, want := range map[string]string{
		``:                               "400 --savepoint-dir",
		`{"target-directory":"x"}`:       "403 --savepoint-dir",
		`{"target-directory":"/tmp/sp"}`: "403 no savepoint root is configured (start the job with weir run --savepoint-dir, or allow roots with --savepoint-allowed-roots)",
	} {
		r := s2.do(t, "POST", "/jobs/wordcount/savepoints", body)
		code, msg, _ := strings.Cut(want, " ")
		if got := http.StatusText(r.code); !strings.HasPrefix(want, code) || !strings.Contains(errorsOf(t, r), msg) {
			t.Errorf("%q: %d (%s) %s; want %s", body, r.code, got, r.body, want)
		}
	}
}

func TestOptionsValidateSecurity(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		opts rest.Options
		msg  string
	}{
		{rest.Options{SavepointAllowedRoots: []string{"ftp://x"}}, `Options.SavepointAllowedRoots: storage: bad storage URL "ftp://x": unknown scheme "ftp"`},
		{rest.Options{TrustedOrigins: []string{"proxy.example"}}, `Options.TrustedOrigins: "proxy.example" is not a web origin`},
		{rest.Options{TrustedOrigins: []string{"https://proxy.example/path"}}, `is not a web origin`},
		{rest.Options{TLSCertFile: "cert.pem"}, "Options.TLSCertFile and Options.TLSKeyFile go together"},
		{rest.Options{TLSCertFile: filepath.Join(dir, "none.pem"), TLSKeyFile: filepath.Join(dir, "none.key")}, "none.pem"},
	} {
		jm, _, _ := fixture()
		_, err := rest.New(jm, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("New(%+v): %v; want an error with %q", c.opts, err, c.msg)
		}
	}
}

// TestTLS serves over HTTPS with a certificate of a CA made here: a client
// trusting the CA gets the API, one that does not and a plain-HTTP one
// get nothing.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	files := certtest.WriteCA(t, dir)
	caPEM, certFile, keyFile := files.CAPEM, files.Cert, files.Key
	jm, _, _ := fixture()
	srv, err := rest.New(jm, rest.Options{Address: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(t.Context(), ln) }()
	defer func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	<-srv.Ready()
	addr := srv.Addr().String()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer trusting.CloseIdleConnections()
	for _, host := range []string{addr, strings.Replace(addr, "127.0.0.1", "localhost", 1)} {
		resp, err := trusting.Get("https://" + host + "/jobs")
		if err != nil {
			t.Fatalf("GET https://%s/jobs: %v", host, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Fatalf("GET https://%s/jobs: %s", host, resp.Status)
		}
	}
	// The dashboard's own requests name an https origin.
	req, _ := http.NewRequest("POST", "https://"+addr+"/jobs/wordcount/checkpoints", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://"+addr)
	resp, err := trusting.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST from the https origin: %s", resp.Status)
	}

	untrusting := &http.Client{Transport: &http.Transport{}}
	defer untrusting.CloseIdleConnections()
	if _, err := untrusting.Get("https://" + addr + "/jobs"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v; want a certificate error", err)
	}
	plain := &http.Client{Transport: &http.Transport{}}
	defer plain.CloseIdleConnections()
	if resp, err := plain.Get("http://" + addr + "/jobs"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP got the API: %s", b)
		}
	}
}
