package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchWordCountSIGKILL: `weir run wordcount --watch` follows a
// directory that gets new files and appended lines (some written in two
// pieces) while the job runs and while it is down; runs are killed with
// SIGKILL and restored with --restore latest, each run at another
// parallelism (2, 3, 1, 4, then 3). Once everything is written, the last
// run's committed output must hold each word,k exactly once.
func TestWatchWordCountSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	base := t.TempDir()
	in, out, ck := filepath.Join(base, "in"), filepath.Join(base, "out"), filepath.Join(base, "ck")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(wordsInput(t, base, 40_000))
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))
	total := 0
	for _, n := range want {
		total += n
	}
	// Six files, each a run of whole lines of the text, cut into pieces
	// at random byte offsets (so that lines are written in two pieces);
	// the pieces are appended round-robin, the files appearing one after
	// the other.
	lines := strings.SplitAfter(string(text), "\n")
	var perFile [][]string
	for f := range 6 {
		seg := strings.Join(lines[f*len(lines)/6:(f+1)*len(lines)/6], "")
		var pieces []string
		for seg != "" {
			n := min(len(seg), 200+rng.IntN(3000))
			pieces = append(pieces, seg[:n])
			seg = seg[n:]
		}
		perFile = append(perFile, pieces)
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for round := 0; ; round++ {
			wrote := false
			for f, pieces := range perFile {
				i := round - 10*f // file f appears at round 10*f
				if i < 0 || i >= len(pieces) {
					continue
				}
				wrote = true
				fh, err := os.OpenFile(filepath.Join(in, fmt.Sprintf("f%d.txt", f)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					t.Error(err)
					return
				}
				fh.WriteString(pieces[i])
				fh.Close()
			}
			if !wrote && round > 60 {
				return
			}
			time.Sleep(time.Duration(5+rng.IntN(15)) * time.Millisecond)
		}
	}()
	args := []string{"run", "wordcount", "--input", in, "--watch", "20ms", "--output", out,
		"--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
	for run := 0; run < 4; run++ {
		runArgs := append(slices.Clip(args), "--parallelism", fmt.Sprint([]int{2, 3, 1, 4}[run]))
		if run > 0 {
			runArgs = append(runArgs, "--restore", "latest")
		}
		r := startAndKill(t, runArgs, 400*time.Millisecond+time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		r.restore = run > 0
		r.committed = committedBytes(t, out)
		t.Logf("run %d: %v", run, r)
		if !r.killed {
			t.Fatalf("run %d of an unbounded job ended by itself", run)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond) // the directory grows while no job runs
	}
	<-writerDone
	// The last run goes on until its committed output holds every line.
	cmd := exec.Command(os.Args[0], append(slices.Clip(args), "--parallelism", "3", "--restore", "latest")...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	committed := 0
	for time.Now().Before(deadline) {
		committed = 0
		forEachCommittedLine(t, out, func(string, string) { committed++ })
		if committed >= total {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a few more checkpoints: nothing more may come
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if committed < total {
		t.Logf("stderr of the last run: %s", strings.TrimSpace(stderr.String()))
	}
	checkWordCountOutput(t, out, want)
}

// TestWatchWordCountBadInput: --watch needs an existing directory; a
// directory that vanishes fails the job with its name.
func TestWatchWordCountBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	os.WriteFile(file, []byte("a b\n"), 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		expect string
	}{
		{"missing", []string{"--input", filepath.Join(dir, "nope"), "--watch", "1s"}, "does not exist"},
		{"a file", []string{"--input", file, "--watch", "1s"}, "is not a directory"},
		{"no input", []string{"--watch", "1s"}, "--watch follows a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startAndKill(t, append([]string{"run", "wordcount", "--output", filepath.Join(dir, "out")}, tc.args...), sigkillRunTimeout)
			msg := strings.TrimSpace(r.stderr)
			if r.code == 0 || !strings.Contains(msg, tc.expect) || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d, stderr %q: want one line with %q", r.code, msg, tc.expect)
			}
		})
	}
	t.Run("vanishes", func(t *testing.T) {
		in := filepath.Join(dir, "in")
		os.Mkdir(in, 0o755)
		os.WriteFile(filepath.Join(in, "a"), []byte("x y\n"), 0o644)
		go func() {
			time.Sleep(700 * time.Millisecond)
			os.RemoveAll(in)
		}()
		r := startAndKill(t, []string{"run", "wordcount", "--input", in, "--watch", "10ms", "--output", filepath.Join(dir, "out2")}, sigkillRunTimeout)
		if r.code == 0 || !strings.Contains(r.stderr, "no longer exists") || !strings.Contains(r.stderr, in) {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}
