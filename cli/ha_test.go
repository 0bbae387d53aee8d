package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/etcdtest"
	"github.com/weirstream/weir/internal/rest"
)

// haTTL is the session TTL of the HA process tests: short, so a failover
// after SIGKILL takes about this long.
const haTTL = 2 * time.Second

func haArgs(endpoint, cluster string) []string { return haArgsTTL(endpoint, cluster, haTTL) }

func haArgsTTL(endpoint, cluster string, ttl time.Duration) []string {
	return []string{"--ha", "etcd", "--ha-endpoints", endpoint, "--ha-cluster-id", cluster, "--ha-session-ttl", ttl.String()}
}

// haJM is one `weir jobmanager --ha etcd` process.
type haJM struct {
	p         *roleProc
	name, url string
}

// startHAJobManager starts a JobManager and waits until it stands by (its
// REST API is up), or leads when lead is set.
func startHAJobManager(t *testing.T, endpoint, cluster, rpc string, extra ...string) *haJM {
	t.Helper()
	return startHAJobManagerTTL(t, endpoint, cluster, rpc, haTTL, extra...)
}

func startHAJobManagerTTL(t *testing.T, endpoint, cluster, rpc string, ttl time.Duration, extra ...string) *haJM {
	t.Helper()
	args := append([]string{"jobmanager", "--rpc-address", rpc, "--rest-address", "127.0.0.1:0"}, haArgsTTL(endpoint, cluster, ttl)...)
	args = append(args, extra...)
	p, got := startRole(t, nil, args, `REST API on (http\S+)`, `JobManager (\S+) standing by`)
	return &haJM{p: p, url: got[0], name: got[1]}
}

// waitLine waits until p prints a line matching re (substring), within d.
func waitStderr(t *testing.T, p *roleProc, substr string, d time.Duration) time.Time {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, substr) {
				return time.Now()
			}
		case <-p.exited:
			t.Fatalf("process exited before printing %q; stderr:\n%s", substr, p.stderr.String())
		case <-timeout:
			t.Fatalf("no %q within %v; stderr:\n%s", substr, d, p.stderr.String())
		}
	}
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       5 * time.Second,
}

func overview(t *testing.T, url string) (int, string, rest.ClusterOverview) {
	t.Helper()
	resp, err := noRedirect.Get(url + "/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o rest.ClusterOverview
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, resp.Header.Get("Location"), o
}

// leaderOf waits until one of jms leads (its /overview answers 200) and
// returns it.
func leaderOf(t *testing.T, d time.Duration, jms ...*haJM) *haJM {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, jm := range jms {
			if code, _, o := overview(t, jm.url); code == http.StatusOK && o.HighAvailability != nil && o.HighAvailability.Leader.Name == jm.name {
				return jm
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no JobManager leads within %v", d)
	return nil
}

// TestHAFailover: two JobManagers on one etcd and two TaskManagers that
// find the leader through etcd (one) and through a list (the other). The
// standby's REST API redirects to the leader (307), whose /overview names
// itself and the standby. The leader is killed with SIGKILL: the standby
// leads within the session TTL and a bit, both TaskManagers register with
// it, and its REST API now serves.
func TestHAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	e := etcdtest.Start(t)
	rpcA, rpcB := freeAddr(t), freeAddr(t)
	a := startHAJobManager(t, e.Endpoint(), "failover", rpcA)
	first := leaderOf(t, 15*time.Second, a)
	b := startHAJobManager(t, e.Endpoint(), "failover", rpcB)

	tmEtcd, _ := startRole(t, nil, append([]string{"taskmanager"}, haArgs(e.Endpoint(), "failover")...), `msg=registered`)
	tmList, _ := startRole(t, nil, []string{"taskmanager", "--jobmanager", rpcB + "," + rpcA}, `msg=registered`)
	waitTaskManagers(t, first.url, "both TaskManagers registered with the leader", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 2 })

	code, loc, _ := overview(t, b.url)
	if code != http.StatusTemporaryRedirect || loc != a.url+"/overview" {
		t.Fatalf("standby /overview = %d to %q, want 307 to %s/overview", code, loc, a.url)
	}
	_, _, o := overview(t, a.url)
	h := o.HighAvailability
	if h == nil || h.Leader.Name != a.name || h.Leader.RPCAddress != rpcA || len(h.Standbys) != 1 || h.Standbys[0].Name != b.name || h.ClusterID != "failover" || h.LeaderRevision == 0 {
		t.Fatalf("leader /overview high-availability = %+v", h)
	}

	killed := time.Now()
	a.p.cmd.Process.Kill()
	<-a.p.exited
	led := waitStderr(t, b.p, "leads cluster failover", haTTL+10*time.Second)
	took := led.Sub(killed)
	t.Logf("SIGKILL of the leader to the standby leading: %v (session TTL %v)", took.Round(time.Millisecond), haTTL)
	if took > haTTL+3*time.Second {
		t.Errorf("failover took %v, more than the TTL %v + 3s", took, haTTL)
	}
	if leaderOf(t, 5*time.Second, b) != b {
		t.Fatal("b does not serve as the leader")
	}
	waitTaskManagers(t, b.url, "both TaskManagers registered with the new leader", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 2 })
	t.Logf("both TaskManagers registered with the new leader %v after it led", time.Since(led).Round(time.Millisecond))
	_, _, o = overview(t, b.url)
	if o.HighAvailability.LeaderRevision <= h.LeaderRevision || len(o.HighAvailability.Standbys) != 0 {
		t.Fatalf("new leader's high-availability = %+v (old revision %d)", o.HighAvailability, h.LeaderRevision)
	}
	for _, tm := range []*roleProc{tmEtcd, tmList} {
		select {
		case <-tm.exited:
			t.Fatalf("a TaskManager exited: %s", tm.stderr.String())
		default:
		}
	}
}

