package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
	"github.com/weirstream/weir/internal/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type answer struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, h http.Handler, method, path string, header http.Header) answer {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1:8081"+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return answer{rec.Code, rec.Result().Header, string(body)}
}

func TestHandler(t *testing.T) {
	h := web.Handler()
	tests := []struct {
		name, method, path string
		code               int
		contentType        string
		body               string // a substring
	}{
		{"index", "GET", "/", 200, "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"index by name", "GET", "/index.html", 200, "text/html; charset=utf-8", "<title>weir dashboard</title>"},
		{"script", "GET", "/app.js", 200, "text/javascript; charset=utf-8", `"use strict";`},
		{"style sheet", "GET", "/style.css", 200, "text/css; charset=utf-8", ":root {"},
		{"icon", "GET", "/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"head", "HEAD", "/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"unknown asset", "GET", "/nope.js", 404, "text/plain; charset=utf-8", "the dashboard is at /"},
		{"embedded directory name", "GET", "/static/app.js", 404, "text/plain; charset=utf-8", "404"},
		{"directory", "GET", "/static/", 404, "text/plain; charset=utf-8", "404"},
		{"API path", "GET", "/jobs", 404, "text/plain; charset=utf-8", "404"},
		{"post", "POST", "/", 405, "text/plain; charset=utf-8", "use GET"},
		{"delete asset", "DELETE", "/app.js", 405, "text/plain; charset=utf-8", "use GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, h, tt.method, tt.path, nil)
			if a.code != tt.code || a.header.Get("Content-Type") != tt.contentType || !strings.Contains(a.body, tt.body) {
				t.Fatalf("%s %s: %d %q %.80q, want %d %q containing %q", tt.method, tt.path,
					a.code, a.header.Get("Content-Type"), a.body, tt.code, tt.contentType, tt.body)
			}
			if tt.method == "HEAD" && a.body != "" {
				t.Errorf("HEAD answered a body of %d bytes", len(a.body))
			}
			if tt.code == 405 && a.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", a.header.Get("Allow"))
			}
			if tt.code == 200 && (a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("Cache-Control") != "no-cache") {
				t.Errorf("headers %v", a.header)
			}
		})
	}
}

func TestIndexSecurityHeaders(t *testing.T) {
	a := do(t, web.Handler(), "GET", "/", nil)
	csp := a.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if a.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("X-Frame-Options %q", a.header.Get("X-Frame-Options"))
	}
}

// TestConditionalRequest: the ETag validates a cached copy.
func TestConditionalRequest(t *testing.T) {
	h := web.Handler()
	first := do(t, h, "GET", "/app.js", nil)
	etag := first.header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{16}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if a := do(t, h, "GET", "/app.js", http.Header{"If-None-Match": {etag}}); a.code != 304 || a.body != "" {
		t.Errorf("same ETag: %d %d bytes", a.code, len(a.body))
	}
	if a := do(t, h, "GET", "/app.js", http.Header{"If-None-Match": {`"0000000000000000"`}}); a.code != 200 || a.body != first.body {
		t.Errorf("other ETag: %d", a.code)
	}
	if other := do(t, h, "GET", "/style.css", nil).header.Get("ETag"); other == etag {
		t.Errorf("two files share the ETag %s", etag)
	}
}

// TestReferencedAssetsAreServed: every file the page loads is served, with
// a relative URL (so that a reverse proxy may mount the dashboard under a
// prefix).
func TestReferencedAssetsAreServed(t *testing.T) {
	index := do(t, web.Handler(), "GET", "/", nil).body
	refs := regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references only %v", refs)
	}
	for _, ref := range refs {
		u := ref[1]
		if strings.HasPrefix(u, "/") || strings.Contains(u, ":") {
			t.Errorf("index.html references %q: use a relative URL of an embedded file", u)
			continue
		}
		if !web.Has("/" + u) {
			t.Errorf("index.html references %q, which is not served", u)
		}
	}
}

