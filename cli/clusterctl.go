package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/rest"
)

// clusterState is the pid file of a local cluster (weir cluster start).
type clusterState struct {
	JobManager   clusterProc   `json:"jobmanager"`
	TaskManagers []clusterProc `json:"taskmanagers"`
	RPCAddress   string        `json:"rpcAddress"`
	RESTURL      string        `json:"restURL"`
	Started      time.Time     `json:"started"`
}

type clusterProc struct {
	Pid int    `json:"pid"`
	Log string `json:"log"`
}

const clusterPidFile = "cluster.json"

// defaultStateDir is where a local cluster keeps its pid file and logs
// (Flink's start-cluster.sh keeps its pid files in /tmp).
func defaultStateDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("weir-cluster-%d", os.Getuid()))
}

func newClusterCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Start or stop a local cluster of a JobManager and TaskManagers as child processes",
	}
	var (
		stateDir, rpcAddr, restAddr, cfg string
		scheduler                        string
		tms, slots                       int
		wait                             time.Duration
	)
	start := &cobra.Command{
		Use:   "start",
		Short: "Start a JobManager and --taskmanagers TaskManagers in the background (Flink's start-cluster.sh)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tms < 0 || tms > 64 {
				return fmt.Errorf("--taskmanagers is %d: use 0 to 64", tms)
			}
			if slots < 1 || slots > cluster.MaxSlots {
				return fmt.Errorf("--slots is %d: use 1 to %d", slots, cluster.MaxSlots)
			}
			var jmArgs []string
			if cmd.Flags().Changed("scheduler") {
				if err := checkScheduler(scheduler); err != nil {
					return err
				}
				jmArgs = append(jmArgs, "--scheduler", scheduler)
			}
			return clusterStart(stateDir, rpcAddr, restAddr, cfg, "", tms, slots, wait, jmArgs...)
		},
	}
	start.Flags().IntVar(&tms, "taskmanagers", 1, "number of TaskManagers")
	start.Flags().IntVar(&slots, "slots", 1, "task slots of each TaskManager")
	start.Flags().StringVar(&rpcAddr, "rpc-address", cluster.DefaultRPCAddress, "the JobManager's control plane (port 0 picks a free one)")
	start.Flags().StringVar(&restAddr, "rest-address", rest.DefaultAddress, "the JobManager's REST API (port 0 picks a free one)")
	start.Flags().StringVar(&cfg, "config", "", "YAML file of settings under Flink's keys, given to every process")
	start.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for every TaskManager to register")
	start.Flags().StringVar(&scheduler, "scheduler", cluster.SchedulerDefault, `the JobManager's scheduler mode: "default" or "reactive" (jobs run at the parallelism of the free slots and rescale when TaskManagers join or leave; default: the JobManager's, or scheduler-mode of --config)`)
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the local cluster that weir cluster start started (SIGTERM, then SIGKILL after 10 s)",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return clusterStop(stateDir) },
	}
	for _, s := range []*cobra.Command{start, stop} {
		s.Flags().StringVar(&stateDir, "state-dir", defaultStateDir(), "directory of the cluster's pid file and logs")
	}
	c.AddCommand(start, stop)
	requireSubcommand(c, "a command")
	return c
}

