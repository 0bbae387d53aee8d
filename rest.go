package weir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/promexport"
	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/local"
)

// --- what a job handle knows for the REST API --------------------------------

// jobInfo is what the REST API and /metrics read about a job besides its
// checkpoint statistics (local.Job: status, failures, task metrics), with
// the options it runs with.
type jobInfo struct {
	*local.Job
	opts Options
}

func newJobInfo(opts Options, name string, jg *graph.JobGraph) *jobInfo {
	return &jobInfo{Job: local.NewJob(opts.JobID, name, jg), opts: opts}
}

// ID returns the job's id (Options.JobID, or the job's name by default).
func (c *JobClient) ID() string { return c.info.ID() }

// Name returns the name the job was executed with.
func (c *JobClient) Name() string { return c.info.Name() }

// --- rest.Job over a JobClient -----------------------------------------------

// restJob is a JobClient as the REST API sees it.
type restJob struct{ c *JobClient }

var _ rest.Job = restJob{}

func (j restJob) ID() string   { return j.c.info.ID() }
func (j restJob) Name() string { return j.c.info.Name() }

func (j restJob) Status() rest.JobStatus {
	st, _ := j.c.info.Status()
	return st
}

func (j restJob) StartTime() time.Time { return j.c.info.StartTime() }

func (j restJob) EndTime() time.Time {
	_, end := j.c.info.Status()
	return end
}

func (j restJob) Exceptions() []rest.ExceptionInfo { return j.c.info.Exceptions() }

// Vertices are the job graph's vertices with the current attempt's figures
// summed over their subtasks.
func (j restJob) Vertices() []rest.VertexInfo { return j.c.info.Vertices(j.c.info.opts.MaxParallelism) }

func (j restJob) CheckpointConfig() rest.CheckpointConfigInfo {
	o := j.c.info.opts
	c := o.Checkpointing
	return rest.CheckpointConfigInfo{
		ExactlyOnce: c.Mode == ExactlyOnce, Interval: c.Interval, Timeout: c.Timeout, MinPause: c.MinPause,
		MaxConcurrent: c.MaxConcurrent, TolerableFailures: c.TolerableFailures, Retained: c.Retained,
		RetainOnCancel: c.RetainOnCancel, StateBackend: o.StateBackend, CheckpointStorage: c.Storage,
		SavepointDir: c.SavepointDir, EveryNRecords: c.EveryNRecords,
		Unaligned: c.Unaligned, AlignedTimeout: c.AlignedTimeout,
	}
}

// Checkpoints and Checkpoint give the job master's statistics as they are:
// the REST API renders them itself.
func (j restJob) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	return j.c.jm.Stats()
}
func (j restJob) Checkpoint(id int64) (jobmaster.CheckpointStats, bool) { return j.c.jm.Checkpoint(id) }

func (j restJob) TriggerCheckpoint(ctx context.Context) (int64, error) {
	return j.c.TriggerCheckpoint(ctx)
}

func (j restJob) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return j.c.TriggerSavepoint(ctx, dir)
}

func (j restJob) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	return j.c.StopWithSavepoint(ctx, dir)
}

// DrainWithSavepoint makes a restJob a rest.Drainer.
func (j restJob) DrainWithSavepoint(ctx context.Context, dir string) (string, error) {
	return j.c.DrainWithSavepoint(ctx, dir)
}

var _ rest.Drainer = restJob{}

func (j restJob) Cancel() {
	j.c.info.RequestCancel()
	j.c.Cancel()
}

// Metrics and Checkpoints make a restJob a promexport.Job.
func (j restJob) Metrics() *metrics.Job { return j.c.info.Metrics() }

var _ promexport.Job = restJob{}

// --- the JobManager of this process --------------------------------------------

// localJobManager is the jobs of this process and its one embedded
// TaskManager, as the REST API sees them.
type localJobManager struct {
	mu      sync.Mutex
	jobs    []*JobClient
	started time.Time
}

