package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/storage"
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

// finishedJob runs wordcount over a small input to its end with periodic
// checkpoints into ck, plus extra flags, and returns its arguments.
func finishedJob(t *testing.T, input, out, ck string, extra ...string) (args []string) {
	t.Helper()
	args = append([]string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck,
		"--checkpoint-interval", "50ms", "--parallelism", "2"}, extra...)
	if _, stderr, code := runWeir(t, args...); code != 0 {
		t.Fatalf("weir %v: exit %d: %s", args, code, stderr)
	}
	return args
}

// newestCheckpoint returns the directory of the newest chk-N of job
// wordcount in ck.
func newestCheckpoint(t *testing.T, ck string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(ck, "wordcount", "chk-*"))
	best, bestID := "", int64(0)
	for _, d := range dirs {
		if id, ok := storage.ParseCheckpointDir(d); ok && id > bestID {
			best, bestID = d, id
		}
	}
	if best == "" {
		t.Fatalf("no checkpoint in %s", ck)
	}
	return best
}

func flipByte(t *testing.T, name string, at func(size int) int) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[at(len(b))] ^= 0x5a
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreLatestRefusesDamagedCheckpoints damages the only checkpoint of
// a finished job in each way the probe did: --restore latest must fail,
// naming the checkpoint and what is wrong with it, and change nothing in
// the output (starting from empty would repeat all of it); --restore none
// then starts over.
func TestRestoreLatestRefusesDamagedCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	cases := []struct {
		name   string
		flags  []string
		damage func(t *testing.T, chk string)
		why    string // in the error
	}{
		{"truncated metadata", nil, func(t *testing.T, chk string) {
			md := filepath.Join(chk, "_metadata")
			info, _ := os.Stat(md)
			os.Truncate(md, info.Size()/2)
		}, "_metadata"},
		{"flipped metadata", nil, func(t *testing.T, chk string) {
			flipByte(t, filepath.Join(chk, "_metadata"), func(n int) int { return n / 2 })
		}, "_metadata"},
		{"garbage metadata", nil, func(t *testing.T, chk string) {
			os.WriteFile(filepath.Join(chk, "_metadata"), []byte("garbage\n"), 0o644)
		}, "_metadata"},
		{"flipped state file", nil, func(t *testing.T, chk string) {
			files, _ := filepath.Glob(filepath.Join(chk, "*.keyed"))
			if len(files) == 0 {
				t.Fatalf("no state file in %s", chk)
			}
			flipByte(t, files[0], func(n int) int { return n / 2 })
		}, "checksum"},
		{"missing shared file", []string{"--state-backend", "pebble", "--incremental"}, func(t *testing.T, chk string) {
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(chk), "shared", "*", "*.sst"))
			if len(files) == 0 {
				files, _ = filepath.Glob(filepath.Join(filepath.Dir(chk), "shared", "*.sst"))
			}
			if len(files) == 0 {
				t.Fatalf("no shared .sst file next to %s", chk)
			}
			os.Remove(files[0])
		}, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			input := wordsInput(t, dir, 3000)
			ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
			args := finishedJob(t, input, out, ck, tc.flags...)
			before := committedFiles(t, out)
			chk := newestCheckpoint(t, ck)
			tc.damage(t, chk)

			_, stderr, code := runWeir(t, append(args, "--restore", "latest")...)
			if code == 0 || !strings.Contains(stderr, filepath.Base(chk)+": ") || !strings.Contains(stderr, tc.why) || !strings.Contains(stderr, "--restore none") {
				t.Fatalf("--restore latest with a damaged %s: exit %d, stderr:\n%s\nwant a failure naming %s, %q and --restore none", chk, code, stderr, filepath.Base(chk), tc.why)
			}
			t.Logf("refused: %s", strings.TrimSpace(stderr))
			if after := committedFiles(t, out); !maps.Equal(before, after) {
				t.Fatalf("the refused restore changed the output: %v, then %v", before, after)
			}
			// The user's way out: start over.
			if _, stderr, code := runWeir(t, append(args, "--restore", "none")...); code != 0 {
				t.Fatalf("--restore none: exit %d: %s", code, stderr)
			}
			text, _ := os.ReadFile(input)
			checkWordCountOutput(t, out, wordTotals(string(text)))
		})
	}
}

