package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// fileWriteBuffer is the buffer of a file store's object writer: state files
// are written in many small pieces.
const fileWriteBuffer = 64 << 10

// NewFileStore returns a Store keeping each object as a file under the
// absolute directory root, through fsys (OSFS, or a NewFaultFS wrapper in
// tests). Nothing is touched on disk before the first operation; directories
// are created as objects are committed.
//
// An object is written to a temporary file in its final directory (named
// ".<name>.tmp-<random>", which List never shows), synced, renamed into
// place, and the directory is synced: a crash leaves either the whole object
// or none of it, and a committed object survives a power loss. Temporary
// files of writers that crashed stay behind until their directory is
// removed.
func NewFileStore(root string, fsys FS) (Store, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: file store root %q is not an absolute path", ErrBadURL, root)
	}
	if fsys == nil {
		fsys = OSFS
	}
	root = filepath.Clean(root)
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(root)}
	if !strings.HasPrefix(u.Path, "/") { // a Windows volume: file:///C:/x
		u.Path = "/" + u.Path
	}
	return &fileStore{root: root, fs: fsys, url: u.String()}, nil
}

type fileStore struct {
	root string
	fs   FS
	url  string
}

var _ Store = (*fileStore)(nil)

func (s *fileStore) URL() string { return s.url }

func (s *fileStore) path(name string) string {
	return filepath.Join(s.root, filepath.FromSlash(name))
}

// notExist reports errors that mean "no such object": a missing file, or a
// component of the path that is a file rather than a directory.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (s *fileStore) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	final := s.path(name)
	dir := filepath.Dir(final)
	if err := s.mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%016x", filepath.Base(final), rand.Uint64()))
	f, err := s.fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return &fileWriter{store: s, ctx: ctx, name: name, final: final, tmp: tmp, f: f,
		w: bufio.NewWriterSize(f, fileWriteBuffer)}, nil
}

// mkdirAll creates dir and its missing parents, and syncs the parent of each
// directory it created, so that the path of a committed object is as durable
// as the object.
func (s *fileStore) mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := s.fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := s.fs.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func (s *fileStore) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	f, err := s.fs.Open(s.path(name))
	if notExist(err) {
		return nil, fmt.Errorf("open %s/%s: %w", s.url, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("open %s/%s: a directory: %w", s.url, name, ErrNotFound)
	}
	return f, nil
}

func (s *fileStore) Stat(ctx context.Context, name string) (int64, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	fi, err := s.fs.Stat(s.path(name))
	if notExist(err) {
		return 0, fmt.Errorf("stat %s/%s: %w", s.url, name, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("stat %s/%s: a directory: %w", s.url, name, ErrNotFound)
	}
	return fi.Size(), nil
}

func (s *fileStore) List(ctx context.Context, prefix string) ([]string, error) {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var names []string
	if err := s.walk(ctx, p, &names); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.Sort(names) // "a.x" sorts before "a/b": the walk's order is not the string order
	return names, nil
}

// walk appends the names of the objects under the directory rel.
func (s *fileStore) walk(ctx context.Context, rel string, names *[]string) error {
	entries, err := s.fs.ReadDir(s.path(rel))
	if notExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") { // temporary files, and nothing of ours
			continue
		}
		name := join(rel, e.Name())
		if !e.IsDir() {
			*names = append(*names, name)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.walk(ctx, name, names); err != nil {
			return err
		}
	}
	return nil
}

func (s *fileStore) Delete(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	p := s.path(name)
	fi, err := s.fs.Stat(p)
	switch {
	case notExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s: %w", name, err)
	case fi.IsDir():
		return nil // a directory is no object
	}
	if err := s.fs.Remove(p); err != nil && !notExist(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

func (s *fileStore) DeletePrefix(ctx context.Context, prefix string) error {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return err
	}
	if p == "" {
		return fmt.Errorf("%w: DeletePrefix of the whole store refused", ErrInvalidName)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	if err := s.fs.RemoveAll(s.path(p)); err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	return nil
}

type fileWriter struct {
	store *fileStore
	ctx   context.Context
	name  string
	final string
	tmp   string
	f     File
	w     *bufio.Writer
	done  bool
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	return w.w.Write(p)
}

func (w *fileWriter) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	if err := w.commit(); err != nil {
		return fmt.Errorf("commit %s: %w", w.name, err)
	}
	return nil
}

func (w *fileWriter) commit() error {
	fsys := w.store.fs
	err := w.ctx.Err()
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(w.tmp, w.final)
	}
	if err != nil {
		_ = fsys.Remove(w.tmp) // best effort: a leftover is invisible anyway
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(w.final)); err != nil {
		// The rename may not survive a crash; take the object back so that
		// an error means "not committed" wherever we can make it so.
		_ = fsys.Remove(w.final)
		return err
	}
	return nil
}

func (w *fileWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	cerr := w.f.Close()
	if err := w.store.fs.Remove(w.tmp); err != nil && !notExist(err) {
		return fmt.Errorf("abort %s: %w", w.name, err)
	}
	if cerr != nil {
		return fmt.Errorf("abort %s: %w", w.name, cerr)
	}
	return nil
}
