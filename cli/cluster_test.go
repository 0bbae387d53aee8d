package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/testutil/certtest"
)

// roleProc is a `weir jobmanager` or `weir taskmanager` process.
type roleProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	lines  chan string
	exited chan struct{}
	err    error
}

// startRole starts weir with args and returns once its stderr matched
// each of want (in any order), with the first submatch of each.
func startRole(t *testing.T, env []string, args []string, want ...string) (*roleProc, []string) {
	t.Helper()
	return startRoleCmd(t, exec.Command(os.Args[0], args...), env, args, want...)
}

// startRoleCmd is startRole of cmd, which runs weir with args.
func startRoleCmd(t *testing.T, cmd *exec.Cmd, env []string, args []string, want ...string) (*roleProc, []string) {
	t.Helper()
	cmd.Env = append(append(os.Environ(), "WEIR_TEST_MAIN=1"), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &roleProc{cmd: cmd, stderr: new(syncBuffer), lines: make(chan string, 1000), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-p.exited
	})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.stderr.Write(append(sc.Bytes(), '\n'))
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, pipe)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	got := make([]string, len(want))
	res := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		res[i] = regexp.MustCompile(w)
	}
	missing := len(want)
	timeout := time.After(30 * time.Second)
	for missing > 0 {
		select {
		case l := <-p.lines:
			for i, re := range res {
				if m := re.FindStringSubmatch(l); m != nil && got[i] == "" {
					got[i] = m[len(m)-1]
					missing--
				}
			}
		case <-p.exited:
			t.Fatalf("weir %s exited before printing %q; stderr:\n%s", args[0], want, p.stderr.String())
		case <-timeout:
			t.Fatalf("weir %s printed no %q; stderr:\n%s", args[0], want, p.stderr.String())
		}
	}
	return p, got
}

func startJobManager(t *testing.T, extra ...string) (p *roleProc, rpc, url string) {
	t.Helper()
	args := append([]string{"jobmanager", "--rpc-address", "127.0.0.1:0", "--rest-address", "127.0.0.1:0"}, extra...)
	p, got := startRole(t, nil, args, `JobManager RPC on (\S+)`, `REST API on (http\S+)`)
	return p, got[0], got[1]
}

func startTaskManager(t *testing.T, rpc string, extra ...string) (p *roleProc, id string) {
	t.Helper()
	args := append([]string{"taskmanager", "--jobmanager", rpc}, extra...)
	p, got := startRole(t, nil, args, `TaskManager (\S+) with`, `msg=registered`)
	return p, got[0]
}

