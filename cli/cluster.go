package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/config"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/metrics/promexport"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/rest"
)

// clusterTokenEnv holds the cluster token when --cluster-token is not
// given.
const clusterTokenEnv = "WEIR_CLUSTER_TOKEN"

// controlFlags are the control plane's flags of both roles.
type controlFlags struct {
	token                  string
	tlsCert, tlsKey, tlsCA string
	logLevel, logFormat    string
	config                 string
	cpuProfile             string
}

func (f *controlFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.token, "cluster-token", "", "token every TaskManager must present to the JobManager, and on the data plane (or set "+clusterTokenEnv+"); required when an address is not a loopback one (default: none)")
	c.Flags().StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate of this process for mutual TLS on the control and data planes, with --tls-key and --tls-ca (default: plain TCP)")
	c.Flags().StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	c.Flags().StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CA certificates that sign the cluster's certificates")
	c.Flags().StringVar(&f.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	c.Flags().StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	c.Flags().StringVar(&f.config, "config", "", "YAML file of settings under Flink's keys (jobmanager.rpc.address, heartbeat.interval, taskmanager.numberOfTaskSlots, …), shared by the JobManager and its TaskManagers; flags override it")
	c.Flags().StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of this process, from its start until it exits (SIGTERM or the end of its work; not a SIGKILL), to this file (read it with go tool pprof; default: none)")
}

// profile starts the CPU profile of --cpu-profile; stop writes it.
func (f *controlFlags) profile() (stop func(), err error) {
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	return startProfile(filepath.Dir(f.cpuProfile), filepath.Base(f.cpuProfile))
}

// prepare applies the config file and returns the token, the TLS files
// (nil without) and the logger.
func (f *controlFlags) prepare(cmd *cobra.Command) (string, *cluster.TLSFiles, *slog.Logger, error) {
	if f.config != "" {
		file, err := config.Load(f.config)
		if err != nil {
			return "", nil, nil, err
		}
		if err := file.ApplyShared(cmd.Flags(), cmd.CommandPath()); err != nil {
			return "", nil, nil, err
		}
	}
	token := f.token
	if token == "" {
		token = os.Getenv(clusterTokenEnv)
	}
	var files *cluster.TLSFiles
	switch n := countSet(f.tlsCert, f.tlsKey, f.tlsCA); n {
	case 0:
	case 3:
		files = &cluster.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
	default:
		return "", nil, nil, errors.New("--tls-cert, --tls-key and --tls-ca go together: give all three (this process's certificate, its key, the cluster's CA) or none")
	}
	log, err := newLogger(os.Stderr, f.logLevel, f.logFormat, time.Minute)
	if err != nil {
		return "", nil, nil, err
	}
	return token, files, log, nil
}

func countSet(s ...string) int {
	n := 0
	for _, v := range s {
		if v != "" {
			n++
		}
	}
	return n
}

