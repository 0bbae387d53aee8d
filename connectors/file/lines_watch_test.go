package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
)

type lineSink struct{ lines []string }

func (s *lineSink) Emit(l string)            { s.lines = append(s.lines, l) }
func (s *lineSink) EmitAt(l string, _ int64) { s.lines = append(s.lines, l) }

func watchReaderOf(t *testing.T, src *LinesSource, subtask, par int, splits []connector.SplitState) connector.Reader[string] {
	t.Helper()
	r, err := src.NewReader(connector.ReaderContext{Subtask: subtask, Parallelism: par, Logger: slog.Default(), RequestCheckpoint: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	r.NoMoreSplits()
	return r
}

// pollFor polls r until it has emitted n lines in all, failing after 5s;
// it then polls for a few more watch intervals to catch extra lines.
func pollFor(t *testing.T, r connector.Reader[string], s *lineSink, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	settle := time.Time{}
	for {
		st, err := r.Poll(s)
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.EndOfInput {
			t.Fatal("a watching reader ended")
		}
		if len(s.lines) >= n && settle.IsZero() {
			settle = time.Now().Add(50 * time.Millisecond)
		}
		if !settle.IsZero() && time.Now().After(settle) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("have %d lines of %d after 5s: %q", len(s.lines), n, s.lines)
		}
		if st == connector.NothingAvailable {
			select {
			case <-r.Available():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestWatchFollowsDirectory: new files and appended lines are read while
// the reader runs; a line without its '\n' waits; hidden files are
// skipped; a reader restored from a snapshot neither rereads nor misses.
func TestWatchFollowsDirectory(t *testing.T) {
	dir := t.TempDir()
	src := Lines(dir).WithOptions(LinesOptions{Watch: 5 * time.Millisecond, BufferSize: MinReadBufferSize, BatchSize: 3})
	if src.Boundedness() != connector.Unbounded {
		t.Fatal("a watching source is bounded")
	}
	splits, err := src.Splits(context.Background(), 1)
	if err != nil || len(splits) != 0 {
		t.Fatalf("Splits: %v, %v", splits, err)
	}
	appendFile(t, filepath.Join(dir, "a.txt"), "a1\na2\na3-partial")
	appendFile(t, filepath.Join(dir, ".hidden"), "never\n")
	appendFile(t, filepath.Join(dir, "_SUCCESS"), "never\n")
	r := watchReaderOf(t, src, 0, 1, splits)
	var s lineSink
	pollFor(t, r, &s, 2)
	if !slices.Equal(s.lines, []string{"a1", "a2"}) {
		t.Fatalf("lines %q, want a1 a2 (the partial line waits)", s.lines)
	}
	appendFile(t, filepath.Join(dir, "a.txt"), "-done\na4 a line longer than the sixteen-byte buffer\n")
	appendFile(t, filepath.Join(dir, "b.txt"), "b1\nb2\n")
	pollFor(t, r, &s, 6)
	want := []string{"a1", "a2", "a3-partial-done", "a4 a line longer than the sixteen-byte buffer", "b1", "b2"}
	if !slices.Equal(s.lines, want) {
		t.Fatalf("lines %q, want %q", s.lines, want)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	// While no reader runs: more lines, a new file.
	appendFile(t, filepath.Join(dir, "b.txt"), "b3\n")
	appendFile(t, filepath.Join(dir, "c.txt"), "c1\n")
	r2 := watchReaderOf(t, src, 0, 1, snap)
	var s2 lineSink
	pollFor(t, r2, &s2, 2)
	if !slices.Equal(s2.lines, []string{"b3", "c1"}) {
		t.Fatalf("restored reader read %q, want b3 c1", s2.lines)
	}
}

// TestWatchSpreadsFilesOverSubtasks: readers of two subtasks take
// disjoint files whose union is every file.
func TestWatchSpreadsFilesOverSubtasks(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 20 {
		l := fmt.Sprint("line of f", i)
		appendFile(t, filepath.Join(dir, fmt.Sprintf("f%02d", i)), l+"\n")
		want = append(want, l)
	}
	src := Lines(dir).WithOptions(LinesOptions{Watch: 5 * time.Millisecond})
	var all []string
	for s := range 2 {
		r := watchReaderOf(t, src, s, 2, nil)
		var ls lineSink
		pollFor(t, r, &ls, 1)
		if len(ls.lines) == 20 {
			t.Fatalf("subtask %d took every file", s)
		}
		all = append(all, ls.lines...)
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("subtasks read %q, want %q", all, want)
	}
	// A restore at another parallelism, the files dealt by the owner
	// rule as the runtime deals them: new lines and a file that appeared
	// meanwhile are read once, nothing is read again.
	r := watchReaderOf(t, src, 0, 1, nil)
	var ls lineSink
	pollFor(t, r, &ls, 20)
	snap, _ := r.Snapshot(1)
	if len(snap) != 20 {
		t.Fatalf("snapshot holds %d splits, want one per file (20)", len(snap))
	}
	appendFile(t, filepath.Join(dir, "f03"), "more of f3\n")
	appendFile(t, filepath.Join(dir, "g"), "line of g\n")
	dealt, err := connector.AssignSplits(snap, 3, src.SplitOwner)
	if err != nil {
		t.Fatal(err)
	}
	var again []string
	for s := range 3 {
		r := watchReaderOf(t, src, s, 3, dealt[s])
		var ls lineSink
		pollFor(t, r, &ls, 0)
		again = append(again, ls.lines...)
	}
	slices.Sort(again)
	if !slices.Equal(again, []string{"line of g", "more of f3"}) {
		t.Fatalf("restored at parallelism 3, read %q, want the new lines only", again)
	}
	// A file dealt to a reader that does not own it is refused: its
	// owner would read it too.
	r3, _ := src.NewReader(connector.ReaderContext{Subtask: 0, Parallelism: 3, Logger: slog.Default()})
	defer r3.Close()
	if err := r3.AddSplits(dealt[1]); err == nil || !strings.Contains(err.Error(), "owner rule") {
		t.Fatalf("a file dealt to the wrong subtask: %v", err)
	}
	// The one split per reader of an earlier version is refused at
	// another parallelism, not guessed at.
	legacy := connector.SplitState{ID: "watch:" + dir + ":0",
		Data: fmt.Appendf(nil, `{"dir":%q,"subtask":0,"parallelism":1}`, dir), Position: []byte{0}}
	r2, _ := src.NewReader(connector.ReaderContext{Subtask: 0, Parallelism: 2, Logger: slog.Default()})
	defer r2.Close()
	if err := r2.AddSplits([]connector.SplitState{legacy}); err == nil || !strings.Contains(err.Error(), "parallelism") {
		t.Fatalf("restore of a legacy split at another parallelism: %v", err)
	}
	r1, _ := src.NewReader(connector.ReaderContext{Subtask: 0, Parallelism: 1, Logger: slog.Default()})
	defer r1.Close()
	if err := r1.AddSplits([]connector.SplitState{legacy}); err != nil {
		t.Fatalf("restore of a legacy split at its parallelism: %v", err)
	}
}

// TestWatchChangedFiles: truncated, replaced and renamed files fail the
// reader with an error naming the file, or are read again as new files.
func TestWatchChangedFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		err    string
		again  []string // lines read after the change with ChangeIsNewFile
	}{
		{"truncated", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "a"), "x\n") }, "was truncated", []string{"x"}},
		{"replaced", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "new"), "n1\nn2\nn3\n")
			os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "a"))
		}, "was replaced", []string{"n1", "n2", "n3"}},
		{"renamed", func(t *testing.T, dir string) { os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")) }, "was renamed", []string{"1", "2"}},
	} {
		for _, mode := range []OnChange{ChangeFails, ChangeIsNewFile} {
			t.Run(fmt.Sprint(tc.name, mode), func(t *testing.T) {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "a"), "1\n2\n")
				src := Lines(dir).WithOptions(LinesOptions{Watch: 5 * time.Millisecond, OnChange: mode})
				r := watchReaderOf(t, src, 0, 1, nil)
				var s lineSink
				pollFor(t, r, &s, 2)
				tc.change(t, dir)
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) {
					_, err := r.Poll(&s)
					if mode == ChangeFails && err != nil {
						if !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), dir) {
							t.Fatalf("error %q does not say %q and name the file", err, tc.err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if mode == ChangeIsNewFile && len(s.lines) >= 2+len(tc.again) {
						if !slices.Equal(s.lines[2:], tc.again) {
							t.Fatalf("after the change: %q, want %q", s.lines[2:], tc.again)
						}
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatalf("no outcome after 5s; lines %q", s.lines)
			})
		}
	}
}

