package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/storage"
)

// DefaultRegistrationTimeout is how long a TaskManager may stay without a
// JobManager before it gives up (Flink's taskmanager.registration.timeout).
const DefaultRegistrationTimeout = 5 * time.Minute

// TaskManagerOptions configure a TaskManager's agent.
type TaskManagerOptions struct {
	// JobManager is the host:port of the JobManager's control plane.
	// Default "127.0.0.1:6123".
	JobManager string
	// ResourceID names this TaskManager process; it stays the same across
	// its registrations. Default: the host name, the process id and a
	// random suffix.
	ResourceID string
	// Slots is the number of task slots offered (Flink's
	// taskmanager.numberOfTaskSlots). Default 1; at most MaxSlots.
	Slots int
	// DataAddress is the host:port of this TaskManager's data plane, as
	// the other processes reach it. Default "": none advertised.
	DataAddress string
	// MetricsAddress is the host:port of its Prometheus /metrics, reported
	// to the JobManager. Default "".
	MetricsAddress string
	// Token is the cluster token sent with every call. Required when the
	// JobManager's, the data or the metrics address is not a loopback one.
	// Default "".
	Token string
	// TLS, when set, dials the control plane over mutual TLS. Default nil.
	TLS *TLSFiles
	// RegistrationTimeout is how long the agent tries to (re)register
	// before Run fails. Default 5 min.
	RegistrationTimeout time.Duration
	// Backoff spaces the attempts to reach the JobManager. Default 100 ms
	// doubling up to 5 s.
	Backoff Backoff
	// Fingerprint is this build's. Default BuildFingerprint().
	Fingerprint string
	// Jobs builds the jobs whose tasks the JobManager deploys here, by
	// name and flags (the same registry as the JobManager's). Default nil:
	// deployments are refused, saying so.
	Jobs deploy.Registry
	// Node is the TaskManager's data plane, listening on DataAddress; the
	// tasks' remote channels go through it. The TaskManager does not close
	// it. Default nil: deployments are refused.
	Node *network.Node
	// OpenStorage opens a checkpoint-storage URL the JobManager names.
	// Default storage.Open.
	OpenStorage func(url string) (storage.Store, error)
	// Logger receives registrations and losses. Default: discards.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MetricsInterval is how often the figures of the tasks running here
	// (records in and out, busy, idle and backpressured time) go to the
	// JobManager, for its REST API; a last report follows the end of each
	// attempt. Flink's JobManager fetches them every
	// metrics.fetcher.update-interval (10 s). Default 1 s; at least 10 ms.
	MetricsInterval time.Duration
	// Resolver, when set, finds the JobManager to dial (high
	// availability: the leader named in etcd, or the one of a list that
	// accepts; see internal/ha); JobManager then only names it in logs
	// and errors. Default nil: dial JobManager.
	Resolver resolver.Builder
}

// EnsureDefaults fills every zero field with its default.
func (o *TaskManagerOptions) EnsureDefaults() {
	if o.JobManager == "" {
		o.JobManager = DefaultRPCAddress
	}
	if o.ResourceID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "taskmanager"
		}
		o.ResourceID = newID(fmt.Sprintf("%s-%d-", host, os.Getpid()))
	}
	if o.Slots == 0 {
		o.Slots = 1
	}
	if o.RegistrationTimeout == 0 {
		o.RegistrationTimeout = DefaultRegistrationTimeout
	}
	if o.Backoff.Initial == 0 {
		o.Backoff.Initial = 100 * time.Millisecond
	}
	if o.Backoff.Max == 0 {
		o.Backoff.Max = 5 * time.Second
	}
	if o.Fingerprint == "" {
		o.Fingerprint = BuildFingerprint()
	}
	if o.OpenStorage == nil {
		o.OpenStorage = storage.Open
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MetricsInterval == 0 {
		o.MetricsInterval = time.Second
	}
}

