package file

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readLines runs Lines(path) with one subtask and returns its lines.
func readLines(t *testing.T, src *LinesSource) []string {
	t.Helper()
	return runSource(t, src, 1)[0]
}

func TestLinesContent(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{"empty file", "", nil},
		{"lf", "a\nbb\nccc\n", []string{"a", "bb", "ccc"}},
		{"no final newline", "a\nbb", []string{"a", "bb"}},
		{"crlf", "a\r\nbb\r\n", []string{"a", "bb"}},
		{"crlf without final newline", "a\r\nbb\r", []string{"a", "bb"}},
		{"only one cr dropped", "a\r\r\n", []string{"a\r"}},
		{"cr inside a line", "a\rb\n", []string{"a\rb"}},
		{"one empty line", "\n", []string{""}},
		{"empty lines", "\n\na\n\n\nb\n\n", []string{"", "", "a", "", "", "b", ""}},
		{"empty crlf lines", "\r\n\r\n", []string{"", ""}},
		{"utf-8", "héllo\n世界\n", []string{"héllo", "世界"}},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{0, MinReadBufferSize} {
			path := filepath.Join(t.TempDir(), "in.txt")
			writeFile(t, path, tt.content)
			got := readLines(t, Lines(path).WithOptions(LinesOptions{BufferSize: bufSize}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s (buffer %d): lines = %q, want %q", tt.name, bufSize, got, tt.want)
			}
		}
	}
}

// trickyLines are lines around the 16-byte minimum buffer, with CRLF and
// empty lines, and a last line without newline.
var trickyLines = []string{
	"", "a", strings.Repeat("b", 14), strings.Repeat("c", 15), strings.Repeat("d", 16),
	strings.Repeat("e", 17), "", strings.Repeat("f", 31), strings.Repeat("g", 33),
	strings.Repeat("h", 100), "i", strings.Repeat("j", 1000), "", strings.Repeat("k", 50),
}

// trickyContent joins trickyLines, some with CRLF, and returns the content
// with the byte offset at which each line starts (and, last, the size).
func trickyContent() (string, []int64) {
	var b strings.Builder
	var offsets []int64
	for i, l := range trickyLines {
		offsets = append(offsets, int64(b.Len()))
		b.WriteString(l)
		switch {
		case i == len(trickyLines)-1: // no final newline
		case i%3 == 1:
			b.WriteString("\r\n")
		default:
			b.WriteString("\n")
		}
	}
	return b.String(), append(offsets, int64(b.Len()))
}

func TestLinesLongerThanBuffer(t *testing.T) {
	content, _ := trickyContent()
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, content)
	for _, bufSize := range []int{MinReadBufferSize, 17, 64, 0} {
		got := readLines(t, Lines(path).WithOptions(LinesOptions{BufferSize: bufSize}))
		if !slices.Equal(got, trickyLines) {
			t.Errorf("buffer %d: lines = %q, want %q", bufSize, got, trickyLines)
		}
	}
}

// TestLinesRestoreEveryCut snapshots after every line and checks that the
// position is the byte offset of the next line and that a reader restored
// from it continues exactly.
func TestLinesRestoreEveryCut(t *testing.T) {
	content, offsets := trickyContent()
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, content)
	src := Lines(path).WithOptions(LinesOptions{BufferSize: MinReadBufferSize, BatchSize: 1})
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(trickyLines); cut++ {
		r := newReader(t, src, 0, 1, splits)
		var e sliceEmitter[string]
		if _, err := pollUntil(r, &e, cut); err != nil {
			t.Fatal(err)
		}
		snap, err := r.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		if cut == len(trickyLines) {
			if len(snap) != 0 {
				t.Errorf("snapshot after the last line = %v, want none (the split is finished)", snap)
			}
		} else if len(snap) != 1 || snap[0].ID != path || string(snap[0].Data) != path ||
			int64(binary.BigEndian.Uint64(snap[0].Position)) != offsets[cut] {
			t.Fatalf("cut %d: snapshot = %+v, want split %q at offset %d", cut, snap, path, offsets[cut])
		}
		tail, err := drain(r)
		if err != nil {
			t.Fatal(err)
		}
		restored, err := drain(newReader(t, src, 0, 1, snap))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slices.Concat(e.recs, tail), trickyLines) {
			t.Errorf("cut %d: head %q + tail %q is not the file", cut, e.recs, tail)
		}
		if want := trickyLines[cut:]; !slices.Equal(restored, want) {
			t.Errorf("cut %d: restored %q, want %q", cut, restored, want)
		}
	}
}

func TestLinesDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.txt"), "b1\nb2\n")
	writeFile(t, filepath.Join(dir, "a.txt"), "a1\na2\na3")
	writeFile(t, filepath.Join(dir, "c"), "c1\n")
	writeFile(t, filepath.Join(dir, ".hidden"), "hidden\n")
	writeFile(t, filepath.Join(dir, "_SUCCESS"), "")
	writeFile(t, filepath.Join(dir, "empty"), "")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "x.txt"), "nested\n")
	outside := filepath.Join(t.TempDir(), "target")
	writeFile(t, outside, "linked\n")
	if err := os.Symlink(outside, filepath.Join(dir, "d-link")); err != nil {
		t.Fatal(err)
	}

	src := Lines(dir)
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var wantIDs []string
	for _, n := range []string{"a.txt", "b.txt", "c", "d-link", "empty"} {
		wantIDs = append(wantIDs, filepath.Join(dir, n))
	}
	if got := splitIDs(splits); !slices.Equal(got, wantIDs) {
		t.Errorf("split IDs = %q, want %q", got, wantIDs)
	}
	for _, s := range splits {
		if string(s.Data) != s.ID || s.Position != nil {
			t.Errorf("split %q: Data %q, Position %v; want the path and no position", s.ID, s.Data, s.Position)
		}
	}
	got := runSplits(t, src, 2, splits)
	want := [][]string{{"a1", "a2", "a3", "c1"}, {"b1", "b2", "linked"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("lines per subtask = %q, want %q", got, want)
	}
}

func TestLinesSnapshotAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1"), "x1\nx2\n")
	writeFile(t, filepath.Join(dir, "2"), "y1\ny2\ny3\n")
	writeFile(t, filepath.Join(dir, "3"), "z1\n")
	src := Lines(dir).WithOptions(LinesOptions{BatchSize: 3})
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e sliceEmitter[string]
	if st, err := r.Poll(&e); st != connector.MoreAvailable || err != nil {
		t.Fatalf("Poll = %v, %v", st, err)
	}
	if want := []string{"x1", "x2", "y1"}; !slices.Equal(e.recs, want) {
		t.Fatalf("first Poll = %q, want %q", e.recs, want)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := splitIDs(snap), []string{filepath.Join(dir, "2"), filepath.Join(dir, "3")}; !slices.Equal(got, want) {
		t.Errorf("snapshot splits = %q, want %q (file 1 is finished)", got, want)
	}
	if got := binary.BigEndian.Uint64(snap[0].Position); got != 3 {
		t.Errorf("file 2 position = %d, want 3", got)
	}
	if snap[1].Position == nil || binary.BigEndian.Uint64(snap[1].Position) != 0 {
		t.Errorf("file 3 position = %v, want offset 0", snap[1].Position)
	}
	restored, err := drain(newReader(t, src, 0, 1, snap))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"y2", "y3", "z1"}; !slices.Equal(restored, want) {
		t.Errorf("restored = %q, want %q", restored, want)
	}
}

func TestLinesEndsWithItsLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "a\nb\n")
	src := Lines(path)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e sliceEmitter[string]
	if st, err := r.Poll(&e); st != connector.EndOfInput || err != nil {
		t.Errorf("Poll = %v, %v; want EndOfInput in the Poll that emits the last line", st, err)
	}
	if want := []string{"a", "b"}; !slices.Equal(e.recs, want) {
		t.Errorf("lines = %q, want %q", e.recs, want)
	}
}

func TestLinesEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "_SUCCESS"), "")
	splits, err := Lines(dir).Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 0 {
		t.Errorf("splits = %v, want none", splits)
	}
	if got := runSource(t, Lines(dir), 2); !slices.EqualFunc(got, [][]string{nil, nil}, slices.Equal) {
		t.Errorf("lines = %q, want none", got)
	}
}

func TestLinesMissingPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope")
	_, err := Lines(path).Splits(t.Context(), 1)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Splits: err = %v, want one saying %q does not exist", err, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Splits: err = %v, want it to wrap fs.ErrNotExist", err)
	}
}

func TestLinesNotAFile(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip("no /dev/null")
	}
	_, err := Lines("/dev/null").Splits(t.Context(), 1)
	if err == nil || !strings.Contains(err.Error(), "neither a regular file nor a directory") {
		t.Errorf("Splits(/dev/null): err = %v", err)
	}
}

func TestLinesFileGoneAtPoll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "a\n")
	src := Lines(path)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = drain(newReader(t, src, 0, 1, splits))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Poll of a removed file: err = %v, want one naming %q", err, path)
	}
}

func TestLinesUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "a\n")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	src := Lines(path)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatalf("Splits must not open files: %v", err)
	}
	_, err = drain(newReader(t, src, 0, 1, splits))
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Poll of an unreadable file: err = %v, want a permission error naming %q", err, path)
	}
}

