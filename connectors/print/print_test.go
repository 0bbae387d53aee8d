package print

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
)

func writerContext(subtask, parallelism int) connector.WriterContext {
	return connector.WriterContext{
		JobID:       "job",
		Subtask:     subtask,
		Parallelism: parallelism,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

// printAll writes recs through the writer of one subtask and returns the
// output.
func printAll[T any](t *testing.T, opts Options[T], subtask, parallelism int, recs ...T) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := Sink(&buf, opts).NewWriter(writerContext(subtask, parallelism))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

type point struct{ X, Y int }

func TestPrefixes(t *testing.T) {
	tests := []struct {
		name                 string
		opts                 Options[int]
		subtask, parallelism int
		want                 string
	}{
		{"parallelism one", Options[int]{}, 0, 1, "1\n2\n"},
		{"parallelism above one", Options[int]{}, 2, 4, "3> 1\n3> 2\n"},
		{"identifier", Options[int]{Identifier: "out"}, 0, 1, "out> 1\nout> 2\n"},
		{"identifier and subtask", Options[int]{Identifier: "out"}, 1, 2, "out:2> 1\nout:2> 2\n"},
		{"no prefix", Options[int]{Identifier: "out", NoPrefix: true}, 1, 2, "1\n2\n"},
	}
	for _, tt := range tests {
		if got := printAll(t, tt.opts, tt.subtask, tt.parallelism, 1, 2); got != tt.want {
			t.Errorf("%s: printed %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFormats(t *testing.T) {
	if got, want := printAll(t, Options[point]{}, 0, 1, point{1, 2}, point{-3, 4}), "{1 2}\n{-3 4}\n"; got != want {
		t.Errorf("%%v of structs: printed %q, want %q", got, want)
	}
	if got, want := printAll(t, Options[string]{}, 0, 1, "a", "", "b c"), "a\n\nb c\n"; got != want {
		t.Errorf("strings: printed %q, want %q", got, want)
	}
	format := func(p point) string { return fmt.Sprintf("(%d,%d)", p.X, p.Y) }
	if got, want := printAll(t, Options[point]{Format: format}, 1, 3, point{1, 2}), "2> (1,2)\n"; got != want {
		t.Errorf("Format: printed %q, want %q", got, want)
	}
}

// lineWriter records each Write call.
type lineWriter struct {
	mu     sync.Mutex
	writes []string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// unsafeWriter is a bytes.Buffer, which is not safe for concurrent use: the
// race detector reports any write that the sink does not serialize.
type unsafeWriter struct{ bytes.Buffer }

func TestConcurrentSubtasksWriteWholeLines(t *testing.T) {
	const parallelism, perSubtask = 4, 200
	var out unsafeWriter
	sink := Sink(&out, Options[string]{})
	var want []string
	for k := range parallelism {
		for i := range perSubtask {
			want = append(want, fmt.Sprintf("%d> record %d of subtask %d %s", k+1, i, k, strings.Repeat("x", i)))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, parallelism)
	for k := range parallelism {
		w, err := sink.NewWriter(writerContext(k, parallelism))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer w.Close()
			for i := range perSubtask {
				if err := w.Write(fmt.Sprintf("record %d of subtask %d %s", i, k, strings.Repeat("x", i))); err != nil {
					errs[k] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("printed lines differ from the records: got %d lines, want %d", len(got), len(want))
	}
}

func TestOneWritePerLine(t *testing.T) {
	var w lineWriter
	pw, err := Sink(&w, Options[int]{}).NewWriter(writerContext(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pw.Write(i * 10)
	}
	if want := []string{"1> 0\n", "1> 10\n", "1> 20\n"}; !slices.Equal(w.writes, want) {
		t.Errorf("Write calls = %q, want %q", w.writes, want)
	}
}

func TestFlushFlushesBufferedWriter(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w, err := Sink(bw, Options[int]{}).NewWriter(writerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(7)
	if buf.Len() != 0 {
		t.Fatalf("the bufio.Writer flushed on its own: %q", buf.String())
	}
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "7\n" {
		t.Errorf("after Flush: %q, want %q", got, "7\n")
	}
}

type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, errors.New("disk on fire") }

func TestWriteError(t *testing.T) {
	w, err := Sink(failingWriter{}, Options[int]{}).NewWriter(writerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(1); err == nil || !strings.Contains(err.Error(), "print sink: disk on fire") {
		t.Errorf("Write: err = %v", err)
	}
}

func TestDefaultsToStdout(t *testing.T) {
	if p := Sink[int](nil, Options[int]{}); p.w != os.Stdout {
		t.Errorf("Sink(nil, …) writes to %v, want os.Stdout", p.w)
	}
}

func TestCloseLeavesWriterAlone(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := Sink(f, Options[int]{}).NewWriter(writerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Write(1); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: err = %v", err)
	}
	if _, err := f.WriteString("still open\n"); err != nil {
		t.Errorf("the sink closed its writer: %v", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	if _, err := Sink(nil, Options[int]{Identifier: "a\nb"}).NewWriter(writerContext(0, 1)); err == nil || !strings.Contains(err.Error(), "Options.Identifier") {
		t.Errorf("Identifier with a newline: err = %v", err)
	}
	if _, err := Sink(nil, Options[int]{}).NewWriter(writerContext(1, 1)); err == nil || !strings.Contains(err.Error(), "subtask 1 of parallelism 1") {
		t.Errorf("subtask out of range: err = %v", err)
	}
	if _, ok := any(Sink(nil, Options[int]{})).(connector.Committer); ok {
		t.Error("the print sink is a Committer")
	}
}

// TestWriteBatchIsOneWrite: a batch's lines go out in one call of the
// underlying writer, as Write would print them one by one.
func TestWriteBatchIsOneWrite(t *testing.T) {
	var w lineWriter
	pw, err := Sink(&w, Options[int]{}).NewWriter(writerContext(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	bw := pw.(connector.BatchWriter[int])
	if err := bw.WriteBatch([]int{0, 10, 20}); err != nil {
		t.Fatal(err)
	}
	if err := bw.WriteBatch(nil); err != nil {
		t.Fatal(err)
	}
	pw.Write(30)
	if want := []string{"1> 0\n1> 10\n1> 20\n", "", "1> 30\n"}; !slices.Equal(w.writes, want) {
		t.Errorf("Write calls = %q, want %q", w.writes, want)
	}
	fw, err := Sink(failingWriter{}, Options[int]{}).NewWriter(writerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.(connector.BatchWriter[int]).WriteBatch([]int{1}); err == nil || !strings.Contains(err.Error(), "print sink: disk on fire") {
		t.Errorf("WriteBatch to a failing writer: err = %v", err)
	}
	pw.Close()
	if err := bw.WriteBatch([]int{1}); !errors.Is(err, errClosed) {
		t.Errorf("WriteBatch after Close: err = %v, want %v", err, errClosed)
	}
}