// TestStopThenRestoreLatestTakesTheSavepoint stops a real `weir run` with
// `weir stop` (a savepoint, on which the sink commits): --restore latest
// must restore that savepoint, not the older periodic checkpoint, and the
// output must end exactly once.
func TestStopThenRestoreLatestTakesTheSavepoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 400_000)
	ck, out, sp := filepath.Join(dir, "ck"), filepath.Join(dir, "out"), filepath.Join(dir, "sp")
	args := []string{"--input", input, "--output", out, "--checkpoint-dir", ck, "--checkpoint-interval", "200ms", "--parallelism", "2"}
	w := startWordCount(t, append(args, "--rest-address", "127.0.0.1:0", "--savepoint-dir", sp)...)
	// Stop once a periodic checkpoint completed: the savepoint is newer.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(ck, "wordcount", "chk-*", "_metadata")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint completed; stderr:\n%s", w.stderr.String())
		}
	}
	// The REST server outlives the job until the client read the stop's
	// outcome (issue 26): weir stop succeeds.
	stdout, stderr, err := runClient("stop", "wordcount", "--jobmanager", w.url)
	if err != nil {
		t.Fatalf("weir stop: %v; stdout %q, stderr %q", err, stdout, stderr)
	}
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("weir run did not end after weir stop; stderr:\n%s", w.stderr.String())
	}
	if w.err != nil {
		t.Fatalf("weir run after weir stop: %v; stderr:\n%s", w.err, w.stderr.String())
	}
	sps, _ := filepath.Glob(filepath.Join(sp, "savepoint-*"))
	if len(sps) != 1 {
		t.Fatalf("savepoints in %s: %v, want 1", sp, sps)
	}
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runWeir(t, append([]string{"run", "wordcount"}, append(args, "--restore", "latest")...)...)
	m := restoredLine.FindStringSubmatch(stderr)
	if code != 0 || m == nil || m[1] != "savepoint" || m[3] != sps[0] {
		t.Fatalf("--restore latest after weir stop: exit %d, stderr %q; want the savepoint %s restored", code, stderr, sps[0])
	}
	checkWordCountOutput(t, out, wordTotals(string(text)))
}

