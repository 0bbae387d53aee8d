package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
)

// memObjects is the content of one memory store: committed objects by full
// name. Committed byte slices are never modified, so readers share them.
type memObjects struct {
	mu      sync.RWMutex
	objects map[string][]byte
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
		o = &memObjects{objects: map[string][]byte{}}
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
	return &memStore{objs: &memObjects{objects: map[string][]byte{}}, url: "memory://"}
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
	b, err := s.get(ctx, "open", name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *memStore) Stat(ctx context.Context, name string) (int64, error) {
	b, err := s.get(ctx, "stat", name)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

func (s *memStore) get(ctx context.Context, op, name string) ([]byte, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, name, err)
	}
	s.objs.mu.RLock()
	b, ok := s.objs.objects[join(s.prefix, name)]
	s.objs.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: %w", op, s.url, name, ErrNotFound)
	}
	return b, nil
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

type memWriter struct {
	store *memStore
	ctx   context.Context
	name  string
	buf   bytes.Buffer
	done  bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	return w.buf.Write(p)
}

func (w *memWriter) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.name, err)
	}
	b := w.buf.Bytes()
	w.buf = bytes.Buffer{}
	w.store.objs.mu.Lock()
	w.store.objs.objects[join(w.store.prefix, w.name)] = b
	w.store.objs.mu.Unlock()
	return nil
}

func (w *memWriter) Abort() error {
	w.done = true
	w.buf = bytes.Buffer{}
	return nil
}