func taskManagers(t *testing.T, url string) map[string]rest.TaskManagerEntry {
	t.Helper()
	resp, err := http.Get(url + "/taskmanagers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out rest.TaskManagersInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	m := map[string]rest.TaskManagerEntry{}
	for _, tm := range out.TaskManagers {
		m[tm.ID] = tm
	}
	return m
}

// waitTaskManagers polls /taskmanagers until cond holds (10 s at most) and
// returns how long that took.
func waitTaskManagers(t *testing.T, url, what string, cond func(map[string]rest.TaskManagerEntry) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		tms := taskManagers(t, url)
		if cond(tms) {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("timed out waiting until %s; /taskmanagers: %+v", what, tms)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterMembership runs a JobManager and TaskManagers as real
// processes: they register with their slots; a TaskManager killed with
// SIGKILL is dropped at once (its connection breaks, long before the
// heartbeat timeout of 30 s), and a restarted one registers again.
func TestClusterMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	_, rpc, url := startJobManager(t, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "30s")
	metrics := freeAddr(t)
	tm1, id1 := startTaskManager(t, rpc, "--slots", "2", "--metrics-address", metrics)
	_, id2 := startTaskManager(t, rpc, "--slots", "3")
	waitTaskManagers(t, url, "both TaskManagers are listed", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 2 })
	tms := taskManagers(t, url)
	if e := tms[id1]; e.SlotsNumber != 2 || e.FreeSlots != 2 || e.DataPort == 0 || e.Hardware.PhysicalMemory == 0 || e.LastBeat == 0 {
		t.Errorf("%s: %+v", id1, e)
	}
	if e := tms[id2]; e.SlotsNumber != 3 || e.FreeSlots != 3 {
		t.Errorf("%s: %+v", id2, e)
	}
	var overview rest.ClusterOverview
	getJSON(t, url+"/overview", &overview)
	if overview.TaskManagers != 2 || overview.SlotsTotal != 5 || overview.SlotsAvailable != 5 {
		t.Errorf("overview %+v", overview)
	}
	var one rest.TaskManagerEntry
	getJSON(t, url+"/taskmanagers/"+id2, &one)
	if one.ID != id2 || one.SlotsNumber != 3 {
		t.Errorf("/taskmanagers/%s: %+v", id2, one)
	}
	if resp, err := http.Get(url + "/taskmanagers/nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown TaskManager: %v %v", resp, err)
	}
	// The TaskManager's own /metrics.
	body := httpGet(t, "http://"+metrics+"/metrics")
	for _, want := range []string{`weir_taskmanager_registered{tm_id="` + id1 + `"} 1`, `weir_taskmanager_slots_total{tm_id="` + id1 + `"} 2`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	tm1.cmd.Process.Kill()
	d := waitTaskManagers(t, url, id1+" is dropped", func(m map[string]rest.TaskManagerEntry) bool { _, ok := m[id1]; return !ok && len(m) == 1 })
	t.Logf("SIGKILLed TaskManager dropped after %v", d)
	if d > 5*time.Second {
		t.Errorf("dropped after %v: the broken connection should drop it at once", d)
	}
	_, id3 := startTaskManager(t, rpc, "--slots", "2")
	if id3 == id1 {
		t.Errorf("the restarted TaskManager has the old id %s", id1)
	}
	waitTaskManagers(t, url, "the restarted TaskManager is listed", func(m map[string]rest.TaskManagerEntry) bool {
		_, ok := m[id3]
		return ok && len(m) == 2
	})
}

// TestClusterHeartbeatTimeout: a TaskManager whose heartbeats stop
// (SIGSTOP) is dropped after the heartbeat timeout; resumed, it is told to
// register again and does, under the same id.
func TestClusterHeartbeatTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	jm, rpc, url := startJobManager(t, "--heartbeat-interval", "100ms", "--heartbeat-timeout", "1s")
	tm, id := startTaskManager(t, rpc, "--slots", "1")
	waitTaskManagers(t, url, "registered", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 1 })
	if err := tm.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	d := waitTaskManagers(t, url, "the stopped TaskManager is dropped", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 0 })
	t.Logf("stopped TaskManager dropped after %v", d)
	if d < 700*time.Millisecond {
		t.Errorf("dropped after %v, before the 1s timeout", d)
	}
	if log, ok := stderrContains(jm, "heartbeat timeout", 5*time.Second); !ok {
		t.Errorf("the JobManager's log does not say why:\n%s", log)
	}
	tm.cmd.Process.Signal(syscall.SIGCONT)
	waitTaskManagers(t, url, "registered again", func(m map[string]rest.TaskManagerEntry) bool { _, ok := m[id]; return ok })
}

