package heap

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"math/bits"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

// store holds the entries of one registered state, whatever its kind: per
// key group a table from the key (and, for a namespaced state, the
// namespace) to an entry of type E. It implements copy-on-write, TTL and
// namespaces once; the kinds (value, list, map, reducing, aggregating) are
// thin layers that choose E and its encoding.
//
// Every method takes the namespace explicitly; the kinds pass the current
// one, ns. A state without namespaces has N = noNamespace and flat tables.
type store[K comparable, N comparable, E any] struct {
	b      *Backend[K]
	info   format.StateInfo
	nested bool             // namespaced: tables map keys to namespace tables
	ns     N                // the current namespace
	tables []table[K, N, E] // by key group slot

	ttl         int64 // milliseconds; 0 without TTL
	renewOnRead bool  // state.OnReadAndWrite

	// mods counts changes to the state, so that an iterator notices that
	// the state changed under it.
	mods uint64

	nsCodec codec.Codec[N] // nil unless nested
	// newEncoder returns a function that appends an entry's value bytes
	// (without TTL prefix); each snapshot gets its own, for its goroutine.
	newEncoder func() func(dst []byte, e E) []byte
	// decode decodes an entry's whole value bytes (without TTL prefix).
	decode func(src []byte) (E, error)

	orders *orderCache // of the flat tables; nil if nested
}

// table is the part of one state in one key group. A state without
// namespaces keeps its entries in flat, a hash table of its own copied on
// write with a memmove (see flatTable). A namespaced state keeps them in nested, nil
// until the first write: a nested map that a snapshot captured is never
// written again: the first write after the snapshot clones it and writes
// the clone.
type table[K comparable, N comparable, E any] struct {
	flat   flatTable[K, E]     // states without namespaces
	nested map[K]nsTable[N, E] // namespaced states: the namespaces of each key
	ver    uint64              // the backend's version when nested was made
}

// nsTable holds the namespaces of one key. It is copied on write on its own,
// like a table: writing one namespace of a key after a snapshot copies the
// namespaces of that key (and, if not done yet, the key group's map of
// keys), not the namespaces of every key.
type nsTable[N comparable, E any] struct {
	m   map[N]E
	ts  map[N]int64 // with TTL: last access of each entry
	ver uint64      // as table.ver
}

// kindSpec is what a kind gives newStore.
type kindSpec[N comparable, E any] struct {
	kind    format.Kind
	nsCodec codec.Codec[N] // nil without namespaces
	// newEncoder returns a function that appends an entry's value bytes
	// (see store.newEncoder).
	newEncoder func() func([]byte, E) []byte
	decode     func([]byte) (E, error)
	// err is a mistake in the constructor's arguments (a nil codec or
	// function), reported after a duplicate name.
	err error
}

// newStore registers a state named name. If name was restored, its entries
// are decoded now.
func newStore[K comparable, N comparable, E any](b *Backend[K], name string, spec kindSpec[N, E], opts []Option) (*store[K, N, E], error) {
	st, err := b.lookupForRegister(name)
	if err != nil {
		return nil, err
	}
	if spec.err != nil {
		return nil, fmt.Errorf("state %q: %w", name, spec.err)
	}
	nsCodec := spec.nsCodec
	var o stateOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := &store[K, N, E]{
		b:          b,
		info:       format.StateInfo{Name: name, Kind: spec.kind, Namespaced: nsCodec != nil, TTL: o.hasTTL},
		nested:     nsCodec != nil,
		tables:     make([]table[K, N, E], b.groups.Len()),
		nsCodec:    nsCodec,
		newEncoder: spec.newEncoder,
		decode:     spec.decode,
	}
	if !s.nested {
		s.orders = newOrderCache(len(s.tables))
	}
	if o.hasTTL {
		if err := o.ttl.Validate(); err != nil {
			return nil, fmt.Errorf("state %q: %w", name, err)
		}
		s.ttl = o.ttl.TTL.Milliseconds()
		s.renewOnRead = o.ttl.Update == state.OnReadAndWrite
	}
	if st != nil && st.raw != nil {
		if err := checkRestoredInfo(st.info, s.info); err != nil {
			return nil, err
		}
		if err := s.load(st.raw); err != nil {
			return nil, err // the bytes stay, so the state is not lost
		}
	}
	b.register(name, s)
	return s, nil
}

