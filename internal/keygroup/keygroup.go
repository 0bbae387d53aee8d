package keygroup

import "fmt"

// UpperBoundMaxParallelism is the largest accepted maxParallelism, as in
// Flink (1 << 15). Key groups are numbered in [0, maxParallelism).
const UpperBoundMaxParallelism = 1 << 15

// Of returns the key group of a key: Hash(keyBytes) mod maxParallelism.
//
// maxParallelism must be in [1, UpperBoundMaxParallelism] (see Validate);
// Of does not check it because it runs once per record.
func Of(keyBytes []byte, maxParallelism int) int {
	return int(Hash(keyBytes) % uint32(maxParallelism))
}

// Range is the half-open interval [Start, End) of key groups owned by one
// subtask.
type Range struct {
	Start, End int
}

// Contains reports whether key group kg lies in r.
func (r Range) Contains(kg int) bool {
	return r.Start <= kg && kg < r.End
}

// Len returns the number of key groups in r.
func (r Range) Len() int {
	return r.End - r.Start
}

// String formats r as "[Start, End)".
func (r Range) String() string {
	return fmt.Sprintf("[%d, %d)", r.Start, r.End)
}

// RangeFor returns the contiguous range of key groups that subtask owns when
// maxParallelism key groups are spread over parallelism subtasks. It matches
// Flink's KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex, so
// the ranges of subtasks 0..parallelism-1 partition [0, maxParallelism) and
// differ in length by at most one.
//
// The arguments must satisfy Validate(maxParallelism, parallelism) and
// 0 <= subtask < parallelism.
func RangeFor(maxParallelism, parallelism, subtask int) Range {
	// Start is ceil(subtask*maxP/par); End is the start of the next
	// subtask's range, written so that it equals ceil((subtask+1)*maxP/par).
	return Range{
		Start: (subtask*maxParallelism + parallelism - 1) / parallelism,
		End:   ((subtask+1)*maxParallelism-1)/parallelism + 1,
	}
}

// SubtaskFor returns the subtask whose RangeFor contains keyGroup. The
// arguments must satisfy Validate(maxParallelism, parallelism) and
// 0 <= keyGroup < maxParallelism.
func SubtaskFor(keyGroup, maxParallelism, parallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

// Validate reports whether maxParallelism and parallelism can be used
// together: maxParallelism in [1, UpperBoundMaxParallelism] and parallelism
// in [1, maxParallelism], since every subtask must own at least one key
// group.
func Validate(maxParallelism, parallelism int) error {
	if maxParallelism < 1 || maxParallelism > UpperBoundMaxParallelism {
		return fmt.Errorf("keygroup: maxParallelism is %d; it must be in [1, %d]",
			maxParallelism, UpperBoundMaxParallelism)
	}
	if parallelism < 1 || parallelism > maxParallelism {
		return fmt.Errorf("keygroup: parallelism is %d; it must be in [1, maxParallelism=%d] because every subtask owns at least one key group",
			parallelism, maxParallelism)
	}
	return nil
}
