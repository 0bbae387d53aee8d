package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// OwnerLockName is the file, in a job's directory of a file store, that
// the process owning the job's checkpoints holds locked.
const OwnerLockName = ".owner.lock"

// ErrOwned is wrapped by LockJob when another live process owns the job's
// checkpoint directory.
var ErrOwned = errors.New("checkpoint directory in use by another process")

// LocalRoot returns the directory of a file store (through any fault
// wrapper), and false for other stores.
func LocalRoot(s Store) (string, bool) {
	switch st := s.(type) {
	case *fileStore:
		return st.root, true
	case *faultStore:
		return LocalRoot(st.s)
	}
	return "", false
}

// LockJob makes this process the one owner of job's directory in the store
// s, for as long as it holds the returned lock: two processes of one job
// would delete each other's pending files and checkpoints. For a file store
// it takes an exclusive OS lock (flock) on <root>/<job>/.owner.lock, which
// the OS releases when the process dies, and writes there who holds it; a
// second process gets an error wrapping ErrOwned that names the directory
// and the holder. Other stores are not locked (a lease object in object
// storage is not implemented): Release is then a no-op.
func LockJob(s Store, jobID string) (*JobLock, error) {
	root, ok := LocalRoot(s)
	if !ok {
		return &JobLock{}, nil
	}
	dir := filepath.Join(root, filepath.FromSlash(jobID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the job's checkpoint directory: %w", err)
	}
	name := filepath.Join(dir, OwnerLockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the owner lock of the checkpoint directory: %w", err)
	}
	if err := flockExclusive(f); err != nil {
		holder, _ := os.ReadFile(name)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is owned by a running process (%s): two processes of job %q would destroy each other's checkpoints and output; stop that one first, or give this one another checkpoint directory",
			ErrOwned, dir, who, jobID)
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	fmt.Fprintf(f, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	return &JobLock{f: f, dir: dir}, nil
}

// TryLockFile takes an exclusive OS lock (flock) on the file name,
// creating it, without waiting: ok is false when another open file holds
// it (a live process; the OS drops the lock of a dead one). Closing the
// returned file releases the lock.
func TryLockFile(name string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := flockExclusive(f); err != nil {
		f.Close()
		return nil, false, nil
	}
	return f, true, nil
}

// JobLock is the ownership of a job's checkpoint directory.
type JobLock struct {
	f   *os.File
	dir string
}

// Dir is the locked directory ("" for a store that is not locked).
func (l *JobLock) Dir() string { return l.dir }

// Release gives the ownership up. It may be called more than once.
func (l *JobLock) Release() {
	if l.f != nil {
		l.f.Close() // closing the descriptor releases the flock
		l.f = nil
	}
}

// SweepIncomplete removes, from the locked job directory, the checkpoint
// directories without a _metadata (a checkpoint that never completed:
// aborted, or in flight when its process was killed), including those that
// hold only a temporary metadata file, which the store's listing does not
// show. Only the directory's owner may call it: a live writer's checkpoint
// in flight would look the same. It returns the names removed.
func (l *JobLock) SweepIncomplete() ([]string, error) {
	if l.f == nil {
		return nil, nil
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if _, ok := ParseCheckpointDir(e.Name()); !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		if _, err := os.Lstat(filepath.Join(p, MetadataName)); err == nil || !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}
