package storage

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
)

// memObjects is the content of one memory store: committed objects by full
// name. Committed objects are never modified, so readers share them.
type memObjects struct {
	mu      sync.RWMutex
	objects map[string]memObject
}

// memObject is the content of one object: the chunks its writer filled,
// in order. A writer appends to chunks of at most memChunkSize bytes
// instead of regrowing one buffer, which for a checkpoint's state file of
// tens of MiB would copy every byte several times over and leave the
// garbage collector the discarded halves; the chunks are read in turn,
// never joined.
type memObject struct {
	chunks [][]byte
	size   int64
}

// memChunkSize is the largest chunk a memWriter allocates (a single larger
// Write gets a chunk of its own size). The first chunk of an object is
// small, and each next one twice the last, so that small objects (metadata,
// markers) stay small.
const (
	memChunkSize      = 1 << 20
	memFirstChunkSize = 4 << 10
)

// open returns a reader of the object's bytes.
func (o memObject) open() *chunkReader { return &chunkReader{chunks: o.chunks} }

// chunkReader reads the chunks of a memObject in turn. The chunks are
// shared with the store and only read.
type chunkReader struct {
	chunks [][]byte
	i, off int // the next byte is chunks[i][off]
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n := 0
	for n < len(p) && r.i < len(r.chunks) {
		c := copy(p[n:], r.chunks[r.i][r.off:])
		n += c
		if r.off += c; r.off == len(r.chunks[r.i]) {
			r.i, r.off = r.i+1, 0
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo lets io.Copy hand the chunks to w without copying them into a
// buffer of its own.
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for r.i < len(r.chunks) {
		c := r.chunks[r.i][r.off:]
		n, err := w.Write(c)
		total += int64(n)
		r.off += n
		if err == nil && n < len(c) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
		r.i, r.off = r.i+1, 0
	}
	return total, nil
}

// memRegistry holds the named memory stores of the process, so that a job
// restarted in the same process (or a test re-opening "memory://x") finds
// what it wrote.
var memRegistry = struct {
	sync.Mutex
	stores map[string]*memObjects
}{stores: map[string]*memObjects{}}

func namedMemObjects(name string) *memObjects {
	memRegistry.Lock()
	defer memRegistry.Unlock()
	o, ok := memRegistry.stores[name]
	if !ok {
		o = &memObjects{objects: map[string]memObject{}}
		memRegistry.stores[name] = o
	}
	return o
}

// ForgetMemory drops the named memory store "memory://name" from the
// process registry: its objects are lost, and the next Open of the name
// starts empty. Stores already opened keep working on the old content.
// Tests call it in t.Cleanup.
func ForgetMemory(name string) {
	memRegistry.Lock()
	defer memRegistry.Unlock()
	delete(memRegistry.stores, name)
}

// NewMemoryStore returns a fresh private memory store, not registered by
// any name: the same as Open("memory://").
func NewMemoryStore() Store {
	return &memStore{objs: &memObjects{objects: map[string]memObject{}}, url: "memory://"}
}

// memStore is a view of a memObjects under a prefix.
type memStore struct {
	objs   *memObjects
	prefix string // clean; "" for the whole store
	url    string
}

var _ Store = (*memStore)(nil)

func (s *memStore) URL() string { return s.url }

func (s *memStore) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return &memWriter{store: s, ctx: ctx, name: name}, nil
}

func (s *memStore) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	o, err := s.get(ctx, "open", name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(o.open()), nil
}

func (s *memStore) Stat(ctx context.Context, name string) (int64, error) {
	o, err := s.get(ctx, "stat", name)
	if err != nil {
		return 0, err
	}
	return o.size, nil
}

func (s *memStore) get(ctx context.Context, op, name string) (memObject, error) {
	if err := validName(name); err != nil {
		return memObject{}, err
	}
	if err := ctx.Err(); err != nil {
		return memObject{}, fmt.Errorf("%s %s: %w", op, name, err)
	}
	s.objs.mu.RLock()
	o, ok := s.objs.objects[join(s.prefix, name)]
	s.objs.mu.RUnlock()
	if !ok {
		return memObject{}, fmt.Errorf("%s %s/%s: %w", op, s.url, name, ErrNotFound)
	}
	return o, nil
}

func (s *memStore) List(ctx context.Context, prefix string) ([]string, error) {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	full := join(s.prefix, p)
	var names []string
	s.objs.mu.RLock()
	for name := range s.objs.objects {
		if under(name, full) {
			names = append(names, s.relative(name))
		}
	}
	s.objs.mu.RUnlock()
	slices.Sort(names)
	return names, nil
}

func (s *memStore) relative(full string) string {
	if s.prefix == "" {
		return full
	}
	return full[len(s.prefix)+1:]
}

func (s *memStore) Delete(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	s.objs.mu.Lock()
	delete(s.objs.objects, join(s.prefix, name))
	s.objs.mu.Unlock()
	return nil
}

func (s *memStore) DeletePrefix(ctx context.Context, prefix string) error {
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
	full := join(s.prefix, p)
	s.objs.mu.Lock()
	for name := range s.objs.objects {
		if under(name, full) {
			delete(s.objs.objects, name)
		}
	}
	s.objs.mu.Unlock()
	return nil
}

// memWriter fills chunks (see memObject); Commit publishes them as they
// are.
type memWriter struct {
	store  *memStore
	ctx    context.Context
	name   string
	chunks [][]byte // full chunks, and last the one being filled
	size   int64
	done   bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	n := len(p)
	for len(p) > 0 {
		last := len(w.chunks) - 1
		if last < 0 || len(w.chunks[last]) == cap(w.chunks[last]) {
			w.chunks = append(w.chunks, make([]byte, 0, w.nextChunk(len(p))))
			last++
		}
		c := w.chunks[last]
		m := min(len(p), cap(c)-len(c))
		w.chunks[last] = append(c, p[:m]...)
		p = p[m:]
	}
	w.size += int64(n)
	return n, nil
}

// nextChunk returns the capacity of the next chunk, for a Write of n bytes
// still to place.
func (w *memWriter) nextChunk(n int) int {
	size := memFirstChunkSize
	if k := len(w.chunks); k > 0 {
		size = min(2*cap(w.chunks[k-1]), memChunkSize)
	}
	if n > memChunkSize {
		return n // one large write: one chunk, filled at once
	}
	return max(size, min(n, memChunkSize))
}

func (w *memWriter) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.name, err)
	}
	o := memObject{chunks: w.chunks, size: w.size}
	w.chunks = nil
	w.store.objs.mu.Lock()
	w.store.objs.objects[join(w.store.prefix, w.name)] = o
	w.store.objs.mu.Unlock()
	return nil
}

func (w *memWriter) Abort() error {
	w.done = true
	w.chunks = nil
	return nil
}