// checkRestoredInfo refuses to register a state over restored entries laid
// out differently.
func checkRestoredInfo(restored, registered format.StateInfo) error {
	name := registered.Name
	switch {
	case restored.Kind != registered.Kind:
		return fmt.Errorf("state %q was written as %s and is registered as %s: register it as %s, or give the new state another name",
			name, kindPhrase(restored.Kind), kindPhrase(registered.Kind), kindPhrase(restored.Kind))
	case restored.Namespaced && !registered.Namespaced:
		return fmt.Errorf("state %q was written with namespaces and is registered without: register it with a namespace codec", name)
	case !restored.Namespaced && registered.Namespaced:
		return fmt.Errorf("state %q was written without namespaces and is registered with a namespace codec: register it without, or give the new state another name", name)
	case restored.TTL && !registered.TTL:
		return fmt.Errorf("state %q was written with a TTL and is registered without one: register it with a state.TTLConfig, or give the new state another name", name)
	case !restored.TTL && registered.TTL:
		return fmt.Errorf("state %q was written without a TTL and is registered with one: register it without a TTL, or give the new state another name", name)
	}
	return nil
}

// kindPhrase returns "a list state", "an aggregating state".
func kindPhrase(k format.Kind) string {
	if k == format.KindAggregating {
		return "an aggregating state"
	}
	return "a " + k.String() + " state"
}

// expired reports whether an entry last accessed at last is expired at now.
func (s *store[K, N, E]) expired(last, now int64) bool {
	return now >= format.ExpiresAt(last, s.ttl)
}

// get returns the entry of the current key in namespace n. With a TTL, an
// expired entry is removed and reads as absent, and read renews the entry
// when the state renews on reads.
func (s *store[K, N, E]) get(n N, read bool) (E, bool) {
	t := &s.tables[s.b.slot]
	if !s.nested {
		i := t.flat.lookup(s.b.hash, s.b.key)
		if i < 0 {
			var zero E
			return zero, false
		}
		e := t.flat.slots[i].val
		if s.ttl == 0 {
			return e, true
		}
		return s.checkTTL(n, e, t.flat.ts[i], read)
	}
	in, ok := t.nested[s.b.key]
	if !ok {
		var zero E
		return zero, false
	}
	e, ok := in.m[n]
	if !ok || s.ttl == 0 {
		return e, ok
	}
	return s.checkTTL(n, e, in.ts[n], read)
}

func (s *store[K, N, E]) checkTTL(n N, e E, last int64, read bool) (E, bool) {
	now := s.b.now()
	if s.expired(last, now) {
		s.del(n)
		var zero E
		return zero, false
	}
	if read && s.renewOnRead && last != now {
		s.setLastAccess(n, now)
	}
	return e, true
}

// peek is get without TTL and without side effects, for a given key.
func (s *store[K, N, E]) peek(slot int, key K, n N) (E, bool) {
	t := &s.tables[slot]
	if !s.nested {
		if i := t.flat.lookup(s.b.hash, key); i >= 0 {
			return t.flat.slots[i].val, true
		}
		var zero E
		return zero, false
	}
	e, ok := t.nested[key].m[n]
	return e, ok
}

// set stores e as the entry of the current key in namespace n, renewing
// its TTL.
func (s *store[K, N, E]) set(n N, e E) {
	if !s.nested {
		t := &s.tables[s.b.slot].flat
		var now int64
		if s.ttl > 0 {
			now = s.b.now()
		}
		if i := t.lookup(s.b.hash, s.b.key); i >= 0 {
			writableFlat(t, s.b)
			t.slots[i].val = e
			if s.ttl > 0 {
				t.ts[i] = now
			}
		} else {
			t.insert(s.b, s.b.key, e, now, s.ttl > 0)
		}
	} else {
		in := s.writableNS()
		in.m[n] = e
		if s.ttl > 0 {
			in.ts[n] = s.b.now()
		}
	}
	s.mods++
}

