package cli

// High availability of the JobManager on etcd (docs/ha.md): the flags of
// weir jobmanager and weir taskmanager, the JobManager's campaign loop
// (the leader serves the control plane and the REST API; a standby
// redirects REST calls to the leader), and how a TaskManager finds the
// leader.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/rest"
)

// haFlags are the high-availability flags of both roles (Flink's
// high-availability.* keys).
type haFlags struct {
	mode, endpoints, clusterID string
	ttl                        time.Duration

	client *ha.Client // a TaskManager's, closed by close
}

func (f *haFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.mode, "ha", "none", "high availability of the JobManager: none, or etcd (standby JobManagers campaign in etcd; TaskManagers find the leader there)")
	c.Flags().StringVar(&f.endpoints, "ha-endpoints", "", "etcd's client endpoints, comma-separated, such as 127.0.0.1:2379 (with --ha etcd)")
	c.Flags().StringVar(&f.clusterID, "ha-cluster-id", "", "the cluster's id: its keys are under /weir/<id>/ in etcd; every JobManager and TaskManager of the cluster gives the same (with --ha etcd)")
	c.Flags().DurationVar(&f.ttl, "ha-session-ttl", ha.DefaultSessionTTL, "how long a JobManager that stopped renewing its etcd lease (killed, paused, cut off) stays leader; whole seconds")
}

// options checks the flags; enabled is false with --ha none.
func (f *haFlags) options(log *slog.Logger) (o ha.Options, enabled bool, err error) {
	switch strings.ToLower(strings.TrimSpace(f.mode)) {
	case "", "none":
		if f.endpoints != "" || f.clusterID != "" {
			return o, false, errors.New("--ha-endpoints and --ha-cluster-id need --ha etcd")
		}
		return o, false, nil
	case "etcd":
	default:
		return o, false, fmt.Errorf("--ha is %q: use none or etcd", f.mode)
	}
	if f.endpoints == "" {
		return o, false, errors.New("--ha etcd needs --ha-endpoints (etcd's client endpoints, such as 127.0.0.1:2379)")
	}
	if f.clusterID == "" {
		return o, false, errors.New("--ha etcd needs --ha-cluster-id (the same for every JobManager and TaskManager of the cluster)")
	}
	o = ha.Options{Endpoints: ha.ParseEndpoints(f.endpoints), ClusterID: f.clusterID, SessionTTL: f.ttl, Logger: log}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return o, false, err
	}
	return o, true, nil
}

// haEnabled reports whether any HA flag is set (runHAJobManager reports
// a bad combination).
func (f *haFlags) haEnabled() bool {
	m := strings.ToLower(strings.TrimSpace(f.mode))
	return (m != "" && m != "none") || f.endpoints != "" || f.clusterID != ""
}

// taskManager points opts at the leader: through etcd with --ha etcd, or
// through the list of --jobmanager A,B. Call close when the TaskManager
// ends.
func (f *haFlags) taskManager(opts *cluster.TaskManagerOptions, log *slog.Logger) error {
	hopts, enabled, err := f.options(log)
	if err != nil {
		return err
	}
	if enabled {
		c, err := ha.Dial(context.Background(), hopts)
		if err != nil {
			return err
		}
		f.client = c
		opts.Resolver = c.Resolver()
		opts.JobManager = "the leader of cluster " + hopts.ClusterID
		return nil
	}
	if !strings.Contains(opts.JobManager, ",") {
		return nil
	}
	var addrs []string
	for _, a := range strings.Split(opts.JobManager, ",") {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("--jobmanager: %q is not host:port (give the JobManagers' RPC addresses, comma-separated, such as 127.0.0.1:6123,127.0.0.1:6124)", a)
		}
		if opts.Token == "" && !cluster.IsLoopback(host) {
			return fmt.Errorf("--jobmanager: %s is not a loopback address, so a cluster token is required: set --cluster-token (or %s)", a, clusterTokenEnv)
		}
		addrs = append(addrs, a)
	}
	opts.Resolver = ha.ListResolver(addrs)
	return nil
}

func (f *haFlags) close() {
	if f.client != nil {
		f.client.Close()
	}
}

// haJobManager is the leader's JobManager as the REST API sees it: the
// cluster's, and the leadership (GET /overview names the leader and the
// standbys).
type haJobManager struct {
	*cluster.JobManager
	client *ha.Client
	lead   *ha.Leadership
}

