package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/rest"
)

// Defaults of the control plane (Flink's).
const (
	DefaultRPCAddress        = "127.0.0.1:6123"
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatTimeout  = 6 * time.Second
	// MaxSlots bounds the slots one TaskManager may offer.
	MaxSlots = 1024
)

// JobManagerOptions configure a JobManager.
type JobManagerOptions struct {
	// Address is the host:port the control plane listens on (Flink's
	// jobmanager.rpc.address and port). An address other than a loopback
	// one needs Token. Default "127.0.0.1:6123".
	Address string
	// Token is the cluster token every TaskManager's calls must carry.
	// Default "": none (then no TaskManager may send one).
	Token string
	// TLS, when set, serves the control plane over mutual TLS. Default nil:
	// plain TCP.
	TLS *TLSFiles
	// HeartbeatInterval is how often the JobManager asks each TaskManager
	// for a heartbeat (Flink's heartbeat.interval). Default 1 s; at least
	// 1 ms.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a TaskManager may stay silent before it
	// is dropped (Flink's heartbeat.timeout); TaskManagers adopt both
	// values. Default 6 s; more than HeartbeatInterval.
	HeartbeatTimeout time.Duration
	// Fingerprint is this build's (TaskManagers of another are refused).
	// Default BuildFingerprint().
	Fingerprint string
	// Jobs builds the jobs clients submit by name. Default nil: the
	// JobManager runs no jobs (Submit fails saying so).
	Jobs deploy.Registry
	// SlotRequestTimeout is how long a job attempt waits for enough free
	// slots before it fails (Flink's slot.request.timeout). Default 5 min.
	// Not used in reactive mode (Reactive.WaitTimeout is its bound).
	SlotRequestTimeout time.Duration
	// SchedulerMode is Flink's scheduler-mode: SchedulerDefault runs each
	// job at the parallelism of its flags; SchedulerReactive runs it at
	// the parallelism the registered slots allow (up to its max
	// parallelism) and rescales it from its latest checkpoint when
	// TaskManagers join or leave (a job's --parallelism is ignored).
	// Default SchedulerDefault.
	SchedulerMode string
	// Reactive configures reactive mode. Default: Flink's defaults in
	// reactive mode (see ReactiveOptions).
	Reactive ReactiveOptions
	// Logger receives registrations and losses. Default: discards.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// HA, when set, records the jobs and their checkpoints for a standby
	// to recover (high availability; see JobHA). Default nil.
	HA JobHA
	// Session is the fencing token TaskManagers register under. With high
	// availability it is the leadership revision (internal/ha), so that a
	// TaskManager tells a new leader from a deposed one. Default "": a
	// fresh random one.
	Session string
}