// killedWithCheckpoints starts a job with --retained-checkpoints 2 and
// SIGKILLs it once two checkpoints are complete; it returns the job's
// arguments and the directories of the two newest complete checkpoints,
// older first.
func killedWithCheckpoints(t *testing.T, input, out, ck string) (args []string, older, newer string) {
	t.Helper()
	args = []string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck,
		"--checkpoint-interval", "50ms", "--parallelism", "2", "--retained-checkpoints", "2"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	complete := func() []string {
		var dirs []string
		for _, m := range globs(filepath.Join(ck, "wordcount", "chk-*", "_metadata")) {
			dirs = append(dirs, filepath.Dir(m))
		}
		slices.SortFunc(dirs, func(a, b string) int {
			x, _ := storage.ParseCheckpointDir(a)
			y, _ := storage.ParseCheckpointDir(b)
			return cmp.Compare(x, y)
		})
		return dirs
	}
	// Kill once the newest complete checkpoint committed its part files
	// (most of the time: the next one may complete meanwhile).
	newestCommitted := func() bool {
		dirs := complete()
		if len(dirs) < 2 {
			return false
		}
		id, _ := storage.ParseCheckpointDir(dirs[len(dirs)-1])
		return len(globs(filepath.Join(out, fmt.Sprintf("part-*-%010d", id)))) > 0
	}
	for deadline := time.Now().Add(20 * time.Second); !newestCommitted(); time.Sleep(2 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the job ended (%v) before it was killed; make the input larger. stderr:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two complete checkpoints; stderr:\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	dirs := complete()
	if len(dirs) < 2 {
		t.Fatalf("complete checkpoints after the kill: %v", dirs)
	}
	return args, dirs[len(dirs)-2], dirs[len(dirs)-1]
}

func globs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// TestRestoreOlderCheckpointRollsBackFileSink restores a checkpoint older
// than one that committed output, the two ways it happens: --restore latest
// falling back past a damaged newest checkpoint, and --restore PATH of the
// older one. The exactly-once file sink must roll back the part files the
// newer checkpoint committed, so that the finished output is exactly once;
// with --keep-rolled-back they are moved to .rolled-back/.
func TestRestoreOlderCheckpointRollsBackFileSink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	for _, tc := range []struct {
		name string
		keep bool
		// restore damages what it must and returns the --restore value.
		restore func(t *testing.T, older, newer string) string
	}{
		{"fallback past a damaged newest", false, func(t *testing.T, older, newer string) string {
			flipByte(t, filepath.Join(newer, "_metadata"), func(n int) int { return n / 2 })
			return "latest"
		}},
		{"older checkpoint by path", true, func(t *testing.T, older, newer string) string { return older }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			input := wordsInput(t, dir, 300_000)
			ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
			args, older, newer := killedWithCheckpoints(t, input, out, ck)
			olderID, _ := storage.ParseCheckpointDir(older)
			newerID, _ := storage.ParseCheckpointDir(newer)
			// The part files committed after the older checkpoint (if the
			// kill came after the newer one's commit).
			between := func(dir string) []string {
				var names []string
				for _, p := range globs(filepath.Join(dir, "part-*")) {
					_, k, _ := parseCountLine(strings.ReplaceAll(filepath.Base(p), "-", ","))
					if int64(k) > olderID && int64(k) <= newerID {
						names = append(names, filepath.Base(p))
					}
				}
				return names
			}
			toRollBack := between(out)
			restore := tc.restore(t, older, newer)
			if tc.keep {
				args = append(args, "--keep-rolled-back")
			}
			_, stderr, code := runWeir(t, append(args, "--restore", restore)...)
			m := restoredLine.FindStringSubmatch(stderr)
			if code != 0 || m == nil || m[3] != older {
				t.Fatalf("--restore %s: exit %d, stderr:\n%s\nwant %s restored", restore, code, stderr, older)
			}
			text, _ := os.ReadFile(input)
			checkWordCountOutput(t, out, wordTotals(string(text)))
			if left := between(out); len(left) > 0 {
				t.Errorf("part files of checkpoints after %d are still there: %v", olderID, left)
			}
			rolled := between(filepath.Join(out, ".rolled-back"))
			want := toRollBack
			if !tc.keep {
				want = nil
			}
			if !slices.Equal(rolled, want) {
				t.Errorf("--keep-rolled-back %t: .rolled-back holds %v, want %v", tc.keep, rolled, want)
			}
			t.Logf("rolled back %d part files of checkpoints %d..%d", len(toRollBack), olderID+1, newerID)
		})
	}
}

// TestFailingJobLogsAndEnds: a job whose output directory disappears
// under it fails its checkpoints and every restart. weir run must log the
// failed checkpoint and the restarts with their cause on stderr, and, once
// its restart strategy gives up, exit non-zero with the last cause instead
// of retrying in silence for ever.
func TestFailingJobLogsAndEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 300_000)
	ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	cmd := exec.Command(os.Args[0], "run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck,
		"--checkpoint-interval", "50ms", "--parallelism", "2", "--restart", "fixed-delay:attempts=3,delay=20ms")
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); len(globs(filepath.Join(ck, "wordcount", "chk-*", "_metadata"))) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no checkpoint completed; stderr:\n%s", stderr.String())
		}
	}
	// The output directory becomes a file: nothing can be written there.
	if err := os.Rename(out, out+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("in the way\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("weir run still runs 30 s after its output went away; stderr:\n%s", stderr.String())
	}
	log := stderr.String()
	t.Logf("exit %v; stderr:\n%s", err, log)
	if err == nil && !strings.Contains(log, "counted") {
		// It finished before the output went: nothing to see.
		t.Skip("the job finished before its output directory was replaced")
	}
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit code %d, want 1", cmd.ProcessState.ExitCode())
	}
	for _, want := range []string{`level=WARN msg="job failed; restarting"`, `err=`, "wordcount failed after 3 restart(s)", out} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