// TestHADeposedLeaderStepsDown: the leader is paused with SIGSTOP past its
// session TTL; the standby leads; resumed, the old leader finds its
// session gone, stops serving the control plane and stands by: its REST
// API redirects to the new leader, and the TaskManager stays with the new
// one. (That its writes fail on the revision guard is proved in
// internal/ha: TestDeposedLeaderCannotWrite.)
func TestHADeposedLeaderStepsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	e := etcdtest.Start(t)
	a := startHAJobManager(t, e.Endpoint(), "pause", "127.0.0.1:0")
	leaderOf(t, 15*time.Second, a)
	b := startHAJobManager(t, e.Endpoint(), "pause", "127.0.0.1:0")
	startRole(t, nil, append([]string{"taskmanager"}, haArgs(e.Endpoint(), "pause")...), `msg=registered`)

	if err := a.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStderr(t, b.p, "leads cluster pause", haTTL+10*time.Second)
	waitTaskManagers(t, b.url, "the TaskManager registered with the new leader", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 1 })
	time.Sleep(500 * time.Millisecond)
	if err := a.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitStderr(t, a.p, "lost the leadership", 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, loc, _ := overview(t, a.url)
		if code == http.StatusTemporaryRedirect && loc == b.url+"/overview" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed old leader's /overview = %d to %q, want 307 to %s", code, loc, b.url)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := taskManagers(t, b.url); len(m) != 1 {
		t.Fatalf("new leader lists %d TaskManagers", len(m))
	}
}

