package pebble

import (
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

// noNamespace is the namespace type of states without namespaces.
type noNamespace = struct{}

// core is what every kind of state shares: the state's id, the current
// namespace, the TTL, and the reads and writes of entries in the database
// in either layout (layout.go). The kinds (value, list, map, reducing,
// aggregating) are thin layers that encode and decode payloads.
//
// Errors of the database go to Options.OnError; a method that hit one
// reports no entry.
type core[K comparable, N comparable] struct {
	b           *Backend[K]
	name        string
	id          uint64
	info        format.StateInfo
	ttl         int64 // milliseconds; 0 without TTL
	renewOnRead bool  // state.OnReadAndWrite
	grouped     bool  // the grouped layout (layout.go)
	// cache is the backend's write-back cache (cache.go), nil for lists
	// (merge operands) and when it is disabled.
	cache *writeCache

	nsCodec codec.Codec[N] // nil without namespaces
	ns      N              // the current namespace

	// mods counts writes, so that an iteration notices that the state
	// changed under it.
	mods uint64

	kbuf  []byte // database key of the last access
	k2buf []byte // a second key (sub-entries, renewals)
	vbuf  []byte // copy of the last value read
	wbuf  []byte // value being written
	xbuf  []byte // encoded elements, user keys
	ybuf  []byte // list chunks, user values
	batch *pebble.Batch
}

// newCore registers a state of the kind in info (Namespaced and TTL are
// filled in from nsCodec and opts). argErr is a mistake in the
// constructor's arguments (a nil codec or function), reported after a
// duplicate name. check decodes the payload of a restored entry (after its
// TTL prefix); spec gives the layout (and explode for the grouped one).
func newCore[K comparable, N comparable](b *Backend[K], info format.StateInfo, nsCodec codec.Codec[N], argErr error, check func(payload []byte) error, spec regSpec, opts []Option) (*core[K, N], error) {
	name := info.Name
	if err := b.checkNewName(name); err != nil {
		return nil, err
	}
	if argErr != nil {
		return nil, fmt.Errorf("state %q: %w", name, argErr)
	}
	var o stateOptions
	for _, opt := range opts {
		opt(&o)
	}
	c := &core[K, N]{b: b, name: name, nsCodec: nsCodec, grouped: spec.grouped}
	if o.hasTTL {
		if err := o.ttl.Validate(); err != nil {
			return nil, fmt.Errorf("state %q: %w", name, err)
		}
		c.ttl = o.ttl.TTL.Milliseconds()
		c.renewOnRead = o.ttl.Update == state.OnReadAndWrite
	}
	info.Namespaced, info.TTL = nsCodec != nil, o.hasTTL
	c.info = info
	spec.ttl = c.ttl
	spec.check = func(kb, vb []byte) error {
		k, err := c.decodeEntryKey(kb)
		if err != nil {
			return err
		}
		if c.ttl > 0 {
			if _, vb, err = format.SplitTTL(vb); err != nil {
				return fmt.Errorf("key %v: %w", k, err)
			}
		}
		if err := check(vb); err != nil {
			return fmt.Errorf("decode value of key %v: %w", k, err)
		}
		return nil
	}
	id, err := b.register(info, spec)
	if err != nil {
		return nil, err
	}
	c.id = id
	c.batch = b.db.NewBatch()
	c.cache = b.cache
	return c, nil
}

// decodeEntryKey decodes a canonical entry key (the key's bytes, then the
// namespace's) and returns the key.
func (c *core[K, N]) decodeEntryKey(ek []byte) (K, error) {
	k, n, err := c.b.keyCodec.Decode(ek)
	if err != nil {
		return k, fmt.Errorf("decode key %x: %w", ek, err)
	}
	if c.nsCodec != nil {
		_, m, err := c.nsCodec.Decode(ek[n:])
		if err != nil {
			return k, fmt.Errorf("decode namespace of key %v (entry key %x): %w", k, ek, err)
		}
		n += m
	}
	if n != len(ek) {
		return k, fmt.Errorf("decode key %x: %d bytes left over: the key (or namespace) codec differs from the one that wrote the state", ek, len(ek)-n)
	}
	return k, nil
}

// now returns the processing time in milliseconds.
func (c *core[K, N]) now() int64 { return c.b.opts.Clock() }

func (c *core[K, N]) expired(last, now int64) bool {
	return c.ttl > 0 && now >= format.ExpiresAt(last, c.ttl)
}

func (c *core[K, N]) errorf(op string, err error) error {
	return fmt.Errorf("state %q, key %v (key group %d): %s: %w", c.name, c.b.key, c.b.group, op, err)
}

// fail reports err to Options.OnError.
func (c *core[K, N]) fail(op string, err error) { c.b.fail(c.errorf(op, err)) }

// keyPrefix returns the database prefix of the current key's entries,
// group|id|key, in c.kbuf.
func (c *core[K, N]) keyPrefix() ([]byte, error) {
	if c.b.closed {
		return nil, fmt.Errorf("state %q: %w", c.name, ErrClosed)
	}
	kb, err := c.b.currentKeyBytes()
	if err != nil {
		return nil, fmt.Errorf("state %q: %w", c.name, err)
	}
	c.kbuf = appendEntryKey(c.kbuf[:0], c.b.group, c.id, kb)
	return c.kbuf, nil
}

// entryKey returns the database key of the current key in namespace n,
// group|id|key‖namespace, in c.kbuf: in the single layout the entry's key,
// in the grouped layout the prefix of its group.
func (c *core[K, N]) entryKey(n N) ([]byte, error) {
	p, err := c.keyPrefix()
	if err != nil {
		return nil, err
	}
	if c.nsCodec != nil {
		p = c.nsCodec.Append(p, n)
		c.kbuf = p
	}
	return p, nil
}

// startValue returns c.wbuf emptied, with the TTL prefix of an entry
// written now when the state has a TTL: the caller appends the payload.
func (c *core[K, N]) startValue() []byte {
	c.wbuf = c.wbuf[:0]
	if c.ttl > 0 {
		c.wbuf = format.AppendTTL(c.wbuf, c.now())
	}
	return c.wbuf
}

// getRaw reads key into c.vbuf, from the write-back cache or the
// database; ok is false when it is absent or on error (reported).
func (c *core[K, N]) getRaw(key []byte) (v []byte, ok bool) {
	if c.cache != nil {
		v, present, hit, err := c.cache.read(c.id, key)
		if err != nil {
			c.fail("write back", err)
		}
		if hit {
			if !present {
				return nil, false
			}
			c.vbuf = append(c.vbuf[:0], v...)
			return c.vbuf, true
		}
	}
	raw, closer, err := c.b.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		if c.cache != nil {
			if err := c.cache.fill(c.id, key, nil, false); err != nil {
				c.fail("write back", err)
			}
		}
		return nil, false
	}
	if err != nil {
		c.fail("read", err)
		return nil, false
	}
	c.vbuf = append(c.vbuf[:0], raw...)
	closer.Close()
	if c.cache != nil {
		if err := c.cache.fill(c.id, key, c.vbuf, true); err != nil {
			c.fail("write back", err)
		}
	}
	return c.vbuf, true
}