// EnsureDefaults fills every zero field with its default.
func (o *JobManagerOptions) EnsureDefaults() {
	if o.Address == "" {
		o.Address = DefaultRPCAddress
	}
	if o.SlotRequestTimeout == 0 {
		o.SlotRequestTimeout = DefaultSlotRequestTimeout
	}
	if o.SchedulerMode == "" {
		o.SchedulerMode = SchedulerDefault
	}
	o.Reactive.EnsureDefaults()
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.Fingerprint == "" {
		o.Fingerprint = BuildFingerprint()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports the first invalid field.
func (o *JobManagerOptions) Validate() error {
	host, _, err := net.SplitHostPort(o.Address)
	if err != nil {
		return fmt.Errorf("the JobManager's RPC address %q is not host:port (such as %s)", o.Address, DefaultRPCAddress)
	}
	if err := checkToken(o.Token); err != nil {
		return err
	}
	if o.Token == "" && !IsLoopback(host) {
		return fmt.Errorf("the JobManager's RPC address %s is reachable from other machines, so a cluster token is required: set --cluster-token (or WEIR_CLUSTER_TOKEN), or listen on a loopback address such as %s", o.Address, DefaultRPCAddress)
	}
	if o.HeartbeatInterval < time.Millisecond {
		return fmt.Errorf("heartbeat interval %v: use 1ms or more", o.HeartbeatInterval)
	}
	if o.HeartbeatTimeout <= o.HeartbeatInterval {
		return fmt.Errorf("heartbeat timeout %v must be longer than the heartbeat interval %v", o.HeartbeatTimeout, o.HeartbeatInterval)
	}
	if o.SlotRequestTimeout < time.Millisecond {
		return fmt.Errorf("slot request timeout %v: use 1ms or more", o.SlotRequestTimeout)
	}
	if o.SchedulerMode != SchedulerDefault && o.SchedulerMode != SchedulerReactive {
		return fmt.Errorf("scheduler mode %q is not known: use %s or %s (scheduler-mode)", o.SchedulerMode, SchedulerDefault, SchedulerReactive)
	}
	return o.Reactive.Validate()
}

// JobManager is a cluster's JobManager. Its membership service registers
// TaskManagers, keeps their slots in a SlotPool, sends them heartbeat
// requests and drops one at once when its control connection (heartbeat or
// task stream) breaks, or when it has not answered for the heartbeat
// timeout. Its job service builds submitted jobs with Options.Jobs and runs
// each one's JobMaster here, with the tasks on the TaskManagers' slots;
// the attempts of a lost TaskManager fail, and the JobMaster restarts them
// from the latest completed checkpoint on the remaining slots.
//
// It implements rest.JobManager: /taskmanagers, /jobs and what hangs off
// them.
type JobManager struct {
	pb.UnimplementedJobManagerServer

	opts    JobManagerOptions
	session string
	server  *grpc.Server

	mu        sync.Mutex
	live      *Liveness
	slots     *SlotPool
	instances map[string]*member // by instance id
	resources map[string]string  // resource id -> instance id
	started   bool
	closed    bool
	// changed is closed (and replaced) whenever the schedulable slots may
	// have changed.
	changed  chan struct{}
	jobs     map[string]*jobRun
	jobOrder []string
	rejected atomic.Int64

	// jobsCtx is the parent of every job's context; Close cancels it.
	jobsCtx    context.Context
	cancelJobs context.CancelFunc

	stop chan struct{}
	wg   sync.WaitGroup // Start's goroutines and the heartbeat streams' receivers
	ln   net.Listener
}

// member is one registered TaskManager instance.
type member struct {
	req        *pb.RegisterRequest
	instance   string
	registered time.Time
	lastBeat   time.Time
	freeMemory int64
	// endStream ends the instance's heartbeat stream; nil while none is
	// attached.
	endStream context.CancelCauseFunc
	// tasks is the instance's task stream; nil while none is attached.
	tasks *taskStream
}

// NewJobManager checks opts and returns a JobManager with a fresh session.
// It starts nothing: call Start and Close.
func NewJobManager(opts JobManagerOptions) (*JobManager, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	creds, err := transportCredentials(opts.TLS)
	if err != nil {
		return nil, err
	}
	sopts := []grpc.ServerOption{
		grpc.UnaryInterceptor(unaryAuth(opts.Token)),
		grpc.StreamInterceptor(streamAuth(opts.Token)),
		grpc.WaitForHandlers(true),
	}
	if creds != nil {
		sopts = append(sopts, grpc.Creds(creds))
	}
	jm := &JobManager{
		opts:      opts,
		session:   cmp.Or(opts.Session, newID("jm-")),
		live:      NewLiveness(opts.HeartbeatTimeout),
		slots:     NewSlotPool(),
		instances: map[string]*member{},
		resources: map[string]string{},
		stop:      make(chan struct{}),
		changed:   make(chan struct{}),
		jobs:      map[string]*jobRun{},
	}
	jm.jobsCtx, jm.cancelJobs = context.WithCancel(context.Background())
	jm.server = grpc.NewServer(sopts...)
	pb.RegisterJobManagerServer(jm.server, jm)
	return jm, nil
}

// Session is the JobManager's fencing token.
func (jm *JobManager) Session() string { return jm.session }

// Listen binds Options.Address; Start then serves it. A busy address fails
// here.
func (jm *JobManager) Listen() error {
	ln, err := net.Listen("tcp", jm.opts.Address)
	if err != nil {
		return fmt.Errorf("the JobManager cannot listen on %s: %w", jm.opts.Address, err)
	}
	jm.ln = ln
	return nil
}

// Addr is the address the control plane listens on (after Listen).
func (jm *JobManager) Addr() string {
	if jm.ln == nil {
		return ""
	}
	return jm.ln.Addr().String()
}

// Start serves the control plane on the listener of Listen (it listens
// first if Listen was not called) and starts watching heartbeats, until
// Close.
func (jm *JobManager) Start() error {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	if jm.closed || jm.started {
		return errors.New("the JobManager was already started or closed")
	}
	if jm.ln == nil {
		if err := jm.Listen(); err != nil {
			return err
		}
	}
	jm.started = true
	jm.wg.Add(2)
	go func() {
		defer jm.wg.Done()
		if err := jm.server.Serve(jm.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			jm.opts.Logger.Error("control plane stopped", "err", err)
		}
	}()
	go func() {
		defer jm.wg.Done()
		jm.watch()
	}()
	return nil
}

// Close cancels the jobs, stops the control plane (TaskManagers see their
// connection break, cancel their tasks and reconnect to whichever
// JobManager comes next) and waits for every goroutine.
func (jm *JobManager) Close() error {
	jm.mu.Lock()
	if jm.closed {
		jm.mu.Unlock()
		return nil
	}
	jm.closed = true
	close(jm.stop)
	jm.mu.Unlock()
	jm.cancelJobs()
	jm.server.Stop()
	if jm.ln != nil {
		jm.ln.Close()
	}
	jm.wg.Wait()
	return nil
}

// watch drops the instances whose heartbeats stopped, checking a few times
// per heartbeat interval.
func (jm *JobManager) watch() {
	tick := time.NewTicker(max(jm.opts.HeartbeatInterval/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-jm.stop:
			return
		case <-tick.C:
		}
		jm.mu.Lock()
		for _, inst := range jm.live.Expired(jm.opts.Now()) {
			jm.dropLocked(inst, fmt.Sprintf("no heartbeat for %v (heartbeat timeout)", jm.opts.HeartbeatTimeout))
		}
		jm.mu.Unlock()
	}
}

// deregistered is the reason of dropLocked for a TaskManager that left.
const deregistered = "deregistered"

// dropLocked removes an instance with its slots and ends its stream.
func (jm *JobManager) dropLocked(instance, reason string) {
	m, ok := jm.instances[instance]
	if !ok {
		return
	}
	delete(jm.instances, instance)
	if jm.resources[m.req.ResourceId] == instance {
		delete(jm.resources, m.req.ResourceId)
	}
	jm.live.Unwatch(instance)
	jm.slots.Remove(instance)
	if m.endStream != nil {
		m.endStream(errors.New(reason))
	}
	if m.tasks != nil {
		// The attempts deployed there fail now (the JobMaster restarts
		// them on the remaining slots).
		m.tasks.lose(reason)
	}
	jm.changedLocked()
	if reason == deregistered {
		jm.opts.Logger.Info("TaskManager deregistered", "taskmanager", m.req.ResourceId, "instance", instance,
			"taskmanagers", len(jm.instances), "slots", jm.slots.Total())
		return
	}
	jm.opts.Logger.Warn("TaskManager lost", "taskmanager", m.req.ResourceId, "instance", instance, "reason", reason,
		"taskmanagers", len(jm.instances), "slots", jm.slots.Total())
}

// Register implements the Register call.
func (jm *JobManager) Register(_ context.Context, req *pb.RegisterRequest) (*pb.RegisterReply, error) {
	switch {
	case req.ResourceId == "":
		return nil, status.Error(codes.InvalidArgument, "registration without a TaskManager id")
	case req.Slots < 1 || req.Slots > MaxSlots:
		return nil, status.Errorf(codes.InvalidArgument, "TaskManager %s offers %d slots: offer 1 to %d", req.ResourceId, req.Slots, MaxSlots)
	case req.BuildFingerprint != jm.opts.Fingerprint:
		return nil, status.Errorf(codes.FailedPrecondition, "TaskManager %s runs another build of weir (fingerprint %s) than the JobManager (%s): run the same weir binary in every process", req.ResourceId, req.BuildFingerprint, jm.opts.Fingerprint)
	}
	if req.DataAddress != "" {
		if _, _, err := net.SplitHostPort(req.DataAddress); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "TaskManager %s: data address %q is not host:port", req.ResourceId, req.DataAddress)
		}
	}
	now := jm.opts.Now()
	jm.mu.Lock()
	defer jm.mu.Unlock()
	if jm.closed {
		return nil, status.Error(codes.Unavailable, "the JobManager is shutting down")
	}
	if old, ok := jm.resources[req.ResourceId]; ok {
		jm.dropLocked(old, "registered again as a new instance")
	}
	m := &member{req: req, instance: newID(req.ResourceId + "-"), registered: now, lastBeat: now}
	if err := jm.slots.Add(m.instance, int(req.Slots)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	jm.instances[m.instance] = m
	jm.resources[req.ResourceId] = m.instance
	jm.live.Watch(m.instance, now)
	jm.opts.Logger.Info("TaskManager registered", "taskmanager", req.ResourceId, "instance", m.instance,
		"slots", req.Slots, "data", req.DataAddress, "taskmanagers", len(jm.instances), "slots_total", jm.slots.Total())
	return &pb.RegisterReply{
		Session: jm.session, InstanceId: m.instance,
		HeartbeatIntervalMs: jm.opts.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMs:  jm.opts.HeartbeatTimeout.Milliseconds(),
	}, nil
}

// Heartbeat implements the control connection of one instance.
func (jm *JobManager) Heartbeat(stream pb.JobManager_HeartbeatServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ctx, end := context.WithCancelCause(stream.Context())
	defer end(nil)
	jm.mu.Lock()
	m, ok := jm.instances[first.InstanceId]
	var again string
	switch {
	case first.Session != jm.session:
		again = fmt.Sprintf("registered with JobManager session %s, which ended; this is session %s", first.Session, jm.session)
	case !ok:
		again = fmt.Sprintf("instance %s is not registered (it was dropped)", first.InstanceId)
	}
	if again != "" {
		jm.mu.Unlock()
		return stream.Send(&pb.JobManagerBeat{Session: jm.session, RegisterAgain: true, Reason: again})
	}
	if m.endStream != nil {
		m.endStream(errors.New("a newer heartbeat stream of the instance attached"))
	}
	m.endStream = end
	jm.live.Heard(m.instance, jm.opts.Now())
	jm.wg.Add(1)
	jm.mu.Unlock()

	broke := make(chan error, 1)
	go func() {
		defer jm.wg.Done()
		for {
			b, err := stream.Recv()
			if err != nil {
				broke <- err
				return
			}
			now := jm.opts.Now()
			jm.mu.Lock()
			if jm.instances[m.instance] == m && jm.live.Heard(m.instance, now) {
				m.lastBeat = now
				m.freeMemory = b.FreeMemory
			}
			jm.mu.Unlock()
		}
	}()
	tick := time.NewTicker(jm.opts.HeartbeatInterval)
	defer tick.Stop()
	var seq uint64
	for {
		select {
		case err := <-broke:
			jm.mu.Lock()
			if jm.instances[m.instance] == m {
				reason := "control connection broke"
				if !errors.Is(err, io.EOF) {
					reason += ": " + status.Convert(err).Message()
				}
				jm.dropLocked(m.instance, reason)
			}
			jm.mu.Unlock()
			return nil
		case <-ctx.Done():
			cause := context.Cause(ctx)
			jm.mu.Lock()
			gone := jm.instances[m.instance] != m
			if !gone && !jm.closed && stream.Context().Err() != nil {
				// The TaskManager's end of the stream went away.
				jm.dropLocked(m.instance, "control connection broke")
			}
			jm.mu.Unlock()
			if gone && stream.Context().Err() == nil {
				// Dropped here: tell the TaskManager to register again.
				stream.Send(&pb.JobManagerBeat{Session: jm.session, RegisterAgain: true, Reason: cause.Error()})
			}
			return nil
		case <-tick.C:
			seq++
			if err := stream.Send(&pb.JobManagerBeat{Session: jm.session, Seq: seq}); err != nil {
				// The receiver sees the break too.
				continue
			}
		}
	}
}

// Deregister implements the Deregister call.
func (jm *JobManager) Deregister(_ context.Context, req *pb.DeregisterRequest) (*pb.DeregisterReply, error) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	_, ok := jm.instances[req.InstanceId]
	ok = ok && req.Session == jm.session
	if ok {
		jm.dropLocked(req.InstanceId, deregistered)
	}
	return &pb.DeregisterReply{Session: jm.session, Removed: ok}, nil
}

