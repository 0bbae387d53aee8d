package cli

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// partRows reads the rows of the visible part files of dir.
func partRows(t *testing.T, dir string) [][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		rows = append(rows, recs...)
	}
	return rows
}

func TestNexmarkRunBlackhole(t *testing.T) {
	stdout, stderr, code := runWeir(t, "nexmark", "run", "--query", "q2", "--events", "20000", "--parallelism", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"nexmark q2: 20000 events (generated)", "rows ", "(blackhole)", "wall time", "CPU time", "events/s ",
		"events/s per CPU core", "checkpoints  1 completed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestNexmarkRunInputOutput runs a query over a file written by gen into
// exactly-once part files, and an updating query whose rows are a
// changelog.
func TestNexmarkRunInputOutput(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if _, stderr, code := runWeir(t, "nexmark", "gen", "--events", "3000", "--output", events); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "q1")
	stdout, stderr, code := runWeir(t, "nexmark", "run", "--query", "q1", "--input", events, "--output", out,
		"--checkpoint-interval", "20ms", "--checkpoint-dir", filepath.Join(dir, "ckpt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "nexmark q1: 3000 events (from "+events+")") {
		t.Errorf("report:\n%s", stdout)
	}
	rows := partRows(t, out)
	// 46 of every 50 events are bids.
	if len(rows) != 3000/50*46 {
		t.Fatalf("%d rows, want %d", len(rows), 3000/50*46)
	}
	for _, r := range rows {
		if len(r) != 5 {
			t.Fatalf("row %q: want the 5 columns auction, bidder, price, dateTime, extra", r)
		}
		if i := strings.IndexByte(r[2], '.'); i < 1 || len(r[2])-i != 4 {
			t.Fatalf("price %q: want a decimal with 3 digits after the point", r[2])
		}
	}

	out = filepath.Join(dir, "q17")
	if _, stderr, code := runWeir(t, "nexmark", "run", "--query", "q17", "--input", events, "--output", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows = partRows(t, out)
	if len(rows) == 0 {
		t.Fatal("q17 wrote no rows")
	}
	for _, r := range rows {
		if k := r[0]; k != "+I" && k != "-U" && k != "+U" && k != "-D" || len(r) != 11 {
			t.Fatalf("row %q: want a row kind and the 10 columns of q17", r)
		}
	}
}

func TestNexmarkReport(t *testing.T) {
	profiles := t.TempDir()
	// A --checkpoint-dir that does not exist yet is created; each run's
	// storage under it is removed after the run.
	ck := filepath.Join(t.TempDir(), "not", "yet")
	stdout, stderr, code := runWeir(t, "nexmark", "report", "--events", "5000", "--queries", "q0,q3", "--checkpoint-interval", "1s", "--cpu-profile-dir", profiles,
		"--checkpoint-dir", ck)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if left, err := os.ReadDir(ck); err != nil || len(left) != 0 {
		t.Errorf("--checkpoint-dir %s after the report: %v, %d entries left; want it created and empty", ck, err, len(left))
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var table []string
	for _, l := range lines {
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		}
	}
	if len(table) != 4 || !strings.HasPrefix(table[2], "| q0 | heap |") || !strings.HasPrefix(table[3], "| q3 | heap |") ||
		!strings.Contains(table[2], "| 155 K | 379 K |") {
		t.Fatalf("want a header, a rule and rows for q0 and q3 with Flink's figures:\n%s", stdout)
	}
	for _, name := range []string{"q0-heap.prof", "q3-heap.prof"} {
		if fi, err := os.Stat(filepath.Join(profiles, name)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}
}

// TestNexmarkRunIncrementalProfile runs a join on pebble with incremental
// checkpoints and a CPU profile.
func TestNexmarkRunIncrementalProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	stdout, stderr, code := runWeir(t, "nexmark", "run", "--query", "q20", "--events", "20000", "--state-backend", "pebble",
		"--incremental", "--checkpoint-interval", "50ms", "--cpu-profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "pebble state backend, incremental checkpoints") || !strings.Contains(stdout, "0 failed") {
		t.Fatalf("want a pebble run without failed checkpoints:\n%s", stdout)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Fatalf("CPU profile: %v (size %v)", err, fi)
	}
}

func TestNexmarkRunBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "events.jsonl")
	if _, stderr, code := runWeir(t, "nexmark", "gen", "--events", "200", "--output", good); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	malformed := filepath.Join(dir, "malformed.jsonl")
	bad := append([]string{}, lines...)
	bad[2] = `{"event_type":2,"bid":{"auction":"x"}}` + "\n"
	os.WriteFile(malformed, []byte(strings.Join(bad, "")), 0o644)
	truncated := filepath.Join(dir, "truncated.jsonl")
	cut := strings.Join(lines[:150], "") + lines[150][:len(lines[150])/2]
	os.WriteFile(truncated, []byte(cut), 0o644)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--query", "q99", "--events", "10"}, `unknown query "q99"`},
		{[]string{"--query", "q6", "--events", "10"}, `query "q6" is not implemented yet`},
		{[]string{"--events", "10"}, "--query is required"},
		{[]string{"--query", "q0", "--events", "-3"}, "--events is -3"},
		{[]string{"--query", "q0"}, "--events is required"},
		{[]string{"--query", "q0", "--events", "10", "--input", good}, "either --events"},
		{[]string{"--query", "q0", "--input", filepath.Join(dir, "nope.jsonl")}, "does not exist"},
		{[]string{"--query", "q0", "--input", malformed, "--restart", "none"}, "line 3"},
		{[]string{"--query", "q0", "--input", truncated}, "line 151"},
		{[]string{"--query", "q0", "--events", "10", "--state-backend", "rocks"}, `--state-backend is "rocks"`},
		{[]string{"--query", "q0", "--events", "10", "--parallelism", "0"}, "--parallelism is 0"},
		{[]string{"--query", "q0", "--events", "10", "--rate", "0"}, "--rate is 0"},
		{[]string{"--query", "q3", "--events", "10", "--incremental"}, "--incremental needs --state-backend pebble"},
		{[]string{"--query", "q0", "--events", "10", "--cpu-profile", filepath.Join(dir, "missing", "cpu.prof")}, "cannot write --cpu-profile"},
	}
	for _, tt := range tests {
		_, stderr, code := runWeir(t, append([]string{"nexmark", "run"}, tt.args...)...)
		if code == 0 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line error containing %q", tt.args, code, stderr, tt.want)
		}
	}
	if _, stderr, code := runWeir(t, "nexmark", "report", "--events", "10", "--queries", "q0,q42"); code == 0 || !strings.Contains(stderr, `unknown query "q42"`) {
		t.Errorf("report with an unknown query: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runWeir(t, "nexmark", "report", "--events", "10", "--queries", "q0,q1", "--restart", "bogus"); code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "bogus") {
		t.Errorf("report with a bad --restart: exit %d, stderr %q; want one line naming it", code, stderr)
	}
	for _, runs := range []string{"0", "-2", "101"} {
		if _, stderr, code := runWeir(t, "nexmark", "report", "--events", "10", "--queries", "q0", "--runs", runs); code == 0 || !strings.Contains(stderr, "--runs is "+runs) {
			t.Errorf("report --runs %s: exit %d, stderr %q", runs, code, stderr)
		}
	}
}

