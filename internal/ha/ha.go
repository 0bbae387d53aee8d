package ha

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Defaults.
const (
	// DefaultSessionTTL is how long a leader that stopped renewing its
	// lease (killed, paused, cut off from etcd) stays leader: Flink's
	// Kubernetes HA lease duration (high-availability.kubernetes.
	// leader-election.lease-duration), 15 s. A JobManager that stops
	// cleanly gives up its lease at once.
	DefaultSessionTTL = 15 * time.Second
	// DefaultDialTimeout bounds the first contact with etcd.
	DefaultDialTimeout = 5 * time.Second
)

// Options configure a connection to a cluster's keys in etcd.
type Options struct {
	// Endpoints are etcd's client URLs or host:port pairs. Required.
	Endpoints []string
	// ClusterID names the cluster: its keys are under /weir/<ClusterID>/.
	// Required (Flink's high-availability.cluster-id).
	ClusterID string
	// SessionTTL is the lease of this JobManager's session (whole
	// seconds, at least 1 s; etcd may raise a short one to its minimum).
	// Default 15 s.
	SessionTTL time.Duration
	// DialTimeout bounds Dial's check that etcd answers. Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds each read and write of Store: a write that
	// etcd did not answer by then fails (and a checkpoint waiting for it
	// does not complete). Default 5 s.
	RequestTimeout time.Duration
	// Name is this process's name among the JobManagers. Default: the
	// host name and process id.
	Name string
	// Logger receives elections and losses. Default: discards.
	Logger *slog.Logger
}

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultDialTimeout
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s-%d", cmp.Or(host, "jobmanager"), os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if len(o.Endpoints) == 0 {
		return errors.New("high availability: no etcd endpoints: give --ha-endpoints (high-availability.etcd.endpoints), such as 127.0.0.1:2379")
	}
	for _, e := range o.Endpoints {
		if err := checkEndpoint(e); err != nil {
			return err
		}
	}
	if _, err := NewKeys(o.ClusterID); err != nil {
		return err
	}
	if o.SessionTTL < time.Second || o.SessionTTL%time.Second != 0 {
		return fmt.Errorf("high availability: session TTL %v: use whole seconds, at least 1s (etcd leases count seconds)", o.SessionTTL)
	}
	if o.DialTimeout <= 0 || o.RequestTimeout <= 0 {
		return fmt.Errorf("high availability: dial timeout %v, request timeout %v: use positive durations", o.DialTimeout, o.RequestTimeout)
	}
	if strings.ContainsAny(o.Name, "/ ") || o.Name == "" {
		return fmt.Errorf("high availability: JobManager name %q: no '/' or space", o.Name)
	}
	return nil
}

// checkEndpoint accepts host:port or http(s)://host:port.
func checkEndpoint(e string) error {
	hp := e
	if i := strings.Index(e, "://"); i >= 0 {
		if s := e[:i]; s != "http" && s != "https" && s != "unix" && s != "unixs" {
			return fmt.Errorf("high availability: etcd endpoint %q: the scheme must be http or https", e)
		}
		hp = strings.TrimSuffix(e[i+3:], "/")
		if strings.HasPrefix(e, "unix") {
			return nil
		}
	}
	if _, _, err := net.SplitHostPort(hp); err != nil {
		return fmt.Errorf("high availability: etcd endpoint %q is not host:port (such as 127.0.0.1:2379)", e)
	}
	return nil
}

// ParseEndpoints splits a comma-separated list of endpoints.
func ParseEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Client is one JobManager's (or TaskManager's) connection to a cluster's
// keys. Safe for concurrent use.
type Client struct {
	opts Options
	keys Keys
	cli  *clientv3.Client
	log  *slog.Logger
}

// Dial connects to etcd and checks that it answers within
// Options.DialTimeout: an unreachable etcd is an error here, in one line.
func Dial(ctx context.Context, o Options) (*Client, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	keys, _ := NewKeys(o.ClusterID)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            o.Endpoints,
		DialTimeout:          o.DialTimeout,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		// Reconnect within a second of etcd coming back (gRPC's default
		// backoff grows to two minutes).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("high availability: etcd at %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, keys.Root(), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("high availability: etcd at %s did not answer within %v (%v): start etcd or correct --ha-endpoints", strings.Join(o.Endpoints, ","), o.DialTimeout, describe(err))
	}
	return &Client{opts: o, keys: keys, cli: cli, log: o.Logger.With("cluster", o.ClusterID)}, nil
}

// describe shortens the errors of the etcd client.
func describe(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return err.Error()
}

// Keys is the cluster's key layout.
func (c *Client) Keys() Keys { return c.keys }

// Options returns the options in force.
func (c *Client) Options() Options { return c.opts }

// Etcd is the underlying client (for tests and tools).
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// Close closes the connection. Leaderships it gave must be resigned first.
func (c *Client) Close() error { return c.cli.Close() }

// Leadership is one term of this process as the leader. Its Store's writes
// succeed only while it lasts.
type Leadership struct {
	c        *Client
	session  *concurrency.Session
	election *concurrency.Election
	key      string
	rev      int64
	info     LeaderInfo
	store    *Store

	resignOnce sync.Once
}

