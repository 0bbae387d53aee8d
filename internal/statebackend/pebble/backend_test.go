package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/format"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string // "" for valid
	}{
		{"defaults", Options{Dir: "x"}, ""},
		{"no dir", Options{}, "Options.Dir is empty"},
		{"negative cache", Options{Dir: "x", CacheSize: -1}, "Options.CacheSize is -1"},
		{"tiny memtable", Options{Dir: "x", MemTableSize: 1 << 10}, "Options.MemTableSize is 1024; it must be in [65536, 4294967296)"},
		{"huge memtable", Options{Dir: "x", MemTableSize: 4 << 30}, "Options.MemTableSize is 4294967296"},
		{"memtables fill the cache", Options{Dir: "x", MemTableSize: 64 << 20}, "two memtables, which pebble charges to the block cache, would leave no room for blocks"},
		{"memtables and a small cache", Options{Dir: "x", CacheSize: 16 << 20}, "Options.MemTableSize is 33554432 and Options.CacheSize 16777216"},
		{"small memtables, small cache", Options{Dir: "x", CacheSize: 16 << 20, MemTableSize: 4 << 20}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.EnsureDefaults()
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	var o Options
	o.EnsureDefaults()
	if o.CacheSize != 128<<20 || o.MemTableSize != 32<<20 || o.FS == nil || o.OnError == nil || o.Logger == nil {
		t.Errorf("defaults = %+v", o)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(keygroup.Range{Start: 5, End: 4}, codec.Int(), Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "range [5, 4) is invalid") {
		t.Errorf("bad range: err = %v", err)
	}
	if _, err := New[int](keygroup.Range{Start: 0, End: 4}, nil, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "nil key codec") {
		t.Errorf("nil codec: err = %v", err)
	}
	if _, err := New(keygroup.Range{Start: 0, End: 4}, codec.Int(), Options{}); err == nil || !strings.Contains(err.Error(), "Options.Dir") {
		t.Errorf("no dir: err = %v", err)
	}
}

func TestDirectoryLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "op-3")
	r := keygroup.Range{Start: 0, End: 8}
	b := newPebble(t, r, codec.Int(), Options{Dir: dir})
	if b.Dir() != filepath.Join(dir, "db") {
		t.Errorf("Dir() = %s", b.Dir())
	}
	// A second backend in the same directory is refused, with advice.
	if _, err := New(r, codec.Int(), Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "give every backend a directory of its own") {
		t.Fatalf("second backend in %s: err = %v", dir, err)
	}
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 0)
	s.Update(1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, %s: %v", dir, err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// A directory holding something else survives Close, with it.
	keep := filepath.Join(dir, "chk-1")
	b2 := newPebble(t, r, codec.Int(), Options{Dir: dir})
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("Close removed %s: %v", keep, err)
	}
	if _, err := os.Stat(b2.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the database: %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	var errs []error
	b := newPebble(t, keygroup.Range{Start: 0, End: 4}, codec.Int(), Options{OnError: func(err error) { errs = append(errs, err) }})
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 2)
	s.Update(5)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Value(); ok {
		t.Errorf("Value after Close = %d", v)
	}
	s.Update(6)
	s.Clear()
	if len(errs) != 3 {
		t.Fatalf("OnError got %v", errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), `state "v"`) {
			t.Errorf("OnError(%v)", err)
		}
	}
	if _, err := b.Snapshot(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot: %v", err)
	}
	if _, err := b.SnapshotIncremental(1, t.TempDir()+"/x"); !errors.Is(err, ErrClosed) {
		t.Errorf("SnapshotIncremental: %v", err)
	}
	if _, err := NewValueState(b, "w", codec.Int()); !errors.Is(err, ErrClosed) {
		t.Errorf("NewValueState: %v", err)
	}
	if err := b.Restore(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Restore: %v", err)
	}
}

func TestDefaultOnErrorPanics(t *testing.T) {
	b := newPebble(t, keygroup.Range{Start: 0, End: 4}, codec.Int(), Options{})
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 9) // outside the range
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !strings.Contains(err.Error(), "key 1 has key group 9, outside the backend's range [0, 4)") {
			t.Fatalf("recovered %v", r)
		}
	}()
	s.Update(1)
}