// set writes value at key, into the write-back cache or the database.
func (c *core[K, N]) set(key, value []byte) {
	if c.cache != nil {
		if err := c.cache.put(c.id, key, value); err != nil {
			c.fail("write back", err)
		}
	} else if err := c.b.dbSet(key, value); err != nil {
		c.fail("write", err)
	}
	c.mods++
}

// delete deletes key, in the write-back cache or the database.
func (c *core[K, N]) delete(key []byte) {
	if c.cache != nil {
		if err := c.cache.del(c.id, key); err != nil {
			c.fail("write back", err)
		}
	} else if err := c.b.dbDelete(key); err != nil {
		c.fail("delete", err)
	}
	c.mods++
}

// stageSet writes value at key: into the write-back cache, or without one
// into c.batch, applied by commit.
func (c *core[K, N]) stageSet(key, value []byte) {
	if c.cache != nil {
		if err := c.cache.put(c.id, key, value); err != nil {
			c.fail("write back", err)
		}
		return
	}
	_ = c.batch.Set(key, value, nil) // a batch's Set fails only when it is read-only
}

// stageDelete deletes key: in the write-back cache, or without one in
// c.batch, applied by commit.
func (c *core[K, N]) stageDelete(key []byte) {
	if c.cache != nil {
		if err := c.cache.del(c.id, key); err != nil {
			c.fail("write back", err)
		}
		return
	}
	_ = c.batch.Delete(key, nil)
}

// flushCached writes the state's dirty cached entries to the database,
// before a database iterator reads its entries; false on an error
// (reported).
func (c *core[K, N]) flushCached(op string) bool {
	if c.cache == nil {
		return true
	}
	if err := c.cache.flushState(c.id); err != nil {
		c.fail(op, err)
		return false
	}
	return true
}

// --- The single layout: one entry per key and namespace.

