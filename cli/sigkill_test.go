package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/weirstream/weir/internal/storage"
)

// Bounds of the SIGKILL test. The input is sized so that an uninterrupted
// run takes about a second: long enough that most runs are killed in the
// middle, short enough that the whole test stays well under 30 s.
//
// On a loaded machine a run may progress little before its kill, so the
// kills are capped rather than the restarts: once the test has killed
// sigkillMaxKills processes, the next run of a job goes to its end, which it
// must reach within sigkillRunTimeout. That bounds the test by about
// sigkillMaxKills*sigkillMaxDelay + sigkillMaxRounds*sigkillRunTimeout when
// things go badly, and by a few seconds when they do not.
const (
	sigkillInputLines = 500_000
	sigkillMinKills   = 3
	sigkillMaxKills   = 8
	sigkillMaxRounds  = 6
	sigkillMinDelay   = 50 * time.Millisecond
	sigkillMaxDelay   = 800 * time.Millisecond
	sigkillRunTimeout = 20 * time.Second // a run that is not killed on purpose must end by then
)

// TestSIGKILLRestoreLatestExactlyOnce kills real `weir run wordcount`
// processes with SIGKILL at random moments and restarts them with
// `--restore latest` until a run finishes by itself. The committed output
// must then hold each line "word,k" exactly once for k = 1..count(word), and
// nothing else; one more restore after the end must change nothing.
//
// Rerun a failure with WEIR_SIGKILL_SEED set to the logged seed (the kill
// moments are then drawn alike; where they land still depends on the
// machine's speed).
func TestSIGKILLRestoreLatestExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes for several seconds")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_SIGKILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("WEIR_SIGKILL_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (rerun with WEIR_SIGKILL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	dir := t.TempDir()
	input := wordsInput(t, dir, sigkillInputLines)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))

	start := time.Now()
	kills, runs, rounds := 0, 0, 0
	maxDelay := sigkillMaxDelay
	// A round is one job, from a fresh start to its end. A round whose runs
	// all finish before their kill proves little: go on with shorter delays
	// until enough kills have happened.
	for rounds == 0 || kills < sigkillMinKills {
		if rounds == sigkillMaxRounds {
			t.Fatalf("only %d kills in %d rounds (%d runs): the job finishes before the kill even with delays up to %v",
				kills, rounds, runs, maxDelay)
		}
		rounds++
		r := sigkillRound(t, rng, filepath.Join(dir, fmt.Sprint("round", rounds)), input, want, maxDelay, sigkillMaxKills-kills)
		kills += r.kills
		runs += len(r.runs)
		if r.kills == 0 {
			maxDelay = max(2*sigkillMinDelay, maxDelay/2)
		}
	}
	t.Logf("%d kills, %d runs in %d rounds, %v", kills, runs, rounds, time.Since(start).Round(time.Millisecond))
}

// weirRun is what the test knows of one process, for the failure report.
type weirRun struct {
	restore bool
	delay   time.Duration // when the kill was due
	sig     syscall.Signal
	elapsed time.Duration
	// killed: the signal ended the process (SIGKILL), or it stopped on it
	// (SIGTERM, SIGINT: exit 128+signal).
	killed bool
	code   int
	stderr string
	// committed is the size of the committed output after the run: its
	// growth is the job's progress.
	committed int64
}

func (r weirRun) String() string {
	mode := "fresh"
	if r.restore {
		mode = "--restore latest"
	}
	outcome := fmt.Sprintf("exit %d", r.code)
	if r.killed && r.sig == syscall.SIGKILL {
		outcome = "SIGKILLed"
	} else if r.killed {
		outcome = fmt.Sprintf("stopped by %v, exit %d", r.sig, r.code)
	}
	s := fmt.Sprintf("%s, %v due at %v, %s after %v; %d bytes committed", mode, r.sig, r.delay.Round(time.Millisecond), outcome, r.elapsed.Round(time.Millisecond), r.committed)
	if r.stderr != "" {
		s += "\n\tstderr: " + strings.ReplaceAll(strings.TrimSpace(r.stderr), "\n", "\n\t        ")
	}
	return s
}

