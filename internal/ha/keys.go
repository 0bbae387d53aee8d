package ha

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Keys is the layout of one cluster's keys in etcd, all under
// /weir/<cluster-id>/:
//
//	leader/<lease>              election candidates; the oldest is the leader, its value a LeaderInfo
//	jobmanagers/<name>          every live JobManager (leader or standby), leased, value a LeaderInfo
//	jobs/<job-id>               a submitted job (JobRecord), until it ends for good
//	checkpoints/<job-id>/counter     the job's highest reserved checkpoint id
//	checkpoints/<job-id>/latest      the job's latest completed checkpoint (Pointer)
//
// Keys are pure: they name things and read nothing.
type Keys struct {
	root string
}

// clusterIDPattern is what a cluster id may be: it is a path segment of
// every key, so no slash.
var clusterIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// jobIDPattern is what a job id may be, for the same reason.
var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// NewKeys returns the layout of cluster id's keys; an id that is empty or
// not a path segment is an error.
func NewKeys(clusterID string) (Keys, error) {
	if !clusterIDPattern.MatchString(clusterID) {
		return Keys{}, fmt.Errorf("high availability: cluster id %q: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (Flink's high-availability.cluster-id, such as \"prod-1\")", clusterID)
	}
	return Keys{root: "/weir/" + clusterID + "/"}, nil
}

// Root is the prefix of every key of the cluster.
func (k Keys) Root() string { return k.root }

// Election is the prefix the JobManagers campaign under.
func (k Keys) Election() string { return k.root + "leader/" }

// Members is the prefix of the live JobManagers.
func (k Keys) Members() string { return k.root + "jobmanagers/" }

// Member is one JobManager's membership key.
func (k Keys) Member(name string) string { return k.Members() + name }

// Jobs is the prefix of the submitted jobs.
func (k Keys) Jobs() string { return k.root + "jobs/" }

// Job is the key of one submitted job.
func (k Keys) Job(jobID string) string { return k.Jobs() + jobID }

// Checkpoints is the prefix of every job's checkpoint keys.
func (k Keys) Checkpoints() string { return k.root + "checkpoints/" }

// JobCheckpoints is the prefix of one job's checkpoint keys.
func (k Keys) JobCheckpoints(jobID string) string { return k.Checkpoints() + jobID + "/" }

// Counter is the key of a job's checkpoint id counter.
func (k Keys) Counter(jobID string) string { return k.JobCheckpoints(jobID) + "counter" }

// Latest is the key of a job's latest completed checkpoint pointer.
func (k Keys) Latest(jobID string) string { return k.JobCheckpoints(jobID) + "latest" }

// CheckpointKey parses a key under Checkpoints into its job id and its
// kind ("counter" or "latest"); ok is false for any other key.
func (k Keys) CheckpointKey(key string) (jobID, kind string, ok bool) {
	rest, found := strings.CutPrefix(key, k.Checkpoints())
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	jobID, kind = rest[:i], rest[i+1:]
	if kind != "counter" && kind != "latest" {
		return "", "", false
	}
	return jobID, kind, true
}

// CheckJobID reports whether id can name a job in etcd.
func CheckJobID(id string) error {
	if !jobIDPattern.MatchString(id) {
		return fmt.Errorf("high availability: job id %q: use 1 to 127 letters, digits, '.', '_', ':' or '-'", id)
	}
	return nil
}

// LeaderInfo is what a JobManager publishes of itself: as the value of its
// election key and of its membership key.
type LeaderInfo struct {
	// Name identifies the JobManager process.
	Name string `json:"name"`
	// RPCAddress is its control plane (host:port), where TaskManagers
	// register once it leads.
	RPCAddress string `json:"rpc_address"`
	// RESTURL is its REST API (http://host:port), "" without one.
	RESTURL string `json:"rest_url,omitempty"`
	// Since is when it started (a member) or was elected (the leader).
	Since time.Time `json:"since"`
	// Revision is the leadership's revision (the create revision of the
	// election key): the fencing token. Filled when read, 0 for members.
	Revision int64 `json:"-"`
}

// JobRecord is one submitted job as etcd keeps it: enough for any
// JobManager to build it again (the same binary builds a job from its name
// and flags) under the same id.
type JobRecord struct {
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Args []string `json:"args"`
	// Submitted is when it was first submitted.
	Submitted time.Time `json:"submitted"`
}

// Pointer names a job's latest completed checkpoint (or savepoint); the
// checkpoint's metadata stays in checkpoint storage, as in Flink.
type Pointer struct {
	JobID      string `json:"job_id"`
	Checkpoint int64  `json:"checkpoint"`
	// URL is where the checkpoint is (a value jobmaster.Options.Restore
	// accepts).
	URL       string    `json:"url"`
	Savepoint bool      `json:"savepoint,omitempty"`
	Completed time.Time `json:"completed"`
	// Leader is the leadership revision it was written under.
	Leader int64 `json:"leader"`
}

func decodeJSON[T any](key string, b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("high availability: etcd key %s holds %q, which is not a weir record: %w (remove it with etcdctl del if it is not weir's)", key, truncate(b), err)
	}
	return v, nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

func parseCounter(key string, b []byte) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("high availability: etcd key %s holds %q, not a checkpoint id", key, truncate(b))
	}
	return n, nil
}

// Recovery is what a new leader does for one job it found in etcd.
type Recovery struct {
	Job JobRecord
	// Restore is where the job starts again: its latest completed
	// checkpoint's URL, or "" when none completed (then the job starts as
	// it was submitted: its own flags say whether it restores).
	Restore string
	// Checkpoint is the id Restore names, 0 without one.
	Checkpoint int64
	// NextID is the lowest checkpoint id the job may use next: above both
	// the reserved counter and the pointer's checkpoint (ids never repeat:
	// exactly-once sinks name their transactions by them).
	NextID int64
}

// State is what etcd holds of a cluster's jobs, as a new leader reads it.
type State struct {
	Jobs     []JobRecord
	Pointers map[string]Pointer // by job id
	Counters map[string]int64   // by job id
}

// Plan decides what a new leader recovers from s: every job, sorted by
// submission time then id, each from its latest pointer. Pointers and
// counters of jobs that are not submitted (a job that ended, whose record
// was removed before them) are returned as Orphans, for removal.
func Plan(s State) (plan []Recovery, orphans []string) {
	jobs := slices.Clone(s.Jobs)
	slices.SortFunc(jobs, func(a, b JobRecord) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), strings.Compare(a.ID, b.ID))
	})
	known := map[string]bool{}
	for _, j := range jobs {
		if known[j.ID] {
			continue
		}
		known[j.ID] = true
		r := Recovery{Job: j, NextID: s.Counters[j.ID] + 1}
		if p, ok := s.Pointers[j.ID]; ok && p.Checkpoint > 0 {
			r.Restore, r.Checkpoint = p.URL, p.Checkpoint
			r.NextID = max(r.NextID, p.Checkpoint+1)
		}
		plan = append(plan, r)
	}
	seen := map[string]bool{}
	for id := range s.Pointers {
		if !known[id] {
			seen[id] = true
		}
	}
	for id := range s.Counters {
		if !known[id] {
			seen[id] = true
		}
	}
	for id := range seen {
		orphans = append(orphans, id)
	}
	slices.Sort(orphans)
	return plan, orphans
}