// TestWatchBadDirectory: a missing path, a file, a directory that
// vanishes, a bad glob.
func TestWatchBadDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeFile(t, file, "x\n")
	opts := LinesOptions{Watch: time.Millisecond}
	if _, err := Lines(filepath.Join(dir, "nope")).WithOptions(opts).Splits(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing: %v", err)
	}
	if _, err := Lines(file).WithOptions(opts).Splits(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("file: %v", err)
	}
	if _, err := Lines(dir).WithOptions(LinesOptions{Watch: time.Millisecond, Glob: "["}).Splits(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "Glob") {
		t.Fatalf("bad glob: %v", err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	r := watchReaderOf(t, Lines(sub).WithOptions(opts), 0, 1, nil)
	var s lineSink
	if _, err := r.Poll(&s); err != nil {
		t.Fatal(err)
	}
	os.Remove(sub)
	time.Sleep(5 * time.Millisecond)
	_, err := r.Poll(&s)
	if err == nil || !strings.Contains(err.Error(), "no longer exists") || !strings.Contains(err.Error(), sub) {
		t.Fatalf("vanished: %v", err)
	}
}

// TestWatchGlob reads only the matching files.
func TestWatchGlob(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.log"), "yes\n")
	writeFile(t, filepath.Join(dir, "b.txt"), "no\n")
	writeFile(t, filepath.Join(dir, ".c.log"), "hidden but matching\n")
	r := watchReaderOf(t, Lines(dir).WithOptions(LinesOptions{Watch: time.Millisecond, Glob: "*.log"}), 0, 1, nil)
	var s lineSink
	pollFor(t, r, &s, 1)
	if !slices.Equal(s.lines, []string{"yes"}) {
		t.Fatalf("lines %q", s.lines)
	}
}