var _ rest.JobManager = (*localJobManager)(nil)

func (m *localJobManager) add(c *JobClient) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		if j.ID() == c.ID() {
			return fmt.Errorf("weir: the REST server already has a job with id %q: give jobs distinct Options.JobID", c.ID())
		}
	}
	m.jobs = append(m.jobs, c)
	return nil
}

func (m *localJobManager) clients() []*JobClient {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.jobs)
}

func (m *localJobManager) Jobs() []rest.Job {
	cs := m.clients()
	out := make([]rest.Job, len(cs))
	for i, c := range cs {
		out[i] = restJob{c}
	}
	return out
}

func (m *localJobManager) Job(id string) (rest.Job, bool) {
	for _, c := range m.clients() {
		if c.ID() == id {
			return restJob{c}, true
		}
	}
	return nil, false
}

func (m *localJobManager) promJobs() []promexport.Job {
	cs := m.clients()
	out := make([]promexport.Job, len(cs))
	for i, c := range cs {
		out[i] = restJob{c}
	}
	return out
}

// TaskManagers describes the embedded TaskManager (local.TaskManager).
func (m *localJobManager) TaskManagers() []rest.TaskManagerInfo {
	cs := m.clients()
	jobs := make([]*local.Job, len(cs))
	for i, c := range cs {
		jobs[i] = c.info.Job
	}
	return []rest.TaskManagerInfo{local.TaskManager(jobs)}
}

// --- the public server ----------------------------------------------------------

// DefaultRESTAddress is where `weir run` serves the REST API unless told
// otherwise: Flink's port, on the loopback interface.
const DefaultRESTAddress = rest.DefaultAddress

// RESTOptions configure a RESTServer.
type RESTOptions struct {
	// Address is the host:port to listen on. Default: "127.0.0.1:8081".
	// Port 0 picks a free port (see RESTServer.Addr). An address other than
	// a loopback one needs Token.
	Address string
	// Token, when set, is the bearer token every request to the API,
	// /metrics and Handlers must carry ("Authorization: Bearer <token>").
	// The web dashboard's files, served at "/", need none: the page asks
	// for the token and sends it with its API requests. Default: none
	// (loopback only).
	Token string
	// SavepointAllowedRoots are the places, besides a job's savepoint
	// directory (CheckpointOptions.SavepointDir), under which a REST
	// request may ask for a savepoint: storage URLs or paths. A target
	// elsewhere, or whose ".." leaves its root, gets 403 naming the roots,
	// and so does an S3 target with parameters of its own (endpoint=…): it
	// takes those of the root it lies under. Default: none.
	SavepointAllowedRoots []string
	// TrustedOrigins are web origins besides the server's own whose pages
	// may send state-changing requests (a reverse proxy's public origin,
	// e.g. "https://weir.example"). Default: none.
	TrustedOrigins []string
	// TLSCertFile and TLSKeyFile, a PEM certificate and its key, make the
	// server speak HTTPS only. Both or neither. Default: plain HTTP.
	TLSCertFile, TLSKeyFile string
	// Handlers are mounted beside the API by ServeMux pattern, behind the
	// same authentication. The web dashboard is served at "/" already (a
	// handler matching its paths replaces it there); "GET /metrics" is
	// taken by Prometheus. Default: none.
	Handlers map[string]http.Handler
	// Logger receives the server's logs. Default: discards everything.
	Logger *slog.Logger
}

// RESTServer serves the REST API (modelled on Flink's, see DESIGN.md §12),
// Prometheus metrics at /metrics and the web dashboard at / for the jobs
// of this process.
//
// Create it with NewRESTServer, add jobs with AddJob (before or while it
// serves), and run Serve; Close (or the end of Serve's context) stops it
// and waits for every goroutine it started.
type RESTServer struct {
	jm  *localJobManager
	srv *rest.Server
	reg *promexport.Registry

	mu sync.Mutex
	ln net.Listener
}

