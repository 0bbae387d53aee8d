// Package miniotest runs real MinIO servers for tests: S3 checkpoint
// storage is tested against the server, not a mock of it.
//
// The server binary is MinIO at a pinned version (Version), built once with
// `go install` into a cache directory and reused by every later test run
// (see Binary). When it cannot be built or started, tests that ask for a
// server are skipped with the reason — or fail, when WEIR_REQUIRE_MINIO=1
// (CI sets it, so that a broken setup cannot pass as green).
//
// # Usage
//
// A test that needs a server of its own (it stops and restarts it):
//
//	srv := miniotest.Start(t) // stopped in t.Cleanup
//	srv.MakeBucket(t, "ckpt")
//	store, err := storage.NewS3Store("ckpt", "job", storage.S3Options{
//		Endpoint: srv.Endpoint, Insecure: true, PathStyle: true,
//		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
//
// Tests of a package sharing one server (started on first use, stopped when
// the tests end):
//
//	func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		srv := miniotest.Shared(t)
//		bucket := srv.NewBucket(t) // a fresh bucket per test
//	}
package miniotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the MinIO server built for tests: a pseudo-version of
// github.com/minio/minio, whose RELEASE.* tags are not semver, so that the
// Go module proxy serves commits only. This one (commit 7aac2a2c5b7c of
// 2026-02-12) was the proxy's @latest when it was pinned.
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

const module = "github.com/minio/minio"

// Environment variables of the helper.
const (
	// EnvBinary names a MinIO server binary to use instead of building one.
	EnvBinary = "WEIR_MINIO_BIN"
	// EnvCacheDir overrides the directory the binary is built into.
	EnvCacheDir = "WEIR_MINIO_CACHE"
	// EnvNoBuild, when "1", never builds: without a binary, tests skip.
	EnvNoBuild = "WEIR_MINIO_NO_BUILD"
	// EnvRequire, when "1", makes a missing server fail the test instead of
	// skipping it.
	EnvRequire = "WEIR_REQUIRE_MINIO"
)

// BuildTimeout bounds `go install` of the server. The first build compiles
// all of MinIO: about half an hour on a busy 2-core machine. A test's own
// timeout (go test -timeout, 10m by default) bounds it further; a build cut
// short keeps its compiled packages in the Go build cache, so the next run
// goes on from there.
const BuildTimeout = 45 * time.Minute

// Credentials of every server the helper starts.
const (
	AccessKey = "weir-test"
	SecretKey = "weir-test-secret"
)

// BuildCommand is the shell command that builds the binary Binary looks for
// into DIR (for CI, which builds it before the tests; see BinaryPath).
func BuildCommand(dir string) string {
	return fmt.Sprintf("GOFLAGS=-mod=mod GOWORK=off GOBIN=%s go install %s@%s", dir, module, Version)
}

// BinaryPath is where Binary looks for the cached binary:
// $WEIR_MINIO_CACHE, or the user cache directory, then
// weir/minio/VERSION/minio.
func BinaryPath() (string, error) {
	dir := os.Getenv(EnvCacheDir)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for the MinIO binary (set %s): %w", EnvCacheDir, err)
		}
		dir = filepath.Join(base, "weir", "minio")
	}
	return filepath.Join(dir, Version, exe("minio")), nil
}

func exe(name string) string {
	if filepath.Separator == '\\' {
		return name + ".exe"
	}
	return name
}

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the MinIO server binary: $WEIR_MINIO_BIN if set, else the
// one at BinaryPath, built there first if missing (unless
// WEIR_MINIO_NO_BUILD=1), within BuildTimeout. A build is tried once per
// process; concurrent test processes take turns through a lock directory
// next to the binary.
func Binary() (string, error) {
	return binaryBy(time.Now().Add(BuildTimeout))
}

func binaryBy(deadline time.Time) (string, error) {
	binary.once.Do(func() { binary.path, binary.err = findOrBuild(deadline) })
	return binary.path, binary.err
}

// buildDeadline is when a build for tb must be done: within BuildTimeout,
// and a minute before the test binary's own timeout kills it.
func buildDeadline(tb testing.TB) time.Time {
	d := time.Now().Add(BuildTimeout)
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := t.Deadline(); ok && end.Add(-time.Minute).Before(d) {
			d = end.Add(-time.Minute)
		}
	}
	return d
}