type roundResult struct {
	kills int
	runs  []weirRun
}

// sigkillRound runs one job in dir to its end and checks its output. It
// kills each of the first maxKills runs after a random delay in
// [sigkillMinDelay, maxDelay] (unless the run ends before), and lets the next
// one finish.
func sigkillRound(t *testing.T, rng *rand.Rand, dir, input string, want map[string]int, maxDelay time.Duration, maxKills int) roundResult {
	return sigkillRoundAt(t, rng, dir, filepath.Join(dir, "ck"), input, want, maxDelay, maxKills)
}

// sigkillRoundAt is sigkillRound with checkpoints in ck, a --checkpoint-dir
// of any scheme.
func sigkillRoundAt(t *testing.T, rng *rand.Rand, dir, ck, input string, want map[string]int, maxDelay time.Duration, maxKills int) roundResult {
	out := filepath.Join(dir, "out")
	var res roundResult
	args := []string{"run", "wordcount", "--input", input, "--output", out, "--parallelism", "2",
		"--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
	for {
		restore := len(res.runs) > 0
		runArgs := args
		if restore {
			runArgs = append(slices.Clip(args), "--restore", "latest")
		}
		delay := sigkillRunTimeout
		if res.kills < maxKills {
			delay = sigkillMinDelay + time.Duration(rng.Int64N(int64(maxDelay-sigkillMinDelay)+1))
		}
		// SIGTERM and SIGINT stop the job (keeping its checkpoints);
		// SIGKILL gives it no say.
		sig := []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT}[rng.IntN(3)]
		r := startAndSignal(t, runArgs, delay, sig)
		r.restore = restore
		r.committed = committedBytes(t, out)
		res.runs = append(res.runs, r)
		t.Logf("%s run %d: %v", filepath.Base(dir), len(res.runs)-1, r)
		switch {
		case r.killed && delay == sigkillRunTimeout:
			t.Fatalf("%s: run %d did not finish within %v", dir, len(res.runs)-1, sigkillRunTimeout)
		case r.killed:
			res.kills++
			continue
		case r.code != 0:
			t.Fatalf("%s: run %d exited %d by itself", dir, len(res.runs)-1, r.code)
		}
		break
	}
	t.Logf("%s: %d runs to the end, %d of them killed", filepath.Base(dir), len(res.runs), res.kills)

	checkWordCountOutput(t, out, want)

	// The run that finished took a final checkpoint; it must be there.
	store, err := storage.Open(ck)
	if err != nil {
		t.Fatalf("open checkpoint dir: %v", err)
	}
	cs := storage.CheckpointStorage{Store: store, JobID: "wordcount"}
	latest, md, skipped, err := cs.Latest(context.Background())
	if err != nil {
		t.Fatalf("no latest checkpoint in %s after the job finished: %v (skipped: %v)", ck, err, skipped)
	}
	if len(skipped) > 0 {
		t.Errorf("damaged checkpoints skipped: %v", skipped)
	}
	t.Logf("%s: latest checkpoint %s (id %d)", filepath.Base(dir), latest, md.ID)
	// Not checked, but worth seeing: what killed runs left behind.
	pending, _ := filepath.Glob(filepath.Join(out, ".part-*.pending"))
	chks, _ := filepath.Glob(filepath.Join(ck, "wordcount", "chk-*"))
	t.Logf("%s: left on disk: %d pending part files, %d checkpoint directories", filepath.Base(dir), len(pending), len(chks))

	// Restoring a finished job replays nothing and commits nothing new.
	before := committedFiles(t, out)
	r := startAndKill(t, append(slices.Clip(args), "--restore", "latest"), sigkillRunTimeout)
	r.restore = true
	r.committed = committedBytes(t, out)
	res.runs = append(res.runs, r)
	t.Logf("%s run %d (after the end): %v", filepath.Base(dir), len(res.runs)-1, r)
	if r.killed || r.code != 0 {
		t.Fatalf("%s: restoring the finished job failed", dir)
	}
	if after := committedFiles(t, out); !maps.Equal(before, after) {
		t.Fatalf("%s: restoring the finished job changed the committed output: %d files before, %d after (new or changed: %s)",
			dir, len(before), len(after), firstOf(newKeys(before, after), 20))
	}
	return res
}

