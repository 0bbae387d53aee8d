package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader is wrapped by every write refused because the leadership
// it was made under is over (fencing): the writer must stop acting as the
// leader.
var ErrNotLeader = errors.New("not the leader any more")

// Store is the leader's view of the cluster's keys: reads are plain, and
// every write is a transaction guarded by the leadership's revision.
// Safe for concurrent use.
type Store struct {
	cli       *clientv3.Client
	keys      Keys
	leaderKey string
	rev       int64
	timeout   time.Duration
	log       *slog.Logger

	writes, fenced, failed atomic.Int64
}

// StoreStats count a Store's writes.
type StoreStats struct {
	// Writes counts the writes that succeeded.
	Writes int64
	// Fenced counts writes refused by the revision guard (ErrNotLeader).
	Fenced int64
	// Failed counts writes that did not reach etcd (unreachable, timed
	// out): their outcome is not known.
	Failed int64
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	return StoreStats{Writes: s.writes.Load(), Fenced: s.fenced.Load(), Failed: s.failed.Load()}
}

// Revision is the leadership revision that guards the writes.
func (s *Store) Revision() int64 { return s.rev }

// guard holds while the leadership lasts: the election key still exists
// with the create revision it was won with.
func (s *Store) guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.rev)
}

// write commits ops if the guard holds.
func (s *Store) write(ctx context.Context, what string, ops ...clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(s.guard()).Then(ops...).Commit()
	if err != nil {
		s.failed.Add(1)
		return fmt.Errorf("high availability: %s: etcd did not answer: %v", what, describe(err))
	}
	if !resp.Succeeded {
		s.fenced.Add(1)
		s.log.Warn("write refused: the leadership it was made under is over", "write", what, "revision", s.rev)
		return fmt.Errorf("high availability: %s: %w (leadership revision %d ended)", what, ErrNotLeader, s.rev)
	}
	s.writes.Add(1)
	return nil
}

// PutJob records a submitted job.
func (s *Store) PutJob(ctx context.Context, j JobRecord) error {
	if err := CheckJobID(j.ID); err != nil {
		return err
	}
	if j.Submitted.IsZero() {
		j.Submitted = time.Now()
	}
	b, _ := json.Marshal(j)
	return s.write(ctx, "record job "+j.ID, clientv3.OpPut(s.keys.Job(j.ID), string(b)))
}

// RemoveJob forgets a job that ended for good (finished, cancelled,
// failed): its record, counter and pointer, in one transaction.
func (s *Store) RemoveJob(ctx context.Context, jobID string) error {
	return s.write(ctx, "remove job "+jobID,
		clientv3.OpDelete(s.keys.Job(jobID)),
		clientv3.OpDelete(s.keys.JobCheckpoints(jobID), clientv3.WithPrefix()))
}

// Read reads every job, pointer and counter of the cluster at one revision.
func (s *Store) Read(ctx context.Context) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return read(ctx, s.cli, s.keys)
}

func read(ctx context.Context, cli *clientv3.Client, keys Keys) (State, error) {
	st := State{Pointers: map[string]Pointer{}, Counters: map[string]int64{}}
	jobs, err := cli.Get(ctx, keys.Jobs(), clientv3.WithPrefix())
	if err != nil {
		return st, fmt.Errorf("high availability: read the jobs: %v", describe(err))
	}
	cps, err := cli.Get(ctx, keys.Checkpoints(), clientv3.WithPrefix(), clientv3.WithRev(jobs.Header.Revision))
	if err != nil {
		return st, fmt.Errorf("high availability: read the checkpoint pointers: %v", describe(err))
	}
	for _, kv := range jobs.Kvs {
		j, err := decodeJSON[JobRecord](string(kv.Key), kv.Value)
		if err != nil {
			return st, err
		}
		st.Jobs = append(st.Jobs, j)
	}
	for _, kv := range cps.Kvs {
		id, kind, ok := keys.CheckpointKey(string(kv.Key))
		if !ok {
			continue
		}
		switch kind {
		case "latest":
			p, err := decodeJSON[Pointer](string(kv.Key), kv.Value)
			if err != nil {
				return st, err
			}
			st.Pointers[id] = p
		case "counter":
			n, err := parseCounter(string(kv.Key), kv.Value)
			if err != nil {
				return st, err
			}
			st.Counters[id] = n
		}
	}
	return st, nil
}