// TestNexmarkReportRuns: with --runs 3 each query runs three times, its
// row is the median run by events/s per core (its figure is the middle of
// the three listed in the last column), and each run leaves its profile.
func TestNexmarkReportRuns(t *testing.T) {
	profiles := t.TempDir()
	stdout, stderr, code := runWeir(t, "nexmark", "report", "--events", "20000", "--queries", "q1,q3", "--runs", "3", "--cpu-profile-dir", profiles)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var table [][]string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(l, "|") {
			cells := strings.Split(strings.Trim(l, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			table = append(table, cells)
		}
	}
	if len(table) != 4 || table[0][len(table[0])-1] != "runs: events/s per core" {
		t.Fatalf("want a header ending in the runs' column, a rule and two rows:\n%s", stdout)
	}
	perCore := func(cell string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSuffix(cell, " K"), 64)
		if err != nil {
			t.Fatalf("figure %q: %v\n%s", cell, err, stdout)
		}
		return v
	}
	for i, q := range []string{"q1", "q3"} {
		row := table[2+i]
		if row[0] != q || len(row) != len(table[0]) {
			t.Fatalf("row %d: %q, want %s's with every column", i, row, q)
		}
		var runs []float64
		for _, c := range strings.Split(row[len(row)-1], ", ") {
			runs = append(runs, perCore(c))
		}
		if len(runs) != 3 {
			t.Fatalf("%s: runs column %q, want three figures", q, row[len(row)-1])
		}
		slices.Sort(runs)
		if got := perCore(row[3]); got != runs[1] {
			t.Errorf("%s: events/s per core %v, want the median of %v", q, got, runs)
		}
		for n := 1; n <= 3; n++ {
			if fi, err := os.Stat(filepath.Join(profiles, fmt.Sprintf("%s-heap-%d.prof", q, n))); err != nil || fi.Size() == 0 {
				t.Errorf("profile of run %d of %s: %v", n, q, err)
			}
		}
	}
}
