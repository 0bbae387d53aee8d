package incremental

import (
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// dirUpload is what uploadDir did with a local native checkpoint.
type dirUpload struct {
	files   []checkpoint.StateFile // every file, in directory order
	data    map[string]sharedFile  // its data files by local name
	fresh   []string               // objects uploaded now (not reused)
	written int64                  // bytes uploaded now
}

// uploadDir uploads the native checkpoint in dir to store: a data file
// that reusable holds under sharedDir is referred to where it is; every
// other file goes to objectFor(name, isDataFile(name)), which is shared
// when it lies in sharedDir. On an error, up.fresh still lists what it
// uploaded.
func (s *incrementalState) uploadDir(ctx context.Context, dir string, reusable map[string]sharedFile, store storage.Store, sharedDir string, objectFor func(name string, data bool) string) (dirUpload, error) {
	names, err := s.fs.List(dir)
	if err != nil {
		return dirUpload{}, fmt.Errorf("list the local checkpoint %s: %w", dir, err)
	}
	slices.Sort(names) // vfs.FS.List gives no order; handles list files in name order
	up := dirUpload{files: make([]checkpoint.StateFile, len(names)), data: make(map[string]sharedFile)}
	type job struct {
		i            int
		name, object string
		data, shared bool
	}
	var jobs []job
	for i, name := range names {
		data := isDataFile(name)
		if f, ok := reusable[name]; ok && data && path.Dir(f.Object) == sharedDir {
			up.files[i] = checkpoint.StateFile{Name: name, Path: sharedPath(f.Object), Size: f.Size, CRC: f.CRC, Shared: true}
			up.data[name] = f
			continue
		}
		fi, err := s.fs.Stat(filepath.Join(dir, name))
		if err != nil {
			return dirUpload{}, fmt.Errorf("local checkpoint file: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return dirUpload{}, fmt.Errorf("%s is not a regular file", filepath.Join(dir, name))
		}
		object := objectFor(name, data)
		jobs = append(jobs, job{i: i, name: name, object: object, data: data, shared: path.Dir(object) == sharedDir})
	}
	var mu sync.Mutex
	err = s.parallel(ctx, len(jobs), func(ctx context.Context, j int) error {
		jb := jobs[j]
		size, crc, err := s.uploadFile(ctx, store, jb.object, filepath.Join(dir, jb.name))
		if err != nil {
			return err
		}
		p := path.Base(jb.object)
		if jb.shared {
			p = sharedPath(jb.object)
		}
		mu.Lock()
		defer mu.Unlock()
		up.files[jb.i] = checkpoint.StateFile{Name: jb.name, Path: p, Size: size, CRC: crc, Shared: jb.shared}
		if jb.data && jb.shared {
			up.data[jb.name] = sharedFile{Object: jb.object, Size: size, CRC: crc}
		}
		up.fresh = append(up.fresh, jb.object)
		up.written += size
		return nil
	})
	return up, err
}

// uploadFile writes the local file as the state file object of store.
func (s *incrementalState) uploadFile(ctx context.Context, store storage.Store, object, local string) (int64, uint32, error) {
	cs := storage.CheckpointStorage{Store: store}
	return cs.WriteStateFile(ctx, path.Dir(object), path.Base(object), func(w io.Writer) error {
		f, err := s.fs.Open(local)
		if err != nil {
			return fmt.Errorf("read the local file: %w", err)
		}
		defer f.Close()
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("read the local file %s: %w", local, err)
		}
		return nil
	})
}

// sharedPath is the path of a shared object relative to a checkpoint
// directory: checkpoint directories and shared/ are siblings.
func sharedPath(object string) string {
	return "../" + storage.SharedDirName + "/" + path.Base(object)
}

// download fetches the files of h into dir, checking each file's size and
// CRC, and returns the bytes read.
func (s *incrementalState) download(ctx context.Context, from Source, h checkpoint.KeyedStateHandle, dir string) (int64, error) {
	cs := storage.CheckpointStorage{Store: from.Store}
	var mu sync.Mutex
	var total int64
	err := s.parallel(ctx, len(h.Files), func(ctx context.Context, i int) error {
		f := h.Files[i]
		if f.Name == "" || f.Name != filepath.Base(f.Name) || strings.HasPrefix(f.Name, ".") {
			return fmt.Errorf("%w: file name %q", storage.ErrCorruptState, f.Name)
		}
		name, err := storage.ResolveStatePath(from.Dir, f.Path, from.Savepoint)
		if err != nil {
			return err
		}
		r, err := cs.OpenStateFile(ctx, path.Dir(name), path.Base(name), f.Size, f.CRC)
		if err != nil {
			return err
		}
		defer r.Close()
		local := filepath.Join(dir, f.Name)
		out, err := s.fs.Create(local, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("create %s: %w", local, err)
		}
		n, err := io.Copy(out, r) // the reader checks the CRC at EOF
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", local, cerr)
		}
		if err != nil {
			return err
		}
		mu.Lock()
		total += n
		mu.Unlock()
		return nil
	})
	return total, err
}

// parallel runs fn for 0..n-1 on up to s.workers goroutines and returns
// the first error; the others see their context cancelled.
func (s *incrementalState) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(n, s.workers) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel(err) })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}