// get returns the payload of the current key's entry in namespace n, in
// c.vbuf (valid until the next access). With a TTL, an expired entry is
// removed and reads as absent, and read renews the entry when the state
// renews on reads.
func (c *core[K, N]) get(n N, read bool) ([]byte, bool) {
	key, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return nil, false
	}
	v, ok := c.getRaw(key)
	if !ok || c.ttl == 0 {
		return v, ok
	}
	last, payload, err := format.SplitTTL(v)
	if err != nil {
		c.fail("read", err)
		return nil, false
	}
	now := c.now()
	if c.expired(last, now) {
		c.delete(key)
		return nil, false
	}
	if read && c.renewOnRead && last != now {
		w := format.AppendTTL(c.wbuf[:0], now)
		c.wbuf = append(w, payload...)
		c.set(key, c.wbuf)
	}
	return payload, true
}

// put stores value, made by startValue and the payload, as the current
// key's entry in namespace n.
func (c *core[K, N]) put(n N, value []byte) {
	key, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return
	}
	c.set(key, value)
}

// del removes the current key's entry in namespace n.
func (c *core[K, N]) del(n N) {
	key, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return
	}
	c.delete(key)
}

// --- The grouped layout: a header and sub-entries per key and namespace.

// groupLive reports whether the current key has a group in namespace n,
// whose prefix it leaves in c.kbuf. With a TTL, an expired group is removed
// and reads as absent, and read renews the group when the state renews on
// reads.
func (c *core[K, N]) groupLive(n N, read bool) ([]byte, bool) {
	gk, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return nil, false
	}
	c.k2buf = append(append(c.k2buf[:0], gk...), headerMark)
	v, ok := c.getRaw(c.k2buf)
	if !ok || c.ttl == 0 {
		return gk, ok
	}
	last, _, err := format.SplitTTL(v)
	if err != nil {
		c.fail("read", err)
		return nil, false
	}
	now := c.now()
	if c.expired(last, now) {
		c.deleteGroup(gk)
		return nil, false
	}
	if read && c.renewOnRead && last != now {
		c.set(c.k2buf, format.AppendTTL(c.wbuf[:0], now))
	}
	return gk, true
}

// group returns the prefix of the current key's group in namespace n, in
// c.kbuf, and whether it may have one: with a TTL, after checking its
// header as groupLive does; without, always (the caller's reads tell).
func (c *core[K, N]) group(n N, read bool) ([]byte, bool) {
	if c.ttl > 0 {
		return c.groupLive(n, read)
	}
	gk, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return nil, false
	}
	return gk, true
}

// groupForWrite returns the prefix of the current key's group in
// namespace n, in c.kbuf, for a write that keeps the group's entries: with
// a TTL, an expired group is removed first. ok is false on an error
// (reported).
func (c *core[K, N]) groupForWrite(n N) ([]byte, bool) {
	if c.ttl > 0 {
		if gk, ok := c.groupLive(n, false); ok {
			return gk, true
		}
	}
	gk, err := c.entryKey(n)
	if err != nil {
		c.b.fail(err)
		return nil, false
	}
	return gk, true
}

// subKey returns gk‖0x01‖sub in c.k2buf.
func (c *core[K, N]) subKey(gk, sub []byte) []byte {
	c.k2buf = append(append(append(c.k2buf[:0], gk...), subMark), sub...)
	return c.k2buf
}

// setHeader stages (stageSet) the header of the group gk, renewing its
// TTL.
func (c *core[K, N]) setHeader(gk []byte) {
	c.k2buf = append(append(c.k2buf[:0], gk...), headerMark)
	var v []byte
	if c.ttl > 0 {
		v = format.AppendTTL(c.wbuf[:0], c.now())
	}
	c.stageSet(c.k2buf, v)
}

// commit applies c.batch, where the writes staged without a cache are.
func (c *core[K, N]) commit() {
	if !c.batch.Empty() {
		if err := c.b.commitBatch(c.batch); err != nil {
			c.fail("write", err)
		}
		c.batch.Reset()
	}
	c.mods++
}

// deleteGroup removes the header and the sub-entries of the group gk.
func (c *core[K, N]) deleteGroup(gk []byte) {
	if c.info.Kind == format.KindList { // a header and one sub-entry, known
		c.k2buf = append(append(c.k2buf[:0], gk...), headerMark)
		c.stageDelete(c.k2buf)
		c.k2buf[len(c.k2buf)-1] = subMark
		c.stageDelete(c.k2buf)
		c.commit()
		return
	}
	lo := append(append([]byte(nil), gk...), headerMark)
	hi := append(append([]byte(nil), gk...), subMark+1)
	if err := c.deleteKeys(lo, hi); err != nil {
		c.fail("delete", err)
	}
	c.mods++
}

