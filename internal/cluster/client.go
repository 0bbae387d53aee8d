package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/ha"
)

// ClientOptions configure a client of a JobManager's job service.
type ClientOptions struct {
	// Token is the cluster token (the JobManager's --cluster-token).
	// Default "": none.
	Token string
	// TLS, when set, dials over mutual TLS. Default nil: plain TCP.
	TLS *TLSFiles
}

// JobStatus is a job as the JobManager reports it.
type JobStatus struct {
	ID, Name string
	// State is Flink's: CREATED, RUNNING, RESTARTING, FINISHED, CANCELED,
	// FAILED (CANCELLING and FAILING on the way).
	State string
	// Attempt is the current (or last) attempt, from 0; Restarts counts
	// the restarts after failures (Flink's numRestarts).
	Attempt, Restarts int
	// LastCheckpoint is the id of the latest completed checkpoint, 0 if
	// none.
	LastCheckpoint int64
	// Error is why the job failed, or the last attempt's failure.
	Error string
	// Note says what the job waits for ("waiting for 4 slots, 2
	// registered"), "" otherwise.
	Note string
}

// Terminal reports whether the job ended: FINISHED, CANCELED or FAILED.
func (s JobStatus) Terminal() bool {
	return s.State == "FINISHED" || s.State == "CANCELED" || s.State == "FAILED"
}

// Client talks to a JobManager's job service (Submit, Status, List,
// Cancel).
type Client struct {
	addr string
	conn *grpc.ClientConn
	c    pb.JobManagerClient
}

// Dial connects to the JobManager at addr (host:port of its --rpc-address)
// and checks that it answers within ctx (a JobManager that does not
// answer is an error naming the address).
func Dial(ctx context.Context, addr string, o ClientOptions) (*Client, error) {
	if err := checkToken(o.Token); err != nil {
		return nil, err
	}
	var r resolver.Builder
	if strings.Contains(addr, ",") {
		// High availability: the JobManagers' addresses; only the leader
		// serves the control plane, so the connection keeps the one that
		// accepts, and after a failover the next (docs/ha.md).
		var addrs []string
		for _, a := range strings.Split(addr, ",") {
			addrs = append(addrs, strings.TrimSpace(a))
		}
		r = ha.ListResolver(addrs)
	}
	conn, err := dialJobManager(addr, r, o.Token, o.TLS)
	if err != nil {
		return nil, err
	}
	cl := &Client{addr: addr, conn: conn, c: pb.NewJobManagerClient(conn)}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if _, err := cl.c.ListJobs(ctx, &pb.ListJobsRequest{}, grpc.WaitForReady(true)); err != nil {
		conn.Close()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
			return nil, fmt.Errorf("no JobManager answered at %s: is `weir jobmanager --rpc-address %s` running?", addr, addr)
		}
		return nil, cl.wrap(err)
	}
	return cl, nil
}

// wrap is err with the address and without gRPC's decoration.
func (cl *Client) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("JobManager %s: %s", cl.addr, describe(err))
}

// Submit builds job name with args (its flags, without the name) on the
// JobManager and runs it; it returns the job's id.
func (cl *Client) Submit(ctx context.Context, name string, args []string) (string, error) {
	r, err := cl.c.Submit(ctx, &pb.SubmitRequest{Name: name, Args: args})
	if err != nil {
		return "", cl.wrap(err)
	}
	return r.JobId, nil
}

// Status reports one job.
func (cl *Client) Status(ctx context.Context, jobID string) (JobStatus, error) {
	r, err := cl.c.JobStatus(ctx, &pb.JobStatusRequest{JobId: jobID})
	if err != nil {
		return JobStatus{}, cl.wrap(err)
	}
	return statusOf(r), nil
}

// List reports every job, in submission order.
func (cl *Client) List(ctx context.Context) ([]JobStatus, error) {
	r, err := cl.c.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil {
		return nil, cl.wrap(err)
	}
	out := make([]JobStatus, len(r.Jobs))
	for i, j := range r.Jobs {
		out[i] = statusOf(j)
	}
	return out, nil
}

// Cancel asks the job to cancel and returns at once (Status tells when it
// is CANCELED).
func (cl *Client) Cancel(ctx context.Context, jobID string) error {
	_, err := cl.c.CancelJob(ctx, &pb.CancelJobRequest{JobId: jobID})
	return cl.wrap(err)
}

// Close closes the connection.
func (cl *Client) Close() error { return cl.conn.Close() }

func statusOf(j *pb.JobInfo) JobStatus {
	return JobStatus{ID: j.Id, Name: j.Name, State: j.State, Attempt: int(j.Attempt), Restarts: int(j.Restarts),
		LastCheckpoint: j.LastCheckpoint, Error: j.Error, Note: j.Note}
}

func infoOf(s JobStatus) *pb.JobInfo {
	return &pb.JobInfo{Id: s.ID, Name: s.Name, State: s.State, Attempt: int64(s.Attempt), Restarts: int64(s.Restarts),
		LastCheckpoint: s.LastCheckpoint, Error: s.Error, Note: s.Note}
}

// dialJobManager returns a connection to the JobManager at addr, or,
// with r, to the addresses r resolves (the JobManagers of a highly
// available cluster, of which only the leader serves), over TLS when tls
// is set and with the cluster token on every call; extra are the caller's
// own options (the TaskManager's reconnection backoff). It connects
// lazily: the first call does.
func dialJobManager(addr string, r resolver.Builder, token string, tls *TLSFiles, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tls != nil {
		c, err := transportCredentials(tls)
		if err != nil {
			return nil, err
		}
		creds = c
	}
	dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, extra...)
	if token != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(tokenCredentials{token: token}))
	}
	target := "passthrough:///" + addr
	if r != nil {
		target = r.Scheme() + ":///jobmanager"
		dopts = append(dopts, grpc.WithResolvers(r))
	}
	conn, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("JobManager address %s: %w", addr, err)
	}
	return conn, nil
}
