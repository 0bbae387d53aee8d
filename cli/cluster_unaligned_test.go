package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
)

// TestClusterUnalignedExactlyOnce: wordcount with --unaligned on a
// JobManager and two TaskManagers (real processes; every keyed edge
// crosses the TCP data plane between them), its source far faster than
// its keyed count and sink, so that the queues between the processes stay
// full: unaligned checkpoints complete and store records in flight
// (persisted data, read from the JobManager's REST API), a TaskManager is
// killed with SIGKILL after one did, the job restores from an unaligned
// checkpoint, and the committed output is exactly once. (It lost records
// in about 1 run in 7 until a drain of a channel became atomic for its
// consumer: the network pump could take an envelope from the middle of
// the writer's drain.)
func TestClusterUnalignedExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, clusterKillLines)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	c := startCluster(t, 2, 2, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "3s")
	out := filepath.Join(dir, "out")
	args := append(wordCountArgs(input, out, filepath.Join(dir, "ck"), "--restart", clusterRestart, "--unaligned"), "--jobmanager", c.rpc)
	run, _ := startRole(t, nil, args, `submitted to the JobManager`)
	// Wait for an unaligned checkpoint that stored records in flight.
	var persisted int64
	deadline := time.Now().Add(60 * time.Second)
	for persisted == 0 && !isDone(run) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		var st rest.CheckpointingStatistics
		if !tryGetJSON(c.url+"/jobs/wordcount/checkpoints", &st) {
			continue
		}
		for _, h := range st.History {
			if h.Status == "COMPLETED" && h.IsUnaligned && h.PersistedData > 0 {
				persisted = h.PersistedData
				t.Logf("checkpoint %d: unaligned, %d bytes of records in flight, %d ms end to end", h.ID, h.PersistedData, h.EndToEndDuration)
				break
			}
		}
	}
	if persisted == 0 {
		t.Fatalf("no completed unaligned checkpoint with records in flight (job ended: %v)\n%s\n%s", isDone(run), run.stderr.String(), c.logs())
	}
	killed := false
	if !isDone(run) {
		c.tms[0].cmd.Process.Kill()
		<-c.tms[0].exited
		killed = true
		time.Sleep(300 * time.Millisecond)
		c.restart(0)
	}
	if code := exitCode(t, run, 120*time.Second, "weir run"); code != 0 {
		t.Fatalf("weir run exited %d (killed a TaskManager: %v):\n%s\n%s", code, killed, run.stderr.String(), c.logs())
	}
	restarts := strings.Count(run.stderr.String(), "restarted (restart")
	t.Logf("killed a TaskManager: %v; %d restarts seen by weir run", killed, restarts)
	checkWordCountOutput(t, out, want)
}

// tryGetJSON decodes url's JSON body into v; false when the request or
// the decoding failed (the job is not there yet).
func tryGetJSON(url string, v any) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}
