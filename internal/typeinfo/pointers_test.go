package typeinfo

import (
	"testing"
	"unsafe"
)

func TestHoldsPointers(t *testing.T) {
	type flat struct {
		A int64
		B [4]float64
		C struct{ D bool }
	}
	type withString struct {
		A int64
		S string
	}
	type deep struct {
		A [2]struct{ P *int }
	}
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"int64", HoldsPointers[int64](), false},
		{"uintptr", HoldsPointers[uintptr](), false},
		{"complex128", HoldsPointers[complex128](), false},
		{"struct of scalars and arrays", HoldsPointers[flat](), false},
		{"empty struct", HoldsPointers[struct{}](), false},
		{"array of pointers, length 0", HoldsPointers[[0]*int](), false},
		{"string", HoldsPointers[string](), true},
		{"pointer", HoldsPointers[*int](), true},
		{"unsafe pointer", HoldsPointers[unsafe.Pointer](), true},
		{"slice of ints", HoldsPointers[[]int](), true},
		{"map", HoldsPointers[map[int]int](), true},
		{"chan", HoldsPointers[chan int](), true},
		{"func", HoldsPointers[func()](), true},
		{"interface", HoldsPointers[any](), true},
		{"struct with a string", HoldsPointers[withString](), true},
		{"array of structs with a pointer", HoldsPointers[deep](), true},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("HoldsPointers[%s]() = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
