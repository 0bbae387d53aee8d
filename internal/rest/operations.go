package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// opKind is the family of an asynchronous operation; its status is polled
// under that family's path. Stops are savepoints (as in Flink).
type opKind string

const (
	opCheckpoint opKind = "checkpoint"
	opSavepoint  opKind = "savepoint"
)

type opKey struct {
	kind opKind
	job  string
	id   string
}

// opResult is an operation's state as seen by a poll.
type opResult struct {
	done         bool
	checkpointID int64
	location     string
	err          error
	// read is set once a poll answered the outcome.
	read bool
}

// opFunc runs an operation; it returns a checkpoint id or a location.
type opFunc func(ctx context.Context) (checkpointID int64, location string, err error)

var (
	errTooManyOperations = errors.New("too many operations in progress")
	errShuttingDown      = errors.New("the server is shutting down")
)

// operations runs asynchronous operations on goroutines it tracks, and
// keeps the results of at most max of them for polling.
type operations struct {
	logger *slog.Logger
	max    int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	byKey   map[opKey]*opResult
	order   []opKey // oldest first
	// changed is closed (and replaced) when an operation ends or its
	// outcome is read: awaitRead's wake-up.
	changed chan struct{}
}

func newOperations(max int, logger *slog.Logger) *operations {
	ctx, cancel := context.WithCancel(context.Background())
	return &operations{logger: logger, max: max, ctx: ctx, cancel: cancel, byKey: make(map[opKey]*opResult), changed: make(chan struct{})}
}

// start runs fn as operation id (a new random id when empty) of job and
// returns the id. A known id starts nothing (the request is a retry).
func (o *operations) start(kind opKind, job, id string, fn opFunc) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return "", errShuttingDown
	}
	if id == "" {
		id = newTriggerID()
	}
	key := opKey{kind, job, id}
	if _, ok := o.byKey[key]; ok {
		return id, nil
	}
	if len(o.byKey) >= o.max && !o.evictOldestDone() {
		return "", errTooManyOperations
	}
	res := &opResult{}
	o.byKey[key] = res
	o.order = append(o.order, key)
	o.wg.Add(1)
	go o.run(key, res, fn)
	return id, nil
}

func (o *operations) run(key opKey, res *opResult, fn opFunc) {
	defer o.wg.Done()
	var (
		cid int64
		loc string
		err error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				o.logger.Error("asynchronous operation panicked", "job", key.job, "operation", string(key.kind), "panic", r)
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		cid, loc, err = fn(o.ctx)
	}()
	if err != nil {
		o.logger.Warn("asynchronous operation failed", "job", key.job, "operation", string(key.kind), "trigger", key.id, "err", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	res.done, res.checkpointID, res.location, res.err = true, cid, loc, err
	o.signal()
}

// signal wakes awaitRead; o.mu is held.
func (o *operations) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// markRead records that a poll answered the outcome of a finished
// operation.
func (o *operations) markRead(kind opKind, job, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r, ok := o.byKey[opKey{kind, job, id}]; ok && r.done && !r.read {
		r.read = true
		o.signal()
	}
}

// awaitRead waits until every operation kept has ended and had its
// outcome read by a poll, or until ctx is done.
func (o *operations) awaitRead(ctx context.Context) error {
	for {
		o.mu.Lock()
		settled := true
		for _, r := range o.byKey {
			if !r.done || !r.read {
				settled = false
				break
			}
		}
		changed := o.changed
		o.mu.Unlock()
		if settled {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// evictOldestDone forgets the oldest finished operation; false if every
// operation is still in progress.
func (o *operations) evictOldestDone() bool {
	for i, k := range o.order {
		if o.byKey[k].done {
			delete(o.byKey, k)
			o.order = slices.Delete(o.order, i, i+1)
			return true
		}
	}
	return false
}

// get returns a copy of the operation's state.
func (o *operations) get(kind opKind, job, id string) (opResult, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.byKey[opKey{kind, job, id}]
	if !ok {
		return opResult{}, false
	}
	return *r, true
}

// stop cancels the operations in progress and waits until they ended; no
// operation starts afterwards. Idempotent.
func (o *operations) stop() {
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}

func newTriggerID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead, on broken systems)
	return hex.EncodeToString(b[:])
}

// validTriggerID reports whether id is 32 lower-case hex digits, Flink's
// TriggerId.
func validTriggerID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