// TestClusterBadInput: each mistake exits non-zero with one line that says
// what was wrong.
func TestClusterBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	_, rpc, _ := startJobManager(t, "--cluster-token", "right")
	dead := freeAddr(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"wrong token", nil, []string{"taskmanager", "--jobmanager", rpc, "--cluster-token", "wrong"}, "weir: refused by the JobManager: wrong cluster token"},
		{"wrong token from the environment", []string{"WEIR_CLUSTER_TOKEN=wrong"}, []string{"taskmanager", "--jobmanager", rpc}, "wrong cluster token"},
		{"no token", nil, []string{"taskmanager", "--jobmanager", rpc}, "the JobManager requires a cluster token"},
		{"no JobManager answers", nil, []string{"taskmanager", "--jobmanager", dead, "--registration-timeout", "500ms"}, "weir: no JobManager answered at " + dead + " within 500ms"},
		{"public JobManager without token", nil, []string{"jobmanager", "--rpc-address", "0.0.0.0:0", "--rest-address", "off"}, "a cluster token is required"},
		{"public TaskManager without token", nil, []string{"taskmanager", "--jobmanager", rpc, "--data-address", "0.0.0.0:0"}, "data address 0.0.0.0:0 is not a loopback address"},
		{"half TLS", nil, []string{"jobmanager", "--tls-cert", "x.pem", "--rest-address", "off"}, "--tls-cert, --tls-key and --tls-ca go together"},
		{"timeout below interval", nil, []string{"jobmanager", "--rpc-address", "127.0.0.1:0", "--heartbeat-interval", "2s", "--heartbeat-timeout", "1s", "--rest-address", "off"}, "heartbeat timeout 1s must be longer"},
		{"slots", nil, []string{"taskmanager", "--slots", "0"}, "--slots is 0: offer 1 to 1024 slots"},
		{"metrics report interval", nil, []string{"taskmanager", "--metrics-report-interval", "1ms"}, "--metrics-report-interval is 1ms: use 10ms or more"},
		{"stop without a cluster", nil, []string{"cluster", "stop", "--state-dir", t.TempDir()}, "no local cluster is running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runWeirEnv(t, tc.env, tc.args...)
			last := lastLine([]byte(stderr))
			if code == 0 || !strings.Contains(last, tc.want) {
				t.Errorf("exit %d, last line %q; want non-zero and %q; stderr:\n%s", code, last, tc.want, stderr)
			}
		})
	}
}

// TestClusterTLSAndConfig: a JobManager and a TaskManager over mutual TLS,
// their heartbeat and slot settings from one shared weir.yaml.
func TestClusterTLSAndConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	files := certtest.WriteCA(t, dir)
	cfg := filepath.Join(dir, "weir.yaml")
	os.WriteFile(cfg, []byte("jobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: 0\nrest.port: 0\nheartbeat.interval: 150 ms\nheartbeat.timeout: 2 s\ntaskmanager.numberOfTaskSlots: 4\n"), 0o644)
	tlsArgs := []string{"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA, "--config", cfg}
	jm, got := startRole(t, nil, append([]string{"jobmanager"}, tlsArgs...), `JobManager RPC on (\S+)`, `REST API on (http\S+)`)
	rpc, url := got[0], got[1]
	if !strings.Contains(jm.stderr.String(), "heartbeat every 150ms, timeout 2s") {
		t.Errorf("the config's heartbeat settings were not applied:\n%s", jm.stderr.String())
	}
	_, id := startTaskManager(t, rpc, tlsArgs...)
	waitTaskManagers(t, url, "registered over TLS", func(m map[string]rest.TaskManagerEntry) bool { return m[id].SlotsNumber == 4 })
	// Without TLS the TaskManager gets no answer.
	_, stderr, code := runWeir(t, "taskmanager", "--jobmanager", rpc, "--registration-timeout", "500ms")
	if code == 0 || !strings.Contains(stderr, "no JobManager answered") {
		t.Errorf("plain TaskManager: exit %d, stderr %s", code, stderr)
	}
}

