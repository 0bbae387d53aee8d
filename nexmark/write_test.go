package nexmark

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteJSONFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	counts, err := WriteJSONFile(path, Config{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if counts != (Counts{Persons: 2, Auctions: 6, Bids: 92}) {
		t.Errorf("counts = %+v", counts)
	}
	var want bytes.Buffer
	if _, err := WriteJSON(&want, Config{}, 100); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) || bytes.Count(got, []byte("\n")) != 100 {
		t.Errorf("file holds %d lines, not what WriteJSON writes", bytes.Count(got, []byte("\n")))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, %v; want 0644", fi.Mode(), err)
	}
	if _, err := WriteJSONFile(path, Config{}, 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("zero events: size %d, %v", fi.Size(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
}

func TestWriteJSONFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		path  string
		cfg   Config
		n     int64
		cause error
		msg   string
	}{
		{"negative count", filepath.Join(dir, "x"), Config{}, -1, nil, "the number of events must be >= 0, got -1"},
		{"bad config", filepath.Join(dir, "x"), Config{Rate: -1}, 1, nil, "Config.Rate must be"},
		{"missing directory", filepath.Join(dir, "no", "x"), Config{}, 1, fs.ErrNotExist, "write " + filepath.Join(dir, "no", "x") + ": no such file or directory"},
		{"a directory", dir, Config{}, 1, errIsDir, "is a directory"},
		{"under a file", filepath.Join(file, "x"), Config{}, 1, syscall.ENOTDIR, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WriteJSONFile(tt.path, tt.cfg, tt.n)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tt.msg)
			}
			if tt.cause != nil && (!errors.Is(err, tt.cause) || !errors.Is(errors.Unwrap(err), tt.cause)) {
				t.Errorf("err = %v does not unwrap to %v", err, tt.cause)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("failed writes left %d entries in the directory, want 1", len(entries))
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, syscall.ENOSPC
	}
	w.after--
	return len(p), nil
}

func TestWriteJSONWriteError(t *testing.T) {
	_, err := WriteJSON(&failingWriter{after: 2}, Config{}, 10_000)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("err = %v, want ENOSPC", err)
	}
}
