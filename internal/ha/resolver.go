package ha

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// LeaderScheme is the gRPC target scheme of Client.Resolver.
const LeaderScheme = "weir-ha"

// Resolver returns a gRPC resolver that points a connection at the
// current leader's control plane, as etcd names it: a TaskManager dialing
// through it follows every failover (its stream to the old leader breaks,
// the next call reaches the new one, which tells it to register again).
// Dial the target LeaderScheme + ":///" + cluster id.
func (c *Client) Resolver() resolver.Builder { return &leaderBuilder{c: c} }

type leaderBuilder struct{ c *Client }

func (b *leaderBuilder) Scheme() string { return LeaderScheme }

func (b *leaderBuilder) Build(_ resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaderResolver{cancel: cancel}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		b.c.WatchLeader(ctx, func(info LeaderInfo, ok bool) {
			if !ok || info.RPCAddress == "" {
				cc.ReportError(fmt.Errorf("no JobManager leads cluster %s yet (etcd %s)", b.c.opts.ClusterID, strings.Join(b.c.opts.Endpoints, ",")))
				return
			}
			b.c.log.Info("leader found", "jobmanager", info.Name, "rpc", info.RPCAddress, "revision", info.Revision)
			cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: info.RPCAddress}}})
		})
	}()
	return r, nil
}

type leaderResolver struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *leaderResolver) ResolveNow(resolver.ResolveNowOptions) {}

func (r *leaderResolver) Close() {
	r.cancel()
	r.wg.Wait()
}

// ListScheme is the gRPC target scheme of ListResolver.
const ListScheme = "weir-jobmanagers"

// ListResolver returns a gRPC resolver over a fixed list of JobManager
// addresses (weir taskmanager --jobmanager A,B): the connection tries
// them in order and keeps the first that accepts, which is the leader, as
// only the leader serves the control plane. Dial the target ListScheme +
// ":///jobmanagers".
func ListResolver(addrs []string) resolver.Builder {
	r := manual.NewBuilderWithScheme(ListScheme)
	st := resolver.State{}
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(st)
	return r
}