// Recover reads the cluster's state and plans its recovery (Plan); the
// orphaned pointers and counters it finds are removed (guarded).
func (s *Store) Recover(ctx context.Context) ([]Recovery, error) {
	st, err := s.Read(ctx)
	if err != nil {
		return nil, err
	}
	plan, orphans := Plan(st)
	for _, id := range orphans {
		if err := s.write(ctx, "remove the checkpoint keys of ended job "+id,
			clientv3.OpDelete(s.keys.JobCheckpoints(id), clientv3.WithPrefix())); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// Job returns job id's checkpoint keys: its id counter and its latest
// completed checkpoint, as the JobMaster's hooks (jobmaster.Options'
// IDCounter and CompletedStore).
func (s *Store) Job(jobID string) *JobStore { return &JobStore{s: s, jobID: jobID} }

// JobStore is one job's checkpoint keys in etcd, written under the
// leader's guard. It implements jobmaster.CheckpointIDCounter and
// jobmaster.CompletedCheckpointStore.
type JobStore struct {
	s     *Store
	jobID string

	mu     sync.Mutex // orders AddCompleted calls
	latest int64      // the newest id AddCompleted recorded
}

// Reserved returns the highest checkpoint id recorded, 0 when none.
func (j *JobStore) Reserved(ctx context.Context) (int64, error) {
	key := j.s.keys.Counter(j.jobID)
	resp, err := j.s.cli.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("high availability: read the checkpoint id counter of job %s: %v", j.jobID, describe(err))
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return parseCounter(key, resp.Kvs[0].Value)
}

// Reserve records next as the highest checkpoint id used.
func (j *JobStore) Reserve(ctx context.Context, next int64) error {
	return j.s.write(ctx, fmt.Sprintf("reserve checkpoint ids of job %s up to %d", j.jobID, next),
		clientv3.OpPut(j.s.keys.Counter(j.jobID), strconv.FormatInt(next, 10)))
}

// AddCompleted records checkpoint id (at url) as the job's latest
// completed one. Until it returns nil the checkpoint does not count.
//
// Calls are serialised; one for an id older than one already recorded
// (checkpoints whose metadata writes crossed) succeeds without moving the
// pointer back: the newer checkpoint subsumes it.
func (j *JobStore) AddCompleted(ctx context.Context, id int64, url string, savepoint bool) (err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if id <= j.latest {
		return nil
	}
	defer func() {
		if err == nil {
			j.latest = id
		}
	}()
	b, _ := json.Marshal(Pointer{JobID: j.jobID, Checkpoint: id, URL: url, Savepoint: savepoint, Completed: time.Now(), Leader: j.s.rev})
	return j.s.write(ctx, fmt.Sprintf("record checkpoint %d of job %s as complete", id, j.jobID),
		clientv3.OpPut(j.s.keys.Latest(j.jobID), string(b)))
}

// Latest reads the job's pointer; ok is false when none was recorded.
func (j *JobStore) Latest(ctx context.Context) (Pointer, bool, error) {
	key := j.s.keys.Latest(j.jobID)
	resp, err := j.s.cli.Get(ctx, key)
	if err != nil {
		return Pointer{}, false, fmt.Errorf("high availability: read the latest checkpoint of job %s: %v", j.jobID, describe(err))
	}
	if len(resp.Kvs) == 0 {
		return Pointer{}, false, nil
	}
	p, err := decodeJSON[Pointer](key, resp.Kvs[0].Value)
	return p, err == nil, err
}
