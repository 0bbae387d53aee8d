package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Tests of issue 24 ("exactly-once at the edges") and of the messages of
// issue 26 that go with them, against real `weir run` processes.

var restoredLine = regexp.MustCompile(`wordcount: restored (checkpoint|savepoint) (\d+): (\S+)`)

// TestRestoreLatestSaysWhatItRestored: --restore latest without any
// checkpoint says so on one line and starts from the beginning; with one,
// it names the checkpoint by a path that --restore accepts.
func TestRestoreLatestSaysWhatItRestored(t *testing.T) {
	dir := t.TempDir()
	input := wordsInput(t, dir, 2000)
	ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	args := []string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck, "--checkpoint-interval", "50ms"}
	_, stderr, code := runWeir(t, append(args, "--restore", "latest")...)
	if want := "wordcount: no checkpoint under " + ck + ": starting from the beginning\n"; code != 0 || stderr != want {
		t.Fatalf("first run with --restore latest: exit %d, stderr %q; want exit 0 and %q", code, stderr, want)
	}
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	checkWordCountOutput(t, out, wordTotals(string(text)))
	before := committedFiles(t, out)

	_, stderr, code = runWeir(t, append(args, "--restore", "latest")...)
	m := restoredLine.FindStringSubmatch(stderr)
	if code != 0 || m == nil || m[1] != "checkpoint" {
		t.Fatalf("second run with --restore latest: exit %d, stderr %q; want exit 0 and a line %q", code, stderr, restoredLine)
	}
	// The path is the checkpoint's directory, a value --restore takes
	// (the run that restored it completed a newer one, so it is gone now).
	if want := filepath.Join(ck, "wordcount", "chk-"+m[2]); m[3] != want {
		t.Fatalf("restored checkpoint printed as %q, want %q", m[3], want)
	}
	if after := committedFiles(t, out); !maps.Equal(before, after) {
		t.Fatalf("restoring the finished job changed its output: %v, then %v", before, after)
	}
}