// TestNothingExternal: the dashboard loads nothing from other hosts (no
// CDN at run time) and runs no inline script or style (the CSP forbids
// them).
func TestNothingExternal(t *testing.T) {
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile("static/" + p)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(data), "http://www.w3.org/2000/svg", "") // the SVG namespace
		if m := regexp.MustCompile(`(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindString(text); m != "" {
			t.Errorf("%s refers to another host: %s", p, m)
		}
		if strings.HasSuffix(p, ".html") && (strings.Contains(text, "<script>") || strings.Contains(text, " style=") || strings.Contains(text, "<style")) {
			t.Errorf("%s has an inline script or style, which the Content-Security-Policy blocks", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHas(t *testing.T) {
	for path, want := range map[string]bool{
		"/": true, "/index.html": true, "/app.js": true, "/style.css": true, "/favicon.svg": true,
		"": false, "/app.js/": false, "app.js": false, "/static/app.js": false, "/jobs": false, "/metrics": false,
	} {
		if got := web.Has(path); got != want {
			t.Errorf("Has(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestMountedInRESTServer: the REST server serves the dashboard at "/"
// without a token (a browser cannot attach one to the page load), while
// the API, other paths and other mounted handlers still need it.
func TestMountedInRESTServer(t *testing.T) {
	jm := resttest.NewJobManager()
	jm.Add(resttest.NewJob("j1", "Job One"))
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "weir_up 1\n") })
	srv, err := rest.New(jm, rest.Options{Token: "s3cret", Handlers: map[string]http.Handler{"GET /metrics": metrics}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	bearer := http.Header{"Authorization": {"Bearer s3cret"}}
	tests := []struct {
		name, method, path string
		header             http.Header
		code               int
		contentType        string
	}{
		{"page without token", "GET", "/", nil, 200, "text/html; charset=utf-8"},
		{"script without token", "GET", "/app.js", nil, 200, "text/javascript; charset=utf-8"},
		{"page with token", "GET", "/", bearer, 200, "text/html; charset=utf-8"},
		{"head without token", "HEAD", "/style.css", nil, 200, "text/css; charset=utf-8"},
		{"API without token", "GET", "/jobs", nil, 401, "application/json; charset=utf-8"},
		{"API with token", "GET", "/jobs/overview", bearer, 200, "application/json; charset=utf-8"},
		{"versioned API", "GET", "/v1/config", bearer, 200, "application/json; charset=utf-8"},
		{"post to the page", "POST", "/", nil, 401, "application/json; charset=utf-8"},
		{"post to the page with token", "POST", "/", bearer, 404, "application/json; charset=utf-8"},
		{"unknown path without token", "GET", "/nope.js", nil, 401, "application/json; charset=utf-8"},
		{"unknown path with token", "GET", "/nope.js", bearer, 404, "application/json; charset=utf-8"},
		{"metrics without token", "GET", "/metrics", nil, 401, "application/json; charset=utf-8"},
		{"metrics with token", "GET", "/metrics", bearer, 200, "text/plain; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, h, tt.method, tt.path, tt.header)
			if a.code != tt.code || a.header.Get("Content-Type") != tt.contentType {
				t.Fatalf("%s %s: %d %q %.100q, want %d %q", tt.method, tt.path, a.code, a.header.Get("Content-Type"), a.body, tt.code, tt.contentType)
			}
		})
	}
}

// TestHandlerAtRootReplacesDashboard: Options.Handlers["/"] takes the
// dashboard's place (and its requests need the token).
func TestHandlerAtRootReplacesDashboard(t *testing.T) {
	mine := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "my dashboard") })
	srv, err := rest.New(resttest.NewJobManager(), rest.Options{Token: "t", Handlers: map[string]http.Handler{"/": mine}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if a := do(t, srv.Handler(), "GET", "/", nil); a.code != 401 {
		t.Errorf("without token: %d %q", a.code, a.body)
	}
	if a := do(t, srv.Handler(), "GET", "/app.js", http.Header{"Authorization": {"Bearer t"}}); a.code != 200 || a.body != "my dashboard" {
		t.Errorf("with token: %d %q", a.code, a.body)
	}
}