// TestDecodeErrorOnRead: registration decodes one entry per key group, so a
// bad entry behind the first one is found when it is read, and reported to
// OnError with the state, the key and the key group.
func TestDecodeErrorOnRead(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	var buf bytes.Buffer
	fw := format.NewWriter(&buf, r)
	must(t, fw.StartGroup(0, 1))
	must(t, fw.StartState("n", 2))
	k1, k2 := codec.String().Append(nil, "a"), codec.String().Append(nil, "b")
	must(t, fw.Entry(k1, codec.Int().Append(nil, 7)))
	must(t, fw.Entry(k2, []byte{1, 2, 3}))
	must(t, fw.EndGroup())
	h, err := fw.Finish()
	must(t, err)

	var got error
	b := newPebble(t, r, codec.String(), Options{OnError: func(err error) { got = err }})
	must(t, b.Restore([]checkpoint.KeyedStateHandle{h}, func(checkpoint.KeyedStateHandle) ([]byte, error) { return buf.Bytes(), nil }))
	s, err := NewValueState(b, "n", codec.Int())
	must(t, err)
	b.SetCurrentKey("a", 0)
	if v, ok := s.Value(); v != 7 || !ok || got != nil {
		t.Fatalf("a = %d, %v (%v)", v, ok, got)
	}
	b.SetCurrentKey("b", 0)
	if _, ok := s.Value(); ok || got == nil || !strings.Contains(got.Error(), `state "n", key b (key group 0): decode value`) {
		t.Fatalf("b: ok %v, OnError(%v)", ok, got)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotMisuse(t *testing.T) {
	b := newPebble(t, keygroup.Range{Start: 0, End: 2}, codec.Int(), Options{})
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 0)
	s.Update(1)

	snap, err := b.Snapshot(1)
	must(t, err)
	write(t, snap, "x")
	if _, err := snap.WriteState(&bytes.Buffer{}); !errors.Is(err, ErrSnapshotUsed) {
		t.Errorf("second WriteState: err = %v", err)
	}
	snap.Release() // a second Release is a no-op

	// Release while WriteState runs is a bug, caught.
	snap, err = b.Snapshot(2)
	must(t, err)
	w := &blockingWriter{started: make(chan struct{}), unblock: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := snap.WriteState(w)
		done <- err
	}()
	<-w.started
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Release while WriteState runs") {
				t.Errorf("recovered %v", r)
			}
		}()
		snap.Release()
	}()
	close(w.unblock)
	must(t, <-done)
	snap.Release()
	if len(b.live) != 0 {
		t.Errorf("live = %v", b.live)
	}
}

type blockingWriter struct {
	started, unblock chan struct{}
	once             bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.started)
		<-w.unblock
	}
	return len(p), nil
}

// TestCloseWaitsForWriteState: Close waits for a running WriteState, then
// releases the snapshots nobody released; the pebble snapshot and iterator
// are closed before the database, which would otherwise refuse to close.
func TestCloseWaitsForWriteState(t *testing.T) {
	b := newPebble(t, keygroup.Range{Start: 0, End: 4}, codec.Int(), Options{})
	s := mustValue[int, int](t, b, "v")
	for i := range 100 {
		b.SetCurrentKey(i, i%4)
		s.Update(i)
	}
	writing, err := b.Snapshot(1)
	must(t, err)
	abandoned, err := b.Snapshot(2)
	must(t, err)
	w := &blockingWriter{started: make(chan struct{}), unblock: make(chan struct{})}
	wrote := make(chan error)
	go func() {
		_, err := writing.WriteState(w)
		wrote <- err
	}()
	<-w.started
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while WriteState ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(w.unblock)
	must(t, <-wrote)
	must(t, <-closed)
	writing.Release() // after Close: no-ops
	abandoned.Release()
	if _, err := abandoned.WriteState(&bytes.Buffer{}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteState of a snapshot Close released: %v", err)
	}
}

func TestWriteErrorIsReturned(t *testing.T) {
	b := newPebble(t, keygroup.Range{Start: 0, End: 4}, codec.Int(), Options{})
	snap, err := b.Snapshot(3)
	must(t, err)
	defer snap.Release()
	_, err = snap.WriteState(errWriter{})
	if err == nil || !strings.Contains(err.Error(), "checkpoint 3") || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err = %v", err)
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("cancelled") }

// TestInMemoryFS runs a backend on pebble's in-memory file system: the FS
// seam reaches every file the backend touches.
func TestInMemoryFS(t *testing.T) {
	fs := vfs.NewMem()
	r := keygroup.Range{Start: 0, End: maxPar}
	b := newPebble(t, r, codec.Int(), Options{FS: fs, Dir: "/state/op"})
	s := mustValue[int, string](t, b, "v")
	for i := range 1000 {
		set(b, codec.Int(), s, i, fmt.Sprint(i))
	}
	files, err := b.SnapshotIncremental(1, "/chk/1")
	must(t, err)
	if len(files) == 0 {
		t.Fatal("no files")
	}
	if _, err := fs.Stat("/chk/1/" + files[0]); err != nil {
		t.Fatal(err)
	}
	must(t, b.Close())
	if _, err := fs.Stat("/state/op"); err == nil {
		t.Error("Close left /state/op")
	}
	if _, err := os.Stat("/state/op"); err == nil {
		t.Error("the backend wrote to the real disk")
	}
}
