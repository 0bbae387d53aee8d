// Package etcdtest starts a real etcd server for tests on free loopback
// ports, with its data in a directory of the test's: in the test's process
// (Start, go.etcd.io/etcd/server/v3/embed) or as a separate etcd process
// (StartProcess, the binary build-etcd.sh builds). Both can be stopped
// and started again on the same ports and data (etcd restarting). Only
// tests import it.
package etcdtest

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is one embedded etcd member.
type Server struct {
	t          testing.TB
	dir        string
	client     url.URL
	peer       url.URL
	mu         sync.Mutex
	e          *embed.Etcd
	everBooted bool
}

// Start starts etcd with its data in a new temporary directory; it is
// stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir()}
	s.client = url.URL{Scheme: "http", Host: freeAddr(t)}
	s.peer = url.URL{Scheme: "http", Host: freeAddr(t)}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Endpoint is the client address, host:port.
func (s *Server) Endpoint() string { return s.client.Host }

// Stop stops etcd (a no-op when stopped).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Restart starts etcd again on the same ports and data (Start's first
// boot too). It fails the test if etcd is not ready within 20 s.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return
	}
	cfg := embed.NewConfig()
	cfg.Name = "weir-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if s.everBooted {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.Metrics = "basic"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var e *embed.Etcd
	var err error
	// The ports were free when picked; a restart may find them in
	// TIME_WAIT for a moment.
	for i := 0; ; i++ {
		e, err = embed.StartEtcd(cfg)
		if err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("etcdtest: start etcd on %s: %v", s.client.Host, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		s.t.Fatalf("etcdtest: etcd on %s not ready within 20s", s.client.Host)
	}
	s.e = e
	s.everBooted = true
}

// String describes the server for logs.
func (s *Server) String() string { return fmt.Sprintf("etcd at %s (data %s)", s.client.Host, s.dir) }

// Version is the etcd release of the real-process test (the one go.mod
// requires for the embedded server).
const Version = "v3.7.3"

// Environment of the real-process test.
const (
	// EnvCacheDir is where the etcd binary is looked for:
	// $WEIR_ETCD_CACHE/<Version>/etcd (default: the user cache
	// directory's weir/etcd). build-etcd.sh puts it there.
	EnvCacheDir = "WEIR_ETCD_CACHE"
	// EnvRequire, set to 1, fails rather than skips the test when the
	// binary is missing.
	EnvRequire = "WEIR_REQUIRE_ETCD"
)

// BinaryPath is where the etcd binary of Version is expected.
func BinaryPath() string {
	dir := os.Getenv(EnvCacheDir)
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			c = os.TempDir()
		}
		dir = filepath.Join(c, "weir", "etcd")
	}
	return filepath.Join(dir, Version, "etcd")
}

// Process is a real etcd process, started from BinaryPath.
type Process struct {
	t      testing.TB
	bin    string
	dir    string
	client string
	peer   string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProcess starts the etcd binary with its data in a temporary
// directory on free loopback ports; it is killed when the test ends. A
// missing binary skips the test (fails it with WEIR_REQUIRE_ETCD=1).
func StartProcess(t testing.TB) *Process {
	t.Helper()
	bin := BinaryPath()
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no etcd %s binary at %s: build it with internal/ha/etcdtest/build-etcd.sh (about 2-4 minutes on two cores)", Version, bin)
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal(msg)
		}
		t.Skipf("%s (set %s=1 to fail instead)", msg, EnvRequire)
	}
	p := &Process{t: t, bin: bin, dir: t.TempDir(), client: freeAddr(t), peer: freeAddr(t)}
	p.Restart()
	t.Cleanup(p.Stop)
	return p
}

// Endpoint is the client address, host:port.
func (p *Process) Endpoint() string { return p.client }

// Stop kills etcd with SIGKILL (a no-op when stopped).
func (p *Process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.cmd.Process.Kill()
		<-p.exited
		p.cmd = nil
	}
}

// Restart starts etcd on the same ports and data; it fails the test if
// etcd does not answer within 20 s.
func (p *Process) Restart() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	cu, pu := "http://"+p.client, "http://"+p.peer
	cmd := exec.Command(p.bin, "--name", "weir-test", "--data-dir", p.dir,
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "weir-test="+pu, "--log-level", "error")
	var out syncWriter
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("etcdtest: start %s: %v", p.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get(cu + "/health"); err == nil {
			ok := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if ok {
				break
			}
		}
		select {
		case <-exited:
			p.t.Fatalf("etcdtest: etcd exited at start: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			p.t.Fatalf("etcdtest: etcd on %s not healthy within 20s: %s", p.client, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.cmd, p.exited = cmd, exited
}

type syncWriter struct {
	mu sync.Mutex
	b  []byte
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.b) < 1<<16 {
		w.b = append(w.b, p...)
	}
	return len(p), nil
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
