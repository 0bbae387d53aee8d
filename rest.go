package weir

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/metrics/promexport"
	"github.com/weirstream/weir/internal/rest"
	iruntime "github.com/weirstream/weir/internal/runtime"
)

// --- what a job handle knows for the REST API --------------------------------

// maxExceptions bounds the failures a job remembers (newest kept).
const maxExceptions = 100

// jobInfo is what the REST API and /metrics read about a job besides its
// checkpoint statistics: identity, graph, status, failures and the
// current attempt's task metrics. Safe for concurrent use.
type jobInfo struct {
	id, name  string
	opts      Options
	jg        *graph.JobGraph
	metrics   *metrics.Job
	submitted time.Time

	mu         sync.Mutex
	status     rest.JobStatus
	end        time.Time
	cancelling bool
	exceptions []rest.ExceptionInfo // newest first
	sources    []*iruntime.Task     // the current attempt's source tasks
	// stopSavepoint is the savepoint the job was stopped with.
	stopSavepoint string
}

// stoppedWith records the outcome of a stop with a savepoint.
func (i *jobInfo) stoppedWith(path string, err error) {
	if err != nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stopSavepoint = path
}

func newJobInfo(opts Options, name string, jg *graph.JobGraph) *jobInfo {
	return &jobInfo{id: opts.JobID, name: name, opts: opts, jg: jg,
		metrics: metrics.NewJob(opts.JobID, name), submitted: time.Now(), status: rest.JobCreated}
}

// deployed records an attempt's tasks; the job is then RUNNING.
func (i *jobInfo) deployed(attempt int, tasks []*iruntime.Task) {
	ms := make([]*metrics.Task, len(tasks))
	for k, t := range tasks {
		ms[k] = t.Metrics()
	}
	i.metrics.SetTasks(attempt, ms)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.sources = i.sources[:0]
	for _, t := range tasks {
		if t.IsSource() {
			i.sources = append(i.sources, t)
		}
	}
	if !i.status.Terminal() {
		i.status = rest.JobRunning
	}
}

// sourceTasks returns the current attempt's source tasks.
func (i *jobInfo) sourceTasks() []*iruntime.Task {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.sources)
}

// failed records the failure of an attempt (jobmaster.Options.OnFailure).
func (i *jobInfo) failed(err error, restarting bool) {
	e := exceptionOf(err, time.Now())
	i.mu.Lock()
	defer i.mu.Unlock()
	i.exceptions = append([]rest.ExceptionInfo{e}, i.exceptions...)
	if len(i.exceptions) > maxExceptions {
		i.exceptions = i.exceptions[:maxExceptions]
	}
	if restarting {
		i.status = rest.JobRestarting
	} else {
		i.status = rest.JobFailing
	}
}

// ended records how the job ended: Run returned err.
func (i *jobInfo) ended(err error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.end = time.Now()
	switch {
	case err == nil:
		i.status = rest.JobFinished
	case errors.Is(err, context.Canceled):
		i.status = rest.JobCanceled
	default:
		i.status = rest.JobFailed
		if len(i.exceptions) == 0 || i.exceptions[0].Message != err.Error() {
			// A failure outside an attempt (restore, storage): the job's own.
			i.exceptions = append([]rest.ExceptionInfo{exceptionOf(err, i.end)}, i.exceptions...)
		}
	}
}

func (i *jobInfo) requestCancel() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.status.Terminal() {
		i.cancelling = true
	}
}

func (i *jobInfo) jobStatus() (rest.JobStatus, time.Time) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cancelling && !i.status.Terminal() {
		return rest.JobCancelling, i.end
	}
	return i.status, i.end
}

// exceptionOf describes a failure: the task that failed, the error's type
// (the innermost cause's) and its text, with the stack for a panic.
func exceptionOf(err error, at time.Time) rest.ExceptionInfo {
	e := rest.ExceptionInfo{Time: at, Message: err.Error()}
	var oe *iruntime.OperatorError
	if errors.As(err, &oe) {
		e.Task = fmt.Sprintf("%s (%d/%d)", oe.Operator, oe.Subtask+1, oe.Parallelism)
	}
	var pe *iruntime.PanicError
	if errors.As(err, &pe) {
		e.Name = "panic"
		e.Message += "\n\n" + pe.Stack
		return e
	}
	inner := err
	for {
		var next error
		switch u := inner.(type) {
		case *iruntime.OperatorError:
			next = u.Err
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		}
		if next == nil {
			break
		}
		inner = next
	}
	e.Name = fmt.Sprintf("%T", inner)
	return e
}

// ID returns the job's id (Options.JobID, or the job's name by default).
func (c *JobClient) ID() string { return c.info.id }

// Name returns the name the job was executed with.
func (c *JobClient) Name() string { return c.info.name }

// --- rest.Job over a JobClient -----------------------------------------------

// restJob is a JobClient as the REST API sees it.
type restJob struct{ c *JobClient }

var _ rest.Job = restJob{}

func (j restJob) ID() string   { return j.c.info.id }
func (j restJob) Name() string { return j.c.info.name }

