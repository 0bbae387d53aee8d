package rest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/web"
)

// Server serves the REST API of one JobManager.
type Server struct {
	jm    JobManager
	opts  Options
	ops   *operations
	api   *http.ServeMux
	extra *http.ServeMux // Options.Handlers; nil when there are none

	loopback       bool            // Options.Address is a loopback one: Host is checked
	trustedOrigins map[string]bool // Options.TrustedOrigins, normalized
	tls            *tls.Config     // Options.TLSCertFile and TLSKeyFile; nil without TLS

	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	ready     chan struct{} // closed once Serve listens

	mu      sync.Mutex
	closed  bool
	serving chan struct{} // closed when Serve returns; nil before Serve
	addr    net.Addr
}

// New returns a server for jm. It starts nothing: call Serve (or mount
// Handler in a server of your own) and Close. It reads Options.TLSCertFile
// and TLSKeyFile, so that a bad certificate fails here.
func New(jm JobManager, opts Options) (*Server, error) {
	if jm == nil {
		return nil, errors.New("rest: New needs a JobManager")
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		jm: jm, opts: opts,
		ops:     newOperations(opts.MaxOperations, opts.Logger),
		api:     http.NewServeMux(),
		closing: make(chan struct{}),
		ready:   make(chan struct{}),
	}
	host, _, _ := net.SplitHostPort(opts.Address)
	s.loopback = isLoopback(host)
	s.trustedOrigins = make(map[string]bool)
	for _, o := range opts.TrustedOrigins {
		s.trustedOrigins[normalizeOrigin(o)] = true
	}
	if opts.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("rest: Options.TLSCertFile %s and TLSKeyFile %s: %w", opts.TLSCertFile, opts.TLSKeyFile, err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	s.routes()
	if len(opts.Handlers) > 0 {
		s.extra = http.NewServeMux()
		for pattern, h := range opts.Handlers {
			s.extra.Handle(pattern, h)
		}
	}
	return s, nil
}

func (s *Server) routes() {
	m := s.api
	m.HandleFunc("GET /overview", s.getOverview)
	m.HandleFunc("GET /config", s.getConfig)
	m.HandleFunc("GET /taskmanagers", s.getTaskManagers)
	m.HandleFunc("GET /taskmanagers/{tmid}", s.getTaskManager)
	m.HandleFunc("GET /jobs", s.getJobs)
	m.HandleFunc("GET /jobs/overview", s.getJobsOverview)
	m.HandleFunc("GET /jobs/{jobid}", s.getJob)
	m.HandleFunc("PATCH /jobs/{jobid}", jsonOnly(s.patchJob))
	m.HandleFunc("GET /jobs/{jobid}/vertices/{vertexid}", s.getVertex)
	m.HandleFunc("GET /jobs/{jobid}/vertices/{vertexid}/taskmanagers", s.getVertexTaskManagers)
	m.HandleFunc("GET /jobs/{jobid}/vertices/{vertexid}/watermarks", s.getVertexWatermarks)
	m.HandleFunc("GET /jobs/{jobid}/exceptions", s.getExceptions)
	m.HandleFunc("GET /jobs/{jobid}/checkpoints", s.getCheckpoints)
	m.HandleFunc("POST /jobs/{jobid}/checkpoints", jsonOnly(s.postCheckpoint))
	m.HandleFunc("GET /jobs/{jobid}/checkpoints/config", s.getCheckpointConfig)
	m.HandleFunc("GET /jobs/{jobid}/checkpoints/details/{checkpointid}", s.getCheckpointDetails)
	m.HandleFunc("GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}", s.getCheckpointSubtasks)
	m.HandleFunc("GET /jobs/{jobid}/checkpoints/{triggerid}", s.getCheckpointStatus)
	m.HandleFunc("POST /jobs/{jobid}/savepoints", jsonOnly(s.postSavepoint))
	m.HandleFunc("GET /jobs/{jobid}/savepoints/{triggerid}", s.getSavepointStatus)
	m.HandleFunc("POST /jobs/{jobid}/stop", jsonOnly(s.postStop))
}

// isAPIPath reports whether p (without the /v1 prefix) is the API's.
func isAPIPath(p string) bool {
	switch p {
	case "/overview", "/config", "/jobs", "/taskmanagers":
		return true
	}
	return strings.HasPrefix(p, "/jobs/") || strings.HasPrefix(p, "/taskmanagers/")
}

// Handler returns the server's handler: authentication, the API, the
// web dashboard and Options.Handlers. Asynchronous operations it starts end at Close.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Serve listens on Options.Address (with TLS when Options.TLSCertFile is
// set) and serves until ctx is done or Close is called. It then stops
// accepting requests, waits up to
// Options.ShutdownTimeout for those in flight, cancels the asynchronous
// operations in progress and waits for them, and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("rest: listen on %s (Options.Address): %w", s.opts.Address, err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener is Serve on a listener of the caller's; it closes ln. With
// Options.TLSCertFile set it speaks TLS on it.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	if s.serving != nil {
		s.mu.Unlock()
		ln.Close()
		return errors.New("rest: the server is already serving")
	}
	done := make(chan struct{})
	s.serving, s.addr = done, ln.Addr()
	close(s.ready)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.closed = true // a server serves once
		s.mu.Unlock()
		close(done)
	}()

	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug),
	}
	s.opts.Logger.Info("REST API listening", "address", ln.Addr().String(), "auth", s.opts.Token != "", "tls", s.tls != nil)
	if !s.loopback && s.tls == nil {
		s.opts.Logger.Warn("the REST API is reachable from other machines over plain HTTP: its token travels in clear; set a TLS certificate and key (--rest-tls-cert, --rest-tls-key) or put a TLS proxy in front of it", "address", ln.Addr().String())
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-served: // the listener failed
	case <-ctx.Done():
	case <-s.closing:
	}
	if err != nil {
		hs.Close() // the connections already accepted
	} else {
		sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
		if hs.Shutdown(sctx) != nil {
			hs.Close() // requests still in flight after the timeout
		}
		cancel()
		if err = <-served; errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	s.ops.stop()
	if err != nil {
		return fmt.Errorf("rest: serve: %w", err)
	}
	return nil
}

