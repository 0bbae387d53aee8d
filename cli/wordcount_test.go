package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestMain lets the tests run the command as a real process: with
// WEIR_TEST_MAIN set, the test binary is the weir binary (cmd/weir's
// main).
func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TEST_MAIN") == "1" {
		// Tests run many `weir run` processes at once: they cannot all
		// serve the REST API on its default port. Those that test it pass
		// --rest-address.
		if len(os.Args) > 1 && (os.Args[1] == "run" && (len(os.Args) < 3 || os.Args[2] == "wordcount") || os.Args[1] == "demo") && !slices.ContainsFunc(os.Args, func(a string) bool { return strings.HasPrefix(a, "--rest-address") }) {
			os.Args = append(os.Args, "--rest-address=off")
		}
		if os.Getenv(otherBuildEnv) == "1" {
			otherBuild()
		}
		os.Args[0] = "weir" // the weir binary, by its name
		Main(Bundled()...)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runWeir(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// multilingualText writes a deterministic text mixing scripts, digits,
// punctuation, CRLF line ends, long lines and blank lines.
func multilingualText(t *testing.T, dir string, lines int) string {
	vocab := []string{"weir", "River", "RIVER", "straße", "Straße", "Überfluss", "река", "Река", "ποταμός",
		"河水", "堰", "川", "café", "naïve", "Ærø", "2026", "x1", "ǅemal", "İstanbul", "σοφίας", "ﬁne", "a", "I"}
	seps := []string{" ", ", ", " — ", "\t", "...", "; ", "'", "-", "(", ")", "!", "?", "¿", "·"}
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i := range lines {
		n := r.IntN(30)
		if i%97 == 0 {
			n = 2000 // a long line
		}
		for j := range n {
			if j > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(vocab[r.IntN(len(vocab))])
		}
		if i%5 == 0 {
			b.WriteString("\r")
		}
		b.WriteString("\n")
	}
	p := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// referenceCounts is the contract, written independently of the job: words
// are maximal runs of letters and digits, lower-cased; each occurrence emits
// its running count.
func referenceCounts(text string) []string {
	counts := map[string]int{}
	var out []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		counts[w]++
		out = append(out, w+","+strconv.Itoa(counts[w]))
	}
	slices.Sort(out)
	return out
}

func readResult(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(data)) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	slices.Sort(out)
	return out
}

func TestWordCountMatchesReference(t *testing.T) {
	dir := t.TempDir()
	input := multilingualText(t, dir, 3000)
	text, _ := os.ReadFile(input)
	want := referenceCounts(string(text))
	if len(want) < 10000 {
		t.Fatalf("generated text too small: %d words", len(want))
	}
	for _, par := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("p", par), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprint("out", par))
			stdout, stderr, code := runWeir(t, "run", "wordcount", "--input", input, "--output", out, "--parallelism", fmt.Sprint(par))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, out) {
				t.Errorf("stdout does not say where the output went: %q", stdout)
			}
			got := readResult(t, out)
			if !slices.Equal(got, want) {
				t.Fatalf("result differs from the reference: %d lines, want %d", len(got), len(want))
			}
		})
	}
}