// Validate reports the first invalid field.
func (o *TaskManagerOptions) Validate() error {
	if err := checkToken(o.Token); err != nil {
		return err
	}
	for _, a := range []struct{ what, addr string }{
		{"JobManager address", o.JobManager}, {"data address", o.DataAddress}, {"metrics address", o.MetricsAddress},
	} {
		if a.addr == "" || (o.Resolver != nil && a.what == "JobManager address") {
			continue
		}
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil {
			return fmt.Errorf("the TaskManager's %s %q is not host:port (such as 127.0.0.1:6123)", a.what, a.addr)
		}
		if o.Token == "" && !IsLoopback(host) {
			return fmt.Errorf("the TaskManager's %s %s is not a loopback address, so a cluster token is required: set --cluster-token (or WEIR_CLUSTER_TOKEN)", a.what, a.addr)
		}
	}
	if o.Slots < 1 || o.Slots > MaxSlots {
		return fmt.Errorf("the TaskManager offers %d slots: offer 1 to %d", o.Slots, MaxSlots)
	}
	if o.RegistrationTimeout < time.Millisecond {
		return fmt.Errorf("registration timeout %v: use 1ms or more", o.RegistrationTimeout)
	}
	if o.MetricsInterval < 10*time.Millisecond {
		return fmt.Errorf("metrics interval %v: use 10ms or more (0 means 1s)", o.MetricsInterval)
	}
	if o.Backoff.Initial <= 0 || o.Backoff.Max < o.Backoff.Initial {
		return fmt.Errorf("backoff %v to %v: the initial delay must be positive and at most the maximum", o.Backoff.Initial, o.Backoff.Max)
	}
	return nil
}

// ErrRefused wraps the errors of a JobManager that refused the TaskManager
// (a wrong token, another build): trying again cannot help.
var ErrRefused = errors.New("refused by the JobManager")

// TaskManager is a TaskManager's agent: it registers its slots with the
// JobManager, answers its heartbeat requests, watches that they keep
// coming, and registers again (with backoff) when the JobManager is
// unreachable, restarted, or dropped it. Beside the heartbeats it keeps the
// task stream open: it runs the parts of job attempts the JobManager
// deploys (built with Options.Jobs) and sends their reports up; when it
// loses the JobManager it cancels them all.
type TaskManager struct {
	opts TaskManagerOptions

	mu       sync.Mutex
	session  string
	instance string

	exec *executor // the current task stream's; nil while none

	registrations atomic.Int64
	heartbeats    atomic.Int64
	losses        atomic.Int64
	rejected      atomic.Int64
}

func (tm *TaskManager) setExecutor(ex *executor) {
	tm.mu.Lock()
	tm.exec = ex
	tm.mu.Unlock()
}

// executor is the task stream's executor, nil between streams.
func (tm *TaskManager) executor() *executor {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.exec
}

