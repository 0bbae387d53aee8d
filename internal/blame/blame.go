package blame

import (
	"runtime"
	"strings"
)

// Pass names the functions of a fused pass: every function whose symbol
// name begins with Prefix and ends with Suffix (so every instance of one
// generic method, whatever its type arguments).
type Pass struct {
	Prefix, Suffix string
}

// Matches reports whether function, a symbol name as runtime.Frame gives
// it, is one of the pass's.
func (p Pass) Matches(function string) bool {
	return strings.HasPrefix(function, p.Prefix) && strings.HasSuffix(function, p.Suffix)
}

// InCall reports whether the innermost frame of the pass on the calling
// goroutine's stack stands at one of lines (lines is called only when
// such a frame is found); false when the pass is not on the stack. Called
// from a function deferred by the pass while a panic unwinds it, the stack
// still holds every frame from the panic down to the pass.
func (p Pass) InCall(lines func() map[int]bool) bool {
	pcs := make([]uintptr, 256)
	n := runtime.Callers(2, pcs)
	for n == len(pcs) { // a deep stack: look at all of it
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(2, pcs)
	}
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if p.Matches(f.Function) {
			return lines()[f.Line]
		}
		if !more {
			return false
		}
	}
}
