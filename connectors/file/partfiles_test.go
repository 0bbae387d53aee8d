package file

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
)

func writerContext(subtask, parallelism, attempt int) connector.WriterContext {
	return connector.WriterContext{
		JobID:       "job",
		Subtask:     subtask,
		Parallelism: parallelism,
		Attempt:     attempt,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

func newWriter[T any](t *testing.T, s connector.Sink[T], subtask, parallelism, attempt int) connector.Writer[T] {
	t.Helper()
	w, err := s.NewWriter(writerContext(subtask, parallelism, attempt))
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPartFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	sink := PartFiles(dir, Options{})
	input := [][]string{{"a", "", "b c"}, {"d"}, nil}
	for k, recs := range input {
		w := newWriter(t, sink, k, len(input), 0)
		for _, rec := range recs {
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(true); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"part-00000-0000", "part-00001-0000", "part-00002-0000"}; !slices.Equal(names, want) {
		t.Errorf("files = %q, want %q", names, want)
	}
	for k, want := range []string{"a\n\nb c\n", "d\n", ""} {
		if got := readFile(t, filepath.Join(dir, PartFileName(k, 0))); got != want {
			t.Errorf("part file of subtask %d = %q, want %q", k, got, want)
		}
	}
}

func TestPartFilesBufferedUntilFlush(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, PartFiles(dir, Options{}), 0, 1, 0)
	path := filepath.Join(dir, PartFileName(0, 0))
	w.Write("one")
	if got := readFile(t, path); got != "" {
		t.Errorf("before Flush the file holds %q, want nothing", got)
	}
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "one\n" {
		t.Errorf("after Flush(false) the file holds %q", got)
	}
	w.Write("two")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "one\n" {
		t.Errorf("after Close the file holds %q; records after the last Flush must be dropped", got)
	}
}

func TestPartFilesSmallBuffer(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, PartFiles(dir, Options{BufferSize: 4}), 0, 1, 0)
	var want strings.Builder
	for i := range 100 {
		rec := strings.Repeat(fmt.Sprint(i%10), i%13)
		want.WriteString(rec + "\n")
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, PartFileName(0, 0))); got != want.String() {
		t.Errorf("file = %q, want %q", got, want.String())
	}
}

func TestPartFilesAttempts(t *testing.T) {
	dir := t.TempDir()
	sink := PartFiles(dir, Options{})
	for _, run := range []struct {
		attempt int
		rec     string
	}{{0, "first run"}, {0, "same attempt again"}, {1, "next attempt"}} {
		w := newWriter(t, sink, 1, 2, run.attempt)
		w.Write(run.rec)
		if err := w.Flush(true); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	if got := readFile(t, filepath.Join(dir, "part-00001-0000")); got != "same attempt again\n" {
		t.Errorf("attempt 0 file = %q, want the second run's record only", got)
	}
	if got := readFile(t, filepath.Join(dir, "part-00001-0001")); got != "next attempt\n" {
		t.Errorf("attempt 1 file = %q", got)
	}
}

func TestPartFilesOf(t *testing.T) {
	type wordCount struct {
		word  string
		count int
	}
	dir := t.TempDir()
	sink := PartFilesOf(dir, func(c wordCount) string { return fmt.Sprintf("%s,%d", c.word, c.count) }, Options{})
	w := newWriter(t, sink, 0, 1, 0)
	for _, c := range []wordCount{{"to", 2}, {"be", 2}, {"or", 1}} {
		if err := w.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, filepath.Join(dir, PartFileName(0, 0))), "to,2\nbe,2\nor,1\n"; got != want {
		t.Errorf("file = %q, want %q", got, want)
	}
}

// TestPartFilesReadBack writes with the sink and reads with the source.
func TestPartFilesReadBack(t *testing.T) {
	dir := t.TempDir()
	sink := PartFiles(dir, Options{})
	var want []string
	for k := range 3 {
		w := newWriter(t, sink, k, 3, 0)
		for i := range 5 {
			rec := fmt.Sprintf("subtask %d line %d", k, i)
			want = append(want, rec)
			w.Write(rec)
		}
		if err := w.Flush(true); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	if got := runSource(t, Lines(dir), 1)[0]; !slices.Equal(got, want) {
		t.Errorf("read back %q, want %q", got, want)
	}
}

func TestPartFilesUnwritableDirectory(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, blocker, "")
	dir := filepath.Join(blocker, "out")
	_, err := PartFiles(dir, Options{}).NewWriter(writerContext(0, 1, 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) {
		t.Errorf("NewWriter under a file: err = %v, want one naming directory %q", err, dir)
	}
}

func TestPartFilesReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into directories whatever their mode")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	_, err := PartFiles(dir, Options{}).NewWriter(writerContext(0, 1, 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) {
		t.Errorf("NewWriter in a read-only directory: err = %v, want one naming %q", err, dir)
	}
}

func TestPartFilesClose(t *testing.T) {
	w := newWriter(t, PartFiles(t.TempDir(), Options{}), 0, 1, 0)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Write("x"); !errors.Is(err, errWriterClosed) {
		t.Errorf("Write after Close: err = %v", err)
	}
	if err := w.Flush(true); !errors.Is(err, errWriterClosed) {
		t.Errorf("Flush after Close: err = %v", err)
	}
}

func TestPartFilesIsNotTwoPhase(t *testing.T) {
	sink := PartFiles(t.TempDir(), Options{})
	if _, ok := any(sink).(connector.Committer); ok {
		t.Error("the plain part-file sink is a Committer")
	}
	if _, ok := newWriter(t, sink, 0, 1, 0).(connector.PreCommitter); ok {
		t.Error("the plain part-file writer is a PreCommitter")
	}
}

func TestPartFilesInvalidConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		sink    *PartFileSink[string]
		ctx     connector.WriterContext
		wantErr string
	}{
		{"negative buffer", PartFiles(dir, Options{BufferSize: -1}), writerContext(0, 1, 0), "Options.BufferSize must be in [1,"},
		{"huge buffer", PartFiles(dir, Options{BufferSize: MaxWriteBufferSize + 1}), writerContext(0, 1, 0), "Options.BufferSize"},
		{"nil format", PartFilesOf[string](dir, nil, Options{}), writerContext(0, 1, 0), "non-nil format"},
		{"subtask out of range", PartFiles(dir, Options{}), writerContext(2, 2, 0), "subtask 2 of parallelism 2"},
		{"negative attempt", PartFiles(dir, Options{}), writerContext(0, 1, -1), "attempt -1"},
	}
	for _, tt := range tests {
		if _, err := tt.sink.NewWriter(tt.ctx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	var o Options
	if o.EnsureDefaults(); o.BufferSize != DefaultWriteBufferSize {
		t.Errorf("EnsureDefaults() = %+v", o)
	}
}
