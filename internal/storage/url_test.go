package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenURLs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url     string
		wantURL string
	}{
		{"memory://", "memory://"},
		{"memory://unit", "memory://unit"},
		{"memory://unit/", "memory://unit"},
		{"memory://unit/a/b/", "memory://unit/a/b"},
		{"file:///var/weir", "file:///var/weir"},
		{"file:///var/weir/", "file:///var/weir"},
		{"file:/var/weir", "file:///var/weir"},
		{"file://localhost/var/weir", "file:///var/weir"},
		{"file:///var/with%20space", "file:///var/with%20space"},
		{"/var/weir", "file:///var/weir"},
		{"/var/weir/../lib", "file:///var/lib"},
		{" /var/weir ", "file:///var/weir"},
		{"ckpt/dir", "file://" + filepath.ToSlash(filepath.Join(wd, "ckpt", "dir"))},
		{"./ckpt", "file://" + filepath.ToSlash(filepath.Join(wd, "ckpt"))},
	}
	t.Cleanup(func() { ForgetMemory("unit") })
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			s, err := Open(tt.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.url, err)
			}
			if got := s.URL(); got != tt.wantURL {
				t.Fatalf("Open(%q).URL() = %q, want %q", tt.url, got, tt.wantURL)
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		url     string
		wantErr string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"s3://", "no bucket"},
		{"hdfs://namenode/ckpt", `unknown scheme "hdfs"`},
		{"gs://bucket", `unknown scheme "gs"`},
		{"file://ckpt/dir", `"ckpt" reads as a host`},
		{"file:ckpt", "a file URL holds an absolute path"},
		{"file:///var/weir?x=1", "no query or fragment"},
		{"memory:x", "starts with memory://"},
		{"memory://.hidden", "memory store name"},
		{"memory://x/../y", "prefix"},
		{"memory://x/a//b", "prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			s, err := Open(tt.url)
			switch {
			case err == nil:
				t.Fatalf("Open(%q) = %s, want an error", tt.url, s.URL())
			case !errors.Is(err, ErrBadURL):
				t.Fatalf("Open(%q) = %v, want it to wrap ErrBadURL", tt.url, err)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Open(%q) = %v, want an error containing %q", tt.url, err, tt.wantErr)
			case !strings.Contains(err.Error(), `"`+tt.url+`"`):
				t.Fatalf("Open(%q) = %v, want the error to name the URL", tt.url, err)
			case !strings.Contains(err.Error(), "file:///ABSOLUTE/PATH"):
				t.Fatalf("Open(%q) = %v, want the error to list the accepted forms", tt.url, err)
			}
		})
	}
}

func TestMemoryRegistry(t *testing.T) {
	name := uniqueMemoryName(t)
	first, err := Open("memory://" + name)
	if err != nil {
		t.Fatal(err)
	}
	put(t, first, "job/chk-1/_metadata", "m1")

	// A job restarted in the same process opens the same URL again.
	again, err := Open("memory://" + name)
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, again, "job/chk-1/_metadata", "m1")

	// A prefix is a view of the same objects.
	sub, err := Open("memory://" + name + "/job")
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, sub, "chk-1/_metadata", "m1")
	put(t, sub, "chk-2/_metadata", "m2")
	mustGet(t, first, "job/chk-2/_metadata", "m2")

	// Other names and private stores are separate.
	other, err := Open("memory://" + name + "-other")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ForgetMemory(name + "-other") })
	mustBeMissing(t, other, "job/chk-1/_metadata")
	private, err := Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	mustBeMissing(t, private, "job/chk-1/_metadata")

	// Forgetting a name starts it afresh.
	ForgetMemory(name)
	fresh, err := Open("memory://" + name)
	if err != nil {
		t.Fatal(err)
	}
	mustBeMissing(t, fresh, "job/chk-1/_metadata")
}

func TestNewFileStoreRejectsRelativeRoot(t *testing.T) {
	if _, err := NewFileStore("relative/dir", OSFS); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Fatalf("NewFileStore(relative) = %v, want an error about the relative path", err)
	}
}
