package adapt

import (
	"fmt"
	"sync/atomic"
)

// The names of the filter's loops, for ForceFilterLoop.
const (
	LoopAdaptive   = "adaptive"
	LoopBranchFree = "branch-free"
	LoopBranching  = "branching"
)

var forcedLoop atomic.Pointer[string]

// ForceFilterLoop makes every filter deployed afterwards in this process
// run one loop instead of choosing: LoopBranchFree or LoopBranching;
// LoopAdaptive or "" restores the choice. It is a switch for tests and
// benchmarks that compare the loops (bench's -stateless.filterloop, make
// pgo), not part of weir's API: jobs always adapt. A job reads it when it
// deploys; safe for concurrent use. A name that is none of these is an
// error and changes nothing.
func ForceFilterLoop(loop string) error {
	switch loop {
	case "", LoopAdaptive:
		forcedLoop.Store(nil)
	case LoopBranchFree, LoopBranching:
		forcedLoop.Store(&loop)
	default:
		return fmt.Errorf("adapt: filter loop %q; want %q, %q or %q (empty means adaptive)", loop, LoopAdaptive, LoopBranchFree, LoopBranching)
	}
	return nil
}

// ForcedFilterLoop returns the loop ForceFilterLoop forced, or
// LoopAdaptive.
func ForcedFilterLoop() string {
	if p := forcedLoop.Load(); p != nil {
		return *p
	}
	return LoopAdaptive
}