// clusterStart starts the JobManager (with jmArgs besides its addresses
// and --config) and tms TaskManagers.
// profileDir, when set, gives every process --cpu-profile
// DIR/jobmanager.prof or DIR/taskmanager-N.prof (weir nexmark report
// --cluster --cpu-profile-dir).
func clusterStart(dir, rpcAddr, restAddr, cfg, profileDir string, tms, slots int, wait time.Duration, jmArgs ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	pidPath := filepath.Join(dir, clusterPidFile)
	if st, err := readClusterState(pidPath); err == nil {
		if alive(st.JobManager.Pid, "jobmanager") {
			return fmt.Errorf("a cluster is already running (JobManager pid %d, pid file %s): run weir cluster stop first", st.JobManager.Pid, pidPath)
		}
	}
	if cfg != "" {
		abs, err := filepath.Abs(cfg)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		cfg = abs
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the weir binary to start: %w", err)
	}
	st := clusterState{Started: time.Now()}
	var started []int
	fail := func(err error) error {
		for _, pid := range started {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return err
	}
	args := append([]string{"jobmanager", "--rpc-address", rpcAddr, "--rest-address", restAddr}, jmArgs...)
	if cfg != "" {
		args = append(args, "--config", cfg)
	}
	if profileDir != "" {
		args = append(args, "--cpu-profile", filepath.Join(profileDir, "jobmanager.prof"))
	}
	jmLog := filepath.Join(dir, "jobmanager.log")
	pid, err := spawn(exe, args, jmLog)
	if err != nil {
		return fail(err)
	}
	started = append(started, pid)
	st.JobManager = clusterProc{Pid: pid, Log: jmLog}
	// The JobManager's addresses, from its log (ports 0 are picked there).
	deadline := time.Now().Add(wait)
	reRPC := regexp.MustCompile(`JobManager RPC on (\S+)`)
	reREST := regexp.MustCompile(`REST API on (https?://\S+)`)
	for st.RPCAddress == "" || st.RESTURL == "" {
		data, _ := os.ReadFile(jmLog)
		if m := reRPC.FindSubmatch(data); m != nil {
			st.RPCAddress = string(m[1])
		}
		if m := reREST.FindSubmatch(data); m != nil {
			st.RESTURL = string(m[1])
		}
		if !alive(pid, "jobmanager") {
			return fail(fmt.Errorf("the JobManager exited at start: %s (log %s)", lastLine(data), jmLog))
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the JobManager did not start within %v (log %s)", wait, jmLog))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range tms {
		args := []string{"taskmanager", "--jobmanager", st.RPCAddress, "--slots", strconv.Itoa(slots)}
		if cfg != "" {
			args = append(args, "--config", cfg)
		}
		if profileDir != "" {
			args = append(args, "--cpu-profile", filepath.Join(profileDir, fmt.Sprintf("taskmanager-%d.prof", i+1)))
		}
		log := filepath.Join(dir, fmt.Sprintf("taskmanager-%d.log", i+1))
		pid, err := spawn(exe, args, log)
		if err != nil {
			return fail(err)
		}
		started = append(started, pid)
		st.TaskManagers = append(st.TaskManagers, clusterProc{Pid: pid, Log: log})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(pidPath, data, 0o600); err != nil {
		return fail(fmt.Errorf("--state-dir: %w", err))
	}
	for {
		n, err := registeredTaskManagers(st.RESTURL)
		if err == nil && n >= tms {
			break
		}
		for _, p := range st.TaskManagers {
			if !alive(p.Pid, "taskmanager") {
				log, _ := os.ReadFile(p.Log)
				clusterStop(dir)
				return fmt.Errorf("a TaskManager exited at start: %s (log %s)", lastLine(log), p.Log)
			}
		}
		if time.Now().After(deadline) {
			clusterStop(dir)
			return fmt.Errorf("%d of %d TaskManagers registered within %v (logs in %s)", n, tms, wait, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("weir: cluster started: JobManager pid %d (RPC %s, REST API %s), %d TaskManagers of %d slots; logs in %s; stop it with weir cluster stop\n",
		st.JobManager.Pid, st.RPCAddress, st.RESTURL, tms, slots, dir)
	return nil
}

// spawn starts exe with args in a session of its own, its output in log.
func spawn(exe string, args []string, log string) (int, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("--state-dir: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start weir %s: %w", args[0], err)
	}
	pid := cmd.Process.Pid
	// Reap it if it ends while this process lives; after that, init does.
	go cmd.Wait()
	return pid, nil
}

func registeredTaskManagers(url string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/taskmanagers")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out rest.TaskManagersInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return len(out.TaskManagers), nil
}

func clusterStop(dir string) error {
	pidPath := filepath.Join(dir, clusterPidFile)
	st, err := readClusterState(pidPath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no local cluster is running: no pid file %s (see --state-dir)", pidPath)
	}
	if err != nil {
		return err
	}
	type proc struct {
		pid  int
		role string
	}
	var procs []proc
	for _, p := range st.TaskManagers {
		procs = append(procs, proc{p.Pid, "taskmanager"})
	}
	procs = append(procs, proc{st.JobManager.Pid, "jobmanager"})
	stopped := 0
	// TaskManagers first, so that they deregister from a JobManager that is
	// still there.
	for _, group := range [][]proc{procs[:len(procs)-1], procs[len(procs)-1:]} {
		for _, p := range group {
			if alive(p.pid, p.role) {
				syscall.Kill(p.pid, syscall.SIGTERM)
				stopped++
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, p := range group {
			for alive(p.pid, p.role) {
				if time.Now().After(deadline) {
					syscall.Kill(p.pid, syscall.SIGKILL)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if err := os.Remove(pidPath); err != nil {
		return err
	}
	fmt.Printf("weir: cluster stopped (%d of its %d processes were running)\n", stopped, len(procs))
	return nil
}

func readClusterState(path string) (clusterState, error) {
	var st clusterState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("pid file %s is damaged (%v): remove it after stopping its processes by hand", path, err)
	}
	return st, nil
}

// alive reports whether pid runs weir in role (a zombie or a reused pid of
// another program is not); role "" accepts any program.
func alive(pid int, role string) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	if role == "" {
		return true
	}
	// A process that has just been started has an empty command line for
	// a moment: exec has replaced its memory (and so exec.Cmd.Start has
	// returned) but the loader has not yet set up its arguments. Wait
	// for them rather than call it dead (CI saw "the JobManager exited at
	// start" with an empty log from exactly that).
	for wait := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return false
		}
		if len(cmdline) > 0 || time.Now().After(wait) {
			return bytes.Contains(cmdline, []byte("\x00"+role+"\x00"))
		}
	}
}

// lastLine is the last non-empty line of a log.
func lastLine(data []byte) string {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
