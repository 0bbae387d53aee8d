package weir

import (
	"reflect"
	goruntime "runtime"
	"sync"

	"github.com/weirstream/weir/internal/adapt"
	"github.com/weirstream/weir/internal/blame"
	"github.com/weirstream/weir/internal/runtime"
)

// fusedPass names every instance of mapOp.emitFiltered, the fused
// map→filter pass:
// "github.com/weirstream/weir.(*mapOp[go.shape.int64,go.shape.int64]).emitFiltered".
var fusedPass = blame.Pass{
	Prefix: reflect.TypeFor[mapOp[int, int]]().PkgPath() + ".(*mapOp[",
	Suffix: ").emitFiltered",
}

// inFusedFilterCall reports whether the innermost fused map→filter pass
// on the calling goroutine's stack is inside its call of the filter's
// function (see internal/blame): it tells the filter's function from the
// map's even when both are one function, and when profile-guided
// optimization has inlined them into the pass.
func inFusedFilterCall() bool { return fusedPass.InCall(fusedKeepLines) }

// fusedKeepLines returns the lines of operators.go at which
// mapOp.emitFiltered calls the filter's function (one per loop), found
// once, the first time a fused pass panics, by running a pass whose filter
// function reports where it was called from.
var fusedKeepLines = sync.OnceValue(func() map[int]bool {
	lines := make(map[int]bool)
	keep := func(int) bool {
		if _, _, line, ok := goruntime.Caller(1); ok {
			lines[line] = true
		}
		return false
	}
	env := &opEnv{cursor: new(runtime.Cursor)}
	for _, flavor := range []adapt.Flavor{branchFree, branching} {
		f := newFilterOp(keep, discard[int]{}, env)
		f.adapt = adapt.Fixed(flavor)
		m := newMapOp(func(v int) int { return v }, f, env)
		m.emitFiltered([]int{0}, nil)
		m.emitFiltered([]int{0}, []int64{0})
	}
	return lines
})

// discard is an Output that drops what it is given.
type discard[T any] struct{}

func (discard[T]) Emit(T, int64) {}