func TestLinesUnreadableFileAsRoot(t *testing.T) {
	// A directory where a file was is unreadable as a file for root too.
	dir := t.TempDir()
	path := filepath.Join(dir, "in.txt")
	writeFile(t, path, "a\n")
	src := Lines(dir)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = drain(newReader(t, src, 0, 1, splits))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Poll of a directory: err = %v, want one naming %q", err, path)
	}
}

func TestLinesFileShorterThanPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "aaaa\nbbbb\ncccc\n")
	src := Lines(path).WithOptions(LinesOptions{BatchSize: 2})
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e sliceEmitter[string]
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "aa\n")
	_, err = drain(newReader(t, src, 0, 1, snap))
	if err == nil || !strings.Contains(err.Error(), "fewer than the offset 10") || !strings.Contains(err.Error(), path) {
		t.Errorf("restore into a truncated file: err = %v", err)
	}
}

func TestLinesMalformedSplits(t *testing.T) {
	tests := []struct {
		name    string
		split   connector.SplitState
		wantErr string
	}{
		{"no data", connector.SplitState{ID: "f"}, `split "f": Data is empty, want a file path`},
		{"short position", connector.SplitState{ID: "f", Data: []byte("/f"), Position: []byte{1, 2, 3}}, `split "f": Position has 3 bytes, want 8`},
		{"negative offset", connector.SplitState{ID: "f", Data: []byte("/f"), Position: binary.BigEndian.AppendUint64(nil, 1<<63)}, `split "f": negative offset`},
		{"duplicate", connector.SplitState{ID: "/a", Data: []byte("/a")}, `split "/a" assigned twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Lines("/").NewReader(readerContext(0, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			good := connector.SplitState{ID: "/a", Data: []byte("/a")}
			err = r.AddSplits([]connector.SplitState{good, tt.split})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("AddSplits: err = %v, want one containing %q", err, tt.wantErr)
			}
			if snap, _ := r.Snapshot(1); len(snap) != 0 {
				t.Errorf("after a failed AddSplits the reader holds %v", splitIDs(snap))
			}
		})
	}
}

func TestLinesOptionsValidate(t *testing.T) {
	tests := []struct {
		opts    LinesOptions
		wantErr string
	}{
		{LinesOptions{}, ""},
		{LinesOptions{BufferSize: MinReadBufferSize, BatchSize: 1}, ""},
		{LinesOptions{BufferSize: MinReadBufferSize - 1}, "LinesOptions.BufferSize must be in [16,"},
		{LinesOptions{BufferSize: -1}, "LinesOptions.BufferSize"},
		{LinesOptions{BufferSize: MaxReadBufferSize + 1}, "LinesOptions.BufferSize"},
		{LinesOptions{BatchSize: -1}, "LinesOptions.BatchSize must be in [1, 65536]"},
		{LinesOptions{BatchSize: MaxBatchSize + 1}, "LinesOptions.BatchSize"},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v.Validate() = %v, want %q", tt.opts, err, tt.wantErr)
		}
	}
	src := Lines(t.TempDir()).WithOptions(LinesOptions{BatchSize: -1})
	if _, err := src.Splits(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "BatchSize") {
		t.Errorf("Splits with a bad BatchSize: err = %v", err)
	}
	if _, err := src.NewReader(readerContext(0, 1)); err == nil || !strings.Contains(err.Error(), "BatchSize") {
		t.Errorf("NewReader with a bad BatchSize: err = %v", err)
	}
	var o LinesOptions
	if o.EnsureDefaults(); o.BufferSize != DefaultReadBufferSize || o.BatchSize != DefaultBatchSize {
		t.Errorf("EnsureDefaults() = %+v", o)
	}
}

func TestLinesWaitForSplitsAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "a\n")
	src := Lines(path)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	var e sliceEmitter[string]
	if st, err := r.Poll(&e); st != connector.NothingAvailable || err != nil {
		t.Fatalf("Poll without splits = %v, %v; want NothingAvailable", st, err)
	}
	ch := r.Available()
	select {
	case <-ch:
		t.Fatal("Available is ready before any split")
	default:
	}
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	<-ch
	r.NoMoreSplits()
	if st, err := r.Poll(&e); st != connector.EndOfInput || err != nil || !slices.Equal(e.recs, []string{"a"}) {
		t.Errorf("Poll = %v, %v, %q; want EndOfInput, a", st, err, e.recs)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Poll(&e); err == nil {
		t.Error("Poll after Close: no error")
	}
}

func TestLinesCloseMidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	writeFile(t, path, "a\nb\nc\n")
	src := Lines(path).WithOptions(LinesOptions{BatchSize: 1})
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	var e sliceEmitter[string]
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	lr := r.(*linesReader)
	f := lr.file
	if f == nil {
		t.Fatal("no open file mid-split")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the split's file is still open after Close (closing it again gave %v)", err)
	}
}
