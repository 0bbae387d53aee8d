package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Store is a flat store of immutable objects with slash-separated names, in
// the manner of an object store: the least that a local directory, memory
// and S3 can all offer with the same meaning.
//
// Names are relative ("job/chk-3/_metadata"): non-empty components separated
// by single slashes, none of them "." or "..", none starting with "." (the
// file store hides its temporary files behind that rule), no backslash or
// NUL. A name must not be both an object and a prefix of other objects
// ("a" and "a/b"): object stores allow it, file systems do not.
//
// Prefixes are directories: List("job/chk-1") and DeletePrefix("job/chk-1")
// see "job/chk-1/…" but never "job/chk-10/…". A trailing slash is optional;
// the empty prefix is the whole store.
//
// Objects appear only whole: a reader sees either no object or all the bytes
// of one Commit. Implementations are safe for concurrent use; concurrent
// Commits to the same name leave one of them.
type Store interface {
	// Create returns a writer for the object name. Nothing is visible until
	// Commit, which publishes all the bytes written, atomically and durably,
	// replacing any object of that name; Abort discards them. The writer
	// honours ctx: Commit fails once ctx is done.
	Create(ctx context.Context, name string) (ObjectWriter, error)

	// Open returns the content of the object. The error wraps ErrNotFound
	// when there is no such object. The caller closes the reader.
	Open(ctx context.Context, name string) (io.ReadCloser, error)

	// Stat returns the size of the object in bytes, or an error wrapping
	// ErrNotFound.
	Stat(ctx context.Context, name string) (size int64, err error)

	// List returns the names of all objects under the directory prefix, at
	// any depth, sorted. It never returns uncommitted objects. A prefix with
	// no objects gives an empty list, not an error.
	List(ctx context.Context, prefix string) ([]string, error)

	// Delete removes the object. A missing object is not an error.
	Delete(ctx context.Context, name string) error

	// DeletePrefix removes every object under the directory prefix. The
	// empty prefix is refused, so that a bug cannot wipe the whole store.
	DeletePrefix(ctx context.Context, prefix string) error

	// URL says where the store is, in the form Open accepts
	// ("file:///var/weir", "memory://tests/job"). A private memory store says
	// "memory://", which cannot be opened again.
	URL() string
}

// ObjectWriter receives the bytes of one object being created. It is not safe
// for concurrent use. Exactly one of Commit and Abort takes effect; calling
// Abort after Commit is a no-op, so `defer w.Abort()` is the safe idiom.
type ObjectWriter interface {
	io.Writer
	// Commit publishes the object (see Store.Create). On error the object is
	// not visible, unless the store cannot know (then Open tells).
	Commit() error
	// Abort discards what was written.
	Abort() error
}

// Sentinel errors callers branch on.
var (
	// ErrNotFound is wrapped by Open, Stat and the reads built on them when
	// the object does not exist.
	ErrNotFound = errors.New("storage: object not found")

	// ErrInvalidName is wrapped by every operation given a name or prefix
	// that breaks the rules of Store.
	ErrInvalidName = errors.New("storage: invalid object name")

	// ErrClosed is returned by an ObjectWriter used after Commit or Abort.
	ErrClosed = errors.New("storage: object writer already committed or aborted")

	// ErrBadURL is wrapped by Open (and ResolveRestore) for a URL that names
	// no store.
	ErrBadURL = errors.New("storage: bad storage URL")
)

// validName checks an object name against the rules of Store.
func validName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if strings.ContainsAny(name, "\\\x00") {
		return fmt.Errorf("%w %q: backslash or NUL", ErrInvalidName, name)
	}
	for part := range strings.SplitSeq(name, "/") {
		switch {
		case part == "":
			return fmt.Errorf("%w %q: empty component (leading, trailing or double slash)", ErrInvalidName, name)
		case strings.HasPrefix(part, "."):
			return fmt.Errorf("%w %q: component %q starts with a dot", ErrInvalidName, name, part)
		}
	}
	return nil
}

// cleanPrefix checks a directory prefix and returns it without its trailing
// slash; "" stands for the whole store.
func cleanPrefix(prefix string) (string, error) {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return "", nil
	}
	if err := validName(p); err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	return p, nil
}

// under reports whether name lies in the directory prefix (clean, "" = all).
func under(name, prefix string) bool {
	return prefix == "" || strings.HasPrefix(name, prefix+"/")
}

// join joins a clean prefix and a name, either of which may be empty.
func join(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	}
	return prefix + "/" + name
}
