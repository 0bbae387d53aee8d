package weir

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// Operator state is Flink's operator (non-keyed) state: lists that belong to
// an operator instance rather than to a key, created in a function's Open
// with OperatorList or UnionList, and broadcast state (broadcast.go).
//
// Operator state is small by design (offsets, buffered records, rules), so
// its snapshot is synchronous: the elements are encoded with their codec on
// the task goroutine when the barrier arrives, and the bytes go inline into
// the checkpoint's _metadata (checkpoint.SubtaskState.Lists and .Broadcast),
// not into state files. Keep it to kilobytes or a few megabytes; large state
// belongs in keyed state.

// opStates is the operator state of one operator instance: the lists and
// broadcast maps registered by its function, and what was restored for it
// but not (yet) registered, which is snapshotted again unchanged so that a
// function that does not touch a state in one run does not lose it.
type opStates struct {
	subtask int
	// restored reports whether the job was restored from a checkpoint or
	// savepoint (Context.IsRestored).
	restored bool
	lists    map[string]*opListEntry
	bcast    map[string]*bcastEntry
}

type opListEntry struct {
	union bool
	raw   [][]byte // restored entries, until registered
	// handle is the *opList[T] once registered; encode writes it.
	handle any
	encode func() [][]byte
}

type bcastEntry struct {
	raw    []checkpoint.MapEntry // restored entries, until registered
	handle any                   // *broadcastMap[K, V] once registered
	encode func() []checkpoint.MapEntry
}

// newOpStates returns the operator state of an instance; restoredJob tells
// whether the deployment restores a checkpoint, r is the instance's restored
// state (nil when the checkpoint has none for it).
func newOpStates(subtask int, restoredJob bool, r *restoredState) *opStates {
	o := &opStates{subtask: subtask, restored: restoredJob, lists: map[string]*opListEntry{}, bcast: map[string]*bcastEntry{}}
	if r == nil {
		return o
	}
	for _, l := range r.lists {
		o.lists[l.Name] = &opListEntry{union: l.Union, raw: l.Entries}
	}
	for _, b := range r.broadcast {
		o.bcast[b.Name] = &bcastEntry{raw: b.Entries}
	}
	return o
}

// IsRestored reports whether the job started from a checkpoint or savepoint
// (Flink's FunctionInitializationContext.isRestored): true for every
// operator of a restored job, also one that had no state in it.
func (c *Context) IsRestored() bool { return c.env.ops != nil && c.env.ops.restored }

// OperatorList returns the operator list state named name of the function
// whose context is ctx, with the built-in codec for T. Call it in Open. Its
// elements are checkpointed and, on restore with another parallelism,
// redistributed by even split: the elements of all subtasks, in subtask
// order, are dealt in contiguous chunks of nearly equal size (the first
// len%parallelism subtasks get one more), each element to exactly one
// subtask. With the same parallelism each subtask gets its own elements
// back. It is Flink's getListState of an OperatorStateStore.
func OperatorList[T any](ctx FunctionContext, name string) (state.List[T], error) {
	c, err := codec.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("operator list state %q: %w (use OperatorListWithCodec)", name, err)
	}
	return registerList(ctx, name, false, c)
}

// OperatorListWithCodec is OperatorList with a codec of the caller's.
func OperatorListWithCodec[T any](ctx FunctionContext, name string, c codec.Codec[T]) (state.List[T], error) {
	return registerList(ctx, name, false, c)
}

// UnionList returns the union list state named name: like OperatorList, but
// on every restore each subtask gets the elements of all subtasks (Flink's
// getUnionListState). A function usually keeps in it only what it must share
// and filters on restore (for example by Subtask).
func UnionList[T any](ctx FunctionContext, name string) (state.List[T], error) {
	c, err := codec.Of[T]()
	if err != nil {
		return nil, fmt.Errorf("union list state %q: %w (use UnionListWithCodec)", name, err)
	}
	return registerList(ctx, name, true, c)
}

// UnionListWithCodec is UnionList with a codec of the caller's.
func UnionListWithCodec[T any](ctx FunctionContext, name string, c codec.Codec[T]) (state.List[T], error) {
	return registerList(ctx, name, true, c)
}