// deleteKeys deletes every key in [lo, hi) (of this state) with point
// deletions (a range deletion per access would pile up range tombstones
// that every read then consults). With the write-back cache, the state's
// dirty entries are written first, so that the database holds every key
// there is, and the cached entries of the keys deleted are dropped.
func (c *core[K, N]) deleteKeys(lo, hi []byte) (err error) {
	if c.cache != nil {
		if err := c.cache.flushState(c.id); err != nil {
			return err
		}
	}
	it, err := c.b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	b := c.b.db.NewBatch()
	defer b.Close()
	for valid := it.First(); valid; valid = it.Next() {
		_ = b.Delete(it.Key(), nil)
		if c.cache != nil {
			c.cache.forget(it.Key())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	return c.b.commitBatch(b)
}

// --- Namespaces.

// nsEntry is a namespace found in the database, with its bytes.
type nsEntry[N any] struct {
	n   N
	key []byte // entry key (single) or group prefix (grouped)
}

// namespaces yields the namespaces of the current key that have an entry,
// in the order of their bytes. Expired entries are removed first. The
// namespaces are those present when the iteration starts, less any removed
// during it.
func (c *core[K, N]) namespaces() iter.Seq[N] {
	return func(yield func(N) bool) {
		p, err := c.keyPrefix()
		if err != nil {
			c.b.fail(err)
			return
		}
		prefix := append([]byte(nil), p...)
		if !c.flushCached("list namespaces") {
			return
		}
		live, expired, err := c.scanNamespaces(prefix)
		if err != nil {
			c.fail("list namespaces", err)
			return
		}
		for _, e := range expired {
			c.removeAt(e.key)
		}
		mods := c.mods
		for _, e := range live {
			if c.mods != mods && !c.existsAt(e.key) {
				continue
			}
			if !yield(e.n) {
				return
			}
		}
	}
}

// scanNamespaces reads the namespaces under prefix (the current key's).
func (c *core[K, N]) scanNamespaces(prefix []byte) (live, expired []nsEntry[N], err error) {
	it, err := c.b.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var now int64
	if c.ttl > 0 {
		now = c.now()
	}
	var seek []byte
	for valid := it.First(); valid; {
		k := it.Key()
		rest := k[len(prefix):]
		n, m, err := c.nsCodec.Decode(rest)
		if err != nil {
			return nil, nil, fmt.Errorf("decode namespace %x: %w", rest, err)
		}
		end := len(prefix) + m
		if c.grouped && (len(rest) != m+1 || rest[m] != headerMark) || !c.grouped && len(rest) != m {
			return nil, nil, fmt.Errorf("%w: entry %x of state %q does not end after its namespace", errBadKey, k, c.name)
		}
		e := nsEntry[N]{n: n, key: append([]byte(nil), k[:end]...)}
		isLive := true
		if c.ttl > 0 {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, nil, err
			}
			last, _, err := format.SplitTTL(v)
			if err != nil {
				return nil, nil, err
			}
			isLive = !c.expired(last, now)
		}
		if isLive {
			live = append(live, e)
		} else {
			expired = append(expired, e)
		}
		if c.grouped {
			seek = append(append(seek[:0], e.key...), subMark+1)
			valid = it.SeekGE(seek)
		} else {
			valid = it.Next()
		}
	}
	return live, expired, it.Error()
}

// existsAt reports whether the entry (single) or group (grouped) at key
// exists, ignoring its TTL.
func (c *core[K, N]) existsAt(key []byte) bool {
	if c.grouped {
		c.k2buf = append(append(c.k2buf[:0], key...), headerMark)
		key = c.k2buf
	}
	_, ok := c.getRaw(key)
	return ok
}

// removeAt removes the entry (single) or group (grouped) at key.
func (c *core[K, N]) removeAt(key []byte) {
	if c.grouped {
		c.deleteGroup(key)
	} else {
		c.delete(key)
	}
}

// clearNamespaces removes the entries of the current key in every
// namespace.
func (c *core[K, N]) clearNamespaces() {
	p, err := c.keyPrefix()
	if err != nil {
		c.b.fail(err)
		return
	}
	lo := append([]byte(nil), p...)
	if err := c.deleteKeys(lo, prefixEnd(lo)); err != nil {
		c.fail("clear namespaces", err)
	}
	c.mods++
}

// entries yields every (key, namespace) with a live entry, across all the
// key groups of the backend, in the order of their bytes; expired entries
// are skipped, not removed. It reads a view of the database as of the
// start of each key group's scan, so writes during the loop do not disturb
// it (but may or may not be seen in later key groups).
func (c *core[K, N]) entries() iter.Seq2[K, N] {
	return func(yield func(K, N) bool) {
		if c.b.closed {
			c.b.fail(fmt.Errorf("state %q: %w", c.name, ErrClosed))
			return
		}
		if !c.flushCached("entries") {
			return
		}
		var now int64
		if c.ttl > 0 {
			now = c.now()
		}
		var prefix []byte
		for g := c.b.groups.Start; g < c.b.groups.End; g++ {
			prefix = appendStatePrefix(prefix[:0], g, c.id)
			if !c.entriesOfGroup(prefix, now, yield) {
				return
			}
		}
	}
}

// entriesOfGroup is entries for one key group's prefix; it returns false
// when the loop stopped or failed.
func (c *core[K, N]) entriesOfGroup(prefix []byte, now int64, yield func(K, N) bool) (more bool) {
	it, err := c.b.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		c.b.fail(fmt.Errorf("state %q: entries: %w", c.name, err))
		return false
	}
	defer func() {
		if err := it.Close(); err != nil && more {
			c.b.fail(fmt.Errorf("state %q: entries: %w", c.name, err))
			more = false
		}
	}()
	var seek []byte
	for valid := it.First(); valid; {
		k := it.Key()
		ek := k[len(prefix):]
		key, n, err := c.b.keyCodec.Decode(ek)
		if err != nil {
			c.b.fail(fmt.Errorf("state %q: entries: decode key %x: %w", c.name, ek, err))
			return false
		}
		var ns N
		end := n
		if c.nsCodec != nil {
			var m int
			if ns, m, err = c.nsCodec.Decode(ek[n:]); err != nil {
				c.b.fail(fmt.Errorf("state %q: entries: decode namespace of key %v: %w", c.name, key, err))
				return false
			}
			end += m
		}
		isLive := true
		if c.ttl > 0 {
			v, err := it.ValueAndErr()
			if err == nil {
				var last int64
				last, _, err = format.SplitTTL(v)
				isLive = !c.expired(last, now)
			}
			if err != nil {
				c.b.fail(fmt.Errorf("state %q: entries: key %v: %w", c.name, key, err))
				return false
			}
		}
		if isLive && !yield(key, ns) {
			return false
		}
		if c.grouped {
			seek = append(append(append(seek[:0], prefix...), ek[:end]...), subMark+1)
			valid = it.SeekGE(seek)
		} else {
			valid = it.Next()
		}
	}
	if err := it.Error(); err != nil {
		c.b.fail(fmt.Errorf("state %q: entries: %w", c.name, err))
		return false
	}
	return true
}

