// Package blame reads the calling goroutine's stack to tell which of two
// user functions, called from one fused pass, was running: the fused
// map→filter pass of the root package calls both the map's and the
// filter's function, and a panic must name the operator whose function
// panicked.
//
// It works from line numbers, not function names, so it holds when both
// functions are one function and when profile-guided optimization inlined
// them into the pass (runtime.CallersFrames gives an inlined call's caller
// the line of the call). The caller finds the lines once, by running a
// pass whose function reports where it was called from.
//
// # Usage
//
//	pass := blame.Pass{Prefix: "example.com/pkg.(*mapOp[", Suffix: ").emitFiltered"}
//	defer func() {
//		if r := recover(); r != nil && pass.InCall(filterLines()) {
//			// the filter's function panicked
//		}
//	}()
package blame