// NewRESTServer returns a server; it listens on nothing until Listen or
// Serve.
func NewRESTServer(opts RESTOptions) (*RESTServer, error) {
	jm := &localJobManager{started: time.Now()}
	reg := promexport.New(jm.promJobs)
	handlers := map[string]http.Handler{"GET /metrics": reg.Handler()}
	for pattern, h := range opts.Handlers {
		if strings.TrimSpace(pattern) == "GET /metrics" || strings.TrimSpace(pattern) == "/metrics" {
			return nil, fmt.Errorf("weir: RESTOptions.Handlers[%q]: /metrics serves Prometheus metrics; mount the handler elsewhere", pattern)
		}
		handlers[pattern] = h
	}
	srv, err := rest.New(jm, rest.Options{Address: opts.Address, Token: opts.Token, Handlers: handlers, Logger: opts.Logger,
		SavepointAllowedRoots: opts.SavepointAllowedRoots, TrustedOrigins: opts.TrustedOrigins,
		TLSCertFile: opts.TLSCertFile, TLSKeyFile: opts.TLSKeyFile})
	if err != nil {
		return nil, fmt.Errorf("weir: %w", err)
	}
	return &RESTServer{jm: jm, srv: srv, reg: reg}, nil
}

// AddJob makes a job visible through the server. Jobs stay listed after
// they end, as in Flink's JobManager. Ids must be distinct.
func (s *RESTServer) AddJob(c *JobClient) error { return s.jm.add(c) }

// Listen binds the server's address without serving yet, so that a caller
// can report an address in use before starting a job; Serve then serves
// on it. The error of an address in use says so in one line.
func (s *RESTServer) Listen(address string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("weir: the REST server is already listening")
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("REST address %s is already in use: stop what listens there, or choose another with --rest-address (\"off\" disables the REST API)", address)
		}
		return fmt.Errorf("REST address %s: %w", address, err)
	}
	s.ln = ln
	return nil
}

// Serve serves until ctx is done or Close is called, on the listener of
// Listen or else on RESTOptions.Address; it then waits for requests in
// flight (up to 5s) and for the operations it started, and returns nil.
func (s *RESTServer) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return s.srv.Serve(ctx)
	}
	return s.srv.ServeListener(ctx, ln)
}

// AwaitAnswered waits until every asynchronous operation started through
// the server (checkpoint, savepoint, stop) has ended and a client has read
// its outcome, or until ctx is done (it then returns ctx.Err()). Call it
// before Close when the process ends with its job: the client that stopped
// the job then reads the savepoint's path.
func (s *RESTServer) AwaitAnswered(ctx context.Context) error { return s.srv.AwaitAnswered(ctx) }

// Ready is closed once Serve listens; Addr then reports the address.
func (s *RESTServer) Ready() <-chan struct{} { return s.srv.Ready() }

// Addr is the address the server listens on (useful with port 0); nil
// before it does.
func (s *RESTServer) Addr() net.Addr {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		return ln.Addr()
	}
	return s.srv.Addr()
}

// URL is the server's base URL, https:// with TLS; "" before it listens.
func (s *RESTServer) URL() string {
	a := s.Addr()
	if a == nil {
		return ""
	}
	if s.srv.TLS() {
		return "https://" + a.String()
	}
	return "http://" + a.String()
}

// Handler is the server's handler (the API, the dashboard, /metrics and
// RESTOptions.Handlers, with the token check), to mount in an http.Server
// of one's own instead of calling Serve.
func (s *RESTServer) Handler() http.Handler { return s.srv.Handler() }

// Close stops Serve and waits for every goroutine the server started. It
// is idempotent. A listener of Listen that Serve never used is closed.
func (s *RESTServer) Close() error {
	err := s.srv.Close()
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close() // already closed when Serve ran; harmless
	}
	return err
}