// startAndKill runs weir with args and sends it SIGKILL after delay unless it
// ended before.
func startAndKill(t *testing.T, args []string, delay time.Duration) weirRun {
	t.Helper()
	return startAndSignal(t, args, delay, syscall.SIGKILL)
}

// stopTimeout bounds the time a process takes to stop after SIGTERM or
// SIGINT.
const stopTimeout = 10 * time.Second

// startAndSignal runs weir with args and sends it sig after delay unless it
// ended before. A process that does not stop within stopTimeout of SIGTERM
// or SIGINT fails the test. One stopped by them must say so.
func startAndSignal(t *testing.T, args []string, delay time.Duration, sig syscall.Signal) weirRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		// The process may end on its own meanwhile: its exit status, not
		// this call's error, says whether the kill landed.
		_ = cmd.Process.Signal(sig)
		if sig == syscall.SIGKILL {
			err = <-done
			break
		}
		select {
		case err = <-done:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			t.Fatalf("weir %s did not stop within %v of %v; stderr:\n%s", strings.Join(args, " "), stopTimeout, sig, stderr.String())
		}
	}
	r := weirRun{delay: delay, sig: sig, elapsed: time.Since(begin), stderr: stderr.String()}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	r.code = cmd.ProcessState.ExitCode()
	if sig == syscall.SIGKILL {
		r.killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
	} else if ws.Signaled() && ws.Signal() == sig {
		r.killed = true // before weir set its handler: as good as SIGKILL
	} else {
		r.killed = r.code == 128+int(sig)
		if r.killed && !strings.Contains(r.stderr, "wordcount: stopped by "+map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig]) {
			t.Errorf("weir stopped by %v (exit %d) without saying so; stderr:\n%s", sig, r.code, r.stderr)
		}
	}
	return r
}

// wordsInput writes lines of words drawn from a small vocabulary, so that
// counts reach tens of thousands, with mixed case and punctuation.
func wordsInput(t *testing.T, dir string, lines int) string {
	t.Helper()
	vocab := []string{"weir", "River", "flood", "GATE", "mill", "stream", "salmon", "ladder", "dam", "sluice",
		"bank", "eddy", "ford", "delta", "basin", "lock", "canal", "spring", "brook", "marsh",
		"x1", "2026", "Straße", "река", "河水", "café"}
	seps := []string{" ", " ", " ", ", ", "; ", " - ", "... "}
	r := rand.New(rand.NewPCG(3, 4)) // fixed: the input's size sets the runs' length
	var b strings.Builder
	for range lines {
		n := r.IntN(16)
		for j := range n {
			if j > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(vocab[r.IntN(len(vocab))])
		}
		b.WriteString("\n")
	}
	p := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wordTotals is the reference, independent of the job: words are maximal
// runs of letters and digits, lower-cased; the result is each word's number
// of occurrences.
func wordTotals(text string) map[string]int {
	counts := map[string]int{}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		counts[strings.ToLower(w)]++
	}
	return counts
}