func findOrBuild(deadline time.Time) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	path, err := BinaryPath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if os.Getenv(EnvNoBuild) == "1" {
		return "", fmt.Errorf("no MinIO binary at %s and %s=1; build it with: %s", path, EnvNoBuild, BuildCommand(filepath.Dir(path)))
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockDir(filepath.Join(dir, ".building"), BuildTimeout, deadline)
	if err != nil {
		return "", fmt.Errorf("waiting for another process building MinIO: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil { // another process built it meanwhile
		return path, nil
	}
	if err := build(dir, deadline); err != nil {
		return "", err
	}
	return path, nil
}

// lockDir takes a lock that works across processes and systems: creating a
// directory is atomic. A lock older than stale is taken over (its holder
// died). It gives up at deadline.
func lockDir(lock string, stale time.Duration, deadline time.Time) (unlock func(), err error) {
	for {
		err := os.Mkdir(lock, 0o755)
		if err == nil {
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) > stale {
			os.Remove(lock)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s still held", lock)
		}
		time.Sleep(time.Second)
	}
}

// build runs `go install` into a fresh directory and renames the binary into
// dir, so that a half-written binary is never found.
func build(dir string, deadline time.Time) error {
	tmp, err := os.MkdirTemp(dir, ".gobin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", module+"@"+Version)
	cmd.Dir = tmp // outside any module
	// An interrupted go command stops its compilers; a killed one does not.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("building MinIO did not finish in the %s left before the test timeout; what was compiled is cached, so run the tests again (or with a longer -timeout), or build it ahead: %s",
				time.Since(start).Round(time.Second), BuildCommand(dir))
		}
		return fmt.Errorf("building MinIO (%s) failed after %s: %w\n%s", BuildCommand(dir), time.Since(start).Round(time.Second), err, tail(out.String(), 3000))
	}
	return os.Rename(filepath.Join(tmp, exe("minio")), filepath.Join(dir, exe("minio")))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// unavailable skips the test, or fails it when WEIR_REQUIRE_MINIO=1.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("MinIO required (%s=1) but unavailable: %s", EnvRequire, msg)
	}
	tb.Skipf("MinIO unavailable, skipping (set %s=1 to fail instead): %s", EnvRequire, msg)
}

// Server is a MinIO server process on a loopback port, over a data
// directory of its own.
type Server struct {
	Endpoint  string // "127.0.0.1:PORT", plain HTTP
	AccessKey string
	SecretKey string
	Dir       string // the data directory

	bin     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *syncBuffer
	buckets atomic.Int64
}

// Start starts a server for tb, stopped in tb.Cleanup. It skips tb in
// -short mode, and when the server cannot be built or started (or fails
// it, see EnvRequire).
func Start(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	srv, err := start(tb.TempDir(), buildDeadline(tb))
	if err != nil {
		unavailable(tb, "%v", err)
	}
	tb.Cleanup(srv.Stop)
	return srv
}

func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("MinIO tests do not run in -short mode")
	}
}

func start(dir string, buildBy time.Time) (*Server, error) {
	bin, err := binaryBy(buildBy)
	if err != nil {
		return nil, err
	}
	srv := &Server{AccessKey: AccessKey, SecretKey: SecretKey, Dir: filepath.Join(dir, "data"), bin: bin}
	// The port is free when picked, but another process may take it before
	// MinIO binds it: try a few.
	for range 3 {
		port, perr := freePort()
		if perr != nil {
			return nil, perr
		}
		srv.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = srv.run(); err == nil {
			return srv, nil
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the process and waits until it answers its liveness probe.
func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("MinIO server already running")
	}
	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.Endpoint,
		"--certs-dir", filepath.Join(filepath.Dir(s.Dir), "certs"), s.Dir)
	env := []string{"MINIO_ROOT_USER=" + s.AccessKey, "MINIO_ROOT_PASSWORD=" + s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	s.log = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited

	if err := waitLive(s.Endpoint, exited, 60*time.Second); err != nil {
		s.stopLocked()
		return fmt.Errorf("MinIO server on %s: %w\n%s", s.Endpoint, err, tail(s.log.String(), 3000))
	}
	return nil
}

func waitLive(endpoint string, exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get("http://" + endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				client.CloseIdleConnections()
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited while starting")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not live after %s (last error: %v)", timeout, err)
		}
	}
}

// Stop kills the server and waits for it to exit. It is idempotent; the
// data directory stays, for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Restart starts a stopped server again, on the same port and data
// directory.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.run(); err != nil {
		tb.Fatalf("restarting MinIO: %v", err)
	}
}

// Log returns what the server printed since it was last started.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// Client returns a minio-go client for the server, for a test's own checks
// (buckets, incomplete uploads).
func (s *Server) Client(tb testing.TB) *minio.Client {
	tb.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// MakeBucket creates the bucket name.
func (s *Server) MakeBucket(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client(tb).MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("creating bucket %q on MinIO %s: %v", name, s.Endpoint, err)
	}
}

// NewBucket creates a bucket no other test of the process uses and returns
// its name.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), s.buckets.Add(1))
	s.MakeBucket(tb, name)
	return name
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var shared struct {
	sync.Mutex
	inMain  bool
	started bool
	srv     *Server
	err     error
	dir     string
}

// Main runs the tests of a package (m.Run) and stops the server Shared
// started, if any; it returns m.Run's exit code. Call it from TestMain.
func Main(m *testing.M) int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the server of the test process, started on first use. It
// needs Main in TestMain, which stops it. It skips tb in -short mode, and
// when the server is unavailable (or fails it, see EnvRequire). Tests
// sharing it use buckets of their own (NewBucket) and must not stop it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		tb.Fatal("miniotest.Shared needs miniotest.Main in the package's TestMain, which stops the server")
	}
	if !shared.started {
		shared.started = true
		shared.dir, shared.err = os.MkdirTemp("", "miniotest-")
		if shared.err == nil {
			shared.srv, shared.err = start(shared.dir, buildDeadline(tb))
		}
	}
	if shared.err != nil {
		unavailable(tb, "%v", shared.err)
	}
	return shared.srv
}
