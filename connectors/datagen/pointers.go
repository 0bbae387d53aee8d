package datagen

import "reflect"

// holdsPointers reports whether a value of type t holds a reference the
// garbage collector follows. A reader clears its reused batch after use
// only so that the batch does not keep what its records referred to
// alive; for a type without pointers (Sequence's int64) it skips the
// clear. The runtime has the same test (runtime.HoldsPointers); a
// connector depends on the connector contract only, so it has its own.
func holdsPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && holdsPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	default: // Pointer, UnsafePointer, String, Slice, Map, Chan, Func, Interface
		return true
	}
}
