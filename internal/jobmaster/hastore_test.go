package jobmaster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// fakeHAStore is a checkpoint id counter and completed-checkpoint store
// whose writes fail while down is set (etcd unreachable).
type fakeHAStore struct {
	mu       sync.Mutex
	down     bool
	reserved int64
	reserves []int64
	added    []int64
	urls     []string
}

func (s *fakeHAStore) Reserved(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved, nil
}

func (s *fakeHAStore) Reserve(_ context.Context, next int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("etcd down")
	}
	s.reserved = next
	s.reserves = append(s.reserves, next)
	return nil
}

func (s *fakeHAStore) AddCompleted(_ context.Context, id int64, url string, _ bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("etcd down")
	}
	s.added = append(s.added, id)
	s.urls = append(s.urls, url)
	return nil
}

func (s *fakeHAStore) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

// TestCompletedStoreFailureDoesNotComplete: with the store down, a
// checkpoint whose tasks all acknowledged and whose metadata is durable
// does not complete: the request fails, the tasks are told it aborted, it
// is counted (NotRecorded) and the job does not fail (it does not count
// toward the tolerable failures, 0 here). Once the store is back the next
// checkpoint completes, and the store holds its URL before the tasks are
// told.
func TestCompletedStoreFailureDoesNotComplete(t *testing.T) {
	st := &fakeHAStore{reserved: 41}
	h := start(t, Options{Checkpoint: checkpoint.Options{Timeout: 10_000}, IDCounter: st, CompletedStore: st})
	next[DeployRequest](t, h.gw)

	res := async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr := next[TriggerRequest](t, h.gw)
	if tr.Checkpoint != 42 {
		t.Fatalf("first checkpoint id %d, want 42 (the counter held 41)", tr.Checkpoint)
	}
	st.setDown(true) // after the id reservation, before the acks
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	r := wait(t, res)
	var ae *checkpoint.AbortError
	if !errors.As(r.err, &ae) || ae.Reason != checkpoint.AbortNotRecorded || !strings.Contains(r.err.Error(), "etcd down") {
		t.Fatalf("TriggerCheckpoint = %d, %v; want an AbortNotRecorded naming the store's error", r.v, r.err)
	}
	if n := next[abortCall](t, h.gw); n.Checkpoint != tr.Checkpoint {
		t.Fatalf("abort notification %+v", n)
	}
	if h.jm.NotRecorded() != 1 {
		t.Fatalf("NotRecorded = %d", h.jm.NotRecorded())
	}
	if s, _ := h.jm.Checkpoint(tr.Checkpoint); s.Status != Failed {
		t.Fatalf("stats %+v", s)
	}

	st.setDown(false)
	res = async(func() (int64, error) { return h.jm.TriggerCheckpoint(context.Background()) })
	tr = next[TriggerRequest](t, h.gw)
	h.gw.ack(0, "a", tr.Checkpoint)
	h.gw.ack(0, "b", tr.Checkpoint)
	if r := wait(t, res); r.err != nil || r.v != 43 {
		t.Fatalf("second TriggerCheckpoint = %d, %v; want 43", r.v, r.err)
	}
	if n := next[completeCall](t, h.gw); n.Checkpoint != 43 {
		t.Fatalf("notify complete %+v", n)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.added) != 1 || st.added[0] != 43 || !strings.HasSuffix(st.urls[0], "job/chk-43") {
		t.Fatalf("store recorded %v at %v, want 43 at …job/chk-43", st.added, st.urls)
	}
	if len(st.reserves) != 1 || st.reserves[0] != 42+idBlock-1 {
		t.Fatalf("reservations %v, want one up to %d", st.reserves, 42+idBlock-1)
	}
	if err := h.end(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the cancellation: the job must not fail", err)
	}
}