// touched records that the entry of the current key in namespace n, which
// exists, was changed in place, renewing its TTL.
func (s *store[K, N, E]) touched(n N) {
	if s.ttl > 0 {
		s.setLastAccess(n, s.b.now())
	}
	s.mods++
}

// setLastAccess sets the last access of an existing entry.
func (s *store[K, N, E]) setLastAccess(n N, now int64) {
	if !s.nested {
		t := &s.tables[s.b.slot].flat
		i := t.lookup(s.b.hash, s.b.key)
		writableFlat(t, s.b)
		t.ts[i] = now
	} else {
		s.writableNS().ts[n] = now
	}
}

// del removes the entry of the current key in namespace n. Removing an
// absent entry copies nothing.
func (s *store[K, N, E]) del(n N) {
	t := &s.tables[s.b.slot]
	if !s.nested {
		i := t.flat.lookup(s.b.hash, s.b.key)
		if i < 0 {
			return
		}
		t.flat.remove(s.b, i)
	} else {
		in, ok := t.nested[s.b.key]
		if !ok {
			return
		}
		if _, ok := in.m[n]; !ok {
			return
		}
		if len(in.m) == 1 { // the key's last namespace: drop the key
			delete(s.writableNested().nested, s.b.key)
		} else {
			in = s.writableNS()
			delete(in.m, n)
			delete(in.ts, n)
		}
	}
	s.mods++
}

// writableNested returns the table of the current key group of a
// namespaced state, its map made or cloned so that no snapshot holds it. A
// store keeps no map but those in its tables, so after a clone nothing can
// reach the frozen map for writing.
func (s *store[K, N, E]) writableNested() *table[K, N, E] {
	t := &s.tables[s.b.slot]
	switch {
	case t.nested == nil:
		t.nested = make(map[K]nsTable[N, E])
		t.ver = s.b.version
	case !s.b.writable(t.ver):
		// Shallow: the nsTables keep their versions, so they stay frozen
		// and are copied when written.
		t.nested = maps.Clone(t.nested)
		t.ver = s.b.version
	}
	return t
}

// writableNS returns the current key's namespace table, made or cloned so
// that no snapshot holds its maps. A writable nsTable is written in place
// without touching the key group's table, which may be frozen: a snapshot
// that captured that table captured the nsTable too, and would have frozen
// it.
func (s *store[K, N, E]) writableNS() nsTable[N, E] {
	in, ok := s.tables[s.b.slot].nested[s.b.key]
	if ok && s.b.writable(in.ver) {
		return in
	}
	if ok {
		in = nsTable[N, E]{m: maps.Clone(in.m), ts: maps.Clone(in.ts), ver: s.b.version}
	} else {
		in = nsTable[N, E]{m: make(map[N]E, 1), ver: s.b.version}
		if s.ttl > 0 {
			in.ts = make(map[N]int64, 1)
		}
	}
	s.writableNested().nested[s.b.key] = in
	return in
}

// namespaces yields the namespaces of the current key that have an entry,
// in no particular order. Expired entries are removed first. The
// namespaces are those present when the iteration starts, less any removed
// during it.
func (s *store[K, N, E]) namespaces() iter.Seq[N] {
	return func(yield func(N) bool) {
		slot, key := s.b.slot, s.b.key
		in, ok := s.tables[slot].nested[key]
		if !ok {
			return
		}
		list := make([]N, 0, len(in.m))
		var expired []N
		var now int64
		if s.ttl > 0 {
			now = s.b.now()
		}
		for n := range in.m {
			if s.ttl > 0 && s.expired(in.ts[n], now) {
				expired = append(expired, n)
				continue
			}
			list = append(list, n)
		}
		for _, n := range expired {
			s.del(n)
		}
		mods := s.mods
		for _, n := range list {
			if s.mods != mods {
				if _, ok := s.peek(slot, key, n); !ok {
					continue
				}
			}
			if !yield(n) {
				return
			}
		}
	}
}