func newJobManagerCommand(jobs deploy.Registry) *cobra.Command {
	var (
		cf                controlFlags
		haf               haFlags
		rpcAddr, restAddr string
		restToken         string
		interval, timeout time.Duration
		slotTimeout       time.Duration
		rf                reactiveFlags
	)
	c := &cobra.Command{
		Use:   "jobmanager",
		Short: "Run a cluster's JobManager: TaskManagers register with it, jobs are submitted to it",
		Long: `Run a cluster's JobManager: TaskManagers register their slots with it over
the control plane (--rpc-address); jobs submitted by name (weir run NAME
--jobmanager ADDR) run their JobMaster here and their tasks on the
TaskManagers' slots, and restart from their latest checkpoint on the
remaining slots when a TaskManager is lost. Its REST API lists the
TaskManagers and the jobs (/taskmanagers, /jobs). With --scheduler
reactive (Flink's reactive mode) every job runs at the parallelism the
registered slots allow and rescales from its latest checkpoint when
TaskManagers join or leave. See docs/cluster.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, files, log, err := cf.prepare(cmd)
			if err != nil {
				return err
			}
			stopProfile, err := cf.profile()
			if err != nil {
				return err
			}
			defer stopProfile()
			if err := checkScheduler(rf.mode); err != nil {
				return err
			}
			jmOpts := cluster.JobManagerOptions{
				Address: rpcAddr, Token: token, TLS: files,
				HeartbeatInterval: interval, HeartbeatTimeout: timeout, Logger: log,
				Jobs: jobs, SlotRequestTimeout: slotTimeout,
				SchedulerMode: rf.mode, Reactive: rf.options(),
			}
			if haf.haEnabled() { // ha.go
				return runHAJobManager(&haf, jmOpts, restAddr, restToken, log)
			}
			jm, err := cluster.NewJobManager(jmOpts)
			if err != nil {
				return err
			}
			if err := jm.Listen(); err != nil {
				return err
			}
			var srv *rest.Server
			var ln net.Listener
			if a := strings.TrimSpace(restAddr); a != "" && !strings.EqualFold(a, "off") {
				if restToken == "" {
					restToken = envToken(os.Stderr)
				}
				srv, err = rest.New(jm, rest.Options{Address: a, Token: restToken, Logger: log, Handlers: jobManagerMetrics(jm)})
				if err != nil {
					return fmt.Errorf("--rest-address: %w", err)
				}
				if ln, err = net.Listen("tcp", a); err != nil {
					return fmt.Errorf("--rest-address: the REST API cannot listen on %s: %w", a, err)
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := jm.Start(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "weir: JobManager RPC on %s (session %s, heartbeat every %v, timeout %v)\n", jm.Addr(), jm.Session(), interval, timeout)
			if rf.mode == cluster.SchedulerReactive {
				fmt.Fprintln(os.Stderr, "weir: reactive mode: each job runs at the parallelism of the free slots and rescales when TaskManagers join or leave")
			}
			var wg sync.WaitGroup
			if srv != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := srv.ServeListener(ctx, ln); err != nil {
						log.Error("REST API stopped", "err", err)
					}
				}()
				scheme := "http"
				if srv.TLS() {
					scheme = "https"
				}
				fmt.Fprintf(os.Stderr, "weir: REST API on %s://%s\n", scheme, ln.Addr())
			}
			<-ctx.Done()
			if srv != nil {
				srv.Close()
			}
			wg.Wait()
			jm.Close()
			fmt.Fprintln(os.Stderr, "weir: JobManager stopped")
			return nil
		},
	}
	c.Flags().StringVar(&rpcAddr, "rpc-address", cluster.DefaultRPCAddress, "host:port of the control plane TaskManagers register with (other than a loopback address it needs --cluster-token)")
	c.Flags().StringVar(&restAddr, "rest-address", rest.DefaultAddress, `host:port of the REST API ("off" disables it; other than a loopback address it needs --rest-token)`)
	c.Flags().StringVar(&restToken, "rest-token", "", "bearer token the REST API requires (or set "+tokenEnv+"; default: none)")
	c.Flags().DurationVar(&interval, "heartbeat-interval", cluster.DefaultHeartbeatInterval, "how often the JobManager asks each TaskManager for a heartbeat")
	c.Flags().DurationVar(&timeout, "heartbeat-timeout", cluster.DefaultHeartbeatTimeout, "a TaskManager silent for this long is dropped (and one whose connection breaks, at once)")
	c.Flags().DurationVar(&slotTimeout, "slot-request-timeout", cluster.DefaultSlotRequestTimeout, "a job attempt fails when too few slots are free for this long (Flink's slot.request.timeout)")
	rf.register(c)
	cf.register(c)
	haf.register(c)
	return c
}

// reactiveFlags are the JobManager's flags of its scheduler mode.
type reactiveFlags struct {
	mode                string
	minIncrease         int
	stabilization, wait time.Duration
}

func (f *reactiveFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.mode, "scheduler", cluster.SchedulerDefault, `scheduler mode (Flink's scheduler-mode): "default" runs each job at the parallelism of its flags; "reactive" runs it at the parallelism of the free slots, up to its max parallelism, and rescales it from its latest checkpoint when TaskManagers join or leave (a job's --parallelism is ignored)`)
	c.Flags().IntVar(&f.minIncrease, "min-parallelism-increase", 1, "reactive mode: a running job scales up once its cumulative parallelism (the sum over its vertices) would grow by this much")
	c.Flags().DurationVar(&f.stabilization, "resource-stabilization-timeout", 0, "reactive mode: how long the slots must stay unchanged before a job starts on fewer slots than it could use, or scales up (0: at once)")
	c.Flags().DurationVar(&f.wait, "resource-wait-timeout", 0, "reactive mode: a job attempt fails when no slot is free for this long (0 or negative: wait for ever)")
}

func (f *reactiveFlags) options() cluster.ReactiveOptions {
	return cluster.ReactiveOptions{MinParallelismIncrease: f.minIncrease, StabilizationTimeout: f.stabilization, WaitTimeout: max(f.wait, 0)}
}

// checkScheduler checks the value of --scheduler.
func checkScheduler(mode string) error {
	if mode != cluster.SchedulerDefault && mode != cluster.SchedulerReactive {
		return fmt.Errorf("--scheduler is %q: use %s or %s (Flink's scheduler-mode)", mode, cluster.SchedulerDefault, cluster.SchedulerReactive)
	}
	return nil
}

func newTaskManagerCommand(jobs deploy.Registry) *cobra.Command {
	var (
		cf                      controlFlags
		haf                     haFlags
		jmAddr, dataAddr, mAddr string
		slots                   int
		regTimeout              time.Duration
		reportInterval          time.Duration
	)
	c := &cobra.Command{
		Use:   "taskmanager",
		Short: "Run a TaskManager that offers task slots to a JobManager",
		Long: `Run a TaskManager: it serves its data plane on --data-address, registers
its slots with the JobManager at --jobmanager, answers its heartbeats, and
registers again (with backoff) when the JobManager restarts or is
unreachable; it exits when no JobManager answered for
--registration-timeout. It runs the tasks of the jobs the JobManager
deploys (built from the same registry of jobs), and cancels them all when
it loses its JobManager. See docs/cluster.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, files, log, err := cf.prepare(cmd)
			if err != nil {
				return err
			}
			stopProfile, err := cf.profile()
			if err != nil {
				return err
			}
			defer stopProfile()
			if slots < 1 || slots > cluster.MaxSlots {
				return fmt.Errorf("--slots is %d: offer 1 to %d slots", slots, cluster.MaxSlots)
			}
			if reportInterval < 10*time.Millisecond {
				return fmt.Errorf("--metrics-report-interval is %v: use 10ms or more", reportInterval)
			}
			opts := cluster.TaskManagerOptions{
				JobManager: jmAddr, Slots: slots, DataAddress: dataAddr, MetricsAddress: mAddr,
				Token: token, TLS: files, RegistrationTimeout: regTimeout, Logger: log,
				MetricsInterval: reportInterval,
			}
			if err := haf.taskManager(&opts, log); err != nil { // ha.go: the leader through etcd, or --jobmanager A,B
				return err
			}
			defer haf.close()
			opts.EnsureDefaults()
			if err := opts.Validate(); err != nil {
				return err
			}
			nopts := network.Options{Token: token, Logger: log}
			if files != nil {
				nopts.TLS = &network.TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
			}
			node, err := network.New(nopts)
			if err != nil {
				return fmt.Errorf("--data-address: %w", err)
			}
			defer node.Close()
			if err := node.Listen(dataAddr); err != nil {
				return fmt.Errorf("--data-address: %w", err)
			}
			opts.DataAddress = advertised(node.Addr())
			opts.Node, opts.Jobs = node, jobs
			tm, err := cluster.NewTaskManager(opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if mAddr != "" {
				closeMetrics, url, err := serveTaskManagerMetrics(mAddr, tm, node)
				if err != nil {
					return err
				}
				defer closeMetrics()
				fmt.Fprintf(os.Stderr, "weir: TaskManager metrics on %s\n", url)
			}
			fmt.Fprintf(os.Stderr, "weir: TaskManager %s with %d slots, data plane on %s, registering with the JobManager at %s\n", tm.ResourceID(), slots, opts.DataAddress, jmAddr)
			if err := tm.Run(ctx); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "weir: TaskManager %s stopped\n", tm.ResourceID())
			return nil
		},
	}
	c.Flags().StringVar(&jmAddr, "jobmanager", cluster.DefaultRPCAddress, "host:port of the JobManager's control plane (its --rpc-address), or a comma-separated list of the JobManagers' with high availability (the leader accepts)")
	c.Flags().IntVar(&slots, "slots", 1, "number of task slots offered")
	c.Flags().StringVar(&dataAddr, "data-address", "127.0.0.1:0", "host:port of this TaskManager's data plane (port 0 picks a free one; other than a loopback address it needs --cluster-token)")
	c.Flags().StringVar(&mAddr, "metrics-address", "", "host:port to serve Prometheus /metrics on (default: none)")
	c.Flags().DurationVar(&regTimeout, "registration-timeout", cluster.DefaultRegistrationTimeout, "exit when no JobManager accepted a registration for this long")
	c.Flags().DurationVar(&reportInterval, "metrics-report-interval", time.Second, "send the records read and written by the subtasks running here to the JobManager this often, for its REST API (at least 10ms)")
	cf.register(c)
	haf.register(c)
	return c
}

