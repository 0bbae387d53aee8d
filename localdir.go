package weir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/weirstream/weir/internal/storage"
)

// localDir is the directory of this process's local state (pebble's
// working files, local recovery copies) for one job:
// <LocalStateDir>/<JobID>/proc-<pid>-<random>/. Each process has its own,
// locked while the job runs (flock on .owner.lock inside it), so that two
// processes of the same JobID never touch each other's files; directories
// of processes that died are removed by the next one (their lock is free).
type localDir struct {
	path string
	lock *os.File
}

const localDirPrefix = "proc-"

// newLocalDir creates and locks this process's local state directory
// under jobDir, and removes those that dead processes left there.
func newLocalDir(jobDir string, log *slog.Logger) (*localDir, error) {
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		return nil, fmt.Errorf("weir: create the local state directory: %w", err)
	}
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		return nil, fmt.Errorf("weir: list the local state directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), localDirPrefix) {
			continue
		}
		dead := filepath.Join(jobDir, e.Name())
		f, ok, err := storage.TryLockFile(filepath.Join(dead, storage.OwnerLockName))
		if err != nil || !ok {
			continue // alive, or not ours to judge
		}
		err = os.RemoveAll(dead)
		f.Close()
		if err != nil {
			log.Warn("cannot remove the local state of a process that ended", "dir", dead, "err", err)
		}
	}
	b := make([]byte, 4)
	rand.Read(b)
	dir := filepath.Join(jobDir, fmt.Sprintf("%s%d-%s", localDirPrefix, os.Getpid(), hex.EncodeToString(b)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("weir: create the local state directory: %w", err)
	}
	f, ok, err := storage.TryLockFile(filepath.Join(dir, storage.OwnerLockName))
	if err == nil && !ok {
		err = errors.New("locked by another process")
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("weir: lock the local state directory %s: %w", dir, err)
	}
	return &localDir{path: dir, lock: f}, nil
}

// release removes the directory (state comes back from checkpoints) and
// drops its lock.
func (d *localDir) release(log *slog.Logger) {
	if d == nil {
		return
	}
	if err := os.RemoveAll(d.path); err != nil {
		log.Warn("cannot remove the local state directory", "dir", d.path, "err", err)
	}
	d.lock.Close()
}