// RunningJobs returns the ids of the jobs with an attempt deployed here.
func (tm *TaskManager) RunningJobs() []string {
	ex := tm.executor()
	if ex == nil {
		return nil
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	var out []string
	for id, j := range ex.jobs {
		if len(j.running) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TaskManagerJob is the part of one job on this TaskManager, as its
// /metrics exports it (a promexport.TaskManagerJob): the tasks of the
// attempt deployed here last, running or ended. It has no checkpoint
// statistics: those are the JobManager's.
type TaskManagerJob struct {
	id, name, tm string
	metrics      *metrics.Job
}

// ID is the job's id.
func (j TaskManagerJob) ID() string { return j.id }

// Name is the job's name, as it was submitted.
func (j TaskManagerJob) Name() string { return j.name }

// TaskManagerID is this TaskManager's resource id.
func (j TaskManagerJob) TaskManagerID() string { return j.tm }

// Checkpoints returns none: the JobManager holds them.
func (j TaskManagerJob) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	return jobmaster.Summary{}, nil
}

// Metrics are the figures of the job's tasks here, of the attempt
// deployed last.
func (j TaskManagerJob) Metrics() *metrics.Job { return j.metrics }

// Jobs returns the jobs with tasks on this TaskManager, by id: for each,
// the tasks of the attempt deployed here last, running or ended, until
// the next attempt is deployed or the JobManager is lost (then the task
// stream's jobs are forgotten). Safe to call from any goroutine.
func (tm *TaskManager) Jobs() []TaskManagerJob {
	ex := tm.executor()
	if ex == nil {
		return nil
	}
	type deployed struct {
		j       *tmJob
		attempt int64
	}
	// The workers are asked outside ex.mu: they report to the executor
	// (upListener) while holding their own locks.
	ex.mu.Lock()
	var ds []deployed
	for _, j := range ex.jobs {
		if j.attempt >= 0 {
			ds = append(ds, deployed{j, j.attempt})
		}
	}
	ex.mu.Unlock()
	var out []TaskManagerJob
	for _, d := range ds {
		mw, ok := d.j.worker.(deploy.MetricsWorker)
		if !ok {
			continue
		}
		tasks := mw.TaskMetrics(int(d.attempt))
		if len(tasks) == 0 {
			continue
		}
		m := metrics.NewJob(d.j.id, d.j.name)
		m.SetTasks(int(d.attempt), tasks)
		out = append(out, TaskManagerJob{id: d.j.id, name: d.j.name, tm: tm.opts.ResourceID, metrics: m})
	}
	slices.SortFunc(out, func(a, b TaskManagerJob) int { return strings.Compare(a.id, b.id) })
	return out
}

// NewTaskManager checks opts. It starts nothing: call Run.
func NewTaskManager(opts TaskManagerOptions) (*TaskManager, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &TaskManager{opts: opts}, nil
}

// ResourceID is the TaskManager's id.
func (tm *TaskManager) ResourceID() string { return tm.opts.ResourceID }

// Slots is the number of slots it offers.
func (tm *TaskManager) Slots() int { return tm.opts.Slots }

// Registration returns the current JobManager session and instance id, or
// false while not registered.
func (tm *TaskManager) Registration() (session, instance string, ok bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.session, tm.instance, tm.instance != ""
}

// Stats are the agent's counters.
type Stats struct {
	// Registrations counts successful registrations.
	Registrations int64
	// Heartbeats counts heartbeat requests answered.
	Heartbeats int64
	// Losses counts the times the JobManager was lost (its connection broke
	// or it fell silent) or told the agent to register again.
	Losses int64
	// Rejected counts the JobManager's commands dropped by fencing (of
	// another session, or of an attempt not deployed here).
	Rejected int64
}

// Stats returns the agent's counters.
func (tm *TaskManager) Stats() Stats {
	return Stats{Registrations: tm.registrations.Load(), Heartbeats: tm.heartbeats.Load(), Losses: tm.losses.Load(),
		Rejected: tm.rejected.Load()}
}

func (tm *TaskManager) setRegistration(session, instance string) {
	tm.mu.Lock()
	tm.session, tm.instance = session, instance
	tm.mu.Unlock()
}

// Run registers and keeps the TaskManager registered until ctx is done,
// then deregisters and returns nil. It fails when the JobManager refuses
// the TaskManager (the error wraps ErrRefused), or when no registration
// succeeded for the registration timeout. Every goroutine it starts has
// ended when it returns.
func (tm *TaskManager) Run(ctx context.Context) error {
	conn, err := dialJobManager(tm.opts.JobManager, tm.opts.Resolver, tm.opts.Token, tm.opts.TLS,
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: tm.opts.Backoff.Initial, Multiplier: 2, Jitter: 0.2, MaxDelay: tm.opts.Backoff.Max},
			// A connection attempt is bounded by the backoff's maximum, so
			// that a silent address fails the call rather than hanging.
			MinConnectTimeout: max(tm.opts.Backoff.Max, time.Second),
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewJobManagerClient(conn)
	log := tm.opts.Logger.With("taskmanager", tm.opts.ResourceID, "jobmanager", tm.opts.JobManager)

	since := tm.opts.Now() // without a registration since
	attempt := 0
	var lastErr error
	var hb heartbeatConfig
	for {
		if ctx.Err() != nil {
			tm.deregister(client, log)
			return nil
		}
		if _, _, ok := tm.Registration(); !ok {
			if d := tm.opts.Now().Sub(since); attempt > 0 && d >= tm.opts.RegistrationTimeout {
				return fmt.Errorf("no JobManager answered at %s within %v: %v", tm.opts.JobManager, tm.opts.RegistrationTimeout, describe(lastErr))
			}
			if !sleep(ctx, tm.opts.Backoff.Delay(attempt)) {
				continue
			}
			attempt++
			var err error
			hb, err = tm.register(ctx, client)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				if errors.Is(err, ErrRefused) {
					return err
				}
				lastErr = err
				log.Debug("registration failed", "err", err, "attempt", attempt)
				continue
			}
			attempt = 0
			session, instance, _ := tm.Registration()
			log.Info("registered", "session", session, "instance", instance, "slots", tm.opts.Slots)
		}
		attached, again, err := tm.heartbeat(ctx, client, hb)
		if ctx.Err() != nil {
			continue
		}
		if attached || again != "" {
			// The JobManager was there: the time without it starts now.
			tm.losses.Add(1)
			since = tm.opts.Now()
		}
		if again != "" {
			log.Warn("told to register again", "reason", again)
			tm.setRegistration("", "")
			attempt = 0 // a JobManager answered (after a failover, the new leader): register at once
			continue
		}
		if attached {
			log.Warn("JobManager lost", "err", describe(err))
		}
		lastErr = err
		// Keep the registration: if the JobManager still knows the instance
		// the stream attaches again, otherwise it says to register again.
		if !sleep(ctx, tm.opts.Backoff.Delay(max(attempt, 1))) {
			continue
		}
		attempt++
		if tm.opts.Now().Sub(since) >= tm.opts.RegistrationTimeout {
			tm.setRegistration("", "")
		}
	}
}

type heartbeatConfig struct{ interval, timeout time.Duration }

// register makes one registration attempt.
func (tm *TaskManager) register(ctx context.Context, client pb.JobManagerClient) (heartbeatConfig, error) {
	total, _ := memory()
	cctx, cancel := context.WithTimeout(ctx, max(tm.opts.Backoff.Max, time.Second)+time.Second)
	defer cancel()
	tm.mu.Lock()
	prev := tm.session
	tm.mu.Unlock()
	reply, err := client.Register(cctx, &pb.RegisterRequest{
		ResourceId: tm.opts.ResourceID, Slots: int32(tm.opts.Slots),
		DataAddress: tm.opts.DataAddress, MetricsAddress: tm.opts.MetricsAddress,
		BuildFingerprint: tm.opts.Fingerprint, CpuCores: int32(runtime.NumCPU()), PhysicalMemory: total,
		Session: prev,
	})
	if err != nil {
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument:
			return heartbeatConfig{}, fmt.Errorf("%w: %s", ErrRefused, status.Convert(err).Message())
		}
		return heartbeatConfig{}, err
	}
	tm.setRegistration(reply.Session, reply.InstanceId)
	tm.registrations.Add(1)
	return heartbeatConfig{
		interval: time.Duration(reply.HeartbeatIntervalMs) * time.Millisecond,
		timeout:  time.Duration(reply.HeartbeatTimeoutMs) * time.Millisecond,
	}, nil
}

