package main

import (
	"context"
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
}

func (f *restFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.address, "rest-address", weir.DefaultRESTAddress,
		`host:port of the REST API, Prometheus /metrics and the web dashboard ("off" or "" disables it; other than a loopback address it needs --rest-token)`)
	c.Flags().StringVar(&f.token, "rest-token", "", "bearer token the REST API requires (or set "+tokenEnv+"; default: none)")
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
	srv, err := weir.NewRESTServer(weir.RESTOptions{Address: addr, Token: token})
	if err != nil {
		return nil, fmt.Errorf("--rest-address: %w", err)
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
	fmt.Fprintf(r.log, "weir: REST API on http://%s (job %s)\n", r.srv.Addr(), job.ID())
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
