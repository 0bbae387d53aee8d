package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceLinesTo writes the lines of text to partitions [from, to) of
// topic, round-robin.
func produceLinesTo(t *testing.T, addr, topic string, from, to int32, text string) {
	t.Helper()
	cl := kafkaClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		recs = append(recs, &kgo.Record{Partition: from + int32(i)%(to-from), Value: []byte(l)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func addPartitions(t *testing.T, addr, topic string, n int) {
	t.Helper()
	resp, err := kadm.NewClient(kafkaClient(t, addr)).CreatePartitions(context.Background(), n, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("add %d partitions to %s: %v", n, topic, err)
	}
}

// startWeirKillable starts weir with args; kill sends it SIGKILL and reports
// whether the signal ended it (not an exit of its own) and its stderr.
func startWeirKillable(t *testing.T, args ...string) (kill func() (bool, string)) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	killed := false
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return func() (bool, string) {
		if !killed {
			killed = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		return ws.Signaled() && ws.Signal() == syscall.SIGKILL, stderr.String()
	}
}

// countsComplete reports whether lines are exactly "w,k" for k =
// 1..want[w], each once.
func countsComplete(lines []string, want map[string]int) bool {
	total := 0
	for _, n := range want {
		total += n
	}
	if len(lines) != total {
		return false
	}
	seen := map[string]bool{}
	for _, l := range lines {
		w, k, ok := strings.Cut(l, ",")
		n, err := strconv.Atoi(k)
		if !ok || err != nil || n < 1 || n > want[w] || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}

// TestKafkaWordCountDiscoversPartitions runs an unbounded exactly-once
// `weir run wordcount --input kafka://…/in?discovery=100ms` at parallelism
// 2, adds partitions to the input topic (kadm CreatePartitions) while it
// runs and writes lines to them, kills it with SIGKILL, adds a partition
// and lines while it is down, restores it with --restore latest at
// parallelism 3 and adds one more partition during that run. The
// read_committed output ends up with each word,k of all the lines exactly
// once: every partition was read, none twice, across the rescale.
func TestKafkaWordCountDiscoversPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes")
	}
	dir := t.TempDir()
	addr := startBroker(t, "in:2,out:3")
	raw, err := os.ReadFile(wordsInput(t, dir, 4000))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(raw), "\n"), "\n")
	part := func(i int) string { return strings.Join(lines[i*len(lines)/4:(i+1)*len(lines)/4], "") }
	want := wordTotals(string(raw))

	produceLinesTo(t, addr, "in", 0, 2, part(0))
	args := []string{"run", "wordcount", "--input", "kafka://" + addr + "/in?discovery=100ms",
		"--output", "kafka://" + addr + "/out", "--checkpoint-interval", "50ms",
		"--checkpoint-dir", filepath.Join(dir, "ck")}
	kill := startWeirKillable(t, append(args, "--parallelism", "2")...)
	time.Sleep(1500 * time.Millisecond)
	addPartitions(t, addr, "in", 2) // 2 and 3
	produceLinesTo(t, addr, "in", 2, 4, part(1))
	time.Sleep(1500 * time.Millisecond)
	if killed, stderr := kill(); !killed {
		t.Fatalf("the unbounded run ended by itself; stderr:\n%s", stderr)
	}
	// While it is down.
	addPartitions(t, addr, "in", 1) // 4
	produceLinesTo(t, addr, "in", 0, 5, part(2))

	kill = startWeirKillable(t, append(args, "--parallelism", "3", "--restore", "latest")...)
	time.Sleep(time.Second)
	addPartitions(t, addr, "in", 1) // 5
	produceLinesTo(t, addr, "in", 5, 6, part(3))
	deadline := time.Now().Add(60 * time.Second)
	var out []string
	for {
		out = consumeTopic(t, addr, "out", true)
		if countsComplete(out, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if killed, stderr := kill(); !killed {
		t.Fatalf("the restored run ended by itself; stderr:\n%s", stderr)
	}
	checkCounts(t, out, want)
	t.Logf("%d output records, each word,k once, from 6 partitions of which 4 were added during or between runs", len(out))
}

// TestKafkaWordCountBadDiscovery: a discovery parameter that is neither
// a positive duration nor off is a one-line error naming it.
func TestKafkaWordCountBadDiscovery(t *testing.T) {
	for _, d := range []string{"soon", "0s", "-1m"} {
		_, stderr, code := runWeir(t, "run", "wordcount", "--input", "kafka://127.0.0.1:1/in?discovery="+d, "--output", "kafka://127.0.0.1:1/out")
		checkOneLineError(t, stderr, code, `discovery="`+d+`": use the interval`)
	}
}