// heartbeat runs the control connection until it breaks, the JobManager
// falls silent for the heartbeat timeout, it says to register again (the
// reason is returned), or ctx is done.
//
// attached reports whether a heartbeat request arrived on the stream.
func (tm *TaskManager) heartbeat(ctx context.Context, client pb.JobManagerClient, hb heartbeatConfig) (attached bool, again string, err error) {
	session, instance, _ := tm.Registration()
	// The stream outlives ctx by the deregistration, so that the
	// JobManager hears the TaskManager leave rather than its connection
	// break.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stream, err := client.Heartbeat(sctx)
	if err != nil {
		return attached, "", err
	}
	_, free := memory()
	if err := stream.Send(&pb.TaskManagerBeat{InstanceId: instance, Session: session, FreeMemory: free}); err != nil {
		return attached, "", err
	}
	type recv struct {
		b   *pb.JobManagerBeat
		err error
	}
	in := make(chan recv)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			b, err := stream.Recv()
			select {
			case in <- recv{b, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tasksDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tasksDone <- tm.runTasks(sctx, client, session, instance)
	}()
	defer wg.Wait()
	defer cancel()

	if hb.timeout <= 0 {
		hb = heartbeatConfig{interval: DefaultHeartbeatInterval, timeout: DefaultHeartbeatTimeout}
	}
	live := NewLiveness(hb.timeout)
	live.Watch("jobmanager", tm.opts.Now())
	tick := time.NewTicker(max(hb.interval/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			tm.deregister(client, tm.opts.Logger.With("taskmanager", tm.opts.ResourceID))
			return attached, "", ctx.Err()
		case err := <-tasksDone:
			return attached, "", fmt.Errorf("the task connection broke: %s", describe(err))
		case r := <-in:
			if r.err != nil {
				if errors.Is(r.err, io.EOF) {
					return attached, "", errors.New("the JobManager closed the control connection")
				}
				return attached, "", r.err
			}
			if r.b.RegisterAgain {
				return attached, r.b.Reason, nil
			}
			if r.b.Session != session {
				return attached, fmt.Sprintf("the JobManager's session changed from %s to %s", session, r.b.Session), nil
			}
			attached = true
			live.Heard("jobmanager", tm.opts.Now())
			_, free := memory()
			if err := stream.Send(&pb.TaskManagerBeat{InstanceId: instance, Session: session, Seq: r.b.Seq, FreeMemory: free}); err != nil {
				return attached, "", err
			}
			tm.heartbeats.Add(1)
		case <-tick.C:
			if len(live.Expired(tm.opts.Now())) > 0 {
				return attached, "", fmt.Errorf("no heartbeat request from the JobManager for %v (heartbeat timeout)", hb.timeout)
			}
		}
	}
}

// deregister tells the JobManager that the TaskManager leaves.
func (tm *TaskManager) deregister(client pb.JobManagerClient, log *slog.Logger) {
	session, instance, ok := tm.Registration()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.Deregister(ctx, &pb.DeregisterRequest{InstanceId: instance, Session: session, Reason: "TaskManager shut down"}); err != nil {
		log.Warn("deregistration failed", "err", describe(err))
	} else {
		log.Info("deregistered", "instance", instance)
	}
	tm.setRegistration("", "")
}

// describe is an error's message without gRPC's decoration.
func describe(err error) string {
	if err == nil {
		return "no answer"
	}
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
