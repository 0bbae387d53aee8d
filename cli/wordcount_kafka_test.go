package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/testutil/kafkatest"
)

// TestKafkaBrokerProcess is not a test: it is the kfake broker process
// the Kafka tests start (the test binary re-executed with
// WEIR_KFAKE_BROKER=1). It serves on 127.0.0.1, prints its address, and
// ends when its stdin closes (the test ended or was killed).
// WEIR_KFAKE_TOPICS lists the topics to create, "name:partitions,...".
func TestKafkaBrokerProcess(t *testing.T) {
	if os.Getenv("WEIR_KFAKE_BROKER") != "1" {
		t.Skip("the kfake broker process of the Kafka tests")
	}
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if d := os.Getenv("WEIR_KFAKE_DATADIR"); d != "" {
		// State on disk, so that the broker can be stopped and started
		// again on the same port (WEIR_KFAKE_PORT).
		opts = append(opts, kfake.DataDir(d), kfake.SyncWrites())
	}
	if p := os.Getenv("WEIR_KFAKE_PORT"); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("WEIR_KFAKE_PORT=%q", p)
		}
		opts = append(opts, kfake.Ports(port))
	}
	for _, spec := range strings.Split(os.Getenv("WEIR_KFAKE_TOPICS"), ",") {
		if spec == "" {
			continue
		}
		name, n, _ := strings.Cut(spec, ":")
		p, err := strconv.Atoi(n)
		if name == "" || err != nil {
			t.Fatalf("WEIR_KFAKE_TOPICS: %q is not name:partitions", spec)
		}
		opts = append(opts, kfake.SeedTopics(int32(p), name))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Printf("kfake listening on %s\n", c.ListenAddrs()[0])
	io.Copy(io.Discard, os.Stdin)
}

// startBroker starts a kfake broker process with the given topics and
// returns its address.
func startBroker(t *testing.T, topics string, env ...string) string {
	addr, _ := startBrokerProcess(t, topics, env...)
	return addr
}

// startBrokerProcess starts a kfake broker process and returns its address
// and a function that stops it (gracefully: its state is written out).
func startBrokerProcess(t *testing.T, topics string, env ...string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKafkaBrokerProcess$")
	cmd.Env = append(append(os.Environ(), "WEIR_KFAKE_BROKER=1", "WEIR_KFAKE_TOPICS="+topics), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			stdin.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	// The address line may follow lines of the test framework (-test.v).
	br := bufio.NewReader(stdout)
	var addr string
	for addr == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("kfake broker process ended before it listened: %v", err)
		}
		addr, _ = strings.CutPrefix(strings.TrimSpace(line), "kfake listening on ")
	}
	go io.Copy(io.Discard, br)
	return addr, stop
}

func kafkaClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkatest.Client(t, []string{addr}, opts...)
}