// TestSecondOwnerOfCheckpointDirIsRefused: while one `weir run` owns a
// checkpoint directory, a second one of the same job is refused at start,
// naming the directory and the other process, and changes nothing; once
// the first is gone, the directory can be used again.
func TestSecondOwnerOfCheckpointDirIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	first := startWordCount(t, "--repeat-rate", "1000", "--checkpoint-interval", "100ms", "--checkpoint-dir", ck,
		"--output", filepath.Join(dir, "out1"), "--rest-address", "127.0.0.1:0")
	input := wordsInput(t, dir, 2000)
	// The same output too: the refused run must not clean it.
	out2 := filepath.Join(dir, "out1")
	args := []string{"run", "wordcount", "--input", input, "--output", out2, "--checkpoint-dir", ck, "--checkpoint-interval", "50ms"}
	for deadline := time.Now().Add(20 * time.Second); len(committedFiles(t, out2)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first weir run committed nothing; stderr:\n%s", first.stderr.String())
		}
	}
	before := committedFiles(t, out2)
	_, stderr, code := runWeir(t, args...)
	lockDir := filepath.Join(ck, "wordcount")
	if code == 0 || !strings.Contains(stderr, lockDir+" is owned by a running process (pid ") {
		t.Fatalf("second weir run on %s: exit %d, stderr %q; want a refusal naming the directory and the first process", ck, code, stderr)
	}
	// The first run goes on committing: every file it had must still be
	// there, unchanged.
	after := committedFiles(t, out2)
	for name, size := range before {
		if after[name] != size {
			t.Fatalf("the refused run changed the first one's output: %s had %d bytes, now %d", name, size, after[name])
		}
	}
	select {
	case <-first.exited:
		t.Fatalf("the first weir run ended: %v\n%s", first.err, first.stderr.String())
	default:
	}
	// The refusal named the first process: SIGKILL it, and the OS drops
	// the lock with it.
	m := regexp.MustCompile(`\(pid (\d+) on `).FindStringSubmatch(stderr)
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the first weir run, pid %d as the refusal says: %v", pid, err)
	}
	select {
	case <-first.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d, named as the owner, was not the first weir run", pid)
	}
	if _, stderr, code := runWeir(t, args...); code != 0 {
		t.Fatalf("weir run after the owner died: exit %d: %s", code, stderr)
	}
	text, _ := os.ReadFile(input)
	checkWordCountOutput(t, out2, wordTotals(string(text)))
}

// TestIncompleteCheckpointDirsRemovedAtStart: checkpoint directories that
// a kill left without _metadata (one holding only a temporary metadata
// file, one with a state file) are removed when the next run starts; the
// complete one stays until retention replaces it.
func TestIncompleteCheckpointDirsRemovedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 2000)
	ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	args := finishedJob(t, input, out, ck)
	complete := newestCheckpoint(t, ck)
	left := map[string]string{"chk-990": "._metadata.tmp-1234abcd", "chk-991": "count-0.keyed"}
	for chk, file := range left {
		if err := os.MkdirAll(filepath.Join(ck, "wordcount", chk), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ck, "wordcount", chk, file), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := runWeir(t, append(args, "--restore", "latest")...); code != 0 || !strings.Contains(stderr, "restored checkpoint") {
		t.Fatalf("--restore latest: exit %d: %s", code, stderr)
	}
	for chk := range left {
		if _, err := os.Stat(filepath.Join(ck, "wordcount", chk)); err == nil {
			t.Errorf("%s, incomplete, is still there", chk)
		}
	}
	if got := newestCheckpoint(t, ck); got == complete {
		t.Errorf("no new checkpoint after the restore")
	}
	text, _ := os.ReadFile(input)
	checkWordCountOutput(t, out, wordTotals(string(text)))
}