// TestHABadInput: each mistake of the HA flags exits non-zero with one
// line naming it, and a JobManager that cannot reach etcd exits at once.
func TestHABadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real weir processes")
	}
	t.Parallel()
	dead := freeAddr(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"etcd unreachable", []string{"jobmanager", "--rest-address", "off", "--ha", "etcd", "--ha-endpoints", dead, "--ha-cluster-id", "c"}, "weir: high availability: etcd at " + dead + " did not answer within 5s"},
		{"no endpoints", []string{"jobmanager", "--rest-address", "off", "--ha", "etcd", "--ha-cluster-id", "c"}, "--ha etcd needs --ha-endpoints"},
		{"no cluster id", []string{"jobmanager", "--rest-address", "off", "--ha", "etcd", "--ha-endpoints", dead}, "--ha etcd needs --ha-cluster-id"},
		{"bad mode", []string{"jobmanager", "--rest-address", "off", "--ha", "zookeeper"}, `--ha is "zookeeper": use none or etcd`},
		{"endpoints without ha", []string{"jobmanager", "--rest-address", "off", "--rpc-address", "127.0.0.1:0", "--ha-endpoints", dead}, "--ha-endpoints and --ha-cluster-id need --ha etcd"},
		{"bad cluster id", []string{"jobmanager", "--rest-address", "off", "--ha", "etcd", "--ha-endpoints", dead, "--ha-cluster-id", "a/b"}, `cluster id "a/b"`},
		{"bad ttl", []string{"jobmanager", "--rest-address", "off", "--ha", "etcd", "--ha-endpoints", dead, "--ha-cluster-id", "c", "--ha-session-ttl", "1500ms"}, "whole seconds"},
		{"taskmanager etcd unreachable", []string{"taskmanager", "--ha", "etcd", "--ha-endpoints", dead, "--ha-cluster-id", "c"}, "did not answer within 5s"},
		{"bad jobmanager list", []string{"taskmanager", "--jobmanager", "127.0.0.1:1,nohost"}, `--jobmanager: "nohost" is not host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, stderr, code := runWeirEnv(t, nil, tc.args...)
			last := lastLine([]byte(stderr))
			if code == 0 || !strings.Contains(last, tc.want) {
				t.Errorf("exit %d, last line %q; want non-zero and %q; stderr:\n%s", code, last, tc.want, stderr)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestHAFailoverTimes measures SIGKILL of the leader to the standby
// serving, over WEIR_HA_FAILOVERS kills (opt-in: WEIR_HA_FAILOVERS=10),
// with the session TTL WEIR_HA_TTL (default 2s).
func TestHAFailoverTimes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("WEIR_HA_FAILOVERS"))
	if n <= 0 {
		t.Skip("set WEIR_HA_FAILOVERS=10 to measure 10 failovers")
	}
	ttl := haTTL
	if v := os.Getenv("WEIR_HA_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WEIR_HA_TTL: %v", err)
		}
		ttl = d
	}
	e := etcdtest.Start(t)
	jms := []*haJM{startHAJobManagerTTL(t, e.Endpoint(), "bench", "127.0.0.1:0", ttl)}
	leaderOf(t, 15*time.Second, jms[0])
	jms = append(jms, startHAJobManagerTTL(t, e.Endpoint(), "bench", "127.0.0.1:0", ttl))
	startRole(t, nil, append([]string{"taskmanager"}, haArgsTTL(e.Endpoint(), "bench", ttl)...), `msg=registered`)
	var serve, register []time.Duration
	for i := 0; i < n; i++ {
		old := leaderOf(t, 15*time.Second, jms...)
		var standby *haJM
		for _, jm := range jms {
			if jm != old {
				standby = jm
			}
		}
		waitTaskManagers(t, old.url, "the TaskManager registered", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 1 })
		killed := time.Now()
		old.p.cmd.Process.Kill()
		<-old.p.exited
		leaderOf(t, ttl+10*time.Second, standby)
		serve = append(serve, time.Since(killed))
		waitTaskManagers(t, standby.url, "the TaskManager registered with the new leader", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 1 })
		register = append(register, time.Since(killed))
		jms = []*haJM{standby, startHAJobManagerTTL(t, e.Endpoint(), "bench", "127.0.0.1:0", ttl)}
	}
	p50 := func(d []time.Duration) (time.Duration, time.Duration) {
		s := slices.Clone(d)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2], s[len(s)-1]
	}
	sp, sm := p50(serve)
	rp, rm := p50(register)
	t.Logf("session TTL %v, %d SIGKILLs of the leader: new leader serving p50 %v max %v; TaskManager registered with it p50 %v max %v",
		ttl, n, sp.Round(time.Millisecond), sm.Round(time.Millisecond), rp.Round(time.Millisecond), rm.Round(time.Millisecond))
}

// jobState reads a job's state from a JobManager's REST API ("" when the
// JobManager does not know it or does not answer as the leader).
func jobState(url, id string) string {
	resp, err := noRedirect.Get(url + "/jobs/" + id)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	var d rest.JobDetailsInfo
	if json.NewDecoder(resp.Body).Decode(&d) != nil {
		return ""
	}
	return string(d.State)
}

// TestHAJobRecoveredExactlyOnce: wordcount runs on a cluster of two
// JobManagers (HA on etcd) and two TaskManagers, writing through the
// exactly-once file sink. Once a checkpoint's pointer is in etcd the
// leader is killed with SIGKILL: the standby leads, recovers the job
// under its id from that pointer, runs it to its end, and the committed
// output holds each "word,k" exactly once; the ended job is removed from
// etcd.
func TestHAJobRecoveredExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real weir processes")
	}
	t.Parallel()
	e := etcdtest.Start(t)
	dir := t.TempDir()
	input := wordsInput(t, dir, 2*clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	rpcA, rpcB := freeAddr(t), freeAddr(t)
	a := startHAJobManager(t, e.Endpoint(), "jobs", rpcA)
	leaderOf(t, 15*time.Second, a)
	b := startHAJobManager(t, e.Endpoint(), "jobs", rpcB)
	for range 2 {
		startRole(t, nil, append([]string{"taskmanager", "--slots", "2"}, haArgs(e.Endpoint(), "jobs")...), `msg=registered`)
	}
	waitTaskManagers(t, a.url, "both TaskManagers registered", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 2 })

	// weir run follows the job through the list of JobManagers: the one
	// that accepts is the leader, before the failover and after it.
	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart), "--jobmanager", rpcB+","+rpcA)
	run, got := startRole(t, nil, args, `submitted to the JobManager at \S+ as (\S+)`)
	id := got[0]

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	keys, _ := ha.NewKeys("jobs")
	pointer := func() (ha.Pointer, bool) {
		resp, err := cli.Get(context.Background(), keys.Latest(id))
		if err != nil || len(resp.Kvs) == 0 {
			return ha.Pointer{}, false
		}
		var p ha.Pointer
		return p, json.Unmarshal(resp.Kvs[0].Value, &p) == nil
	}
	deadline := time.Now().Add(30 * time.Second)
	var before ha.Pointer
	for {
		p, ok := pointer()
		if ok {
			before = p
			break
		}
		if time.Now().After(deadline) || jobState(a.url, id) == "FINISHED" {
			t.Fatalf("no checkpoint pointer of job %s in etcd while it ran (state %q); leader:\n%s", id, jobState(a.url, id), a.p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := jobState(a.url, id); st != "RUNNING" {
		t.Fatalf("job %s is %q when the leader is killed: make the input larger", id, st)
	}
	killed := time.Now()
	a.p.cmd.Process.Kill()
	<-a.p.exited
	waitStderr(t, b.p, "recovered job "+id, haTTL+15*time.Second)
	for jobState(b.url, id) != "RUNNING" {
		if time.Since(killed) > haTTL+30*time.Second {
			t.Fatalf("job %s not RUNNING under the new leader; its stderr:\n%s", id, b.p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("SIGKILL of the leader (pointer at checkpoint %d) to the job RUNNING under the new leader: %v (session TTL %v)",
		before.Checkpoint, time.Since(killed).Round(time.Millisecond), haTTL)
	for st := jobState(b.url, id); st != "FINISHED"; st = jobState(b.url, id) {
		if st == "FAILED" || time.Since(killed) > 120*time.Second {
			t.Fatalf("job %s is %q under the new leader; its stderr:\n%s", id, st, b.p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := exitCode(t, run, 30*time.Second, "weir run"); code != 0 {
		t.Fatalf("weir run following the job through the failover: exit %d:\n%s", code, run.stderr.String())
	}
	checkWordCountOutput(t, out, want)
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, err := cli.Get(context.Background(), keys.Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		left := []string{}
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); strings.HasPrefix(k, keys.Jobs()) || strings.HasPrefix(k, keys.Checkpoints()) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished job's keys are still in etcd: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHADeposedLeaderWithJob: a job runs under leader A; A is paused with
// SIGSTOP past its session TTL; B leads and recovers the job; A is
// resumed while the job runs under B, finds its session gone and stands
// by. Every pointer etcd records once B wrote its first is B's (each
// carries the leadership revision it was written under): A, resumed,
// never moves it; its writes fail on the guard. The output is exactly
// once.
func TestHADeposedLeaderWithJob(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses real weir processes")
	}
	t.Parallel()
	e := etcdtest.Start(t)
	dir := t.TempDir()
	input := wordsInput(t, dir, 4*clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	hb := []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s"}
	a := startHAJobManager(t, e.Endpoint(), "zombie", "127.0.0.1:0", hb...)
	leaderOf(t, 15*time.Second, a)
	b := startHAJobManager(t, e.Endpoint(), "zombie", "127.0.0.1:0", hb...)
	for range 2 {
		startRole(t, nil, append([]string{"taskmanager", "--slots", "2"}, haArgs(e.Endpoint(), "zombie")...), `msg=registered`)
	}
	waitTaskManagers(t, a.url, "both TaskManagers registered", func(m map[string]rest.TaskManagerEntry) bool { return len(m) == 2 })
	_, _, o := overview(t, a.url)
	revA := o.HighAvailability.LeaderRevision
	rpcA := o.HighAvailability.Leader.RPCAddress

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	keys, _ := ha.NewKeys("zombie")
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	events := cli.Watch(wctx, keys.Checkpoints(), clientv3.WithPrefix())

	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart), "--jobmanager", rpcA, "--detached")
	_, stderr, code := runWeirEnv(t, nil, args...)
	m := regexp.MustCompile(`submitted to the JobManager at \S+ as (\S+)`).FindStringSubmatch(stderr)
	if code != 0 || m == nil {
		t.Fatalf("weir run --detached: exit %d:\n%s", code, stderr)
	}
	id := m[1]

	var pointers []ha.Pointer
	gotPointer := func(d time.Duration, cond func(ha.Pointer) bool) {
		t.Helper()
		timeout := time.After(d)
		for {
			select {
			case resp := <-events:
				for _, ev := range resp.Events {
					if ev.Type != clientv3.EventTypePut || string(ev.Kv.Key) != keys.Latest(id) {
						continue
					}
					var p ha.Pointer
					if err := json.Unmarshal(ev.Kv.Value, &p); err != nil {
						t.Fatal(err)
					}
					pointers = append(pointers, p)
					if cond(p) {
						return
					}
				}
			case <-timeout:
				t.Fatalf("no such pointer of job %s within %v; pointers so far %+v", id, d, pointers)
			}
		}
	}
	gotPointer(30*time.Second, func(p ha.Pointer) bool { return p.Leader == revA })
	if st := jobState(a.url, id); st != "RUNNING" {
		t.Fatalf("job %s is %q before the pause: make the input larger", id, st)
	}

	if err := a.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStderr(t, b.p, "recovered job "+id, haTTL+15*time.Second)
	_, _, o = overview(t, b.url)
	revB := o.HighAvailability.LeaderRevision
	gotPointer(30*time.Second, func(p ha.Pointer) bool { return p.Leader == revB })
	if err := a.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for !strings.Contains(a.p.stderr.String(), "lost the leadership") {
		if time.Since(resumed) > 15*time.Second {
			a.p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, to see where it hangs
			time.Sleep(time.Second)
			t.Fatalf("the resumed old leader did not stand down within 15s; stderr:\n%s", a.p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("resumed A stood down after %v", time.Since(resumed).Round(time.Millisecond))
	for st := jobState(b.url, id); st != "FINISHED"; st = jobState(b.url, id) {
		if st == "FAILED" || len(pointers) > 0 && time.Since(pointers[len(pointers)-1].Completed) > 120*time.Second {
			t.Fatalf("job %s is %q under the new leader; its stderr:\n%s", id, st, b.p.stderr.String())
		}
		select {
		case resp := <-events:
			for _, ev := range resp.Events {
				var p ha.Pointer
				if ev.Type == clientv3.EventTypePut && string(ev.Kv.Key) == keys.Latest(id) && json.Unmarshal(ev.Kv.Value, &p) == nil {
					pointers = append(pointers, p)
				}
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	checkWordCountOutput(t, out, want)
	firstB := slices.IndexFunc(pointers, func(p ha.Pointer) bool { return p.Leader == revB })
	for _, p := range pointers[firstB:] {
		if p.Leader != revB {
			t.Fatalf("after B's first pointer, etcd recorded %+v, written under revision %d (A's is %d, B's %d)", p, p.Leader, revA, revB)
		}
	}
	t.Logf("%d pointers recorded (%d under A, revision %d; then only B's, revision %d); the resumed A logged %d refused writes",
		len(pointers), firstB, revA, revB, strings.Count(a.p.stderr.String(), "write refused"))
}
