package connector

import (
	"fmt"
	"hash/fnv"
)

// SplitDiscoverer is implemented by a Source whose set of splits grows
// while the job runs: Kafka partitions added to a topic (or topics that
// come to match a pattern), files that appear in a watched directory.
//
// There is no coordinator that hands new splits out, so each reader
// discovers splits itself (it lists the partitions or the directory) and
// reads those that SplitOwner gives to its subtask. What makes a split be
// read exactly once, also across restores at another parallelism, is that
// one rule decides every assignment of a deployment:
//
//   - When a job starts without a checkpoint, the runtime deals the splits
//     Source.Splits enumerates by SplitOwner (not round-robin).
//   - When a job restores, the runtime gathers the split states of every
//     subtask of the checkpoint and deals each to SplitOwner(id, p) of the
//     new parallelism p. A split ID found twice fails the restore.
//   - A reader discovering a split reads it only if SplitOwner gives it to
//     its subtask and it was not given the split by AddSplits (or found it
//     earlier). SplitClaims keeps that record.
//
// So the owner of a split in a deployment is the only subtask that holds
// it, whether it came from the checkpoint or from discovery: no two readers
// read a split, and a split that the checkpoint does not hold is new to the
// whole job, to be read from its beginning (the records a failed run read
// of it after the checkpoint were rolled back with the run). The
// consequences for a connector:
//
//   - SplitOwner is a pure function of the split ID and the parallelism,
//     the same in every process and every version that may restore the
//     checkpoint.
//   - Snapshot keeps every split the reader could discover again, finished
//     ones included (with a position saying so): a split missing from a
//     checkpoint is taken as new and read again from its start. (Readers of
//     sources that never finish a discoverable split, an unbounded Kafka
//     topic, have nothing to add.)
//   - A newly discovered split starts at a position that does not depend on
//     when it was discovered (its earliest offset, a file's first byte), so
//     that a restored run reads what the failed one read.
//   - The reader adds discovered splits itself (AddSplits is still called
//     once, with the dealt splits, before the first Poll); an unbounded
//     discovering reader does not report EndOfInput when it has no split.
//
// A coordinator (Flink's KafkaSource enumerator) could balance splits
// better than a hash and discover once instead of in every subtask; the
// rule above needs none, and a coordinator that later takes discovery over
// can keep SplitOwner as its assignment.
type SplitDiscoverer interface {
	// DiscoversSplits reports whether the source, as configured, finds
	// splits at run time (a source may discover in some configurations
	// only). When false the runtime deals splits round-robin and ignores
	// SplitOwner.
	DiscoversSplits() bool
	// SplitOwner returns the subtask, in [0, parallelism), that reads the
	// split with the given ID. Called from any goroutine; it must be pure.
	SplitOwner(splitID string, parallelism int) int
}

// HashOwner is an owner rule for sources with none better: FNV-1a of key,
// modulo parallelism.
func HashOwner(key string, parallelism int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(parallelism))
}

// AssignSplits deals splits to parallelism subtasks: by owner when it is
// not nil, round-robin otherwise (split i to subtask i mod parallelism).
// The runtime uses it for the splits a job starts with and for those of a
// restored checkpoint, gathered from all its subtasks. It fails when a
// split ID appears twice or owner returns a subtask out of range: either
// would have two readers, or none, read a split.
func AssignSplits(splits []SplitState, parallelism int, owner func(splitID string, parallelism int) int) ([][]SplitState, error) {
	if parallelism < 1 {
		return nil, fmt.Errorf("assign splits: parallelism %d, want >= 1", parallelism)
	}
	out := make([][]SplitState, parallelism)
	seen := make(map[string]bool, len(splits))
	for i, sp := range splits {
		if seen[sp.ID] {
			return nil, fmt.Errorf("assign splits: split %q appears twice; the checkpoint or the source's split list is corrupt", sp.ID)
		}
		seen[sp.ID] = true
		s := i % parallelism
		if owner != nil {
			s = owner(sp.ID, parallelism)
			if s < 0 || s >= parallelism {
				return nil, fmt.Errorf("assign splits: the source's SplitOwner gives split %q to subtask %d, outside [0, %d)", sp.ID, s, parallelism)
			}
		}
		out[s] = append(out[s], sp)
	}
	return out, nil
}

// SplitClaims is a discovering reader's record of the splits it holds.
// The reader calls Assigned for each split AddSplits gives it and Claim
// for each split its discovery finds; Claim says which discovered splits
// are new and the reader's to read. Like the Reader, it is used from the
// task's goroutine only (or under the reader's own lock).
type SplitClaims struct {
	subtask, parallelism int
	owner                func(string, int) int
	held                 map[string]bool
}

// NewSplitClaims returns the claims of the reader of ctx.Subtask, under
// the source's owner rule.
func NewSplitClaims(ctx ReaderContext, owner func(splitID string, parallelism int) int) *SplitClaims {
	return &SplitClaims{subtask: ctx.Subtask, parallelism: ctx.Parallelism, owner: owner, held: map[string]bool{}}
}

// Owns reports whether the split is this reader's under the owner rule.
func (c *SplitClaims) Owns(splitID string) bool {
	return c.owner(splitID, c.parallelism) == c.subtask
}

// Assigned records a split given by AddSplits. It fails when the split is
// not this reader's (the runtime dealt the splits by another rule: another
// reader may be reading it) or when it is held already.
func (c *SplitClaims) Assigned(splitID string) error {
	if o := c.owner(splitID, c.parallelism); o != c.subtask {
		return fmt.Errorf("split %q given to subtask %d of %d, but the source's owner rule gives it to subtask %d: refusing it, since that subtask reads it too", splitID, c.subtask, c.parallelism, o)
	}
	if c.held[splitID] {
		return fmt.Errorf("split %q given twice", splitID)
	}
	c.held[splitID] = true
	return nil
}

// Claim reports whether a discovered split is new and this reader's; if so
// it is recorded as held, and the reader must read it from its beginning.
func (c *SplitClaims) Claim(splitID string) bool {
	if c.held[splitID] || !c.Owns(splitID) {
		return false
	}
	c.held[splitID] = true
	return true
}

// Holds reports whether the split is held.
func (c *SplitClaims) Holds(splitID string) bool { return c.held[splitID] }

// Forget drops a split that no longer exists (a deleted file): should
// discovery find it again, it is new.
func (c *SplitClaims) Forget(splitID string) { delete(c.held, splitID) }
