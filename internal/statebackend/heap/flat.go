package heap

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"unsafe"
)

// flatTable is the table of a state without namespaces in one key group: an
// open-addressing hash table (linear probing, backward-shift deletion, no
// tombstones) whose slots hold each key next to its entry, so that a
// lookup costs one cache miss, like a Go map's. A bitmap, used, says which
// slots hold an entry: a bit per slot (2 KiB for 16k slots) stays in the
// caches where a tag byte per slot would make every slot 8 bytes larger
// (int64 keys and values: 16 bytes a slot instead of 24). With a TTL, the
// last-access times sit in ts, parallel to slots.
//
// # Copy-on-write
//
// A Go map cannot be read by a snapshot's writer while the task writes it,
// so the first write after a snapshot had to clone every key group's map
// (maps.Clone re-inserts every entry). This table is two plain slices: a
// snapshot captures them (O(1)), and the first write after it copies them
// with a memmove, whatever the write (update, insert, delete): about as
// many bytes as a map clone, without re-inserting. ver is the
// backend version at which the slices were allocated or copied: they are
// frozen exactly when Backend.writable(ver) is false, as for the maps of
// namespaced states. A table that grows allocates new slices, which no
// snapshot holds.
type flatTable[K comparable, E any] struct {
	slots []slot[K, E] // nil, or a power of two long
	used  []uint64     // bit i%64 of used[i/64]: slots[i] holds an entry
	ts    []int64      // with a TTL: last access of the entry in each slot; else nil
	n     int          // used slots
	ver   uint64
	// layout identifies where the entries sit: a new value (from
	// Backend.layouts) whenever an entry is removed or moved (growth, or
	// the shift after a removal), so that a key keeps its slot while the
	// layout stays the same. Inserts keep it: linear probing puts a new key
	// in a free slot and moves no other. An order of the slots by key
	// computed for one capture therefore holds for the keys of a later
	// capture of the same layout (see orderCache). Copying keeps it.
	layout uint64
}

// slot is one entry of a flatTable.
type slot[K comparable, E any] struct {
	key K
	val E
}

// minSlots is the number of slots of a table's first allocation.
const minSlots = 8

// maxLoad returns whether a table of size slots may hold n entries: at most
// three quarters full, so that linear probing stays short (2.5 probes on
// average for a hit at the limit) and a probe always reaches a free slot.
func maxLoad(n, size int) bool { return 4*n <= 3*size }

// isUsed reports whether slot i holds an entry.
func (t *flatTable[K, E]) isUsed(i int) bool { return t.used[i>>6]&(1<<(i&63)) != 0 }

// find returns the slot holding key, whose hash is h, and true; or the
// free slot where key would go, and false. The table must have slots.
func (t *flatTable[K, E]) find(h uint64, key K) (int, bool) {
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		if !t.isUsed(i) {
			return i, false
		}
		if t.slots[i].key == key {
			return i, true
		}
	}
}

// lookup returns the slot of key, or -1.
func (t *flatTable[K, E]) lookup(hash func(K) uint64, key K) int {
	if t.n == 0 {
		return -1
	}
	if i, ok := t.find(hash(key), key); ok {
		return i
	}
	return -1
}

// writable makes t's slices writable: if a snapshot holds them, it copies
// them.
func writableFlat[K comparable, E any](t *flatTable[K, E], b *Backend[K]) {
	if b.writable(t.ver) {
		return
	}
	t.slots = append([]slot[K, E](nil), t.slots...)
	t.used = append([]uint64(nil), t.used...)
	if t.ts != nil {
		t.ts = append([]int64(nil), t.ts...)
	}
	t.ver = b.version
}

// grow moves t's entries into new slices of size slots, which belong to
// the backend's current version.
func (t *flatTable[K, E]) grow(b *Backend[K], size int, ttl bool) {
	hash := b.hash
	old, oldUsed, oldTS := t.slots, t.used, t.ts
	t.slots = make([]slot[K, E], size)
	t.used = make([]uint64, (size+63)/64)
	t.ts = nil
	if ttl {
		t.ts = make([]int64, size)
	}
	t.ver = b.version
	t.layout = b.newLayout()
	for j := range old {
		if oldUsed[j>>6]&(1<<(j&63)) == 0 {
			continue
		}
		i, _ := t.find(hash(old[j].key), old[j].key)
		t.slots[i] = old[j]
		t.used[i>>6] |= 1 << (i & 63)
		if ttl {
			t.ts[i] = oldTS[j]
		}
	}
}

// insert adds key, absent, with entry e (and last-access time last, with a
// TTL).
func (t *flatTable[K, E]) insert(b *Backend[K], key K, e E, last int64, ttl bool) {
	if len(t.slots) == 0 || !maxLoad(t.n+1, len(t.slots)) {
		t.grow(b, max(minSlots, 2*len(t.slots)), ttl)
	} else {
		writableFlat(t, b)
	}
	i, _ := t.find(b.hash(key), key)
	t.slots[i] = slot[K, E]{key: key, val: e}
	t.used[i>>6] |= 1 << (i & 63)
	if ttl {
		t.ts[i] = last
	}
	t.n++
}