// produceLines writes the lines of text to topic, round-robin over its
// partitions.
func produceLines(t *testing.T, addr, topic string, partitions int32, text string) {
	t.Helper()
	cl := kafkaClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		recs = append(recs, &kgo.Record{Partition: int32(i) % partitions, Value: []byte(l)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeTopic reads every value of topic up to its end, with
// read_committed or read_uncommitted.
func consumeTopic(t *testing.T, addr, topic string, committed bool) []string {
	t.Helper()
	return kafkatest.Consume(t, []string{addr}, topic, committed, 30*time.Second)
}

// checkCounts checks that lines hold "w,k" for k = 1..want[w] exactly
// once each and nothing else.
func checkCounts(t *testing.T, lines []string, want map[string]int) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	var missing, dup, unexpected []string
	total := 0
	for w, n := range want {
		total += n
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
	for l := range seen {
		unexpected = append(unexpected, l)
	}
	if len(missing)+len(dup)+len(unexpected) > 0 {
		slices.Sort(missing)
		slices.Sort(dup)
		t.Fatalf("%d records, want %d: %d missing (%v), %d duplicated (%v), %d unexpected (%v)", len(lines), total,
			len(missing), firstOf(missing, 5), len(dup), firstOf(dup, 5), len(unexpected), firstOf(unexpected, 5))
	}
}

// TestKafkaWordCountSIGKILL runs `weir run wordcount` from a topic of 3
// partitions to a topic, exactly-once, on a kfake broker process; it kills
// the weir process with SIGKILL at random moments and restarts it with
// --restore latest until it finishes (stop=latest). A read_committed
// consumer of the output then sees each word,k exactly once; a
// read_uncommitted one sees the records of the aborted transactions too.
func TestKafkaWordCountSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_SIGKILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with WEIR_SIGKILL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	addr := startBroker(t, "in:3,out:3")
	text, err := os.ReadFile(wordsInput(t, dir, 100_000))
	if err != nil {
		t.Fatal(err)
	}
	produceLines(t, addr, "in", 3, string(text))
	want := wordTotals(string(text))

	args := []string{"run", "wordcount", "--input", "kafka://" + addr + "/in?stop=latest",
		"--output", "kafka://" + addr + "/out", "--parallelism", "2",
		"--checkpoint-interval", "50ms", "--checkpoint-dir", filepath.Join(dir, "ck")}
	kills, runs := 0, 0
	start := time.Now()
	for {
		runArgs := args
		if runs > 0 {
			runArgs = append(slices.Clip(args), "--restore", "latest")
		}
		delay := sigkillRunTimeout
		if kills < 4 {
			delay = 100*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
		}
		r := startAndKill(t, runArgs, delay)
		r.restore = runs > 0
		runs++
		t.Logf("run %d: %v", runs, r)
		if r.killed {
			if delay == sigkillRunTimeout {
				t.Fatalf("run %d did not finish within %v", runs, sigkillRunTimeout)
			}
			kills++
			continue
		}
		if r.code != 0 {
			t.Fatalf("run %d exited %d", runs, r.code)
		}
		break
	}
	t.Logf("%d kills in %d runs, %v", kills, runs, time.Since(start).Round(time.Millisecond))
	if kills == 0 {
		t.Log("no run was killed before it finished: the machine is fast; the check below still holds")
	}
	committed := consumeTopic(t, addr, "out", true)
	checkCounts(t, committed, want)
	uncommitted := consumeTopic(t, addr, "out", false)
	t.Logf("read_committed: %d records, each word,k once; read_uncommitted: %d records (%d more, from transactions the kills left open and the restarts aborted)",
		len(committed), len(uncommitted), len(uncommitted)-len(committed))
	if len(uncommitted) < len(committed) {
		t.Fatalf("read_uncommitted saw fewer records (%d) than read_committed (%d)", len(uncommitted), len(committed))
	}

	// Restoring the finished job commits its last transactions again (by
	// producer id and epoch: a retry the broker accepts) and writes
	// nothing new.
	r := startAndKill(t, append(slices.Clip(args), "--restore", "latest"), sigkillRunTimeout)
	if r.killed || r.code != 0 {
		t.Fatalf("restoring the finished job: %v", r)
	}
	if again := consumeTopic(t, addr, "out", true); len(again) != len(committed) {
		t.Fatalf("restoring the finished job changed the output: %d records, was %d", len(again), len(committed))
	}
}

// TestKafkaWordCountBadInput: an unreachable broker, a missing topic and a
// topic with fewer partitions than the checkpoint are each a one-line
// error at start naming the broker or the topic.
func TestKafkaWordCountBadInput(t *testing.T) {
	dir := t.TempDir()
	addr := startBroker(t, "in:3,out:1")
	one := startBroker(t, "in:1,out:1")
	produceLines(t, addr, "in", 3, "a b\nc d\ne f\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unreachable input", []string{"--input", "kafka://127.0.0.1:1/in", "--output", "kafka://" + addr + "/out"},
			"cannot reach brokers 127.0.0.1:1"},
		{"unreachable output", []string{"--input", "kafka://" + addr + "/in?stop=latest", "--output", "kafka://127.0.0.1:1/out"},
			"cannot reach brokers 127.0.0.1:1"},
		{"missing input topic", []string{"--input", "kafka://" + addr + "/nope", "--output", "kafka://" + addr + "/out"},
			`topic "nope" does not exist on brokers ` + addr},
		{"missing output topic", []string{"--input", "kafka://" + addr + "/in", "--output", "kafka://" + addr + "/nope"},
			`topic "nope" does not exist on brokers ` + addr},
		{"bad parameter", []string{"--input", "kafka://" + addr + "/in?from=start", "--output", "kafka://" + addr + "/out"},
			`unknown parameter "from"`},
		{"exactly-once without checkpoints", []string{"--input", "kafka://" + addr + "/in", "--output", "kafka://" + addr + "/out?guarantee=exactly-once"},
			"guarantee=exactly-once commits at checkpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runWeir(t, append([]string{"run", "wordcount"}, tc.args...)...)
			checkOneLineError(t, stderr, code, tc.want)
		})
	}
	t.Run("fewer partitions than the checkpoint", func(t *testing.T) {
		// An unbounded run checkpoints unfinished splits of the 3
		// partitions; it is killed, then restored against a broker whose
		// topic has 1 partition.
		ck := filepath.Join(dir, "ck")
		args := []string{"run", "wordcount", "--input", "kafka://" + addr + "/in", "--output", "kafka://" + addr + "/out",
			"--checkpoint-interval", "20ms", "--checkpoint-dir", ck}
		r := startAndKill(t, args, 1500*time.Millisecond)
		if !r.killed {
			t.Fatalf("the unbounded run ended by itself: %v", r)
		}
		_, stderr, code := runWeir(t, "run", "wordcount", "--input", "kafka://"+one+"/in", "--output", "kafka://"+one+"/out",
			"--checkpoint-interval", "20ms", "--checkpoint-dir", ck, "--restore", "latest")
		checkOneLineError(t, stderr, code, `topic "in" has 1 partitions on brokers `+one+`, fewer than the 3 of the checkpoint`)
	})
}

