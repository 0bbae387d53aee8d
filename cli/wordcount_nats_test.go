package cli

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTestServer is an embedded nats-server with JetStream on loopback,
// which a test can restart on the same port and store.
type natsTestServer struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t *testing.T) *natsTestServer {
	ns := &natsTestServer{t: t, dir: t.TempDir(), port: -1}
	ns.start()
	t.Cleanup(ns.stop)
	return ns
}

func (ns *natsTestServer) start() {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: ns.port, JetStream: true, StoreDir: ns.dir, NoLog: true, NoSigs: true})
	if err != nil {
		ns.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		ns.t.Fatal("nats-server not ready in 10s")
	}
	ns.srv, ns.port = s, s.Addr().(*net.TCPAddr).Port
}

func (ns *natsTestServer) stop() {
	if ns.srv != nil {
		ns.srv.Shutdown()
		ns.srv.WaitForShutdown()
		ns.srv = nil
	}
}

// outMsgs is the number of messages in stream OUT, -1 while the server
// is down.
func (ns *natsTestServer) outMsgs() int64 {
	if ns.srv == nil {
		return -1
	}
	st, err := ns.js().Stream(context.Background(), "OUT")
	if err != nil {
		return -1
	}
	return int64(st.CachedInfo().State.Msgs)
}

func (ns *natsTestServer) hostPort() string { return "127.0.0.1:" + strconv.Itoa(ns.port) }

func (ns *natsTestServer) js() jetstream.JetStream {
	nc, err := nats.Connect("nats://" + ns.hostPort())
	if err != nil {
		ns.t.Fatal(err)
	}
	ns.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		ns.t.Fatal(err)
	}
	return js
}

// natsWordsStream creates stream IN with one message per line of a
// generated text and stream OUT on subject counts (allowing atomic batch
// publish when atomic is set), and returns the expected totals.
func natsWordsStream(t *testing.T, ns *natsTestServer, lines int, atomic bool) map[string]int {
	js := ns.js()
	ctx := context.Background()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "IN", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage},
		{Name: "OUT", Subjects: []string{"counts"}, Storage: jetstream.FileStorage, AllowAtomicPublish: atomic},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(wordsInput(t, t.TempDir(), lines))
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine acknowledges slowly: wait for room, not 200ms.
	stall := jetstream.WithStallWait(30 * time.Second)
	for i, l := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		// Two subjects, so that a subject filter has something to leave out.
		if _, err := js.PublishAsync("in.words", []byte(l), stall); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := js.PublishAsync("in.other", []byte("ignored noise"), stall); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing the input took over 30s")
	}
	return wordTotals(string(text))
}

// natsOutputLines reads every message of stream OUT and checks that the
// Word header matches the line.
func natsOutputLines(t *testing.T, ns *natsTestServer) []string {
	js := ns.js()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, "OUT", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for uint64(len(out)) < info.State.Msgs {
		batch, err := cons.Fetch(10000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			l := string(m.Data())
			if w, _, _ := parseCountLine(l); m.Headers().Get(natsWordHeader) != w {
				t.Fatalf("message %q has Word header %q", l, m.Headers().Get(natsWordHeader))
			}
			out = append(out, l)
		}
		if n == 0 {
			t.Fatalf("read %d of %d messages of OUT", len(out), info.State.Msgs)
		}
	}
	return out
}

// checkCountLines checks that lines hold each "w,k" for k = 1..want[w]
// exactly once and nothing else.
func checkCountLines(t *testing.T, lines []string, want map[string]int) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	var missing, dup, extra []string
	for w, n := range want {
		for k := 1; k <= n; k++ {
			l := w + "," + strconv.Itoa(k)
			switch seen[l] {
			case 0:
				missing = append(missing, l)
			case 1:
			default:
				dup = append(dup, l)
			}
			delete(seen, l)
		}
	}
	extra = slices.Sorted(maps.Keys(seen))
	if len(missing)+len(dup)+len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(dup)
		t.Fatalf("output is not exactly once: %d lines, %d missing (%s), %d duplicated (%s), %d unexpected (%s)",
			len(lines), len(missing), firstOf(missing, 10), len(dup), firstOf(dup, 10), len(extra), firstOf(extra, 10))
	}
}

