// Package state holds the handles through which user functions read and write
// keyed state. A handle is scoped to the key of the record being processed: the
// runtime sets the current key before it calls the function, so a handle always
// reads and writes the current key's value.
//
// Handles are created once, in a function's Open, with weir.Value and friends,
// and used only from the task goroutine that created them.
package state
