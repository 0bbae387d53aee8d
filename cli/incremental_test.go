package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// TestWordCountIncremental runs weir run wordcount with incremental pebble
// checkpoints: the result is the reference, the final checkpoint refers to
// its data files under shared/, and shared/ holds exactly those files.
func TestWordCountIncremental(t *testing.T) { wordCountIncremental(t, "--incremental") }

// TestWordCountChangelog is TestWordCountIncremental with --changelog: the
// checkpoints are changelog-based (metadata version 3 once a checkpoint
// lists log segments), the result is the reference, and shared/ holds
// exactly what the retained checkpoint refers to.
func TestWordCountChangelog(t *testing.T) { wordCountIncremental(t, "--changelog") }

func wordCountIncremental(t *testing.T, mode string) {
	dir := t.TempDir()
	input := multilingualText(t, dir, 2000)
	text, _ := os.ReadFile(input)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	_, stderr, code := runWeir(t, "run", "wordcount", "--input", input, "--output", out, "--parallelism", "2",
		"--state-backend", "pebble", mode, "--checkpoint-interval", "20ms", "--checkpoint-dir", ck)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, want := readResult(t, out), referenceCounts(string(text)); !slices.Equal(got, want) {
		t.Fatalf("result differs from the reference: %d lines, want %d", len(got), len(want))
	}
	st, err := storage.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	cs := storage.CheckpointStorage{Store: st, JobID: "wordcount"}
	ctx := context.Background()
	chkDir, md, _, err := cs.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	incremental := 0
	for _, op := range md.Operators {
		for _, s := range op.Subtasks {
			for _, h := range s.Keyed {
				if h.Backend == checkpoint.IncrementalBackend {
					incremental++
				}
			}
		}
	}
	if incremental != 2 {
		t.Fatalf("the final checkpoint has %d incremental handles, want 2", incremental)
	}
	refs, err := storage.SharedRefs(chkDir, md)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := st.List(ctx, cs.SharedDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 || !slices.Equal(shared, refs) {
		t.Fatalf("shared/ holds %v, the retained checkpoint refers to %v", shared, refs)
	}
}

func TestWordCountIncrementalNeedsPebble(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--incremental", "--changelog"} {
		_, stderr, code := runWeir(t, "run", "wordcount", "--input", file, "--output", filepath.Join(dir, "o"), flag)
		if code == 0 || !strings.Contains(stderr, flag+" needs --state-backend pebble") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("exit %d, stderr %q: want one line saying %s needs --state-backend pebble", code, stderr, flag)
		}
	}
}
