package storage

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// acceptedForms ends every error about a storage URL.
const acceptedForms = "accepted: memory://NAME[/PREFIX], memory:// (a private store), file:///ABSOLUTE/PATH, a plain file system path, or s3://BUCKET[/PREFIX][?endpoint=HOST:PORT&secure=false&pathstyle=true]"

// Open returns the store a checkpoint-storage URL names:
//
//   - memory://NAME[/PREFIX]: the process-wide memory store NAME (created
//     empty on first use, shared by every later Open of NAME, so that a job
//     restarted in the same process finds its checkpoints), seen under
//     PREFIX if given;
//   - memory:// alone: a fresh private memory store;
//   - file:///abs/path (or file:/abs/path): files under /abs/path;
//   - a plain path, absolute or relative to the working directory: the
//     same as its file URL;
//   - s3://BUCKET[/PREFIX][?PARAMS]: the objects of an existing bucket,
//     under the key prefix PREFIX (NewS3Store). The options come from the
//     environment (S3OptionsFromEnv; credentials from the credential
//     chain), overridden by the parameters: endpoint=HOST[:PORT] (or
//     http(s)://HOST[:PORT]), region=R, secure=true|false,
//     pathstyle=true|false, partsize=BYTES (or 16MiB), parallel=N.
//
// Open does no I/O: a file store's directory is created by its first
// Commit, and an s3 store first talks to the service when it is used.
func Open(rawURL string) (Store, error) {
	loc, err := parseLocation(rawURL)
	if err != nil {
		return nil, err
	}
	return loc.open()
}

// location is a parsed storage URL: a memory store and a prefix in it, or a
// file system path.
type location struct {
	memory  bool
	private bool   // memory:// alone
	name    string // memory store name
	prefix  string // clean prefix inside the memory store
	path    string // absolute OS path of a file store
	s3      *s3Location
}

func badURL(rawURL, why string) error {
	return fmt.Errorf("%w %q: %s; %s", ErrBadURL, rawURL, why, acceptedForms)
}

func parseLocation(rawURL string) (location, error) {
	s := strings.TrimSpace(rawURL)
	switch {
	case s == "":
		return location{}, badURL(rawURL, "empty")
	case filepath.IsAbs(s):
		return location{path: filepath.Clean(s)}, nil
	case strings.HasPrefix(s, "memory:"):
		return parseMemory(rawURL, s)
	case strings.HasPrefix(s, "file:"):
		return parseFile(rawURL, s)
	case strings.HasPrefix(s, "s3:"):
		return parseS3(rawURL, s, os.Getenv)
	case strings.Contains(s, "://"):
		return location{}, badURL(rawURL, fmt.Sprintf("unknown scheme %q", s[:strings.Index(s, "://")]))
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	return location{path: abs}, nil
}

func parseMemory(rawURL, s string) (location, error) {
	rest, ok := strings.CutPrefix(s, "memory://")
	if !ok {
		return location{}, badURL(rawURL, "a memory URL starts with memory://")
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return location{memory: true, private: true}, nil
	}
	name, prefix, _ := strings.Cut(rest, "/")
	if err := validName(name); err != nil {
		return location{}, badURL(rawURL, fmt.Sprintf("memory store name %q: %v", name, err))
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	return location{memory: true, name: name, prefix: p}, nil
}

func parseFile(rawURL, s string) (location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	switch {
	case u.Opaque != "":
		return location{}, badURL(rawURL, "a file URL holds an absolute path (file:///abs/path)")
	case u.Host != "" && u.Host != "localhost":
		return location{}, badURL(rawURL, fmt.Sprintf("a file URL holds an absolute path, but %q reads as a host: write file:///%s%s for an absolute path, or a plain relative path without file://", u.Host, u.Host, u.Path))
	case u.RawQuery != "" || u.Fragment != "":
		return location{}, badURL(rawURL, "a file URL takes no query or fragment")
	}
	p := filepath.FromSlash(u.Path)
	if len(u.Path) >= 3 && u.Path[0] == '/' && u.Path[2] == ':' { // file:///C:/x on Windows
		p = filepath.FromSlash(u.Path[1:])
	}
	if !filepath.IsAbs(p) {
		return location{}, badURL(rawURL, "a file URL holds an absolute path (file:///abs/path)")
	}
	return location{path: filepath.Clean(p)}, nil
}

func (l location) open() (Store, error) {
	switch {
	case l.s3 != nil:
		return newS3Store(*l.s3)
	case l.private:
		return NewMemoryStore(), nil
	case l.memory:
		u := "memory://" + l.name
		if l.prefix != "" {
			u += "/" + l.prefix
		}
		return &memStore{objs: namedMemObjects(l.name), prefix: l.prefix, url: u}, nil
	}
	return NewFileStore(l.path, OSFS)
}

// parent splits a location into that of its parent directory and its last
// component; ok is false at the root of a store.
func (l location) parent() (parent location, base string, ok bool) {
	switch {
	case l.s3 != nil:
		if l.s3.prefix == "" {
			return l, "", false
		}
		i := strings.LastIndex(l.s3.prefix, "/")
		s3 := *l.s3
		s3.prefix = l.s3.prefix[:max(i, 0)]
		return location{s3: &s3}, l.s3.prefix[i+1:], true
	case l.private:
		return l, "", false
	case l.memory:
		if l.prefix == "" {
			return l, "", false
		}
		i := strings.LastIndex(l.prefix, "/")
		p := l
		p.prefix = l.prefix[:max(i, 0)]
		return p, l.prefix[i+1:], true
	}
	dir, base := filepath.Split(l.path)
	if base == "" {
		return l, "", false
	}
	p := l
	p.path = filepath.Clean(dir)
	return p, base, true
}
