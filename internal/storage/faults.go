package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Op is a set of operation kinds a fault Rule matches. The same kinds serve
// the FS wrapper (NewFaultFS) and the Store wrapper (WithFaults); each
// wrapper reports the kinds that exist at its level.
type Op uint32

const (
	OpCreate  Op = 1 << iota // FS.Create, Store.Create
	OpOpen                   // FS.Open, Store.Open
	OpRead                   // File.Read, a Store reader's Read
	OpWrite                  // File.Write, ObjectWriter.Write
	OpSync                   // File.Sync
	OpClose                  // File.Close
	OpCommit                 // ObjectWriter.Commit
	OpRename                 // FS.Rename (matched on either name)
	OpRemove                 // FS.Remove, FS.RemoveAll, Store.Delete, Store.DeletePrefix
	OpList                   // FS.ReadDir, Store.List
	OpMkdir                  // FS.MkdirAll
	OpStat                   // FS.Stat, File.Stat, Store.Stat
	OpSyncDir                // FS.SyncDir

	// OpAll matches every operation.
	OpAll Op = 1<<iota - 1
)

var opNames = []string{"create", "open", "read", "write", "sync", "close", "commit", "rename", "remove", "list", "mkdir", "stat", "syncdir"}

func (o Op) String() string {
	if o == OpAll {
		return "all"
	}
	var parts []string
	for i, name := range opNames {
		if o&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := o &^ OpAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("Op(%#x)", uint32(rest)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// ErrInjected is wrapped by every error a fault rule injects.
var ErrInjected = errors.New("storage: injected fault")

// FaultError is an injected error.
type FaultError struct {
	Op   Op
	Name string // the file or object name the operation was on
	Rule int    // index of the rule that fired, in the order added
	Err  error  // Rule.Err, or ErrInjected
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("%v: %s %s (rule %d)", e.Err, e.Op, e.Name, e.Rule)
}

func (e *FaultError) Unwrap() []error {
	if e.Err == ErrInjected {
		return []error{ErrInjected}
	}
	return []error{e.Err, ErrInjected}
}

// Rule is one fault: the operations it matches and what it does to them.
type Rule struct {
	// Ops are the operation kinds matched. Default 0: OpAll.
	Ops Op

	// Path is a glob (path.Match syntax, slash-separated) matched against the
	// last components of the name, as many as the pattern has: "_metadata"
	// matches every object or file named _metadata, "chk-*/_metadata" every
	// metadata file of a checkpoint. A pattern starting with "/" is matched
	// against the whole name instead. A file store writes an object through
	// a temporary file ".<base>.tmp-<random>" in the same directory, so
	// "*_metadata*" also matches the writes and syncs of a _metadata file.
	// Default "": every name.
	Path string

	// Nth, if positive, makes the rule fire once, on the Nth operation it
	// matches (1 for the first), counted from when it was added.
	Nth int

	// Probability, used when Nth is 0, makes the rule fire on each matching
	// operation with this probability, in (0, 1], drawn from the seeded
	// random source of the Faults. Default 0: no error (a Delay-only rule).
	Probability float64

	// Err is the error injected, wrapped in a *FaultError that also wraps
	// ErrInjected. Default nil: ErrInjected alone.
	Err error

	// After makes a firing rule let the operation take effect and then
	// report the error, as a network store can fail after the write landed:
	// a Commit that fails After leaves the object visible. Default false:
	// the operation does not happen.
	After bool

	// Delay, if set, is called before every matching operation, whether the
	// rule fires or not, without any lock held. It may sleep or block ("a
	// storage write taking seconds"); it must return for the operation to go
	// on.
	Delay func(op Op, name string)
}

// Faults decides, for every operation through the wrappers it is given to,
// whether to delay it and whether it fails. Every rule sees every operation
// it matches (so Nth counts them all), every matching rule's Delay runs, and
// when several rules fire on one operation the first added decides the
// error. A Faults may be shared by several wrappers and is safe
// for concurrent use; which operation a Nth or random rule hits then depends
// on the scheduling, as it would in production.
type Faults struct {
	mu       sync.Mutex
	rules    []*faultRule
	rnd      *rand.Rand
	injected int
}

type faultRule struct {
	Rule
	seen int // matching operations so far
}

// fires counts a matching operation and says whether the rule fires on it.
func (r *faultRule) fires(rnd *rand.Rand) bool {
	r.seen++
	switch {
	case r.Nth > 0:
		return r.seen == r.Nth
	case r.Probability > 0:
		return rnd.Float64() < r.Probability
	}
	return false
}

// NewFaults returns a Faults with no rules whose random choices
// (Rule.Probability) come from seed.
func NewFaults(seed uint64) *Faults {
	return &Faults{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Add adds a rule. It rejects a malformed pattern, a probability outside
// [0, 1], a negative Nth, and a rule that would do nothing.
func (f *Faults) Add(r Rule) error {
	if r.Ops == 0 {
		r.Ops = OpAll
	}
	if _, err := path.Match(strings.TrimPrefix(r.Path, "/"), ""); err != nil {
		return fmt.Errorf("fault rule: Path %q: %w", r.Path, err)
	}
	switch {
	case r.Nth < 0:
		return fmt.Errorf("fault rule: Nth is %d, want >= 0", r.Nth)
	case r.Probability < 0 || r.Probability > 1:
		return fmt.Errorf("fault rule: Probability is %v, want in [0, 1]", r.Probability)
	case r.Nth == 0 && r.Probability == 0 && r.Delay == nil:
		return errors.New("fault rule: does nothing: set Nth, Probability or Delay")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &faultRule{Rule: r})
	return nil
}

// Clear removes every rule; operations go through unharmed from now on.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Injected returns how many errors were injected so far, so that a test can
// check its faults really happened.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// decision is what the Faults decided for one operation.
type decision struct {
	err   error // nil: no fault
	after bool  // carry out the operation, then return err
}

// check runs the delays of the rules matching an operation on names (the
// first is the one reported) and decides its fault.
func (f *Faults) check(op Op, names ...string) decision {
	if f == nil {
		return decision{}
	}
	var delays []func(Op, string)
	var d decision
	f.mu.Lock()
	for i, r := range f.rules {
		if r.Ops&op == 0 || !matchAny(r.Path, names) {
			continue
		}
		if r.Delay != nil {
			delays = append(delays, r.Delay)
		}
		if r.fires(f.rnd) && d.err == nil {
			err := r.Err
			if err == nil {
				err = ErrInjected
			}
			d = decision{err: &FaultError{Op: op, Name: names[0], Rule: i, Err: err}, after: r.After}
			f.injected++
		}
	}
	f.mu.Unlock()
	for _, delay := range delays {
		delay(op, names[0])
	}
	return d
}

func matchAny(pattern string, names []string) bool {
	if pattern == "" {
		return true
	}
	for _, n := range names {
		if matchTail(pattern, filepath.ToSlash(n)) {
			return true
		}
	}
	return false
}

// matchTail matches pattern against the whole of name if it starts with a
// slash, else against as many trailing components of name as it has.
func matchTail(pattern, name string) bool {
	if strings.HasPrefix(pattern, "/") {
		ok, _ := path.Match(pattern, "/"+strings.TrimPrefix(name, "/"))
		return ok
	}
	k := strings.Count(pattern, "/") + 1
	parts := strings.Split(strings.TrimPrefix(name, "/"), "/")
	if len(parts) < k {
		return false
	}
	ok, _ := path.Match(pattern, strings.Join(parts[len(parts)-k:], "/"))
	return ok
}

// NewFaultFS wraps fsys so that every operation first goes through faults.
func NewFaultFS(fsys FS, faults *Faults) FS {
	return &faultFS{fs: fsys, faults: faults}
}

type faultFS struct {
	fs     FS
	faults *Faults
}

// do runs an FS operation under the faults' decision.
func (f *faultFS) do(op Op, fn func() error, names ...string) error {
	d := f.faults.check(op, names...)
	if d.err != nil && !d.after {
		return d.err
	}
	if err := fn(); err != nil {
		return err
	}
	return d.err
}

func (f *faultFS) Create(name string) (File, error) {
	var file File
	err := f.do(OpCreate, func() (err error) { file, err = f.fs.Create(name); return err }, name)
	if err != nil {
		if file != nil {
			file.Close()
		}
		return nil, err
	}
	return &faultFile{File: file, name: name, faults: f.faults}, nil
}

func (f *faultFS) Open(name string) (File, error) {
	var file File
	err := f.do(OpOpen, func() (err error) { file, err = f.fs.Open(name); return err }, name)
	if err != nil {
		if file != nil {
			file.Close()
		}
		return nil, err
	}
	return &faultFile{File: file, name: name, faults: f.faults}, nil
}

func (f *faultFS) Rename(oldname, newname string) error {
	return f.do(OpRename, func() error { return f.fs.Rename(oldname, newname) }, newname, oldname)
}

func (f *faultFS) Remove(name string) error {
	return f.do(OpRemove, func() error { return f.fs.Remove(name) }, name)
}

func (f *faultFS) RemoveAll(name string) error {
	return f.do(OpRemove, func() error { return f.fs.RemoveAll(name) }, name)
}

func (f *faultFS) ReadDir(name string) ([]fs.DirEntry, error) {
	var entries []fs.DirEntry
	err := f.do(OpList, func() (err error) { entries, err = f.fs.ReadDir(name); return err }, name)
	if err != nil {
		return nil, err
	}
	return entries, nil
}

func (f *faultFS) MkdirAll(name string, perm fs.FileMode) error {
	return f.do(OpMkdir, func() error { return f.fs.MkdirAll(name, perm) }, name)
}

func (f *faultFS) Stat(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := f.do(OpStat, func() (err error) { fi, err = f.fs.Stat(name); return err }, name)
	if err != nil {
		return nil, err
	}
	return fi, nil
}

func (f *faultFS) SyncDir(name string) error {
	return f.do(OpSyncDir, func() error { return f.fs.SyncDir(name) }, name)
}

type faultFile struct {
	File
	name   string
	faults *Faults
}

func (f *faultFile) Read(p []byte) (int, error) {
	d := f.faults.check(OpRead, f.name)
	if d.err != nil && !d.after {
		return 0, d.err
	}
	n, err := f.File.Read(p)
	if err != nil && err != io.EOF {
		return n, err
	}
	if d.err != nil {
		return n, d.err
	}
	return n, err
}

func (f *faultFile) Write(p []byte) (int, error) {
	d := f.faults.check(OpWrite, f.name)
	if d.err != nil && !d.after {
		return 0, d.err
	}
	n, err := f.File.Write(p)
	if err != nil {
		return n, err
	}
	return n, d.err
}

func (f *faultFile) Sync() error {
	d := f.faults.check(OpSync, f.name)
	if d.err != nil && !d.after {
		return d.err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	return d.err
}

func (f *faultFile) Close() error {
	d := f.faults.check(OpClose, f.name)
	// A file whose Close fails is still closed: never leak the descriptor.
	err := f.File.Close()
	if d.err != nil {
		return d.err
	}
	return err
}

func (f *faultFile) Stat() (fs.FileInfo, error) {
	d := f.faults.check(OpStat, f.name)
	if d.err != nil && !d.after {
		return nil, d.err
	}
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	return fi, nil
}

// WithFaults wraps any Store so that every operation first goes through
// faults: the exactly-once harness injects storage errors and slow writes
// with it around a memory store, where NewFaultFS serves the file store.
func WithFaults(s Store, faults *Faults) Store {
	return &faultStore{s: s, faults: faults}
}

type faultStore struct {
	s      Store
	faults *Faults
}

var _ Store = (*faultStore)(nil)

func (f *faultStore) URL() string { return f.s.URL() }

func (f *faultStore) do(op Op, name string, fn func() error) error {
	d := f.faults.check(op, name)
	if d.err != nil && !d.after {
		return d.err
	}
	if err := fn(); err != nil {
		return err
	}
	return d.err
}

func (f *faultStore) Create(ctx context.Context, name string) (ObjectWriter, error) {
	var w ObjectWriter
	err := f.do(OpCreate, name, func() (err error) { w, err = f.s.Create(ctx, name); return err })
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return nil, err
	}
	return &faultWriter{w: w, name: name, faults: f.faults}, nil
}

func (f *faultStore) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	var r io.ReadCloser
	err := f.do(OpOpen, name, func() (err error) { r, err = f.s.Open(ctx, name); return err })
	if err != nil {
		if r != nil {
			r.Close()
		}
		return nil, err
	}
	return &faultReader{r: r, name: name, faults: f.faults}, nil
}

func (f *faultStore) Stat(ctx context.Context, name string) (int64, error) {
	var size int64
	err := f.do(OpStat, name, func() (err error) { size, err = f.s.Stat(ctx, name); return err })
	if err != nil {
		return 0, err
	}
	return size, nil
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	err := f.do(OpList, prefix, func() (err error) { names, err = f.s.List(ctx, prefix); return err })
	if err != nil {
		return nil, err
	}
	return names, nil
}

func (f *faultStore) Delete(ctx context.Context, name string) error {
	return f.do(OpRemove, name, func() error { return f.s.Delete(ctx, name) })
}

func (f *faultStore) DeletePrefix(ctx context.Context, prefix string) error {
	return f.do(OpRemove, prefix, func() error { return f.s.DeletePrefix(ctx, prefix) })
}

type faultWriter struct {
	w      ObjectWriter
	name   string
	faults *Faults
}

func (w *faultWriter) Write(p []byte) (int, error) {
	d := w.faults.check(OpWrite, w.name)
	if d.err != nil && !d.after {
		return 0, d.err
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, d.err
}

func (w *faultWriter) Commit() error {
	d := w.faults.check(OpCommit, w.name)
	if d.err != nil && !d.after {
		w.w.Abort()
		return d.err
	}
	if err := w.w.Commit(); err != nil {
		return err
	}
	return d.err
}

func (w *faultWriter) Abort() error { return w.w.Abort() }

type faultReader struct {
	r      io.ReadCloser
	name   string
	faults *Faults
}

func (r *faultReader) Read(p []byte) (int, error) {
	d := r.faults.check(OpRead, r.name)
	if d.err != nil && !d.after {
		return 0, d.err
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		return n, err
	}
	if d.err != nil {
		return n, d.err
	}
	return n, err
}

func (r *faultReader) Close() error { return r.r.Close() }
