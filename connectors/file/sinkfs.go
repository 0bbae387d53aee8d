package file

import (
	"io"
	"io/fs"
	"os"
)

// sinkFS is the disk seam of the exactly-once sink: every file-system call
// it makes goes through one, so that tests can inject the failures of a full,
// read-only or flaky disk (root, which runs the tests in CI, ignores file
// modes). Paths are passed as the sink builds them; errors are returned as
// the os package does, as *fs.PathError or *os.LinkError naming the path.
type sinkFS interface {
	MkdirAll(dir string) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Create creates a new file for writing; it fails if path exists.
	Create(path string) (sinkFile, error)
	Rename(from, to string) error
	Remove(path string) error
	Lstat(path string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
}

// sinkFile is a file being written.
type sinkFile interface {
	io.Writer
	Sync() error
	Close() error
}

// osFS is the sinkFS of the real file system.
type osFS struct{}

func (osFS) MkdirAll(dir string) error                 { return os.MkdirAll(dir, 0o755) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
func (osFS) Rename(from, to string) error              { return os.Rename(from, to) }
func (osFS) Remove(path string) error                  { return os.Remove(path) }
func (osFS) Lstat(path string) (fs.FileInfo, error)    { return os.Lstat(path) }

func (osFS) Create(path string) (sinkFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