// advertised is the data address to give the JobManager for a listen
// address: an unspecified host (0.0.0.0, ::) becomes the host name.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			return net.JoinHostPort(h, port)
		}
	}
	return addr
}

// serveTaskManagerMetrics serves /metrics for a TaskManager: the task and
// operator metrics of the subtasks running on it (promexport's, with
// tm_id its resource id), its agent's figures, its data plane's channels,
// the Go runtime and the process.
func serveTaskManagerMetrics(addr string, tm *cluster.TaskManager, node *network.Node) (stop func(), url string, err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promexport.Collector(func() []promexport.Job {
		jobs := tm.Jobs()
		out := make([]promexport.Job, len(jobs))
		for i, j := range jobs {
			out[i] = j
		}
		return out
	}, nil))
	labels := prometheus.Labels{"tm_id": tm.ResourceID()}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	reg.MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		node.Collector(),
		gauge("weir_taskmanager_slots_total", "Task slots this TaskManager offers.", func() float64 { return float64(tm.Slots()) }),
		gauge("weir_taskmanager_registered", "1 while registered with a JobManager, else 0.", func() float64 {
			if _, _, ok := tm.Registration(); ok {
				return 1
			}
			return 0
		}),
		counter("weir_taskmanager_registrations_total", "Successful registrations with a JobManager.", func() float64 { return float64(tm.Stats().Registrations) }),
		counter("weir_taskmanager_heartbeats_total", "Heartbeat requests of the JobManager answered.", func() float64 { return float64(tm.Stats().Heartbeats) }),
		counter("weir_taskmanager_jobmanager_losses_total", "Times the JobManager was lost or asked for a new registration.", func() float64 { return float64(tm.Stats().Losses) }),
	)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-address: cannot listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	return func() {
		srv.Close()
		<-done
	}, "http://" + ln.Addr().String() + "/metrics", nil
}

// A TaskManager's jobs export their tasks' metrics only, under its id.
var _ promexport.TaskManagerJob = cluster.TaskManagerJob{}

// jobManagerMetrics serves the JobManager's Prometheus /metrics on its REST
// address, as Flink's JobManager reports them: each job's checkpoint
// figures and numRestarts (the tasks' figures are on each TaskManager's
// --metrics-address).
func jobManagerMetrics(jm *cluster.JobManager) map[string]http.Handler {
	reg := promexport.New(func() []promexport.Job {
		var out []promexport.Job
		for _, j := range jm.Jobs() {
			if pj, ok := j.(promexport.Job); ok {
				out = append(out, pj)
			}
		}
		return out
	})
	return map[string]http.Handler{"GET /metrics": reg.Handler()}
}