// Member is one registered TaskManager as the JobManager sees it.
type Member struct {
	ResourceID, Instance        string
	DataAddress, MetricsAddress string
	Slots, FreeSlots            int
	Registered, LastHeartbeat   time.Time
	CPUCores                    int
	PhysicalMemory, FreeMemory  int64
}

// Members returns the registered TaskManagers, sorted by id.
func (jm *JobManager) Members() []Member {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	out := make([]Member, 0, len(jm.instances))
	for _, m := range jm.instances {
		total, free, _ := jm.slots.Slots(m.instance)
		out = append(out, Member{
			ResourceID: m.req.ResourceId, Instance: m.instance,
			DataAddress: m.req.DataAddress, MetricsAddress: m.req.MetricsAddress,
			Slots: total, FreeSlots: free, Registered: m.registered, LastHeartbeat: m.lastBeat,
			CPUCores: int(m.req.CpuCores), PhysicalMemory: m.req.PhysicalMemory, FreeMemory: m.freeMemory,
		})
	}
	slices.SortFunc(out, func(a, b Member) int {
		if a.ResourceID < b.ResourceID {
			return -1
		}
		if a.ResourceID > b.ResourceID {
			return 1
		}
		return 0
	})
	return out
}

// TaskManagers implements rest.JobManager: the registered TaskManagers.
func (jm *JobManager) TaskManagers() []rest.TaskManagerInfo {
	var out []rest.TaskManagerInfo
	for _, m := range jm.Members() {
		port := 0
		if _, p, err := net.SplitHostPort(m.DataAddress); err == nil {
			fmt.Sscan(p, &port)
		}
		out = append(out, rest.TaskManagerInfo{
			ID: m.ResourceID, Address: m.DataAddress, DataPort: port, LastHeartbeat: m.LastHeartbeat,
			Slots: m.Slots, FreeSlots: m.FreeSlots, CPUCores: m.CPUCores,
			PhysicalMemory: m.PhysicalMemory, FreeMemory: m.FreeMemory,
		})
	}
	return out
}

// newID is prefix and 12 random hex digits.
func newID(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
