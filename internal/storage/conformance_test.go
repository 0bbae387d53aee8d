package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// storeKinds are every Store implementation and wrapper, each made fresh for
// one test. They all go through the same conformance tests.
var storeKinds = []struct {
	name     string
	new      func(t *testing.T) Store
	reopens  bool // Open(s.URL()) gives the same objects
	fileRoot func(s Store) string
}{
	{name: "memory private", new: func(t *testing.T) Store { return NewMemoryStore() }},
	{name: "memory named with prefix", reopens: true, new: func(t *testing.T) Store {
		name := uniqueMemoryName(t)
		s, err := Open("memory://" + name + "/some/prefix")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{name: "file", reopens: true, new: func(t *testing.T) Store {
		s, err := NewFileStore(t.TempDir(), OSFS)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, fileRoot: func(s Store) string { return s.(*fileStore).root }},
	{name: "file over an idle fault FS", new: func(t *testing.T) Store {
		s, err := NewFileStore(filepath.Join(t.TempDir(), "not", "yet"), NewFaultFS(OSFS, NewFaults(1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, fileRoot: func(s Store) string { return s.(*fileStore).root }},
	{name: "memory with idle faults", new: func(t *testing.T) Store {
		return WithFaults(NewMemoryStore(), NewFaults(1))
	}},
}

// uniqueMemoryName returns a memory store name for this test alone and
// forgets the store when the test ends.
func uniqueMemoryName(t *testing.T) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	ForgetMemory(name)
	t.Cleanup(func() { ForgetMemory(name) })
	return name
}

func put(t *testing.T, s Store, name, content string) {
	t.Helper()
	w, err := s.Create(context.Background(), name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if _, err := io.WriteString(w, content); err != nil {
		t.Fatalf("Write(%q): %v", name, err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit(%q): %v", name, err)
	}
}

func get(t *testing.T, s Store, name string) (string, error) {
	t.Helper()
	r, err := s.Open(context.Background(), name)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %q: %v", name, err)
	}
	return string(b), nil
}

func mustGet(t *testing.T, s Store, name, want string) {
	t.Helper()
	got, err := get(t, s, name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	if got != want {
		t.Fatalf("Open(%q) = %q, want %q", name, got, want)
	}
}

func mustBeMissing(t *testing.T, s Store, name string) {
	t.Helper()
	if got, err := get(t, s, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open(%q) = %q, %v; want ErrNotFound", name, got, err)
	}
	if size, err := s.Stat(context.Background(), name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat(%q) = %d, %v; want ErrNotFound", name, size, err)
	}
}

func list(t *testing.T, s Store, prefix string) []string {
	t.Helper()
	names, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return names
}

func TestStoreConformance(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("uncommitted is invisible", func(t *testing.T) {
				s := kind.new(t)
				ctx := context.Background()
				w, err := s.Create(ctx, "job/chk-1/_metadata")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(w, "hello"); err != nil {
					t.Fatal(err)
				}
				mustBeMissing(t, s, "job/chk-1/_metadata")
				if got := list(t, s, ""); len(got) != 0 {
					t.Fatalf("List before Commit = %q, want nothing (no temporary files)", got)
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				mustGet(t, s, "job/chk-1/_metadata", "hello")
				if size, err := s.Stat(ctx, "job/chk-1/_metadata"); err != nil || size != 5 {
					t.Fatalf("Stat = %d, %v; want 5", size, err)
				}
				if err := w.Commit(); !errors.Is(err, ErrClosed) {
					t.Fatalf("second Commit = %v, want ErrClosed", err)
				}
				if err := w.Abort(); err != nil {
					t.Fatalf("Abort after Commit = %v, want nil", err)
				}
				mustGet(t, s, "job/chk-1/_metadata", "hello")
			})

			t.Run("abort discards", func(t *testing.T) {
				s := kind.new(t)
				w, err := s.Create(context.Background(), "a/b")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(w, "doomed"); err != nil {
					t.Fatal(err)
				}
				if err := w.Abort(); err != nil {
					t.Fatal(err)
				}
				mustBeMissing(t, s, "a/b")
				if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
					t.Fatalf("Write after Abort = %v, want ErrClosed", err)
				}
				if err := w.Commit(); !errors.Is(err, ErrClosed) {
					t.Fatalf("Commit after Abort = %v, want ErrClosed", err)
				}
				mustBeMissing(t, s, "a/b")
				if got := list(t, s, ""); len(got) != 0 {
					t.Fatalf("List = %q, want nothing", got)
				}
				if kind.fileRoot != nil {
					assertNoTempFiles(t, kind.fileRoot(s))
				}
			})

			t.Run("overwrite", func(t *testing.T) {
				s := kind.new(t)
				put(t, s, "x", "first")
				w, err := s.Create(context.Background(), "x")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(w, "second, longer"); err != nil {
					t.Fatal(err)
				}
				mustGet(t, s, "x", "first")
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				mustGet(t, s, "x", "second, longer")
				if got := list(t, s, ""); !slices.Equal(got, []string{"x"}) {
					t.Fatalf("List = %q, want [x]", got)
				}
			})

			t.Run("empty object", func(t *testing.T) {
				s := kind.new(t)
				put(t, s, "empty", "")
				mustGet(t, s, "empty", "")
			})

			t.Run("list is sorted and prefixes are directories", func(t *testing.T) {
				s := kind.new(t)
				// Sorted as S3 sorts, by bytes: "job.x" before "job/".
				all := []string{"job.x/y", "job/chk-1/_metadata", "job/chk-1/x", "job/chk-10/_metadata", "job/chk-2/a/b", "other/z", "top"}
				for _, n := range slices.Backward(all) {
					put(t, s, n, n)
				}
				tests := []struct {
					prefix string
					want   []string
				}{
					{"", all},
					{"job", all[1:5]},
					{"job/", all[1:5]},
					{"job/chk-1", all[1:3]},
					{"job/chk-1/", all[1:3]},
					{"job/chk-2", all[4:5]},
					{"job/chk-2/a", all[4:5]},
					{"top", nil},
					{"missing", nil},
					{"job/chk-1/_metadata", nil},
				}
				for _, tt := range tests {
					if got := list(t, s, tt.prefix); !slices.Equal(got, tt.want) {
						t.Errorf("List(%q) = %q, want %q", tt.prefix, got, tt.want)
					}
				}
			})

			t.Run("delete", func(t *testing.T) {
				s := kind.new(t)
				ctx := context.Background()
				put(t, s, "d/a", "1")
				put(t, s, "d/b", "2")
				if err := s.Delete(ctx, "d/a"); err != nil {
					t.Fatal(err)
				}
				mustBeMissing(t, s, "d/a")
				if err := s.Delete(ctx, "d/a"); err != nil {
					t.Fatalf("Delete of a missing object = %v, want nil", err)
				}
				if err := s.Delete(ctx, "d"); err != nil {
					t.Fatalf("Delete of a directory name = %v, want nil", err)
				}
				mustGet(t, s, "d/b", "2")
			})

			t.Run("delete prefix", func(t *testing.T) {
				s := kind.new(t)
				ctx := context.Background()
				for _, n := range []string{"job/chk-1/_metadata", "job/chk-1/deep/x", "job/chk-10/_metadata", "job/shared/s"} {
					put(t, s, n, n)
				}
				if err := s.DeletePrefix(ctx, "job/chk-1"); err != nil {
					t.Fatal(err)
				}
				if got, want := list(t, s, ""), []string{"job/chk-10/_metadata", "job/shared/s"}; !slices.Equal(got, want) {
					t.Fatalf("after DeletePrefix(job/chk-1): List = %q, want %q", got, want)
				}
				if err := s.DeletePrefix(ctx, "job/missing"); err != nil {
					t.Fatalf("DeletePrefix of nothing = %v, want nil", err)
				}
				if err := s.DeletePrefix(ctx, ""); !errors.Is(err, ErrInvalidName) {
					t.Fatalf("DeletePrefix(\"\") = %v, want ErrInvalidName", err)
				}
				if err := s.DeletePrefix(ctx, "job/"); err != nil {
					t.Fatal(err)
				}
				if got := list(t, s, ""); len(got) != 0 {
					t.Fatalf("after DeletePrefix(job/): List = %q, want nothing", got)
				}
				put(t, s, "job/chk-1/_metadata", "again") // the directory can be used again
				mustGet(t, s, "job/chk-1/_metadata", "again")
			})

			t.Run("invalid names", func(t *testing.T) {
				s := kind.new(t)
				ctx := context.Background()
				for _, name := range []string{"", "/a", "a/", "a//b", "..", "../a", "a/./b", ".hidden", "a/.tmp", "a\\b", "a\x00b"} {
					if _, err := s.Create(ctx, name); !errors.Is(err, ErrInvalidName) {
						t.Errorf("Create(%q) = %v, want ErrInvalidName", name, err)
					}
					if _, err := s.Open(ctx, name); !errors.Is(err, ErrInvalidName) {
						t.Errorf("Open(%q) = %v, want ErrInvalidName", name, err)
					}
					if _, err := s.Stat(ctx, name); !errors.Is(err, ErrInvalidName) {
						t.Errorf("Stat(%q) = %v, want ErrInvalidName", name, err)
					}
					if err := s.Delete(ctx, name); !errors.Is(err, ErrInvalidName) {
						t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
					}
				}
				for _, prefix := range []string{"/a", "../a", "a//", ".x"} {
					if _, err := s.List(ctx, prefix); !errors.Is(err, ErrInvalidName) {
						t.Errorf("List(%q) = %v, want ErrInvalidName", prefix, err)
					}
					if err := s.DeletePrefix(ctx, prefix); !errors.Is(err, ErrInvalidName) {
						t.Errorf("DeletePrefix(%q) = %v, want ErrInvalidName", prefix, err)
					}
				}
			})

			t.Run("context", func(t *testing.T) {
				s := kind.new(t)
				ctx, cancel := context.WithCancel(context.Background())
				w, err := s.Create(ctx, "late")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(w, "x"); err != nil {
					t.Fatal(err)
				}
				cancel()
				if err := w.Commit(); !errors.Is(err, context.Canceled) {
					t.Fatalf("Commit after cancel = %v, want context.Canceled", err)
				}
				mustBeMissing(t, s, "late")
				if _, err := s.Create(ctx, "late"); !errors.Is(err, context.Canceled) {
					t.Fatalf("Create with a canceled context = %v, want context.Canceled", err)
				}
				if _, err := s.List(ctx, ""); !errors.Is(err, context.Canceled) {
					t.Fatalf("List with a canceled context = %v, want context.Canceled", err)
				}
				if kind.fileRoot != nil {
					assertNoTempFiles(t, kind.fileRoot(s))
				}
			})

			t.Run("concurrent writers", func(t *testing.T) {
				s := kind.new(t)
				var wg sync.WaitGroup
				errs := make(chan error, 32)
				var want []string
				for i := range 32 {
					name := fmt.Sprintf("job/chk-%d/state-%02d", i%3+1, i)
					want = append(want, name)
					wg.Go(func() {
						w, err := s.Create(context.Background(), name)
						if err == nil {
							_, err = io.WriteString(w, name)
						}
						if err == nil {
							err = w.Commit()
						}
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				slices.Sort(want)
				if got := list(t, s, ""); !slices.Equal(got, want) {
					t.Fatalf("List = %q, want %q", got, want)
				}
				for _, n := range want {
					mustGet(t, s, n, n)
				}
			})

			t.Run("url reopens", func(t *testing.T) {
				s := kind.new(t)
				if s.URL() == "" {
					t.Fatal("URL() is empty")
				}
				if !kind.reopens {
					return
				}
				put(t, s, "job/chk-1/_metadata", "m")
				again, err := Open(s.URL())
				if err != nil {
					t.Fatalf("Open(%q): %v", s.URL(), err)
				}
				mustGet(t, again, "job/chk-1/_metadata", "m")
				if again.URL() != s.URL() {
					t.Fatalf("reopened URL = %q, want %q", again.URL(), s.URL())
				}
			})
		})
	}
}

// assertNoTempFiles fails if a temporary file is left anywhere under root.
func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