// Campaign enters the election with info and blocks until this process is
// the leader (or ctx ends). It also registers info under Members for as
// long as the session lives, so the leader can list the standbys.
// A leadership ends when its session's lease is lost (Done) or at Resign.
func (c *Client) Campaign(ctx context.Context, info LeaderInfo) (*Leadership, error) {
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(int(c.opts.SessionTTL/time.Second)))
	if err != nil {
		return nil, fmt.Errorf("high availability: open an etcd session: %v", describe(err))
	}
	if info.Name == "" {
		info.Name = c.opts.Name
	}
	member := info
	member.Since = time.Now()
	if b, err := json.Marshal(member); err == nil {
		if _, err := c.cli.Put(ctx, c.keys.Member(info.Name), string(b), clientv3.WithLease(s.Lease())); err != nil {
			s.Close()
			return nil, fmt.Errorf("high availability: register JobManager %s: %v", info.Name, describe(err))
		}
	}
	e := concurrency.NewElection(s, c.keys.Election())
	info.Since = time.Now()
	val, _ := json.Marshal(info)
	// Campaign's value says when this candidate entered, not when it won:
	// the leader proclaims the time of its election below.
	if err := e.Campaign(ctx, string(val)); err != nil {
		s.Close()
		return nil, fmt.Errorf("high availability: campaign: %v", describe(err))
	}
	info.Since = time.Now()
	info.Revision = e.Rev()
	val, _ = json.Marshal(info)
	if err := e.Proclaim(ctx, string(val)); err != nil {
		e.Resign(context.WithoutCancel(ctx))
		s.Close()
		return nil, fmt.Errorf("high availability: proclaim: %v", describe(err))
	}
	l := &Leadership{c: c, session: s, election: e, key: e.Key(), rev: e.Rev(), info: info}
	l.store = &Store{cli: c.cli, keys: c.keys, leaderKey: l.key, rev: l.rev, timeout: c.opts.RequestTimeout, log: c.log}
	c.log.Info("elected leader", "jobmanager", info.Name, "revision", l.rev)
	return l, nil
}

// Proclaim publishes new information about the leader (its control
// plane's address once it listens) without another election; it fails
// once the leadership is over.
func (l *Leadership) Proclaim(ctx context.Context, info LeaderInfo) error {
	info.Since, info.Revision = l.info.Since, l.rev
	if info.Name == "" {
		info.Name = l.info.Name
	}
	val, _ := json.Marshal(info)
	ctx, cancel := context.WithTimeout(ctx, l.c.opts.RequestTimeout)
	defer cancel()
	if err := l.election.Proclaim(ctx, string(val)); err != nil {
		return fmt.Errorf("high availability: proclaim: %v", describe(err))
	}
	l.info = info
	l.c.cli.Put(ctx, l.c.keys.Member(info.Name), string(val), clientv3.WithLease(l.session.Lease()))
	return nil
}

// Revision is the leadership's revision: the fencing token.
func (l *Leadership) Revision() int64 { return l.rev }

// Key is the election key this leadership holds.
func (l *Leadership) Key() string { return l.key }

// Info is what the leader published.
func (l *Leadership) Info() LeaderInfo { return l.info }

// Store is the leader's guarded store.
func (l *Leadership) Store() *Store { return l.store }

// Done is closed when the session's lease is lost (expired, revoked, or
// etcd unreachable for longer than the TTL): the leadership is over, and
// every write of Store fails from then on even if Done has not fired yet.
func (l *Leadership) Done() <-chan struct{} { return l.session.Done() }

// Lease is the session's lease (tests revoke it to depose the leader).
func (l *Leadership) Lease() clientv3.LeaseID { return l.session.Lease() }

// Resign gives up the leadership and the session at once (a clean stop):
// a standby is elected without waiting for the TTL.
func (l *Leadership) Resign(ctx context.Context) error {
	var err error
	l.resignOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err = l.election.Resign(ctx)
		if cerr := l.session.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Leader reads the current leader; ok is false while there is none.
func (c *Client) Leader(ctx context.Context) (LeaderInfo, bool, error) {
	resp, err := c.cli.Get(ctx, c.keys.Election(), clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("high availability: read the leader: %v", describe(err))
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, false, nil
	}
	kv := resp.Kvs[0]
	info, err := decodeJSON[LeaderInfo](string(kv.Key), kv.Value)
	if err != nil {
		return LeaderInfo{}, false, err
	}
	info.Revision = kv.CreateRevision
	return info, true, nil
}

// Members lists the live JobManagers (leader and standbys), by name.
func (c *Client) Members(ctx context.Context) ([]LeaderInfo, error) {
	resp, err := c.cli.Get(ctx, c.keys.Members(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("high availability: list the JobManagers: %v", describe(err))
	}
	var out []LeaderInfo
	for _, kv := range resp.Kvs {
		info, err := decodeJSON[LeaderInfo](string(kv.Key), kv.Value)
		if err != nil {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// WatchLeader calls f with the leader each time it changes (ok false while
// there is none), first with the current one, until ctx ends. Errors of
// etcd are retried; WatchLeader returns when ctx is done.
func (c *Client) WatchLeader(ctx context.Context, f func(info LeaderInfo, ok bool)) {
	var last LeaderInfo
	lastOK, first := false, true
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.cli.Watch(wctx, c.keys.Election(), clientv3.WithPrefix())
		info, ok, err := c.Leader(ctx)
		if err == nil && (first || ok != lastOK || info != last) {
			f(info, ok)
			last, lastOK, first = info, ok, false
		}
		if err != nil {
			c.log.Debug("reading the leader failed", "err", err)
		}
		// Read again on every change under the election prefix.
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			info, ok, err := c.Leader(ctx)
			if err != nil {
				break
			}
			if ok != lastOK || info != last {
				f(info, ok)
				last, lastOK = info, ok
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
