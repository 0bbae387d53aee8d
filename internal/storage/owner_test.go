package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLockJob: one owner at a time per job directory of a file store, the
// refusal naming the directory and the holder; released, it can be taken
// again; other stores are not locked.
func TestLockJob(t *testing.T) {
	root := t.TempDir()
	st := fileStoreAt(t, root)
	first, err := LockJob(st, "job")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockJob(st, "job")
	dir := filepath.Join(root, "job")
	if !errors.Is(err, ErrOwned) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on ", os.Getpid())) {
		t.Fatalf("second LockJob = %v; want ErrOwned naming %s and this pid", err, dir)
	}
	other, err := LockJob(st, "other-job")
	if err != nil {
		t.Fatalf("LockJob of another job: %v", err)
	}
	other.Release()
	first.Release()
	first.Release() // twice is fine
	again, err := LockJob(st, "job")
	if err != nil {
		t.Fatalf("LockJob after Release: %v", err)
	}
	again.Release()
	mem, err := LockJob(NewMemoryStore(), "job")
	if err != nil || mem.Dir() != "" {
		t.Fatalf("LockJob of a memory store = %v, %v; want a no-op lock", mem, err)
	}
	mem.Release()
}

// TestSweepIncomplete removes the checkpoint directories without _metadata
// of the locked job directory, also one holding only a temporary metadata
// file, and nothing else.
func TestSweepIncomplete(t *testing.T) {
	root := t.TempDir()
	st := fileStoreAt(t, root)
	cs := CheckpointStorage{Store: st, JobID: "job"}
	writeCheckpoint(t, cs, 3, map[string]string{"a.keyed": "x"})
	for name, file := range map[string]string{"chk-4": "._metadata.tmp-0123", "chk-5": "a.keyed", "shared": "x.sst", "notchk-6": "y"} {
		os.MkdirAll(filepath.Join(root, "job", name), 0o755)
		os.WriteFile(filepath.Join(root, "job", name, file), []byte("z"), 0o644)
	}
	l, err := LockJob(st, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	removed, err := l.SweepIncomplete()
	slices.Sort(removed)
	if err != nil || !slices.Equal(removed, []string{"chk-4", "chk-5"}) {
		t.Fatalf("SweepIncomplete = %v, %v; want chk-4 and chk-5", removed, err)
	}
	for _, keep := range []string{"chk-3/_metadata", "shared/x.sst", "notchk-6/y"} {
		if _, err := os.Stat(filepath.Join(root, "job", keep)); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
}
