// Package pgtest runs real PostgreSQL servers for tests: the PostgreSQL
// connector is tested against the server, not a mock of it.
//
// A server is a fresh cluster made by initdb in a temporary directory and
// started with pg_ctl, as the operating system user postgres when the tests
// run as root (PostgreSQL refuses to run as root). It listens on a free
// loopback port (127.0.0.1 only) and on a Unix socket in its directory, with
// wal_level=logical, prepared transactions and replication slots enabled and
// fsync off. When the binaries are missing (the Debian package postgresql
// installs them under /usr/lib/postgresql/N/bin) tests that ask for a server
// are skipped with the reason — or fail, when WEIR_REQUIRE_POSTGRES=1 (CI
// sets it, so that a broken setup cannot pass as green).
//
// # Usage
//
// Tests of a package sharing one server (started on first use, stopped when
// the tests end):
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		srv := pgtest.Shared(t)
//		url := srv.NewDatabase(t) // a fresh database per test
//	}
//
// A test that restarts or reconfigures its server starts its own with Start.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables of the helper.
const (
	// EnvRequire, when "1", makes a missing server fail the test instead of
	// skipping it.
	EnvRequire = "WEIR_REQUIRE_POSTGRES"
	// EnvBinDir names the directory of initdb and pg_ctl, instead of the
	// newest /usr/lib/postgresql/N/bin.
	EnvBinDir = "WEIR_POSTGRES_BIN"
)

// PasswordUser is a role that every server authenticates by password over
// TCP (scram-sha-256); every other role is trusted. Tests of wrong
// credentials create it with CreatePasswordUser.
const PasswordUser = "weir_secret"

// Options configure a server.
type Options struct {
	// MaxPreparedTransactions is max_prepared_transactions; default 64. Set
	// NoPreparedTransactions for 0.
	MaxPreparedTransactions int
	// NoPreparedTransactions starts the server with
	// max_prepared_transactions = 0.
	NoPreparedTransactions bool
	// WALLevel is wal_level; default "logical".
	WALLevel string
}

// Server is a running PostgreSQL cluster.
type Server struct {
	// Dir holds the cluster (Dir/data) and its Unix socket.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int
	bin  string
	dbs  atomic.Int64
}

// BinDir finds initdb and pg_ctl: $WEIR_POSTGRES_BIN, or the newest
// /usr/lib/postgresql/N/bin.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%s=%s: %v", EnvBinDir, d, err)
		}
		return d, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		return "", errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql, or set " + EnvBinDir)
	}
	sort.Slice(m, func(i, j int) bool { return version(m[i]) < version(m[j]) })
	return filepath.Dir(m[len(m)-1]), nil
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// unavailable skips or fails t.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("PostgreSQL server needed (%s=1): %v", EnvRequire, err)
	}
	t.Skipf("no PostgreSQL server: %v", err)
}

// Start starts a server of t's own, stopped in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := start(opts)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

var shared struct {
	sync.Mutex
	srv     *Server
	err     error
	started bool
}

// Main runs a package's tests and stops the shared server afterwards.
func Main(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	return code
}

// Shared returns the package's shared server, starting it on first use. The
// package's TestMain must call Main, which stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = start(Options{})
	}
	if shared.err != nil {
		unavailable(t, shared.err)
	}
	return shared.srv
}

// runAs returns a command run as the postgres user when this process is root.
func command(name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("tests run as root, and PostgreSQL must not: no user postgres to run it as (%v)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "HOME="+u.HomeDir)
	}
	return cmd, nil
}

func run(name string, args ...string) error {
	cmd, err := command(name, args...)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "weir-pg-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("tests run as root, and PostgreSQL must not: no user postgres to run it as (%v)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s := &Server{Dir: dir, bin: bin}
	data := filepath.Join(dir, "data")
	if err := run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	mpt := opts.MaxPreparedTransactions
	if mpt == 0 {
		mpt = 64
	}
	if opts.NoPreparedTransactions {
		mpt = 0
	}
	wal := opts.WALLevel
	if wal == "" {
		wal = "logical"
	}
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = %s
max_prepared_transactions = %d
max_replication_slots = 16
max_wal_senders = 16
max_connections = 100
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
wal_sender_timeout = 60s
log_min_messages = warning
`, dir, wal, mpt)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		f.Close()
	}
	if err == nil {
		hba := "local all all trust\nlocal replication all trust\n" +
			"host all " + PasswordUser + " 127.0.0.1/32 scram-sha-256\n" +
			"host replication " + PasswordUser + " 127.0.0.1/32 scram-sha-256\n" +
			"host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
		err = os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600)
		if err == nil && os.Geteuid() == 0 {
			u, _ := user.Lookup("postgres")
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			err = os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A port taken between freePort and the server's bind makes pg_ctl
	// fail: try another.
	for try := 0; ; try++ {
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err = s.pgctl("start"); err == nil || try == 4 {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) pgctl(action string) error {
	args := []string{action, "-D", filepath.Join(s.Dir, "data"), "-w", "-t", "60", "-m", "fast"}
	if action != "stop" {
		args = append(args, "-l", filepath.Join(s.Dir, "log"), "-o", fmt.Sprintf("-p %d", s.Port))
	}
	return run(filepath.Join(s.bin, "pg_ctl"), args...)
}

// Restart restarts the server (pg_ctl restart -m fast): every connection
// is broken; prepared transactions survive.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.pgctl("restart"); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	_ = s.pgctl("stop")
	os.RemoveAll(s.Dir)
}

// URL is the connection URL of database db as user.
func (s *Server) URL(user, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, s.Port, db)
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// NewDatabase creates a fresh database and returns its URL (user postgres).
// Its replication slots are dropped at the end of the test, so that they
// do not hold WAL for the other tests of the package.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test%d", s.dbs.Add(1))
	s.Exec(t, "postgres", "CREATE DATABASE "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL("postgres", "postgres"))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL", name)
		_, _ = c.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", name)
	})
	return s.URL("postgres", name)
}

// Exec runs SQL statements in database db as user postgres.
func (s *Server) Exec(t testing.TB, db string, sql ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres", db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range sql {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// Query runs sql on the database at url and returns its rows, each
// scanned into a T (one column: pgx.RowTo). Any error fails the test.
func Query[T any](t testing.TB, url, sql string, args ...any) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// CreatePasswordUser creates PasswordUser with the given password and
// every privilege on database db.
func (s *Server) CreatePasswordUser(t testing.TB, db, password string) {
	t.Helper()
	s.Exec(t, db, fmt.Sprintf("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN REPLICATION SUPERUSER PASSWORD '%s'; END IF; END$$", PasswordUser, PasswordUser, password))
}