func TestWordCountPebbleWithCheckpoints(t *testing.T) {
	dir := t.TempDir()
	input := multilingualText(t, dir, 2000)
	text, _ := os.ReadFile(input)
	out := filepath.Join(dir, "out")
	_, stderr, code := runWeir(t, "run", "wordcount", "--input", input, "--output", out, "--parallelism", "2",
		"--state-backend", "pebble", "--checkpoint-interval", "20ms", "--checkpoint-dir", filepath.Join(dir, "ck"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, want := readResult(t, out), referenceCounts(string(text)); !slices.Equal(got, want) {
		t.Fatalf("result differs from the reference: %d lines, want %d", len(got), len(want))
	}
}

func TestWordCountDirectoryInputAndRerun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	os.WriteFile(filepath.Join(in, "a.txt"), []byte("Hello world\nhello"), 0o644)
	os.WriteFile(filepath.Join(in, "b.txt"), []byte("WORLD, hello!\n"), 0o644)
	os.WriteFile(filepath.Join(in, ".hidden"), []byte("ignored\n"), 0o644)
	out := filepath.Join(dir, "out")
	for _, par := range []string{"4", "1"} { // a rerun must not mix in the first run's part files
		if _, stderr, code := runWeir(t, "run", "wordcount", "--input", in, "--output", out, "--parallelism", par); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		want := []string{"hello,1", "hello,2", "hello,3", "world,1", "world,2"}
		if got := readResult(t, out); !slices.Equal(got, want) {
			t.Fatalf("p=%s: got %v, want %v", par, got, want)
		}
	}
}

func TestWordCountBundledDemo(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := runWeir(t, "run", "wordcount", "--output", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, want := readResult(t, out), referenceCounts(demoText); !slices.Equal(got, want) {
		t.Fatalf("demo result differs from reference (%d vs %d lines)", len(got), len(want))
	}
	if !strings.Contains(stdout, "bundled demo text") {
		t.Errorf("stdout = %q", stdout)
	}
}

func TestWordCountBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	os.WriteFile(file, []byte("x\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing input", []string{"--input", filepath.Join(dir, "nope")}, "does not exist: pass an existing file or directory with --input"},
		{"output is a file", []string{"--input", file, "--output", file}, "choose a writable --output"},
		{"output under a file", []string{"--input", file, "--output", filepath.Join(file, "sub")}, "choose a writable --output"},
		{"unknown flag", []string{"--bogus"}, "unknown flag: --bogus (see weir run wordcount --help)"},
		{"bad parallelism", []string{"--input", file, "--parallelism", "0"}, "--parallelism is 0"},
		{"non-numeric parallelism", []string{"--parallelism", "two"}, "invalid argument"},
		{"extra argument", []string{"extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--output", filepath.Join(dir, "o")}, tt.args...)...)
			if code == 0 {
				t.Fatal("exit code 0, want non-zero")
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("stderr = %q, want one line containing %q", stderr, tt.want)
			}
		})
	}
}

// TestRunBufferTimeoutSettings: each setting of the buffer timeout, by flag
// and by Flink's keys in --config, runs wordcount to the same exact result
// (0 sends batches of one record), in local mode and on a cluster of two
// TaskManagers (the TaskManagers build the job from the same flags).
func TestRunBufferTimeoutSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := wordsInput(t, dir, 3000)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))
	conf := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, args := range [][]string{
		{"--buffer-timeout", "0"},
		{"--buffer-timeout", "5ms"},
		{"--buffer-timeout-enabled=false"},
		{"--config", conf("zero.yaml", "execution.buffer-timeout.interval: 0\n")},
		{"--config", conf("off.yaml", "execution:\n  buffer-timeout:\n    enabled: false\n    interval: 10 ms\n")},
	} {
		out := filepath.Join(dir, fmt.Sprint("out", i))
		_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--input", input, "--output", out, "--parallelism", "2"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		checkWordCountOutput(t, out, want)
	}
	if testing.Short() {
		return
	}
	// On a cluster of two TaskManagers of one slot each, where the
	// shuffle crosses TCP between the processes: every record its own
	// batch (--buffer-timeout 0), a short timeout, and no timeout, each
	// from a flag or the job's --config.
	c := startCluster(t, 2, 1)
	for i, args := range [][]string{
		{"--buffer-timeout", "0"},
		{"--buffer-timeout", "1ms"},
		{"--config", conf("zero-cluster.yaml", "execution.buffer-timeout.interval: 0\n")},
		{"--buffer-timeout-enabled=false", "--checkpoint-interval", "50ms"},
	} {
		out := filepath.Join(dir, fmt.Sprint("cluster-out", i))
		// A cluster's checkpoint storage is a path every process shares.
		_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--input", input, "--output", out, "--parallelism", "2", "--jobmanager", c.rpc,
			"--checkpoint-dir", filepath.Join(dir, fmt.Sprint("cluster-ck", i))}, args...)...)
		if code != 0 {
			t.Fatalf("on the cluster, %v: exit %d: %s\n%s", args, code, stderr, c.logs())
		}
		checkWordCountOutput(t, out, want)
	}
}
