package blame

import (
	"reflect"
	"runtime"
	"testing"
)

// fused stands for a fused pass: it calls first, then second, each on a
// line of its own, and asks from a deferred function whether a panic came
// from second's call.
type fused[T any] struct{ pass Pass }

func (f *fused[T]) run(first, second func(), lines func() map[int]bool) (inSecond bool, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			inSecond = f.pass.InCall(lines)
		}
	}()
	first()
	second() // the line callLines finds
	return false, false
}

var testPass = Pass{
	Prefix: reflect.TypeFor[fused[int]]().PkgPath() + ".(*fused[",
	Suffix: "]).run",
}

// callLines finds the line at which fused.run calls its second function
// by running a pass whose second function reports its caller's line.
func callLines() map[int]bool {
	lines := map[int]bool{}
	f := &fused[string]{pass: testPass}
	f.run(func() {}, func() {
		if _, _, line, ok := runtime.Caller(1); ok {
			lines[line] = true
		}
	}, func() map[int]bool { return nil })
	return lines
}

func TestInCall(t *testing.T) {
	lines := callLines()
	if len(lines) != 1 {
		t.Fatalf("calibration found lines %v, want one", lines)
	}
	boom := func() { panic("boom") }
	nothing := func() {}
	deep := func() {
		var rec func(int)
		rec = func(n int) {
			if n == 0 {
				panic("deep")
			}
			rec(n - 1)
		}
		rec(600) // deeper than the first 256 frames InCall reads
	}
	tests := []struct {
		name          string
		first, second func()
		want          bool
	}{
		{"the second function panics", nothing, boom, true},
		{"the first function panics", boom, nothing, false},
		{"a deep stack in the second function", nothing, deep, true},
		{"a deep stack in the first function", deep, nothing, false},
		{"one function for both, panicking in the first call", boom, boom, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fused[int]{pass: testPass}
			got, panicked := f.run(tt.first, tt.second, func() map[int]bool { return lines })
			if !panicked {
				t.Fatal("no panic")
			}
			if got != tt.want {
				t.Fatalf("InCall = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInCallWithoutThePass(t *testing.T) {
	called := false
	if (Pass{Prefix: "no.such.(*pass[", Suffix: "]).run"}).InCall(func() map[int]bool { called = true; return nil }) {
		t.Fatal("InCall = true without the pass on the stack")
	}
	if called {
		t.Fatal("InCall asked for the lines without finding the pass")
	}
}

func TestMatches(t *testing.T) {
	p := Pass{Prefix: "github.com/weirstream/weir.(*mapOp[", Suffix: "]).emitFiltered"}
	tests := []struct {
		fn   string
		want bool
	}{
		{"github.com/weirstream/weir.(*mapOp[go.shape.int64,go.shape.int64]).emitFiltered", true},
		{"github.com/weirstream/weir.(*mapOp[go.shape.string,go.shape.int]).emitFiltered", true},
		{"github.com/weirstream/weir.(*mapOp[go.shape.int64,go.shape.int64]).Emit", false},
		{"github.com/weirstream/weir.(*filterOp[go.shape.int64]).emitFiltered", false},
	}
	for _, tt := range tests {
		if got := p.Matches(tt.fn); got != tt.want {
			t.Errorf("Matches(%q) = %v, want %v", tt.fn, got, tt.want)
		}
	}
}