// checkWordCountOutput checks that the committed files of out hold each line
// "w,k" for k = 1..want[w] exactly once and no other line, and reports the
// missing, duplicated and unexpected lines with the files they are in.
func checkWordCountOutput(t *testing.T, out string, want map[string]int) {
	t.Helper()
	seen := make(map[string][]uint8, len(want)) // seen[w][k-1]: times "w,k" was read
	for w, n := range want {
		seen[w] = make([]uint8, n)
	}
	var unexpected []string
	total := 0
	forEachCommittedLine(t, out, func(file, line string) {
		total++
		w, k, ok := parseCountLine(line)
		if !ok || k < 1 || k > len(seen[w]) {
			unexpected = append(unexpected, fmt.Sprintf("%q in %s", line, file))
			return
		}
		if seen[w][k-1] < 255 {
			seen[w][k-1]++
		}
	})
	var missing, duplicated []string
	for _, w := range slices.Sorted(maps.Keys(seen)) {
		for i, c := range seen[w] {
			line := w + "," + strconv.Itoa(i+1)
			switch {
			case c == 0:
				missing = append(missing, line)
			case c > 1:
				duplicated = append(duplicated, line)
			}
		}
	}
	if len(missing)+len(duplicated)+len(unexpected) == 0 {
		return
	}
	// Say where the duplicated lines are, and which lines of each word went
	// missing, so that the part file (subtask, attempt, checkpoint) at fault
	// can be told.
	where := map[string][]string{}
	for _, l := range duplicated[:min(len(duplicated), 10)] {
		where[l] = nil
	}
	forEachCommittedLine(t, out, func(file, line string) {
		if fs, ok := where[line]; ok {
			where[line] = append(fs, file)
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "committed output of %s is not exactly once: %d lines read, %d missing, %d duplicated, %d unexpected",
		out, total, len(missing), len(duplicated), len(unexpected))
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\nmissing (first 10): %v", missing[:min(len(missing), 10)])
		fmt.Fprintf(&b, "\nmissing ranges: %s", missingRanges(missing, 20))
	}
	for _, l := range duplicated[:min(len(duplicated), 10)] {
		fmt.Fprintf(&b, "\nduplicated %q in %v", l, where[l])
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(&b, "\nunexpected (first 10): %v", unexpected[:min(len(unexpected), 10)])
	}
	fmt.Fprintf(&b, "\nfiles: %s", firstOf(slices.Sorted(maps.Keys(committedFiles(t, out))), 40))
	t.Error(b.String())
}

// missingRanges condenses missing lines, sorted by word and count, into
// runs "w,a..b", at most n of them.
func missingRanges(missing []string, n int) string {
	var runs []string
	var w string
	var from, to int
	flush := func() {
		if w != "" {
			runs = append(runs, fmt.Sprintf("%s,%d..%d", w, from, to))
		}
	}
	for _, l := range missing {
		lw, k, _ := parseCountLine(l)
		if lw == w && k == to+1 {
			to = k
			continue
		}
		flush()
		w, from, to = lw, k, k
	}
	flush()
	return firstOf(runs, n)
}

func parseCountLine(line string) (word string, k int, ok bool) {
	i := strings.LastIndexByte(line, ',')
	if i < 0 {
		return "", 0, false
	}
	k, err := strconv.Atoi(line[i+1:])
	return line[:i], k, err == nil
}

// forEachCommittedLine calls fn for each line of the files of dir that
// readers see: those not starting with "." or "_".
func forEachCommittedLine(t *testing.T, dir string, fn func(file, line string)) {
	t.Helper()
	for name := range committedFiles(t, dir) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fn(name, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
	}
}

// committedFiles maps the names of the committed files of dir to their
// sizes. A run killed early may not have created dir: it holds nothing.
func committedFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return files
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = info.Size()
	}
	return files
}

// firstOf prints at most n elements of list.
func firstOf(list []string, n int) string {
	if len(list) > n {
		return fmt.Sprintf("%v and %d more", list[:n], len(list)-n)
	}
	return fmt.Sprint(list)
}

func committedBytes(t *testing.T, dir string) int64 {
	var n int64
	for _, size := range committedFiles(t, dir) {
		n += size
	}
	return n
}

func newKeys(before, after map[string]int64) []string {
	var out []string
	for k, v := range after {
		if w, ok := before[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
