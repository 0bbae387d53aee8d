package timerqueue

import (
	"container/heap"
	"fmt"

	"github.com/weirstream/weir/codec"
)

// ID identifies a timer: at most one per (key, namespace, timestamp).
type ID[K comparable, N comparable] struct {
	Key K
	NS  N
	TS  int64
}

// Queue orders timers by timestamp (then by registration) and finds one
// by its id for deletion. Not safe for concurrent use: it belongs to one
// task goroutine.
type Queue[K comparable, N comparable] struct {
	h items[K, N]
}

// items is the heap; it is a type of its own so that the heap.Interface
// methods stay out of Queue's API.
type items[K comparable, N comparable] struct {
	items []*queued[K, N]
	index map[ID[K, N]]*queued[K, N]
	seq   uint64
}

// queued knows its position in items: moving a timer in the heap updates
// it, not the index map.
type queued[K comparable, N comparable] struct {
	id  ID[K, N]
	seq uint64
	pos int
}

// New returns an empty queue.
func New[K comparable, N comparable]() *Queue[K, N] {
	return &Queue[K, N]{h: items[K, N]{index: make(map[ID[K, N]]*queued[K, N])}}
}

// Add queues id; it returns false if id is queued already.
func (q *Queue[K, N]) Add(id ID[K, N]) bool {
	if _, ok := q.h.index[id]; ok {
		return false
	}
	q.h.seq++
	heap.Push(&q.h, &queued[K, N]{id: id, seq: q.h.seq})
	return true
}

// Remove removes id; it returns false if id is not queued.
func (q *Queue[K, N]) Remove(id ID[K, N]) bool {
	t, ok := q.h.index[id]
	if !ok {
		return false
	}
	heap.Remove(&q.h, t.pos)
	return true
}

// Contains reports whether id is queued.
func (q *Queue[K, N]) Contains(id ID[K, N]) bool {
	_, ok := q.h.index[id]
	return ok
}

// Peek returns the earliest timer.
func (q *Queue[K, N]) Peek() (ID[K, N], bool) {
	if len(q.h.items) == 0 {
		return ID[K, N]{}, false
	}
	return q.h.items[0].id, true
}

// PopDue removes and returns the earliest timer if its timestamp is at
// most upTo.
func (q *Queue[K, N]) PopDue(upTo int64) (ID[K, N], bool) {
	if len(q.h.items) == 0 || q.h.items[0].id.TS > upTo {
		return ID[K, N]{}, false
	}
	return heap.Pop(&q.h).(*queued[K, N]).id, true
}

// Len is the number of queued timers.
func (q *Queue[K, N]) Len() int { return len(q.h.items) }

func (h *items[K, N]) Len() int { return len(h.items) }
func (h *items[K, N]) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.id.TS != b.id.TS {
		return a.id.TS < b.id.TS
	}
	return a.seq < b.seq
}
func (h *items[K, N]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].pos = i
	h.items[j].pos = j
}
func (h *items[K, N]) Push(x any) {
	t := x.(*queued[K, N])
	t.pos = len(h.items)
	h.index[t.id] = t
	h.items = append(h.items, t)
}
func (h *items[K, N]) Pop() any {
	last := len(h.items) - 1
	t := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	delete(h.index, t.id)
	return t
}

// Namespace is the namespace under which a timer is stored in keyed
// state: its timestamp and the user's namespace.
type Namespace[N comparable] struct {
	TS int64
	NS N
}

// NamespaceCodec encodes a Namespace as the timestamp (8 bytes, ordered)
// and then the user namespace with NS.
type NamespaceCodec[N comparable] struct{ NS codec.Codec[N] }

// Append implements codec.Codec.
func (c NamespaceCodec[N]) Append(dst []byte, v Namespace[N]) []byte {
	dst = codec.Int64().Append(dst, v.TS)
	return c.NS.Append(dst, v.NS)
}

// Decode implements codec.Codec.
func (c NamespaceCodec[N]) Decode(src []byte) (Namespace[N], int, error) {
	ts, n, err := codec.Int64().Decode(src)
	if err != nil {
		return Namespace[N]{}, 0, fmt.Errorf("timer timestamp: %w", err)
	}
	ns, m, err := c.NS.Decode(src[n:])
	if err != nil {
		return Namespace[N]{}, 0, fmt.Errorf("timer namespace: %w", err)
	}
	return Namespace[N]{TS: ts, NS: ns}, n + m, nil
}

// Void is the namespace of timers that need none (keyed process
// functions).
type Void struct{}

// VoidCodec encodes a Void as nothing.
type VoidCodec struct{}

// Append implements codec.Codec.
func (VoidCodec) Append(dst []byte, _ Void) []byte { return dst }

// Decode implements codec.Codec.
func (VoidCodec) Decode([]byte) (Void, int, error) { return Void{}, 0, nil }

// StateNames returns the names of the keyed states holding the timers of
// a service; suffix tells apart several services of one operator ("" for
// one).
func StateNames(suffix string) (event, processing string) {
	return "_timer_event" + suffix, "_timer_proc" + suffix
}

var (
	_ codec.Codec[Namespace[Void]] = NamespaceCodec[Void]{}
	_ codec.Codec[Void]            = VoidCodec{}
)