// TestTwoPebbleJobsOfOneIDKeepTheirLocalState runs two `weir run`
// processes of the same job id at once, with the pebble backend, other
// checkpoint and output directories, and the same local state directory
// (TMPDIR), the second started once the first has opened its databases:
// each must keep its working files to itself, so both finish with
// exactly-once output; and none is left behind.
func TestTwoPebbleJobsOfOneIDKeepTheirLocalState(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	input := wordsInput(t, dir, 100_000)
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	type result struct {
		code   int
		stderr string
	}
	results := make(chan result, 2)
	for i := range 2 {
		out, ck := filepath.Join(dir, fmt.Sprint("out", i)), filepath.Join(dir, fmt.Sprint("ck", i))
		cmd := exec.Command(os.Args[0], "run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck,
			"--checkpoint-interval", "50ms", "--state-backend", "pebble", "--parallelism", "2")
		cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1", "TMPDIR="+tmp)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			cmd.Wait()
			results <- result{cmd.ProcessState.ExitCode(), stderr.String()}
		}()
		if i == 0 {
			// The second starts once the first has its databases open: a
			// start that cleared the job's local state would remove them.
			for deadline := time.Now().Add(20 * time.Second); len(globs(filepath.Join(tmp, "weir-state", "wordcount", "*", "*", "db", "MANIFEST-*")))+len(globs(filepath.Join(tmp, "weir-state", "wordcount", "*", "db", "MANIFEST-*"))) == 0; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the first job opened no pebble database under %s", tmp)
				}
			}
		}
	}
	for range 2 {
		select {
		case r := <-results:
			if r.code != 0 {
				t.Fatalf("a pebble job failed beside another of the same id: exit %d: %s", r.code, r.stderr)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("two pebble jobs of one id did not finish within 60 s")
		}
	}
	for i := range 2 {
		checkWordCountOutput(t, filepath.Join(dir, fmt.Sprint("out", i)), want)
	}
	if left := globs(filepath.Join(tmp, "weir-state", "wordcount", "*")); len(left) != 0 {
		t.Errorf("local state left behind: %v", left)
	}
}

// TestFullDiskEndsThenResumesExactlyOnce puts --output on a 2 MiB tmpfs
// (root only: skipped when mount is refused) that the job fills: weir run
// must report the full disk, end non-zero once its restarts are used up,
// and have committed nothing twice; with the disk grown, --restore latest
// must finish the output exactly once.
func TestFullDiskEndsThenResumesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", out).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, b)
	}
	t.Cleanup(func() { exec.Command("umount", out).Run() })
	input := wordsInput(t, dir, 100_000)
	ck := filepath.Join(dir, "ck")
	args := []string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-dir", ck,
		"--checkpoint-interval", "50ms", "--parallelism", "2", "--restart", "fixed-delay:attempts=2,delay=50ms"}
	_, stderr, code := runWeir(t, args...)
	t.Logf("on a full disk: exit %d; stderr:\n%s", code, stderr)
	if code != 1 || !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, "wordcount failed after 2 restart(s)") {
		t.Fatalf("on a full disk: exit %d, want 1 and the cause (no space left on device) after 2 restarts", code)
	}
	text, _ := os.ReadFile(input)
	want := wordTotals(string(text))
	// Nothing committed twice so far (the rest is missing).
	seen := map[string]bool{}
	forEachCommittedLine(t, out, func(file, line string) {
		if seen[line] {
			t.Fatalf("%q committed twice on the full disk (in %s)", line, file)
		}
		seen[line] = true
	})
	if b, err := exec.Command("mount", "-o", "remount,size=64m", out).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, b)
	}
	if _, stderr, code := runWeir(t, append(args, "--restore", "latest")...); code != 0 {
		t.Fatalf("--restore latest once the disk has room: exit %d: %s", code, stderr)
	}
	checkWordCountOutput(t, out, want)
}
