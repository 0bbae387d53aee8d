package storage

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
)

// memObjects is the content of one memory store: committed objects by full
// name. Committed objects are never modified, so readers share them.
type memObjects struct {
	mu      sync.RWMutex
	objects map[string]memObject
	// free holds chunks of deleted objects that no reader had open, by
	// size class (free[i] has chunks of memFirstChunkSize<<i bytes), for
	// writers to fill again: a checkpoint's state file then reuses the
	// memory of the one it subsumed instead of new pages (which the
	// kernel must fault in and zero, and the garbage collector count). A
	// job taking unaligned checkpoints every few milliseconds writes small
	// channel state files at that pace. At most memFreeBytes in all.
	free      [memClasses][][]byte
	freeBytes int
}

// memFreeBytes bounds the memory that a store keeps for reuse;
// memClasses is the number of chunk sizes, memFirstChunkSize to
// memChunkSize by doubling.
const (
	memFreeBytes = 64 << 20
	memClasses   = 9
)

// memClass returns the size class of a chunk of capacity c, or -1 for a
// size that is not one (a single write larger than memChunkSize).
func memClass(c int) int {
	for i := range memClasses {
		if c == memFirstChunkSize<<i {
			return i
		}
	}
	return -1
}

// recycle keeps the chunks of o, which was just removed from the store,
// for reuse, unless a reader has o open. Callers hold mu for writing, so
// no reader can open o any more.
func (m *memObjects) recycle(o memObject) {
	if o.readers == nil || o.readers.Load() != 0 {
		return
	}
	for _, c := range o.chunks {
		k := memClass(cap(c))
		if k < 0 || m.freeBytes+cap(c) > memFreeBytes {
			continue
		}
		m.free[k] = append(m.free[k], c[:0])
		m.freeBytes += cap(c)
	}
}

// chunk returns a free chunk of size bytes (a size class), or a new one.
func (m *memObjects) chunk(size int) []byte {
	k := memClass(size)
	if k < 0 {
		return make([]byte, 0, size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.free[k]); n > 0 {
		c := m.free[k][n-1]
		m.free[k][n-1] = nil
		m.free[k] = m.free[k][:n-1]
		m.freeBytes -= cap(c)
		return c
	}
	return make([]byte, 0, size)
}

// freeChunks is the number of chunks kept for reuse.
func (m *memObjects) freeChunks() int {
	n := 0
	for _, f := range m.free {
		n += len(f)
	}
	return n
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
	// readers counts the readers of the object not closed yet: its chunks
	// are reused only if there are none when it is deleted.
	readers *atomic.Int64
}

// memChunkSize is the largest chunk a memWriter allocates (a single larger
// Write gets a chunk of its own size). The first chunk of an object is
// small, and each next one twice the last, so that small objects (metadata,
// markers) stay small.
const (
	memChunkSize      = 1 << 20
	memFirstChunkSize = 4 << 10
)

// open returns a reader of the object's bytes. Callers hold the store's
// mu, so that a Delete does not recycle the chunks under the new reader.
func (o memObject) open() *chunkReader {
	if o.readers != nil {
		o.readers.Add(1)
	}
	return &chunkReader{chunks: o.chunks, readers: o.readers}
}

// chunkReader reads the chunks of a memObject in turn. The chunks are
// shared with the store and only read.
type chunkReader struct {
	chunks  [][]byte
	i, off  int // the next byte is chunks[i][off]
	readers *atomic.Int64
}

// Close implements io.Closer: the reader stops reading, and the object's
// chunks may be reused once it is deleted.
func (r *chunkReader) Close() error {
	if r.chunks == nil && r.readers == nil {
		return nil
	}
	r.chunks, r.i, r.off = nil, 0, 0
	if r.readers != nil {
		r.readers.Add(-1)
		r.readers = nil
	}
	return nil
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
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	s.objs.mu.RLock()
	defer s.objs.mu.RUnlock()
	o, ok := s.objs.objects[join(s.prefix, name)]
	if !ok {
		return nil, fmt.Errorf("open %s/%s: %w", s.url, name, ErrNotFound)
	}
	return o.open(), nil
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
	full := join(s.prefix, name)
	s.objs.mu.Lock()
	if o, ok := s.objs.objects[full]; ok {
		delete(s.objs.objects, full)
		s.objs.recycle(o)
	}
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
			s.objs.recycle(s.objs.objects[name])
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
			w.chunks = append(w.chunks, w.store.objs.chunk(w.nextChunk(len(p))))
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
// still to place: a size class (see memObjects.free), twice the last
// chunk's and at least n rounded up to one, or n itself past
// memChunkSize.
func (w *memWriter) nextChunk(n int) int {
	size := memFirstChunkSize
	if k := len(w.chunks); k > 0 {
		size = min(2*cap(w.chunks[k-1]), memChunkSize)
	}
	if n > memChunkSize {
		return n // one large write: one chunk, filled at once
	}
	for size < n {
		size *= 2
	}
	return size
}

func (w *memWriter) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.name, err)
	}
	o := memObject{chunks: w.chunks, size: w.size, readers: new(atomic.Int64)}
	w.chunks = nil
	full := join(w.store.prefix, w.name)
	w.store.objs.mu.Lock()
	if old, ok := w.store.objs.objects[full]; ok {
		w.store.objs.recycle(old)
	}
	w.store.objs.objects[full] = o
	w.store.objs.mu.Unlock()
	return nil
}

func (w *memWriter) Abort() error {
	if !w.done && len(w.chunks) > 0 {
		// Never visible to a reader: the chunks can be reused at once.
		w.store.objs.mu.Lock()
		w.store.objs.recycle(memObject{chunks: w.chunks, readers: new(atomic.Int64)})
		w.store.objs.mu.Unlock()
	}
	w.done = true
	w.chunks = nil
	return nil
}
