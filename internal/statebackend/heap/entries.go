package heap

import "iter"

// Entries yields every (key, namespace) with a live entry, across all the
// key groups of the backend, in no particular order; expired entries (with
// a TTL) are skipped, not removed. It reads the state without changing it
// and without changing the current key or namespace. The loop must not
// write to this state; it may read it and write to other states.
//
// Timers use it: a timer is an entry of a namespaced value state, and after
// a restore the timer service rebuilds its queue from Entries.
func (o namespaceOps[K, N, E]) Entries() iter.Seq2[K, N] { return o.st.entries() }

func (s *store[K, N, E]) entries() iter.Seq2[K, N] {
	return func(yield func(K, N) bool) {
		var now int64
		if s.ttl > 0 {
			now = s.b.now()
		}
		for slot := range s.tables {
			for k, in := range s.tables[slot].nested {
				for n := range in.m {
					if s.ttl > 0 && s.expired(in.ts[n], now) {
						continue
					}
					if !yield(k, n) {
						return
					}
				}
			}
		}
	}
}