// remove deletes the entry in slot i, shifting back the entries of the
// probe sequence after it so that no lookup stops short of them.
func (t *flatTable[K, E]) remove(b *Backend[K], i int) {
	writableFlat(t, b)
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.isUsed(j); j = (j + 1) & mask {
		home := int(b.hash(t.slots[j].key)) & mask
		// The entry at j may move to i if i lies on its probe path, that
		// is cyclically in [home, j).
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			if t.ts != nil {
				t.ts[i] = t.ts[j]
			}
			i = j
		}
	}
	t.slots[i] = slot[K, E]{}
	t.used[i>>6] &^= 1 << (i & 63)
	if t.ts != nil {
		t.ts[i] = 0
	}
	t.n--
	t.layout = b.newLayout()
}

// capture returns t as a snapshot sees it. The slices are frozen from now
// on, by version: the caller raises the backend's frozenBelow.
func (t *flatTable[K, E]) capture() flatView[K, E] {
	return flatView[K, E]{slots: t.slots, used: t.used, ts: t.ts, n: t.n, layout: t.layout}
}

// flatView is a snapshot's view of a flatTable: nothing writes its slices
// any more.
type flatView[K comparable, E any] struct {
	slots  []slot[K, E]
	used   []uint64
	ts     []int64
	n      int
	layout uint64
}

// hasherFor returns the hash function of a backend's tables for keys of
// type K: an inlined mix of the bits for 8- and 4-byte integer keys, the
// runtime's string hash for strings, maphash.Comparable otherwise. Every
// backend gets its own random seed, so that keys cannot be chosen to
// collide.
func hasherFor[K comparable]() func(K) uint64 {
	seed := maphash.MakeSeed()
	k := maphash.Comparable(seed, 0) | 1 // random, odd
	var zero K
	switch any(zero).(type) {
	case int, uint, int64, uint64, uintptr:
		if unsafe.Sizeof(zero) == 8 {
			return func(key K) uint64 { return mix64(*(*uint64)(unsafe.Pointer(&key)), k) }
		}
	case int32, uint32:
		return func(key K) uint64 { return mix64(uint64(*(*uint32)(unsafe.Pointer(&key))), k) }
	case string:
		return func(key K) uint64 { return maphash.String(seed, *(*string)(unsafe.Pointer(&key))) }
	}
	return func(key K) uint64 { return maphash.Comparable(seed, key) }
}

// mix64 hashes x with the odd key k: a 128-bit multiply folded to 64 bits
// (as wyhash does), whose high and low bits both depend on every bit of x.
func mix64(x, k uint64) uint64 {
	hi, lo := bits.Mul64(x^k, k^0x9e3779b97f4a7c15)
	return hi ^ lo
}

// all yields the slots that hold an entry, in slot order.
func (v *flatView[K, E]) all(yield func(int) bool) {
	for w, bitsLeft := range v.used {
		for bitsLeft != 0 {
			i := w*64 + bits.TrailingZeros64(bitsLeft)
			bitsLeft &= bitsLeft - 1
			if !yield(i) {
				return
			}
		}
	}
}

// orderCache keeps, per key group, the slots of a state's flat table in
// the order of their keys' bytes, as the last snapshot that sorted them
// found it, with the table's layout and its used slots. A later snapshot
// of the same layout (the keys did not move; some may have been added)
// sorts only the keys added since and merges them in, instead of sorting
// the whole key group: a running aggregate over a slowly growing key set,
// like the checkpoint overhead benchmark, sorts almost nothing. The
// snapshots' writers share it, each on its goroutine.
//
// An order costs 4 bytes per entry. A wrong order cannot make a wrong
// file: format.Writer.Entry refuses keys out of order.
type orderCache struct {
	mu     sync.Mutex
	bySlot []cachedOrder
}

type cachedOrder struct {
	layout uint64
	used   []uint64 // the used slots of the table the order is of
	order  []int32  // those slots by key; never modified once cached
}

func newOrderCache(slots int) *orderCache { return &orderCache{bySlot: make([]cachedOrder, slots)} }

// get returns the cached order of the table at slot, if it is of layout
// layout and of a subset of the slots in used.
func (oc *orderCache) get(slot int, layout uint64, used []uint64) (cachedOrder, bool) {
	oc.mu.Lock()
	c := oc.bySlot[slot]
	oc.mu.Unlock()
	if c.layout != layout || len(c.used) != len(used) {
		return cachedOrder{}, false
	}
	for w, u := range c.used {
		if u&^used[w] != 0 {
			return cachedOrder{}, false
		}
	}
	return c, true
}

// put caches c for the table at slot, unless the one cached is of a newer
// layout, or of the same layout with more slots.
func (oc *orderCache) put(slot int, c cachedOrder) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	old := oc.bySlot[slot]
	if old.layout < c.layout || (old.layout == c.layout && len(old.order) < len(c.order)) {
		oc.bySlot[slot] = c
	}
}

// ranks returns, for used (a bitmap), the number of set bits before each
// word: the rank of slot i among the used slots is ranks[i/64] plus the set
// bits of used[i/64] below bit i%64.
func ranks(used []uint64, dst []int32) []int32 {
	dst = dst[:0]
	var r int32
	for _, u := range used {
		dst = append(dst, r)
		r += int32(bits.OnesCount64(u))
	}
	return dst
}

// rankOf returns the rank of used slot i (see ranks).
func rankOf(used []uint64, prefix []int32, i int32) int32 {
	return prefix[i>>6] + int32(bits.OnesCount64(used[i>>6]&(1<<(i&63)-1)))
}