// TestClusterStartStop: weir cluster start runs a JobManager and
// TaskManagers in the background; weir cluster stop ends them.
func TestClusterStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	args := []string{"cluster", "start", "--taskmanagers", "2", "--slots", "2", "--state-dir", dir, "--rpc-address", "127.0.0.1:0", "--rest-address", "127.0.0.1:0"}
	stdout, stderr, code := runWeir(t, args...)
	var st clusterState
	data, _ := os.ReadFile(filepath.Join(dir, clusterPidFile))
	json.Unmarshal(data, &st)
	t.Cleanup(func() {
		for _, p := range append(st.TaskManagers, st.JobManager) {
			if p.Pid > 0 && alive(p.Pid, "") {
				syscall.Kill(p.Pid, syscall.SIGKILL)
			}
		}
	})
	if code != 0 || !strings.Contains(stdout, "cluster started") {
		t.Fatalf("cluster start: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	tms := taskManagers(t, st.RESTURL)
	if len(tms) != 2 {
		t.Errorf("/taskmanagers: %+v", tms)
	}
	for id, e := range tms {
		if e.SlotsNumber != 2 {
			t.Errorf("%s: %+v", id, e)
		}
	}
	if _, stderr, code := runWeir(t, args...); code == 0 || !strings.Contains(stderr, "a cluster is already running") {
		t.Errorf("second start: exit %d, %s", code, stderr)
	}
	stdout, stderr, code = runWeir(t, "cluster", "stop", "--state-dir", dir)
	if code != 0 || !strings.Contains(stdout, "cluster stopped (3 of its 3 processes were running)") {
		t.Fatalf("cluster stop: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, p := range append(st.TaskManagers, st.JobManager) {
		if alive(p.Pid, "") {
			t.Errorf("pid %d still runs", p.Pid)
		}
	}
	// The TaskManagers deregistered before the JobManager stopped.
	if log, _ := os.ReadFile(st.JobManager.Log); strings.Count(string(log), "deregistered") != 2 {
		t.Errorf("JobManager log:\n%s", log)
		for _, p := range st.TaskManagers {
			l, _ := os.ReadFile(p.Log)
			t.Logf("%s:\n%s", p.Log, l)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, clusterPidFile)); !os.IsNotExist(err) {
		t.Errorf("pid file left: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(httpGet(t, url)), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// TestClusterPartition partitions a TaskManager from its JobManager: the
// TaskManager runs in a network namespace of its own, joined to the host by
// a veth pair, and the host's end is taken down. No connection breaks, so
// only the heartbeat timeout finds it; once the link is up again the
// TaskManager registers again. Needs root and ip(8); skipped otherwise.
func TestClusterPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	needNetns(t)
	t.Parallel()
	v := newVethNamespace(t, 51)
	hostIP, peerIP := v.hostIP, v.peerIP

	// Not loopback addresses: the cluster token is required.
	jm, got := startRole(t, nil, []string{"jobmanager", "--rpc-address", hostIP + ":0", "--rest-address", "127.0.0.1:0",
		"--cluster-token", "part", "--heartbeat-interval", "100ms", "--heartbeat-timeout", "1s"},
		`JobManager RPC on (\S+)`, `REST API on (http\S+)`)
	rpc, url := got[0], got[1]
	args := []string{"taskmanager", "--jobmanager", rpc, "--cluster-token", "part", "--data-address", peerIP + ":0"}
	_, got = startRoleCmd(t, v.cmd(args...), nil, args,
		`TaskManager (\S+) with`, `msg=registered`)
	id := got[0]
	waitTaskManagers(t, url, "registered across the veth", func(m map[string]rest.TaskManagerEntry) bool { _, ok := m[id]; return ok })

	v.cut()
	d := waitTaskManagers(t, url, "the partitioned TaskManager is dropped", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 0 })
	t.Logf("partitioned TaskManager dropped after %v", d)
	if d < 700*time.Millisecond {
		t.Errorf("dropped after %v, before the 1s heartbeat timeout", d)
	}
	if log, ok := stderrContains(jm, "heartbeat timeout", 5*time.Second); !ok {
		t.Errorf("the JobManager's log does not say why:\n%s", log)
	}
	v.heal()
	waitTaskManagers(t, url, "registered again after the partition healed", func(m map[string]rest.TaskManagerEntry) bool { _, ok := m[id]; return ok })
}

// stderrContains waits up to timeout for p's stderr to contain want (its
// lines arrive through a pipe, a moment after what the REST API already
// shows) and returns what it holds then.
func stderrContains(p *roleProc, want string, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		log := p.stderr.String()
		if strings.Contains(log, want) || time.Now().After(deadline) {
			return log, strings.Contains(log, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAliveRightAfterStart: a process whose exec.Cmd.Start has just
// returned is alive in its role, although for a moment its command line
// in /proc is empty (weir cluster start once took a JobManager so caught
// for one that had exited at start).
func TestAliveRightAfterStart(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	for i := range 200 {
		cmd := exec.Command(sleep, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ok := alive(cmd.Process.Pid, "30")
		cmd.Process.Kill()
		cmd.Wait()
		if !ok {
			t.Fatalf("start %d: a running process is not alive", i)
		}
		if alive(cmd.Process.Pid, "30") {
			t.Fatalf("start %d: a reaped process is alive", i)
		}
	}
}