// TestNATSWordCountSIGKILL runs `weir run wordcount` from a JetStream
// stream to a JetStream stream, kills it with SIGKILL at random moments
// and restores it with --restore latest until a run ends by itself; with
// restartServer, the server is also restarted (its store kept) while a run
// goes on. The output stream must hold each word,k exactly once. The
// output stream allows atomic batch publish in the server-restart run (the
// sink commits in batches with one message ID each) and not in the other
// (one ID per message).
func TestNATSWordCountSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes")
	}
	for _, restartServer := range []bool{false, true} {
		t.Run(fmt.Sprint("server-restart=", restartServer), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 7))
			ns := startNATS(t)
			want := natsWordsStream(t, ns, 15_000, restartServer)
			ck := filepath.Join(t.TempDir(), "ck")
			args := []string{"run", "wordcount", "--input", "nats://" + ns.hostPort() + "/IN?subject=in.words&stop=latest",
				"--output", "nats://" + ns.hostPort() + "/counts", "--parallelism", "2",
				"--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
			kills, extra := 0, false
			for run := 0; ; run++ {
				runArgs := args
				if run > 0 {
					runArgs = append(slices.Clip(args), "--restore", "latest")
				}
				delay := sigkillRunTimeout
				if kills < 4 {
					delay = 300*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
				}
				if restartServer && run == 1 {
					// Not killed: the server goes down and comes back
					// under the running job.
					delay = sigkillRunTimeout
					go func() {
						time.Sleep(300 * time.Millisecond)
						ns.stop()
						time.Sleep(200 * time.Millisecond)
						ns.start()
					}()
				}
				r := startAndKill(t, runArgs, delay)
				r.restore = run > 0
				t.Logf("run %d: %v; OUT holds %d messages", run, r, ns.outMsgs())
				if r.killed && !extra && ns.outMsgs() > 0 {
					// A checkpoint has completed (its output is committed):
					// the stop sequence is in it, and messages published now
					// are past it. Their word must never be counted.
					extra = true
					js := ns.js()
					for range 100 {
						js.PublishAsync("in.words", []byte("zzlate zzlate"))
					}
					<-js.PublishAsyncComplete()
				}
				if r.killed {
					if delay == sigkillRunTimeout {
						t.Fatalf("run %d did not end within %v", run, sigkillRunTimeout)
					}
					kills++
					continue
				}
				if r.code != 0 {
					if restartServer && run == 1 {
						continue // failed under the server restart: restored next
					}
					t.Fatalf("run %d exited %d", run, r.code)
				}
				if kills == 0 && !restartServer {
					t.Log("no run was killed before its end")
				}
				break
			}
			if restartServer && ns.srv == nil {
				time.Sleep(time.Second)
			}
			t.Logf("late messages published past the stop sequence: %v", extra)
			checkCountLines(t, natsOutputLines(t, ns), want)
		})
	}
}

// TestNATSWordCountBadInput: one-line errors naming the server, the
// stream or the subject, from a real weir process.
func TestNATSWordCountBadInput(t *testing.T) {
	ns := startNATS(t)
	ns.js().CreateStream(context.Background(), jetstream.StreamConfig{Name: "IN", Subjects: []string{"in"}})
	ns.js().CreateStream(context.Background(), jetstream.StreamConfig{Name: "OUT", Subjects: []string{"counts"}})
	out := t.TempDir()
	hp := ns.hostPort()
	for _, tc := range []struct {
		name   string
		args   []string
		expect string
	}{
		{"unreachable input", []string{"--input", "nats://127.0.0.1:1/IN", "--output", out}, "cannot connect to nats://127.0.0.1:1"},
		{"missing stream", []string{"--input", "nats://" + hp + "/NOPE", "--output", out}, `stream "NOPE" does not exist`},
		{"subject outside the stream", []string{"--input", "nats://" + hp + "/IN?subject=x.y", "--output", out}, `subject "x.y" is not in stream "IN"`},
		{"bad stop", []string{"--input", "nats://" + hp + "/IN?stop=never", "--output", out}, "the only stop is latest"},
		{"output subject outside every stream", []string{"--output", "nats://" + hp + "/nowhere"}, `subject "nowhere" is in no stream`},
		{"unreachable output", []string{"--output", "nats://127.0.0.1:1/counts"}, "cannot connect to nats://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startAndKill(t, append([]string{"run", "wordcount"}, tc.args...), sigkillRunTimeout)
			msg := strings.TrimSpace(r.stderr)
			if r.code == 0 || !strings.Contains(msg, tc.expect) || strings.Count(msg, "\n") > 0 {
				t.Fatalf("exit %d, stderr %q: want one line with %q", r.code, msg, tc.expect)
			}
		})
	}
}
