package nats

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/connector"
)

func TestMain(m *testing.M) {
	// A stream's file store can outlive the server's WaitForShutdown by a
	// moment on a loaded machine (its flush loops and the server's
	// access-time ticker stop asynchronously; seen once in make test).
	// They are nats-server's goroutines, not the connector's: ignored by
	// name, everything else is still checked.
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"))
}

// testServer is an embedded nats-server with JetStream, on loopback.
type testServer struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
}

// startServer starts a server with its store in a new temporary directory
// on a free port.
func startServer(t testing.TB) *testServer {
	t.Helper()
	ts := &testServer{t: t, dir: t.TempDir(), port: -1}
	ts.start()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) start() {
	ts.t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: ts.port, JetStream: true, StoreDir: ts.dir,
		NoLog: true, NoSigs: true, ServerName: "weir-test"}
	s, err := server.NewServer(opts)
	if err != nil {
		ts.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		ts.t.Fatal("nats-server not ready in 10s")
	}
	ts.srv = s
	ts.port = s.Addr().(*net.TCPAddr).Port
}

// restart shuts the server down and starts it again on the same port and
// store.
func (ts *testServer) restart() {
	ts.stop()
	ts.start()
}

func (ts *testServer) stop() {
	if ts.srv != nil {
		ts.srv.Shutdown()
		ts.srv.WaitForShutdown()
		ts.srv = nil
	}
}

func (ts *testServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(ts.port) }

// js connects a client for the test's own use.
func (ts *testServer) js() (*nats.Conn, jetstream.JetStream) {
	ts.t.Helper()
	nc, err := nats.Connect(ts.url())
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		ts.t.Fatal(err)
	}
	return nc, js
}

func (ts *testServer) createStream(cfg jetstream.StreamConfig) jetstream.Stream {
	ts.t.Helper()
	_, js := ts.js()
	if cfg.Storage == 0 {
		cfg.Storage = jetstream.FileStorage
	}
	st, err := js.CreateStream(context.Background(), cfg)
	if err != nil {
		ts.t.Fatal(err)
	}
	return st
}

// publish publishes n messages "<prefix>-<i>" to subject, i from 0.
func (ts *testServer) publish(subject, prefix string, n int) {
	ts.t.Helper()
	_, js := ts.js()
	for i := range n {
		if _, err := js.PublishAsync(subject, []byte(fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			ts.t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		ts.t.Fatal("publish acks did not come in 10s")
	}
}

// streamData returns the payloads of every message of the stream.
func (ts *testServer) streamData(stream string) []string {
	ts.t.Helper()
	_, js := ts.js()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		ts.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		ts.t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			ts.t.Fatal(err)
		}
		out = append(out, string(m.Data))
	}
	return out
}

// collector is a test Emitter.
type collector struct {
	recs []string
	ts   []int64
}

func (c *collector) Emit(rec string) {
	c.recs = append(c.recs, rec)
	c.ts = append(c.ts, connector.NoTimestamp)
}
func (c *collector) EmitAt(rec string, ts int64) {
	c.recs = append(c.recs, rec)
	c.ts = append(c.ts, ts)
}

// drain polls r until it has emitted want more records or ended, and
// reports whether it ended.
func drain(t testing.TB, r connector.Reader[string], c *collector, want int) bool {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	start := len(c.recs)
	for len(c.recs)-start < want {
		st, err := r.Poll(c)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st == connector.EndOfInput:
			return true
		case len(c.recs)-start >= want:
		case st == connector.NothingAvailable:
			select {
			case <-r.Available():
			case <-time.After(time.Until(deadline)):
				t.Fatalf("no records for 15s: have %d of %d", len(c.recs)-start, want)
			}
		}
	}
	return false
}

// drainToEnd polls r until EndOfInput.
func drainToEnd(t testing.TB, r connector.Reader[string], c *collector) {
	t.Helper()
	if !drain(t, r, c, 1<<30) {
		t.Fatal("reader did not end")
	}
}
