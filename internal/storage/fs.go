package storage

import (
	"io"
	"io/fs"
	"os"
)

// FS is the seam between the file store and the disk: the few file-system
// operations it needs, so that tests can put a fault-injecting wrapper
// (NewFaultFS) between them. Names are OS paths. Implementations are safe for
// concurrent use.
type FS interface {
	// Create creates a new file for writing; it fails if name exists.
	Create(name string) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	// Rename atomically replaces newname by oldname.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it; a missing name is not
	// an error.
	RemoveAll(name string) error
	// ReadDir returns the entries of a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(name string, perm fs.FileMode) error
	// Stat describes a file or directory.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of a directory durable (after a create,
	// rename or remove in it).
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes the file's content durable.
	Sync() error
	Stat() (fs.FileInfo, error)
}

// OSFS is the FS of the operating system.
var OSFS FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

func (osFS) Open(name string) (File, error) { return os.Open(name) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(name string) error { return os.RemoveAll(name) }

func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
