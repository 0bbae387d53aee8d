package state

// Value is keyed state holding one value of type T per key.
type Value[T any] interface {
	// Value returns the current key's value and whether it is set.
	Value() (T, bool)
	// Update sets the current key's value.
	Update(v T)
	// Clear removes the current key's value.
	Clear()
}