func checkOneLineError(t *testing.T, stderr string, code int, want string) {
	t.Helper()
	msg := strings.TrimSpace(stderr)
	if code == 0 || !strings.Contains(msg, want) {
		t.Fatalf("exit %d, stderr %q; want an error containing %q", code, msg, want)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the error spans %d lines: %q", strings.Count(msg, "\n")+1, msg)
	}
}

// TestKafkaWordCountBrokerRestart stops the broker process in the middle of
// an exactly-once `weir run wordcount` and starts it again (its state on
// disk, same port): the job rides it out (its clients retry, or it fails
// and restarts from its checkpoint and commits again) and the output holds
// each word,k exactly once.
func TestKafkaWordCountBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a broker process under a running job")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := []string{"WEIR_KFAKE_DATADIR=" + filepath.Join(dir, "broker"), "WEIR_KFAKE_PORT=" + strconv.Itoa(port)}
	addr, stop := startBrokerProcess(t, "in:3,out:3", env...)
	text, err := os.ReadFile(wordsInput(t, dir, 100_000))
	if err != nil {
		t.Fatal(err)
	}
	produceLines(t, addr, "in", 3, string(text))
	want := wordTotals(string(text))

	cmd := exec.Command(os.Args[0], "run", "wordcount", "--input", "kafka://"+addr+"/in?stop=latest",
		"--output", "kafka://"+addr+"/out", "--parallelism", "2",
		"--checkpoint-interval", "50ms", "--checkpoint-dir", filepath.Join(dir, "ck"))
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	begin := time.Now()
	time.Sleep(400 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("weir ended (%v) before the broker was stopped: the input is too small for this machine", err)
	default:
	}
	stop()
	t.Log("broker stopped")
	time.Sleep(300 * time.Millisecond)
	startBrokerProcess(t, "", env...)
	t.Log("broker started again")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("weir: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("weir did not finish within 60 s after the broker restart; stderr:\n%s", stderr.String())
	}
	committed := consumeTopic(t, addr, "out", true)
	checkCounts(t, committed, want)
	t.Logf("weir finished %v after its start; read_committed: %d records, each word,k once", time.Since(begin).Round(time.Millisecond), len(committed))
}