// namespaceOps are the methods of every namespaced state.
type namespaceOps[K comparable, N comparable] struct {
	nc *core[K, N]
}

// SetCurrentNamespace scopes the state to namespace n of the current key,
// until the next call. It is as cheap as an assignment. A new state's
// namespace is the zero N.
func (o namespaceOps[K, N]) SetCurrentNamespace(n N) { o.nc.ns = n }

// CurrentNamespace returns the namespace set last.
func (o namespaceOps[K, N]) CurrentNamespace() N { return o.nc.ns }

// Namespaces yields the namespaces in which the current key has an entry,
// in the order of their codec bytes; it removes expired entries first. It
// yields the namespaces present when the iteration starts, less those
// removed during it, so the loop may clear or merge namespaces. It does
// not change the current namespace.
func (o namespaceOps[K, N]) Namespaces() iter.Seq[N] { return o.nc.namespaces() }

// ClearAllNamespaces removes the current key's entries in every namespace.
func (o namespaceOps[K, N]) ClearAllNamespaces() { o.nc.clearNamespaces() }

// Entries yields every (key, namespace) with a live entry, across all the
// key groups of the backend, in the order of their bytes; expired entries
// (with a TTL) are skipped, not removed. It reads the state without
// changing it and without changing the current key or namespace. The loop
// must not write to this state; it may read it and write to other states.
// (As the heap backend's Entries; timers rebuild their queues from it.)
func (o namespaceOps[K, N]) Entries() iter.Seq2[K, N] { return o.nc.entries() }

// checkNamespaceCodec returns the error of a namespaced state's constructor
// given no namespace codec.
func checkNamespaceCodec[N any](c codec.Codec[N]) error {
	if c == nil {
		return errors.New("nil namespace codec")
	}
	return nil
}

// decodeAll decodes a T that must take all of src.
func decodeAll[T any](c codec.Codec[T], src []byte) (T, error) {
	v, n, err := c.Decode(src)
	if err == nil && n != len(src) {
		err = fmt.Errorf("%d bytes left over: the codec differs from the one that wrote the state", len(src)-n)
	}
	return v, err
}
