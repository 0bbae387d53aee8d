// Package typeinfo answers questions about Go types that the record path
// decides once, when an operator, channel or reader is built, so that the
// per-record loops need not ask: today, whether a record type holds
// pointers (HoldsPointers). It depends on the standard library only, so
// that the runtime and the connectors can both use it.
package typeinfo
