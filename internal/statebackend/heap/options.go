package heap

import (
	"fmt"
	"reflect"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/state"
)

// Option is an optional setting of a state, given to its constructor.
type Option func(*stateOptions)

type stateOptions struct {
	ttl    state.TTLConfig
	hasTTL bool
}

// WithTTL makes the state's entries expire (see state.TTLConfig). The
// constructor fails if c is not valid.
func WithTTL(c state.TTLConfig) Option {
	return func(o *stateOptions) { o.ttl, o.hasTTL = c, true }
}

// noNamespace is the namespace type of states without namespaces.
type noNamespace = struct{}

// needsCopy reports whether a value of type t can share memory with
// another (through a pointer, slice, map, interface, channel or function),
// so that modifying one in place could modify the other: such accumulators
// are copied before a user function may modify them while a snapshot holds
// them.
func needsCopy(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && needsCopy(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if needsCopy(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// copier returns a function that deep-copies a T through c (encode, then
// decode), or nil when T shares no memory and a Go assignment copies it.
// The copy panics if c does not decode what it encoded: a broken codec, on
// the task goroutine, which fails the task.
func copier[T any](name string, c codec.Codec[T]) func(T) T {
	if !needsCopy(reflect.TypeFor[T]()) {
		return nil
	}
	return func(v T) T {
		buf := c.Append(nil, v) // not reused: a codec's Decode may keep src
		out, n, err := c.Decode(buf)
		if err == nil && n != len(buf) {
			err = fmt.Errorf("%d bytes left over", len(buf)-n)
		}
		if err != nil {
			panic(fmt.Sprintf("state %q: copying an accumulator through its codec failed: the codec does not decode what it encodes: %v", name, err))
		}
		return out
	}
}
