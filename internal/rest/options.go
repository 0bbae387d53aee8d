package rest

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/storage"
)

// DefaultAddress is where the API listens by default: Flink's port, on the
// loopback interface only.
const DefaultAddress = "127.0.0.1:8081"

// Options configure a Server.
type Options struct {
	// Address is the host:port to listen on. Default: "127.0.0.1:8081".
	// An address other than a loopback one (127.0.0.0/8, ::1, localhost)
	// needs Token.
	Address string
	// Token, when set, is the bearer token every request to the API and
	// to Handlers must carry ("Authorization: Bearer <token>"); others get
	// 401. The dashboard's files are served without it (the page sends the
	// token the user enters with its API requests). Default: none (allowed
	// on loopback addresses only).
	Token string
	// SavepointAllowedRoots are the places, besides the job's own savepoint
	// directory (CheckpointConfigInfo.SavepointDir), under which a request
	// may ask for a savepoint (target-directory, targetDirectory): storage
	// URLs or paths (relative ones to the working directory). A target
	// elsewhere, or whose ".." leaves its root, gets 403 naming the roots;
	// so does an S3 target with parameters of its own (endpoint=…): an S3
	// target takes the parameters of the root it lies under. A relative
	// target lies under the job's savepoint directory. Default: none (only
	// the job's savepoint directory).
	SavepointAllowedRoots []string
	// TrustedOrigins are web origins ("https://flink-ui.example:8443")
	// besides the server's own whose pages may send state-changing
	// requests (POST, PATCH, DELETE), e.g. a reverse proxy's public origin
	// when it rewrites Host. Requests from pages of other origins (Origin,
	// Sec-Fetch-Site: cross-site or same-site) get 403. Default: none.
	TrustedOrigins []string
	// TLSCertFile and TLSKeyFile are a PEM certificate (chain) and its
	// key: with them the server speaks HTTPS only, so that the token does
	// not travel in clear. Both or neither. Default: none (plain HTTP).
	TLSCertFile, TLSKeyFile string
	// Handlers are mounted beside the API, by ServeMux pattern, e.g.
	// Prometheus at "GET /metrics". They may not claim a path of the API
	// (/overview, /config, /jobs…, /taskmanagers…, /v1/…) and are behind
	// the same authentication. The server serves the web dashboard at "/"
	// itself (internal/web); a handler whose pattern matches one of its
	// paths wins (a handler at "/" replaces the dashboard). Default: none
	// (paths that are neither the API's nor the dashboard's get a JSON
	// 404).
	Handlers map[string]http.Handler
	// CheckpointHistory is the number of most recent checkpoints
	// GET /jobs/{id}/checkpoints lists (Flink's web.checkpoints.history).
	// Default: 10. Range: [1, 100000].
	CheckpointHistory int
	// MaxOperations is the number of asynchronous operations (checkpoint,
	// savepoint and stop requests) whose results are kept for polling; the
	// oldest finished ones are forgotten first. Requests that would exceed
	// it while all are in progress get 429. Default: 1000. Range:
	// [1, 1000000].
	MaxOperations int
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default:
	// 1 MiB. Range: [1, 1<<30].
	MaxBodyBytes int64
	// RefreshInterval is the dashboard's refresh interval, reported by
	// GET /config. Default: 3s. Range: >= 1ms.
	RefreshInterval time.Duration
	// ShutdownTimeout bounds how long Serve waits for requests in flight
	// when it stops. Default: 5s. Range: >= 0.
	ShutdownTimeout time.Duration
	// Version and Revision are reported by /overview and /config.
	// Default: the main module's version and VCS revision from the build
	// information, else "dev" and "".
	Version, Revision string
	// Logger receives the server's logs. Default: discards everything.
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.CheckpointHistory == 0 {
		o.CheckpointHistory = 10
	}
	if o.MaxOperations == 0 {
		o.MaxOperations = 1000
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 3 * time.Second
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.Version == "" {
		o.Version, o.Revision = buildVersion()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports the first invalid field, naming it and what it accepts.
func (o *Options) Validate() error {
	host, port, err := net.SplitHostPort(o.Address)
	if err != nil {
		return fmt.Errorf("rest: Options.Address %q is not host:port (e.g. %q): %v", o.Address, DefaultAddress, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("rest: Options.Address %q has an invalid port: use a number from 0 to 65535", o.Address)
	}
	if o.Token == "" && !isLoopback(host) {
		return fmt.Errorf("rest: Options.Address %q is reachable from other machines, so Options.Token is required: set a bearer token, or listen on a loopback address such as %q", o.Address, DefaultAddress)
	}
	if strings.ContainsAny(o.Token, " \t\r\n") {
		return fmt.Errorf("rest: Options.Token contains white space: use a token of printable characters without spaces")
	}
	if o.CheckpointHistory < 1 || o.CheckpointHistory > 100000 {
		return fmt.Errorf("rest: Options.CheckpointHistory is %d: use a value from 1 to 100000", o.CheckpointHistory)
	}
	if o.MaxOperations < 1 || o.MaxOperations > 1000000 {
		return fmt.Errorf("rest: Options.MaxOperations is %d: use a value from 1 to 1000000", o.MaxOperations)
	}
	if o.MaxBodyBytes < 1 || o.MaxBodyBytes > 1<<30 {
		return fmt.Errorf("rest: Options.MaxBodyBytes is %d: use a value from 1 to %d", o.MaxBodyBytes, 1<<30)
	}
	if o.RefreshInterval < time.Millisecond {
		return fmt.Errorf("rest: Options.RefreshInterval is %v: use 1ms or more", o.RefreshInterval)
	}
	if o.ShutdownTimeout < 0 {
		return fmt.Errorf("rest: Options.ShutdownTimeout is %v: use 0 or more", o.ShutdownTimeout)
	}
	wd, _ := os.Getwd()
	for _, root := range o.SavepointAllowedRoots {
		if err := storage.CheckSavepointRoot(root, wd); err != nil {
			return fmt.Errorf("rest: Options.SavepointAllowedRoots: %v", err)
		}
	}
	for _, origin := range o.TrustedOrigins {
		if normalizeOrigin(origin) == "" {
			return fmt.Errorf("rest: Options.TrustedOrigins: %q is not a web origin: use scheme://host[:port], such as https://ui.example:8443", origin)
		}
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return fmt.Errorf("rest: Options.TLSCertFile and Options.TLSKeyFile go together: set both (a PEM certificate and its key) or neither")
	}
	for pattern, h := range o.Handlers {
		if h == nil {
			return fmt.Errorf("rest: Options.Handlers[%q] is nil", pattern)
		}
		if err := checkPattern(pattern); err != nil {
			return fmt.Errorf("rest: Options.Handlers[%q]: %v", pattern, err)
		}
	}
	return nil
}

// isLoopback reports whether host (of a listen address) only accepts
// connections from this machine. An empty host listens on every interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkPattern rejects a ServeMux pattern that would not register, or that
// claims a path of the API (it would never be reached).
func checkPattern(pattern string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not a valid ServeMux pattern: %v", r)
		}
	}()
	http.NewServeMux().Handle(pattern, http.NotFoundHandler())
	path := pattern
	if i := strings.IndexAny(path, " \t"); i >= 0 {
		path = strings.TrimLeft(path[i:], " \t")
	}
	if i := strings.IndexByte(path, '/'); i > 0 { // a host pattern
		path = path[i:]
	}
	if p := strings.TrimSuffix(path, "/"); path != "/" && (isAPIPath(p) || p == "/v1" || strings.HasPrefix(p, "/v1/")) {
		return fmt.Errorf("the path belongs to the REST API: mount the handler elsewhere")
	}
	return nil
}

func buildVersion() (version, revision string) {
	version = "dev"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return version, revision
}