func (h haJobManager) HighAvailability() rest.HighAvailabilityInfo {
	info := h.lead.Info()
	st := h.lead.Store().Stats()
	out := rest.HighAvailabilityInfo{
		Type: "etcd", ClusterID: h.client.Options().ClusterID, LeaderRevision: h.lead.Revision(),
		Leader:   rest.JobManagerInfo{Name: info.Name, RPCAddress: info.RPCAddress, RESTURL: info.RESTURL, Since: info.Since.UnixMilli()},
		Standbys: []rest.JobManagerInfo{},
		Writes:   st.Writes, FencedWrites: st.Fenced, FailedWrites: st.Failed,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	members, _ := h.client.Members(ctx)
	for _, m := range members {
		if m.Name != info.Name {
			out.Standbys = append(out.Standbys, rest.JobManagerInfo{Name: m.Name, RPCAddress: m.RPCAddress, RESTURL: m.RESTURL, Since: m.Since.UnixMilli()})
		}
	}
	return out
}

// standbyHandler answers a standby's REST calls: 307 to the same path on
// the leader's REST API, or 503 while no leader is known.
func standbyHandler(c *ha.Client, self string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		info, ok, err := c.Leader(ctx)
		w.Header().Set("X-Weir-Standby", self)
		if err != nil || !ok || info.RESTURL == "" || info.Name == self {
			reason := "no JobManager leads the cluster yet: an election is under way"
			if err != nil {
				reason = "this standby cannot reach etcd to find the leader: " + err.Error()
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string][]string{"errors": {reason}})
			return
		}
		w.Header().Set("X-Weir-Leader", info.Name)
		http.Redirect(w, r, strings.TrimSuffix(info.RESTURL, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})
}

