// Package statebackend defines what every keyed state backend offers the
// operators that own it. A backend instance belongs to one subtask of one keyed
// operator: it holds the state of the key groups in the subtask's range, and it
// is used only from the subtask's goroutine (snapshots of later issues hand a
// frozen view to another goroutine, never the live tables).
//
// Backends: heap (package heap) keeps typed Go maps per key group; pebble (a
// later issue) keeps bytes in an LSM tree under keyGroup|stateId|key|namespace.
package statebackend