func listKind(union bool) string {
	if union {
		return "union list"
	}
	return "operator list"
}

func registerList[T any](ctx FunctionContext, name string, union bool, c codec.Codec[T]) (state.List[T], error) {
	kind := listKind(union)
	if c == nil {
		return nil, fmt.Errorf("%s state %q: nil codec", kind, name)
	}
	if name == "" {
		return nil, fmt.Errorf("%s state: empty name", kind)
	}
	ops := ctx.context().env.ops
	e := ops.lists[name]
	if e != nil && e.union != union {
		return nil, fmt.Errorf("%s state %q: the state is a %s state (redistribution modes cannot change, as in Flink); use another name",
			kind, name, listKind(e.union))
	}
	if e != nil && e.handle != nil {
		h, ok := e.handle.(*opList[T])
		if !ok {
			return nil, fmt.Errorf("%s state %q is already registered with element type %v, not %v",
				kind, name, reflect.TypeOf(e.handle).Elem().Field(0).Type.Elem(), reflect.TypeFor[T]())
		}
		return h, nil
	}
	l := &opList[T]{}
	if e != nil {
		for i, b := range e.raw {
			v, n, err := c.Decode(b)
			if err == nil && n != len(b) {
				err = fmt.Errorf("%d trailing bytes", len(b)-n)
			}
			if err != nil {
				return nil, fmt.Errorf("%s state %q: restore element %d: %w (was it written with another type?)", kind, name, i, err)
			}
			l.elems = append(l.elems, v)
		}
	} else {
		e = &opListEntry{union: union}
		ops.lists[name] = e
	}
	e.raw, e.handle = nil, l
	e.encode = func() [][]byte {
		out := make([][]byte, len(l.elems))
		for i, v := range l.elems {
			out[i] = c.Append(nil, v)
		}
		return out
	}
	return l, nil
}

// opList is an operator list state: the elements of one operator instance.
type opList[T any] struct{ elems []T }

var _ state.List[int] = (*opList[int])(nil)

// Get returns the elements (nil when none). Writes never change the
// elements of a slice returned earlier: Update and Clear replace the
// backing array, Add only appends past its length.
func (l *opList[T]) Get() []T {
	if len(l.elems) == 0 {
		return nil
	}
	return l.elems[:len(l.elems):len(l.elems)]
}

func (l *opList[T]) Add(v T)       { l.elems = append(l.elems, v) }
func (l *opList[T]) AddAll(vs []T) { l.elems = append(l.elems, vs...) }
func (l *opList[T]) Update(vs []T) { l.elems = slices.Clone(vs) }
func (l *opList[T]) Clear()        { l.elems = nil }

// addTo puts the operator state into an operator's snapshot; an operator
// with operator state is not stateless. It runs after the function's
// SnapshotState hook, on the task goroutine.
func (o *opStates) addTo(snap *runtime.OperatorSnapshot) {
	if o == nil || len(o.lists)+len(o.bcast) == 0 {
		return
	}
	snap.Stateless = false
	for _, name := range sortedKeys(o.lists) {
		e := o.lists[name]
		ls := checkpoint.ListState{Name: name, Union: e.union}
		switch {
		case e.encode != nil:
			ls.Entries = e.encode()
		case e.union && o.subtask != 0:
			// An unregistered union state came back whole to every
			// subtask: one copy (subtask 0's) keeps it without multiplying
			// it by the parallelism at each restore.
		default:
			ls.Entries = e.raw
		}
		snap.State.Lists = append(snap.State.Lists, ls)
	}
	for _, name := range sortedKeys(o.bcast) {
		e := o.bcast[name]
		bs := checkpoint.BroadcastState{Name: name, Entries: e.raw}
		if e.encode != nil {
			bs.Entries = e.encode()
		}
		snap.State.Broadcast = append(snap.State.Broadcast, bs)
	}
}

// snapshot is the SnapshotState of a non-keyed operator running fn: the
// function's hook, then its operator state.
func (o *opStates) snapshot(id int64, fn any) (runtime.OperatorSnapshot, error) {
	snap := runtime.OperatorSnapshot{Stateless: true}
	if err := (userHooks{fn}).snapshot(id); err != nil {
		return snap, err
	}
	o.addTo(&snap)
	return snap, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
