package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// contentTypes are the types of the files the dashboard is made of; a file
// of another kind is not served (Has reports false), so that a stray file
// in static/ never goes out with a sniffed type.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// contentSecurityPolicy allows the page only its own scripts, styles and
// API, and forbids framing (the page has a cancel button: no clickjacking).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	data        []byte
	contentType string
	etag        string
}

var (
	loadOnce sync.Once
	files    map[string]file // by URL path: "/" and "/app.js"
)

// load indexes the embedded files once, on first use.
func load() map[string]file {
	loadOnce.Do(func() {
		files = map[string]file{}
		err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			ct, ok := contentTypes[path.Ext(p)]
			if !ok {
				return nil
			}
			data, err := static.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			files[strings.TrimPrefix(p, "static")] = file{data: data, contentType: ct,
				etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
			return nil
		})
		if err != nil { // the embedded tree is part of the binary: it cannot fail
			panic("web: reading the embedded dashboard: " + err.Error())
		}
		files["/"] = files["/index.html"]
	})
	return files
}

// Has reports whether urlPath names one of the dashboard's files: "/",
// "/index.html" or an asset such as "/app.js".
func Has(urlPath string) bool {
	_, ok := load()[urlPath]
	return ok
}

// Handler serves the dashboard's files: GET and HEAD of "/" (the page) and
// of its assets, with their content types, an ETag (a conditional request
// gets 304) and a Content-Security-Policy that allows nothing but the page's
// own files and API. Other paths get 404 and other methods 405. The files
// are public (they hold no data); the page asks for a token itself.
func Handler() http.Handler { return http.HandlerFunc(serve) }

// modTime is zero: ETags, not dates, validate caches (the embedded files
// carry no modification time).
var modTime time.Time

func serve(w http.ResponseWriter, r *http.Request) {
	f, ok := load()[r.URL.Path]
	if !ok {
		http.Error(w, "404 page not found: the dashboard is at /", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	// Revalidate every time: a new binary must not run an old page's script.
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if f.contentType == contentTypes[".html"] {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, "", modTime, bytes.NewReader(f.data))
}
