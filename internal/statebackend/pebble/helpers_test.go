package pebble

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/heap"
	"github.com/weirstream/weir/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const maxPar = 128

// groupOf computes a key's group the way the runtime does.
func groupOf[K any](kc codec.Codec[K], k K) int {
	return keygroup.Of(kc.Append(nil, k), maxPar)
}

// kinds are the backends every conformance test runs against.
var kinds = []string{"heap", "pebble"}

// newBackend returns an empty backend of kind, closed when the test ends.
func newBackend[K comparable](t testing.TB, kind string, r keygroup.Range, kc codec.Codec[K]) statebackend.KeyedBackend[K] {
	t.Helper()
	switch kind {
	case "heap":
		return heap.New(r, kc)
	case "pebble":
		return newPebble(t, r, kc, Options{})
	}
	t.Fatalf("unknown backend kind %q", kind)
	return nil
}

// newPebble returns a pebble backend in a new temporary directory (unless
// opts.Dir is set), closed when the test ends.
func newPebble[K comparable](t testing.TB, r keygroup.Range, kc codec.Codec[K], opts Options) *Backend[K] {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "state")
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = 4 << 20 // many backends at once in some tests
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = 1 << 20
	}
	b, err := New(r, kc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// closeBackend closes b if its kind needs it.
func closeBackend[K comparable](b statebackend.KeyedBackend[K]) error {
	if c, ok := b.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// valueState registers a value state on either kind of backend: the
// dispatch the root package does in weir.ValueWithCodec.
func valueState[K comparable, V any](b statebackend.KeyedBackend[K], name string, c codec.Codec[V]) (state.Value[V], error) {
	switch b := b.(type) {
	case *heap.Backend[K]:
		s, err := heap.NewValueState(b, name, c)
		if err != nil {
			return nil, err
		}
		return s, nil
	case *Backend[K]:
		s, err := NewValueState(b, name, c)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("backend %q does not support value state", b.Kind())
}

func mustValue[K comparable, V any](t testing.TB, b statebackend.KeyedBackend[K], name string) state.Value[V] {
	t.Helper()
	c, err := codec.Of[V]()
	if err != nil {
		t.Fatal(err)
	}
	s, err := valueState(b, name, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// file is a written snapshot.
type file struct {
	h    checkpoint.KeyedStateHandle
	data []byte
}

// write runs WriteState on another goroutine, as the runtime does, then
// releases the snapshot.
func write(t testing.TB, snap statebackend.Snapshot, path string) file {
	t.Helper()
	var buf bytes.Buffer
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(&buf)
		done <- result{h, err}
	}()
	r := <-done
	snap.Release()
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.h.Path = path
	return file{r.h, buf.Bytes()}
}

func checkpointTo[K comparable](t testing.TB, b statebackend.KeyedBackend[K], id int64) file {
	t.Helper()
	snap, err := b.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, snap, fmt.Sprintf("chk-%d/%v", id, b.KeyGroups()))
}

// restoreFiles restores b from files and returns the paths open was asked
// for.
func restoreFiles[K comparable](b statebackend.KeyedBackend[K], files []file) ([]string, error) {
	var opened []string
	handles := make([]checkpoint.KeyedStateHandle, len(files))
	byPath := map[string][]byte{}
	for i, f := range files {
		handles[i] = f.h
		byPath[f.h.Path] = f.data
	}
	err := b.Restore(handles, func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		opened = append(opened, h.Path)
		return byPath[h.Path], nil
	})
	return opened, err
}

func set[K comparable, V any](b statebackend.KeyedBackend[K], kc codec.Codec[K], s state.Value[V], k K, v V) {
	b.SetCurrentKey(k, groupOf(kc, k))
	s.Update(v)
}

func get[K comparable, V any](b statebackend.KeyedBackend[K], kc codec.Codec[K], s state.Value[V], k K) (V, bool) {
	b.SetCurrentKey(k, groupOf(kc, k))
	return s.Value()
}
