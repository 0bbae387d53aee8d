package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark/queries"
)

func TestNexmarkGen(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "events.jsonl")
	if _, stderr, code := runWeir(t, "nexmark", "gen", "--events", "1000", "--seed", "7", "--output", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines, want 1000", len(lines))
	}
	kinds := map[string]int{}
	for i, l := range lines {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		var kind int
		json.Unmarshal(ev["event_type"], &kind)
		n := 0
		for _, k := range []string{"person", "auction", "bid"} {
			if v, ok := ev[k]; ok && string(v) != "null" {
				n++
				kinds[k]++
			}
		}
		if n != 1 {
			t.Fatalf("line %d holds %d of person/auction/bid, want exactly one: %s", i+1, n, l)
		}
	}
	if kinds["bid"] < 800 || kinds["person"] == 0 || kinds["auction"] == 0 {
		t.Fatalf("event mix %v", kinds)
	}
	// Same flags, same bytes.
	again := filepath.Join(dir, "again.jsonl")
	runWeir(t, "nexmark", "gen", "--events", "1000", "--seed", "7", "--output", again)
	if b, _ := os.ReadFile(again); !bytes.Equal(b, data) {
		t.Fatal("the generator is not deterministic for a seed")
	}
}

func TestNexmarkGenBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--events", "-3", "--output", filepath.Join(dir, "x")}, "--events is -3"},
		{[]string{"--events", "10", "--output", filepath.Join(dir, "nope", "x")}, "cannot write --output"},
		{[]string{"--events", "10"}, "--output"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
	}
	for _, tt := range tests {
		_, stderr, code := runWeir(t, append([]string{"nexmark", "gen"}, tt.args...)...)
		if code == 0 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line error containing %q", tt.args, code, stderr, tt.want)
		}
	}
}

// TestNexmarkSummaryCheckpointSizes checks that the run summary shows both
// sizes of the checkpoints: the full state they refer to and what they
// uploaded (less for incremental checkpoints).
func TestNexmarkSummaryCheckpointSizes(t *testing.T) {
	r := queries.Result{Query: "q5", Events: 1000, Rows: 10, Wall: time.Second, CPU: time.Second,
		Checkpoints: weir.CheckpointSummary{Completed: 3},
		Completed: []weir.CheckpointStats{
			{ID: 1, StateSize: 4 << 20, CheckpointedSize: 4 << 20},
			{ID: 2, StateSize: 5 << 20, CheckpointedSize: 1 << 20},
			{ID: 3, StateSize: 6 << 20, CheckpointedSize: 1 << 20},
		}}
	var out strings.Builder
	printNexmarkResult(&out, r, nexmarkRunFlags{parallelism: 1, backend: "pebble", incremental: true})
	want := "state size last 6.0 MiB, max 6.0 MiB; checkpointed size mean 2.0 MiB, max 4.0 MiB"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant it to contain %q", out.String(), want)
	}
}