// TLS reports whether the server speaks HTTPS (Options.TLSCertFile).
func (s *Server) TLS() bool { return s.tls != nil }

// AwaitAnswered waits until every asynchronous operation (checkpoint,
// savepoint, stop) has ended and a poll of its status has read its
// outcome, or until ctx is done (it then returns ctx.Err()). A process
// that ends with its job calls it before Close, so that the client that
// asked for the stop reads the savepoint's path instead of a refused
// connection.
func (s *Server) AwaitAnswered(ctx context.Context) error { return s.ops.awaitRead(ctx) }

// Ready is closed once Serve listens; Addr then reports the address.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address Serve listens on (useful with port 0); nil before.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops Serve, cancels the asynchronous operations in progress, and
// waits until every goroutine the server started has ended. It is
// idempotent and safe to call concurrently with Serve.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	s.closed = true
	serving := s.serving
	s.mu.Unlock()
	if serving != nil {
		<-serving
	}
	s.ops.stop()
	return nil
}

// --- dispatch ----------------------------------------------------------------

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.opts.Logger.Error("REST handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p)
			writeError(w, http.StatusInternalServerError, "internal error: see the JobManager's log")
		}
	}()
	securityHeaders(w.Header())
	if !s.checkHost(w, r) || !s.checkOrigin(w, r) {
		return
	}
	if !s.authorized(r) && !s.isDashboard(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		writeError(w, http.StatusUnauthorized, `missing or wrong bearer token: send the header "Authorization: Bearer <token>"`)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v1"); ok && (rest == "" || rest[0] == '/') {
		if isAPIPath(rest) {
			serveMux(s.api, w, stripV1(r, rest))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path: %s", r.URL.Path))
		return
	}
	switch {
	case isAPIPath(r.URL.Path):
		serveMux(s.api, w, r)
	case s.isDashboard(r):
		web.Handler().ServeHTTP(w, r)
	case s.extra != nil:
		serveMux(s.extra, w, r)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path: %s", r.URL.Path))
	}
}

// isDashboard reports whether r gets a file of the web dashboard
// (internal/web, mounted at "/"): GET or HEAD of "/" or of an asset, unless
// Options.Handlers claim the path (a handler at "/" replaces the
// dashboard). The files are served without authentication: a browser
// cannot attach a bearer token to the navigation that loads the page, and
// the files hold no data (they are the same code for everyone). The page
// then sends the token the user enters with every API request.
func (s *Server) isDashboard(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || !web.Has(r.URL.Path) {
		return false
	}
	if s.extra != nil {
		if _, pattern := s.extra.Handler(r); pattern != "" {
			return false
		}
	}
	return true
}

func stripV1(r *http.Request, path string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path = path
	r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, "/v1")
	return r2
}

// serveMux serves r with m, answering a path m does not know, or a method
// it does not allow there, with a JSON error.
func serveMux(m *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	h, pattern := m.Handler(r)
	if pattern != "" {
		m.ServeHTTP(w, r)
		return
	}
	c := &captureWriter{header: make(http.Header)}
	h.ServeHTTP(c, r)
	switch c.code {
	case http.StatusMethodNotAllowed:
		allow := c.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s: use %s", r.Method, r.URL.Path, allow))
	case http.StatusNotFound:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path: %s", r.URL.Path))
	default: // a redirect to the clean path
		h.ServeHTTP(w, r)
	}
}

// captureWriter records what ServeMux's own handlers (not found, method
// not allowed, redirect) would answer.
type captureWriter struct {
	header http.Header
	code   int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.opts.Token)) == 1
}

// --- responses ---------------------------------------------------------------

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Errors: []string{"internal error: cannot encode the response: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorResponse{Errors: []string{msg}})
}

// decodeBody reads an optional JSON object into v; an empty body leaves v
// as it is. It answers a bad body itself and then returns false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", s.opts.MaxBodyBytes))
		} else {
			writeError(w, http.StatusBadRequest, "cannot read the request body: "+err.Error())
		}
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := "malformed request body: " + strings.TrimPrefix(err.Error(), "json: ")
		if strings.Contains(err.Error(), "unknown field") {
			msg += "; accepted fields: " + jsonFields(v)
		}
		writeError(w, http.StatusBadRequest, msg)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "malformed request body: data after the JSON object")
		return false
	}
	return true
}

// jsonFields lists the JSON names of the fields of the struct *v.
func jsonFields(v any) string {
	t := reflect.TypeOf(v).Elem()
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// ms is t in milliseconds since the epoch, -1 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