// swapHandler serves whichever handler is current: the standby's or the
// leader's REST API.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }
func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// runHAJobManager runs weir jobmanager --ha etcd: it campaigns; as leader
// it serves the control plane (fenced by the leadership revision) and the
// REST API until it loses the leadership, then stands by again; as a
// standby its REST API redirects to the leader's.
func runHAJobManager(f *haFlags, jmOpts cluster.JobManagerOptions, restAddr, restToken string, log *slog.Logger) error {
	hopts, _, err := f.options(log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := ha.Dial(ctx, hopts)
	if err != nil {
		return err
	}
	defer client.Close()
	name := client.Options().Name
	jmOpts.EnsureDefaults()

	// The REST API listens from the start: a standby redirects.
	var (
		ln      net.Listener
		restURL string
		swap    swapHandler
		hsrv    *http.Server
		wg      sync.WaitGroup
	)
	swap.set(standbyHandler(client, name))
	if a := strings.TrimSpace(restAddr); a != "" && !strings.EqualFold(a, "off") {
		if restToken == "" {
			restToken = envToken(os.Stderr)
		}
		// Check the options before campaigning.
		check, err := rest.New(emptyJobManager{}, rest.Options{Address: a, Token: restToken})
		if err != nil {
			return fmt.Errorf("--rest-address: %w", err)
		}
		check.Close()
		if ln, err = net.Listen("tcp", a); err != nil {
			return fmt.Errorf("--rest-address: the REST API cannot listen on %s: %w", a, err)
		}
		restURL = "http://" + ln.Addr().String()
		restAddr = ln.Addr().String()
		hsrv = &http.Server{Handler: &swap, ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() { hsrv.Serve(ln) })
		fmt.Fprintf(os.Stderr, "weir: REST API on %s\n", restURL)
	}
	defer func() {
		if hsrv != nil {
			hsrv.Close()
		}
		wg.Wait()
	}()
	fmt.Fprintf(os.Stderr, "weir: JobManager %s standing by for cluster %s (etcd %s, session TTL %v)\n", name, hopts.ClusterID, strings.Join(hopts.Endpoints, ","), hopts.SessionTTL)

	for ctx.Err() == nil {
		l, err := client.Campaign(ctx, ha.LeaderInfo{Name: name, RPCAddress: jmOpts.Address, RESTURL: restURL})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("campaign failed; trying again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		err = lead(ctx, client, l, jmOpts, restAddr, restToken, &swap, log)
		swap.set(standbyHandler(client, name))
		l.Resign(context.Background())
		if ctx.Err() != nil {
			break
		}
		log.Error("no longer the leader; standing by again", "err", err)
		fmt.Fprintf(os.Stderr, "weir: JobManager %s lost the leadership (%v); standing by\n", name, err)
	}
	fmt.Fprintln(os.Stderr, "weir: JobManager stopped")
	return nil
}

// closeTimeout bounds the stop of a leader's control plane and jobs.
const closeTimeout = 30 * time.Second

// errDeposed ends a leadership whose etcd session was lost.
var errDeposed = errors.New("its etcd session expired: another JobManager may lead now")

// lead serves as the leader until ctx ends or the leadership is lost.
func lead(ctx context.Context, client *ha.Client, l *ha.Leadership, jmOpts cluster.JobManagerOptions, restAddr, restToken string, swap *swapHandler, log *slog.Logger) error {
	jmOpts.Session = fmt.Sprintf("%s-rev-%d", client.Options().ClusterID, l.Revision())
	jmOpts.HA = &haJobs{store: l.Store(), log: log}
	jm, err := cluster.NewJobManager(jmOpts)
	if err != nil {
		return err
	}
	defer func() {
		// A control plane that does not stop must not keep a deposed
		// leader from standing by (its writes are fenced anyway): exit,
		// and let the supervisor start it again.
		done := make(chan struct{})
		go func() {
			jm.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(closeTimeout):
			fmt.Fprintf(os.Stderr, "weir: the JobManager's control plane did not stop within %v of the end of its leadership; exiting\n", closeTimeout)
			os.Exit(1)
		}
	}()
	// Listen may have to wait for a deposed leader's port on this host.
	for {
		if err = jm.Listen(); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.Done():
			return errDeposed
		case <-time.After(200 * time.Millisecond):
		}
	}
	info := l.Info()
	info.RPCAddress = jm.Addr()
	if err := l.Proclaim(ctx, info); err != nil {
		return err
	}
	if err := jm.Start(); err != nil {
		return err
	}
	var srv *rest.Server
	if restAddr != "" && !strings.EqualFold(restAddr, "off") {
		srv, err = rest.New(haJobManager{JobManager: jm, client: client, lead: l}, rest.Options{Address: restAddr, Token: restToken, Logger: log, Handlers: jobManagerMetrics(jm)})
		if err != nil {
			return err
		}
		defer srv.Close()
		swap.set(srv.Handler())
	}
	fmt.Fprintf(os.Stderr, "weir: JobManager %s leads cluster %s (revision %d); RPC on %s (session %s)\n", info.Name, client.Options().ClusterID, l.Revision(), jm.Addr(), jm.Session())
	plan, err := l.Store().Recover(ctx)
	if err != nil {
		log.Error("cannot read the jobs to recover from etcd", "err", err)
	}
	for _, r := range plan {
		// Each job resumes under its id from its latest completed
		// checkpoint (the pointer in etcd), or as submitted without one.
		if err := jm.RecoverJob(ctx, r.Job.ID, r.Job.Name, r.Job.Args, r.Restore); err != nil {
			log.Error("cannot recover a job recorded in etcd", "job", r.Job.ID, "name", r.Job.Name, "restore", r.Restore, "err", err)
			continue
		}
		log.Info("job recovered", "job", r.Job.ID, "name", r.Job.Name, "checkpoint", r.Checkpoint, "restore", r.Restore)
		fmt.Fprintf(os.Stderr, "weir: recovered job %s (%s) from checkpoint %d\n", r.Job.ID, r.Job.Name, r.Checkpoint)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l.Done():
		return errDeposed
	}
}

// haJobs keeps the leader's jobs in etcd (cluster.JobHA): each submission
// is recorded before it runs, each JobMaster's checkpoint id counter and
// completed-checkpoint pointer are etcd keys written under the leader's
// guard, and a job that ended for good is removed.
type haJobs struct {
	store *ha.Store
	log   *slog.Logger
}

func (h *haJobs) Submitted(ctx context.Context, id, name string, args []string) error {
	return h.store.PutJob(ctx, ha.JobRecord{ID: id, Name: name, Args: args})
}

func (h *haJobs) Master(id string, o *jobmaster.Options) {
	js := h.store.Job(id)
	o.IDCounter, o.CompletedStore = js, js
	// A JobManager stopping or deposed cancels its jobs' JobMasters: their
	// checkpoints are what the next leader restores, never discarded.
	o.RetainOnCancel = true
}

func (h *haJobs) Ended(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.store.RemoveJob(ctx, id); err != nil {
		h.log.Error("cannot remove an ended job from etcd: a next leader would run it again", "job", id, "err", err)
	}
}

// emptyJobManager lets the REST options be checked before the leader's
// JobManager exists.
type emptyJobManager struct{}

func (emptyJobManager) Jobs() []rest.Job                     { return nil }
func (emptyJobManager) Job(string) (rest.Job, bool)          { return nil, false }
func (emptyJobManager) TaskManagers() []rest.TaskManagerInfo { return nil }