// clearNamespaces removes the entries of the current key in every
// namespace.
func (s *store[K, N, E]) clearNamespaces() {
	if _, ok := s.tables[s.b.slot].nested[s.b.key]; !ok {
		return
	}
	delete(s.writableNested().nested, s.b.key)
	s.mods++
}

// len returns the number of entries, across key groups, including expired
// entries not removed yet.
func (s *store[K, N, E]) len() int {
	n := 0
	for _, t := range s.tables {
		n += t.flat.n
		for _, in := range t.nested {
			n += len(in.m)
		}
	}
	return n
}

// load decodes restored entries into s's tables, dropping those expired
// already.
func (s *store[K, N, E]) load(raw []format.StateBlock) error {
	name := s.info.Name
	kc := s.b.keyCodec
	var now int64
	if s.ttl > 0 {
		now = s.b.now()
	}
	for slot, blk := range raw {
		if blk.Entries == 0 {
			continue
		}
		group := s.b.groups.Start + slot
		if kc == nil {
			return fmt.Errorf("restore state %q, key group %d: the backend has no key codec", name, group)
		}
		t := table[K, N, E]{ver: s.b.version}
		if !s.nested {
			size := minSlots
			for !maxLoad(blk.Entries, size) {
				size *= 2
			}
			t.flat.grow(s.b, size, s.ttl > 0)
		}
		err := blk.ForEach(func(kb, vb []byte) error {
			k, n, err := kc.Decode(kb)
			if err != nil {
				return fmt.Errorf("decode key %x: %w", kb, err)
			}
			var ns N
			if s.nested {
				var m int
				if ns, m, err = s.nsCodec.Decode(kb[n:]); err != nil {
					return fmt.Errorf("decode namespace of key %v (entry key %x): %w", k, kb, err)
				}
				n += m
			}
			if n != len(kb) {
				return fmt.Errorf("decode key %x: %d bytes left over: the key (or namespace) codec differs from the one that wrote the state", kb, len(kb)-n)
			}
			var last int64
			if s.ttl > 0 {
				if last, vb, err = format.SplitTTL(vb); err != nil {
					return fmt.Errorf("key %v: %w", k, err)
				}
				if s.expired(last, now) {
					return nil
				}
			}
			e, err := s.decode(vb)
			if err != nil {
				return fmt.Errorf("decode value of key %v: %w", k, err)
			}
			if !s.nested {
				if t.flat.lookup(s.b.hash, k) >= 0 {
					return fmt.Errorf("key %v decoded twice from different bytes", k)
				}
				t.flat.insert(s.b, k, e, last, s.ttl > 0)
				return nil
			}
			if t.nested == nil {
				t.nested = make(map[K]nsTable[N, E], blk.Entries)
			}
			in, ok := t.nested[k]
			if !ok {
				in = nsTable[N, E]{m: make(map[N]E, 1), ver: s.b.version}
				if s.ttl > 0 {
					in.ts = make(map[N]int64, 1)
				}
				t.nested[k] = in
			}
			if _, dup := in.m[ns]; dup {
				return fmt.Errorf("key %v, namespace %v decoded twice from different bytes", k, ns)
			}
			in.m[ns] = e
			if s.ttl > 0 {
				in.ts[ns] = last
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("restore state %q, key group %d: %w", name, group, err)
		}
		s.tables[slot] = t
	}
	return nil
}

func (s *store[K, N, E]) capture(now int64) captured {
	tables := make([]tableView[K, N, E], len(s.tables))
	for i := range s.tables {
		t := &s.tables[i]
		tables[i] = tableView[K, N, E]{flat: t.flat.capture(), nested: t.nested}
	}
	return &storeCapture[K, N, E]{
		info:     s.info,
		tables:   tables,
		keyCodec: s.b.keyCodec,
		nsCodec:  s.nsCodec,
		encode:   s.newEncoder(),
		ttl:      s.ttl,
		now:      now,
		orders:   s.orders,
	}
}

// storeCapture is a store's part of a snapshot: its tables as they were,
// which nothing writes any more.
type storeCapture[K comparable, N comparable, E any] struct {
	info     format.StateInfo
	tables   []tableView[K, N, E] // by slot; frozen
	keyCodec codec.Codec[K]
	nsCodec  codec.Codec[N]
	encode   func([]byte, E) []byte
	ttl      int64
	now      int64       // when the snapshot was taken
	orders   *orderCache // nil if nested
}

// tableView is a snapshot's view of a table.
type tableView[K comparable, N comparable, E any] struct {
	flat   flatView[K, E]
	nested map[K]nsTable[N, E]
}

func (c *storeCapture[K, N, E]) stateInfo() format.StateInfo { return c.info }

func (c *storeCapture[K, N, E]) live(last int64) bool {
	return c.ttl == 0 || c.now < format.ExpiresAt(last, c.ttl)
}

func (c *storeCapture[K, N, E]) entries(slot int) int {
	t := &c.tables[slot]
	n := 0
	if c.ttl == 0 {
		n = t.flat.n
		for _, in := range t.nested {
			n += len(in.m)
		}
		return n
	}
	for i := range t.flat.all {
		if c.live(t.flat.ts[i]) {
			n++
		}
	}
	for _, in := range t.nested {
		for _, last := range in.ts {
			if c.live(last) {
				n++
			}
		}
	}
	return n
}

func (c *storeCapture[K, N, E]) write(w *format.Writer, slot, n int, sc *scratch) error {
	t := &c.tables[slot]
	if c.orders != nil {
		if cached, ok := c.orders.get(slot, t.flat.layout, t.flat.used); ok {
			return c.writeInOrder(w, slot, n, sc, cached)
		}
	}
	// Locals, stored back into sc once: appending to sc's fields would
	// run a GC write barrier per append while a collection is marking.
	buf, ents, key, at := sc.buf[:0], sc.entries[:0], sc.key, sc.at[:0]
	// value appends the value bytes of an entry.
	value := func(buf []byte, e E, last int64) []byte {
		if c.ttl > 0 {
			buf = format.AppendTTL(buf, last)
		}
		return c.encode(buf, e)
	}
	for i := range t.flat.all {
		sl := &t.flat.slots[i]
		k, e := sl.key, sl.val
		var last int64
		if c.ttl > 0 {
			if last = t.flat.ts[i]; !c.live(last) {
				continue
			}
		}
		sp := span{k: len(buf)}
		buf = c.keyCodec.Append(buf, k)
		sp.v = len(buf)
		buf = value(buf, e, last)
		sp.end = len(buf)
		ents = append(ents, sp)
		at = append(at, int32(i))
	}
	for k, in := range t.nested {
		key = c.keyCodec.Append(key[:0], k)
		for ns, e := range in.m {
			var last int64
			if c.ttl > 0 {
				if last = in.ts[ns]; !c.live(last) {
					continue
				}
			}
			sp := span{k: len(buf)}
			buf = append(buf, key...)
			buf = c.nsCodec.Append(buf, ns)
			sp.v = len(buf)
			buf = value(buf, e, last)
			sp.end = len(buf)
			ents = append(ents, sp)
		}
	}
	sc.buf, sc.entries, sc.key, sc.at = buf, ents, key, at
	if len(ents) != n {
		return fmt.Errorf("state %q, key group slot %d: counted %d entries, found %d", c.info.Name, slot, n, len(ents))
	}
	order := sc.keys.sort(buf, sc.entries)
	if c.orders != nil && n == t.flat.n && t.flat.layout != 0 {
		// Every entry was written (none expired): the order of the used
		// slots holds for the next snapshots of this layout.
		slots := make([]int32, n)
		for j, it := range order {
			slots[j] = at[it.i]
		}
		c.orders.put(slot, cachedOrder{layout: t.flat.layout, used: slices.Clone(t.flat.used), order: slots})
	}
	if err := w.StartState(c.info.Name, n); err != nil {
		return err
	}
	for _, it := range order {
		e := sc.entries[it.i]
		if err := w.Entry(buf[e.k:e.v], buf[e.v:e.end]); err != nil {
			return err
		}
	}
	return nil
}

// writeInOrder writes the n entries of the flat table at slot using the
// order of its slots that a snapshot of the same layout cached. It encodes
// the entries in slot order, as write does (reading the slots
// sequentially: walking a large table in key order would miss the caches
// on every entry), sorts only the entries of the slots used since, and
// merges them into the cached order while writing. Entries of a TTL state
// expired since are left out. The merged order is cached in turn.
func (c *storeCapture[K, N, E]) writeInOrder(w *format.Writer, slot, n int, sc *scratch, cached cachedOrder) error {
	t := &c.tables[slot].flat
	buf, ents := sc.buf[:0], sc.entries[:0]
	expired := false
	for i := range t.all {
		sp := span{k: len(buf), v: len(buf), end: -1}
		var last int64
		if c.ttl > 0 {
			if last = t.ts[i]; !c.live(last) {
				ents = append(ents, sp)
				expired = true
				continue
			}
		}
		sl := &t.slots[i]
		buf = c.keyCodec.Append(buf, sl.key)
		sp.v = len(buf)
		if c.ttl > 0 {
			buf = format.AppendTTL(buf, last)
		}
		buf = c.encode(buf, sl.val)
		sp.end = len(buf)
		ents = append(ents, sp)
	}
	prefix := ranks(t.used, sc.prefix)
	// The live entries of the slots used since the order was cached, by
	// key.
	fresh, freshSlots := sc.fresh[:0], sc.freshSlots[:0]
	for wi, u := range t.used {
		for added := u &^ cached.used[wi]; added != 0; added &= added - 1 {
			i := int32(wi*64 + bits.TrailingZeros64(added))
			if e := ents[rankOf(t.used, prefix, i)]; e.end >= 0 {
				fresh = append(fresh, e)
				freshSlots = append(freshSlots, i)
			}
		}
	}
	sc.buf, sc.entries, sc.prefix, sc.fresh, sc.freshSlots = buf, ents, prefix, fresh, freshSlots
	if err := w.StartState(c.info.Name, n); err != nil {
		return err
	}
	var merged []int32
	if len(fresh) > 0 && !expired {
		merged = make([]int32, 0, len(cached.order)+len(fresh))
	}
	byKey := sc.keys.sort(buf, fresh)
	written, j := 0, 0
	emit := func(e span, i int32) error {
		if merged != nil {
			merged = append(merged, i)
		}
		written++
		return w.Entry(buf[e.k:e.v], buf[e.v:e.end])
	}
	for _, i := range cached.order {
		e := ents[rankOf(t.used, prefix, i)]
		if e.end < 0 {
			continue
		}
		for ; j < len(byKey); j++ {
			f := fresh[byKey[j].i]
			if bytes.Compare(buf[f.k:f.v], buf[e.k:e.v]) > 0 {
				break
			}
			if err := emit(f, freshSlots[byKey[j].i]); err != nil {
				return err
			}
		}
		if err := emit(e, i); err != nil {
			return err
		}
	}
	for ; j < len(byKey); j++ {
		if err := emit(fresh[byKey[j].i], freshSlots[byKey[j].i]); err != nil {
			return err
		}
	}
	if written != n {
		return fmt.Errorf("state %q, key group slot %d: counted %d entries, found %d", c.info.Name, slot, n, written)
	}
	if merged != nil {
		c.orders.put(slot, cachedOrder{layout: t.layout, used: slices.Clone(t.used), order: merged})
	}
	return nil
}
