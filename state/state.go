package state

import (
	"fmt"
	"iter"
	"time"
)

// Value is keyed state holding one value of type T per key.
type Value[T any] interface {
	// Value returns the current key's value and whether it is set.
	Value() (T, bool)
	// Update sets the current key's value.
	Update(v T)
	// Clear removes the current key's value.
	Clear()
}

// List is keyed state holding a list of T per key. An empty list and no
// list are the same: Update with no elements clears the state.
type List[T any] interface {
	// Get returns the current key's list, nil when it has none. The slice
	// is the state's own, not a copy: the caller must not modify its
	// elements. Appending to it is safe (it has no spare capacity, so
	// append copies) but changes nothing in the state. It stays valid, with
	// the same elements, after later writes to the state.
	Get() []T
	// Add appends v to the current key's list. It takes amortized constant
	// time.
	Add(v T)
	// AddAll appends the elements of vs, in order. vs is not retained.
	AddAll(vs []T)
	// Update replaces the current key's list with the elements of vs (none
	// clears it). vs is not retained.
	Update(vs []T)
	// Clear removes the current key's list.
	Clear()
}

// Map is keyed state holding a map from UK to UV per key. An empty map and
// no map are the same.
//
// All and Keys yield the entries in no particular order (as a Go map
// does; the order can differ between calls and between backends). The map
// may be modified during an iteration: an entry removed before it is
// reached is not yielded, one added may or may not be, and an entry updated
// before it is reached is yielded with its new value.
type Map[UK comparable, UV any] interface {
	// Get returns the value of uk in the current key's map.
	Get(uk UK) (UV, bool)
	// Put sets the value of uk.
	Put(uk UK, uv UV)
	// PutAll sets every entry of m. m is not retained.
	PutAll(m map[UK]UV)
	// Remove removes uk.
	Remove(uk UK)
	// Contains reports whether uk has a value.
	Contains(uk UK) bool
	// All yields the current key's entries.
	All() iter.Seq2[UK, UV]
	// Keys yields the current key's user keys.
	Keys() iter.Seq[UK]
	// Len returns the number of entries of the current key's map.
	Len() int
	// IsEmpty reports whether the current key's map has no entries.
	IsEmpty() bool
	// Clear removes the current key's map.
	Clear()
}

// Reducing is keyed state that combines the values added for a key with a
// reduce function into one value of type T.
type Reducing[T any] interface {
	// Get returns the current key's combined value and whether any value
	// was added since the state was last cleared.
	Get() (T, bool)
	// Add combines v with the current key's value: the first value is kept
	// as it is, later ones are combined by reduce(acc, v).
	Add(v T)
	// Clear removes the current key's value.
	Clear()
}

// Aggregating is keyed state that folds the values added for a key into an
// accumulator with an AggregateFunction and returns the accumulator's
// result.
type Aggregating[IN, OUT any] interface {
	// Get returns the result of the current key's accumulator and whether
	// any value was added since the state was last cleared.
	Get() (OUT, bool)
	// Add adds v to the current key's accumulator, made with
	// CreateAccumulator for the first value.
	Add(v IN)
	// Clear removes the current key's accumulator.
	Clear()
}

// AggregateFunction folds values of type IN into an accumulator of type
// ACC and computes a result of type OUT from it. It is called on the task
// goroutine only.
//
// Add and Merge may modify their accumulator argument acc or a and return
// it: a state backend never hands them an accumulator that a checkpoint in
// progress still reads (the heap backend copies such an accumulator first,
// through its codec). GetResult must not modify acc, nor return a value
// that shares memory the accumulator later changes.
type AggregateFunction[IN, ACC, OUT any] interface {
	// CreateAccumulator returns a new, empty accumulator.
	CreateAccumulator() ACC
	// Add adds v to acc and returns the accumulator.
	Add(v IN, acc ACC) ACC
	// GetResult returns the result of acc.
	GetResult(acc ACC) OUT
	// Merge merges b into a and returns the merged accumulator; b is not
	// used afterwards. States use it to merge namespaces (the windows of a
	// merging window assigner).
	Merge(a, b ACC) ACC
}

// TTLConfig makes the entries of a keyed state expire a fixed time after
// their last write (or access). It is given when the state is registered.
//
// Time is processing time: the wall clock of the state backend, in
// milliseconds. An expired entry is never returned: every read checks the
// expiry, and an expired entry reads as absent. Expired entries are removed
// when they are touched, and snapshots leave them out.
//
// The TTL covers a whole entry, that is the value of one key (and
// namespace): a whole list or a whole map expires at once, and any write to
// it renews it. (Flink's TTL covers each list element and map entry
// separately.)
//
// A state written with a TTL must be restored with one, and a state written
// without one must be restored without one: registration fails otherwise.
// The TTL itself may change between runs; restored entries expire by the
// new TTL, counted from their last recorded write or access.
type TTLConfig struct {
	// TTL is how long an entry lives after its last update (or access,
	// with OnReadAndWrite). At least a millisecond; it is counted in whole
	// milliseconds.
	TTL time.Duration
	// Update says which accesses renew an entry. Default: OnCreateAndWrite.
	Update TTLUpdate
}

// TTLUpdate says which accesses renew an entry's TTL.
type TTLUpdate uint8

const (
	// OnCreateAndWrite renews an entry when it is created or written.
	OnCreateAndWrite TTLUpdate = iota
	// OnReadAndWrite also renews an entry when it is read.
	OnReadAndWrite
)

func (u TTLUpdate) String() string {
	switch u {
	case OnCreateAndWrite:
		return "OnCreateAndWrite"
	case OnReadAndWrite:
		return "OnReadAndWrite"
	}
	return fmt.Sprintf("TTLUpdate(%d)", uint8(u))
}

// Validate reports whether c is usable: TTL at least a millisecond, Update
// one of the constants.
func (c TTLConfig) Validate() error {
	if c.TTL < time.Millisecond {
		return fmt.Errorf("TTLConfig.TTL is %v: it must be at least 1ms", c.TTL)
	}
	if c.Update != OnCreateAndWrite && c.Update != OnReadAndWrite {
		return fmt.Errorf("TTLConfig.Update is %v: it must be OnCreateAndWrite or OnReadAndWrite", c.Update)
	}
	return nil
}