func (j restJob) Status() rest.JobStatus {
	st, _ := j.c.info.jobStatus()
	return st
}

func (j restJob) StartTime() time.Time { return j.c.info.submitted }

func (j restJob) EndTime() time.Time {
	_, end := j.c.info.jobStatus()
	return end
}

func (j restJob) Exceptions() []rest.ExceptionInfo {
	i := j.c.info
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.exceptions)
}

// Vertices are the job graph's vertices with the current attempt's figures
// summed over their subtasks.
func (j restJob) Vertices() []rest.VertexInfo {
	i := j.c.info
	st, end := i.jobStatus()
	figures := map[string]metrics.Vertex{}
	for _, v := range i.metrics.Vertices(time.Now()) {
		figures[v.ID] = v
	}
	out := make([]rest.VertexInfo, 0, len(i.jg.Vertices))
	for _, v := range i.jg.Vertices {
		id := strconv.Itoa(int(v.ID))
		vi := rest.VertexInfo{ID: id, Name: v.Name, Parallelism: v.Parallelism,
			MaxParallelism: i.opts.MaxParallelism, Status: rest.TaskCreated}
		if m, ok := figures[id]; ok {
			vi.Status = taskStatus(m.Status)
			vi.StartTime, vi.EndTime = m.Start, m.End
			vi.Metrics = rest.IOMetrics{
				ReadRecords: m.RecordsIn, WriteRecords: m.RecordsOut,
				BackPressuredTime: m.BackPressured, IdleTime: m.Idle, BusyTime: m.Busy,
				BytesUnknown: true,
			}
			vi.BackPressuredRatio = m.MaxBackPressuredRatio
			for k, name := range m.Operators {
				vi.Operators = append(vi.Operators, rest.OperatorRecords{Name: name,
					ReadRecords: m.OperatorRecordsIn[k], WriteRecords: m.OperatorRecordsOut[k]})
			}
		} else if st.Terminal() {
			vi.Status, vi.EndTime = terminalTaskStatus(st), end
		}
		for _, e := range v.Inputs {
			vi.Inputs = append(vi.Inputs, rest.VertexInput{
				Source:       strconv.Itoa(int(i.jg.VertexOf[e.From])),
				ShipStrategy: e.Partitioner.String(),
			})
		}
		out = append(out, vi)
	}
	return out
}

func taskStatus(s metrics.Status) rest.TaskStatus {
	switch s {
	case metrics.Initializing:
		return rest.TaskInitializing
	case metrics.Running:
		return rest.TaskRunning
	case metrics.Finished:
		return rest.TaskFinished
	case metrics.Canceled:
		return rest.TaskCanceled
	case metrics.Failed:
		return rest.TaskFailed
	default:
		return rest.TaskCreated
	}
}

func terminalTaskStatus(st rest.JobStatus) rest.TaskStatus {
	switch st {
	case rest.JobFailed:
		return rest.TaskFailed
	case rest.JobCanceled:
		return rest.TaskCanceled
	default:
		return rest.TaskFinished
	}
}

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

func (j restJob) Checkpoints() (CheckpointSummary, []CheckpointStats) { return j.c.Checkpoints() }
func (j restJob) Checkpoint(id int64) (CheckpointStats, bool)         { return j.c.Checkpoint(id) }

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
	j.c.info.requestCancel()
	j.c.Cancel()
}

// Metrics and Checkpoints make a restJob a promexport.Job.
func (j restJob) Metrics() *metrics.Job { return j.c.info.metrics }

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

// TaskManagers describes the embedded TaskManager: as many slots as the
// jobs need (a job needs its largest vertex parallelism, as with Flink's
// slot sharing), those of running jobs in use; the machine's cores and
// memory.
func (m *localJobManager) TaskManagers() []rest.TaskManagerInfo {
	slots, used := 0, 0
	for _, c := range m.clients() {
		need := 0
		for _, v := range c.info.jg.Vertices {
			need = max(need, v.Parallelism)
		}
		slots += need
		if st, _ := c.info.jobStatus(); !st.Terminal() {
			used += need
		}
	}
	total, free := memoryInfo()
	return []rest.TaskManagerInfo{{
		ID: "local", Address: "local", LastHeartbeat: time.Now(),
		Slots: max(slots, 1), FreeSlots: max(slots, 1) - used,
		CPUCores: goruntime.NumCPU(), PhysicalMemory: total, FreeMemory: free,
	}}
}

// memoryInfo is the machine's physical and available memory in bytes, from
// /proc/meminfo on Linux; elsewhere the Go runtime's view of this process.
func memoryInfo() (total, free int64) {
	f, err := os.Open("/proc/meminfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, rest, _ := strings.Cut(sc.Text(), ":")
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				continue
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				continue
			}
			switch name {
			case "MemTotal":
				total = kb << 10
			case "MemAvailable":
				free = kb << 10
			}
		}
		if total > 0 {
			return total, free
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.Sys), int64(ms.Sys - ms.HeapInuse)
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
