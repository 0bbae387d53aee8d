package typeinfo

import "reflect"

// HoldsPointers reports whether a value of type T holds a reference the
// garbage collector follows: a pointer, string, slice, map, channel,
// function or interface, alone or inside an array or struct. A reused
// buffer of records is cleared after use only so that it does not keep
// what its old records referred to alive; for a type without pointers
// there is nothing to release and the clear can be skipped. It uses
// reflect: call it once, when an operator or channel is built.
func HoldsPointers[T any]() bool { return holdsPointers(reflect.TypeFor[T]()) }

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
