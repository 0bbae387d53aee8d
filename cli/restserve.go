package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
)

// restFlags are the REST API flags of the commands that run jobs.
type restFlags struct {
	address string
	token   string
	// Security of the REST API (docs/rest-security.md).
	savepointRoots []string
	trustedOrigins []string
	tlsCert        string
	tlsKey         string
}

func (f *restFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.address, "rest-address", weir.DefaultRESTAddress,
		`host:port of the REST API, Prometheus /metrics and the web dashboard ("off" or "" disables it; other than a loopback address it needs --rest-token)`)
	c.Flags().StringVar(&f.token, "rest-token", "", "bearer token the REST API requires (or set "+tokenEnv+"; default: none)")
	c.Flags().StringSliceVar(&f.savepointRoots, "savepoint-allowed-roots", nil,
		"directories or storage URLs (comma-separated, or the flag repeated) under which REST requests may take savepoints besides the job's savepoint directory; s3:// roots lend their endpoint=… parameters to the targets under them (default: none)")
	c.Flags().StringSliceVar(&f.trustedOrigins, "rest-trusted-origins", nil,
		"web origins (scheme://host[:port]) besides the REST API's own whose pages may stop, cancel or snapshot jobs, e.g. a reverse proxy's public origin (default: none)")
	c.Flags().StringVar(&f.tlsCert, "rest-tls-cert", "", "PEM certificate (chain) of the REST API: with --rest-tls-key it serves HTTPS only (default: plain HTTP)")
	c.Flags().StringVar(&f.tlsKey, "rest-tls-key", "", "PEM private key of --rest-tls-cert")
}

// options are the REST server's options of the flags; flag names are in
// the errors.
func (f restFlags) options(addr, token string) (weir.RESTOptions, error) {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return weir.RESTOptions{}, errors.New("--rest-tls-cert and --rest-tls-key go together: give both (a PEM certificate and its key) or neither")
	}
	return weir.RESTOptions{Address: addr, Token: token, SavepointAllowedRoots: f.savepointRoots,
		TrustedOrigins: f.trustedOrigins, TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey}, nil
}

// restFlagOf names the flag behind an error of weir.NewRESTServer.
func restFlagOf(err error) string {
	msg := err.Error()
	for field, flag := range map[string]string{
		"SavepointAllowedRoots": "--savepoint-allowed-roots", "TrustedOrigins": "--rest-trusted-origins",
		"TLSCertFile": "--rest-tls-cert", "TLSKeyFile": "--rest-tls-key",
	} {
		if strings.Contains(msg, "Options."+field) {
			return flag
		}
	}
	return "--rest-address"
}

// restServer is the REST API of a `weir run` process: bound before the job
// starts (so that a busy port fails the command at once), served while the
// job runs.
type restServer struct {
	srv    *weir.RESTServer
	served chan error
	log    io.Writer
}

// listenREST binds the REST API's address; nil when it is disabled.
func listenREST(f restFlags, log io.Writer) (*restServer, error) {
	addr := strings.TrimSpace(f.address)
	if addr == "" || strings.EqualFold(addr, "off") {
		return nil, nil
	}
	token := f.token
	if token == "" {
		token = envToken(log)
	}
	opts, err := f.options(addr, token)
	if err != nil {
		return nil, err
	}
	srv, err := weir.NewRESTServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", restFlagOf(err), err)
	}
	if err := srv.Listen(addr); err != nil {
		return nil, err
	}
	return &restServer{srv: srv, log: log}, nil
}

// serve serves the API for job until stop is called; stop waits for the
// server's goroutines. A nil server serves nothing.
func (r *restServer) serve(job *weir.JobClient) (stop func()) {
	if r == nil {
		return func() {}
	}
	if err := r.srv.AddJob(job); err != nil {
		fmt.Fprintln(r.log, "weir:", err)
	}
	r.served = make(chan error, 1)
	go func() { r.served <- r.srv.Serve(context.Background()) }()
	fmt.Fprintf(r.log, "weir: REST API on %s (job %s)\n", r.srv.URL(), job.ID())
	return func() {
		r.srv.Close()
		if err := <-r.served; err != nil {
			fmt.Fprintln(r.log, "weir:", err)
		}
	}
}

// restLinger bounds how long the REST API outlives its job for clients
// that have yet to read the outcome of an operation.
var restLinger = 10 * time.Second

// settle waits, once the job has ended, until the clients have read the
// outcome of every operation they started through the API (weir stop and
// weir savepoint poll for the savepoint's path), for at most restLinger: a
// stopped job ends before the client's next poll.
func (r *restServer) settle() {
	if r == nil || r.served == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), restLinger)
	defer cancel()
	r.srv.AwaitAnswered(ctx)
}

// close releases the address when the job never started.
func (r *restServer) close() {
	if r != nil {
		r.srv.Close()
	}
}
