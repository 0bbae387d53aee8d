package weir

import (
	"fmt"
	"time"
)

// --- window join and co-group --------------------------------------------------

// Join starts a window join of s with other, as Flink's DataStream.join:
// Where and EqualTo give each side's key, Window the windows; every pair of
// a record of s and a record of other with equal keys in the same window
// is joined when the window fires. It is a co-group that pairs the records.
//
// Join and CoGroup are functions, not methods of Stream: a method of
// Stream[A] making a Stream[Either[A, B]] would make Go instantiate
// Stream types without end.
func Join[A, B any](s *Stream[A], other *Stream[B]) *JoinedStreams[A, B] {
	return &JoinedStreams[A, B]{c: CoGroupedStreams[A, B]{left: s, right: other}}
}

// JoinedStreams are two streams to be joined by window.
type JoinedStreams[A, B any] struct{ c CoGroupedStreams[A, B] }

// Where sets the key of the first stream's records.
func (j *JoinedStreams[A, B]) Where[K comparable](key func(A) K) *JoinWhere[K, A, B] {
	return &JoinWhere[K, A, B]{w: j.c.Where(key)}
}

// JoinWhere is a join with the first side's key.
type JoinWhere[K comparable, A, B any] struct{ w *CoGroupWhere[K, A, B] }

// EqualTo sets the key of the second stream's records.
func (j *JoinWhere[K, A, B]) EqualTo(key func(B) K) *JoinKeyed[K, A, B] {
	return &JoinKeyed[K, A, B]{k: j.w.EqualTo(key)}
}

// JoinKeyed is a join with both keys.
type JoinKeyed[K comparable, A, B any] struct{ k *CoGroupKeyed[K, A, B] }

// Window sets the windows records are joined in.
func (j *JoinKeyed[K, A, B]) Window[W Window](assigner WindowAssigner[W]) *WindowedJoin[K, A, B, W] {
	return &WindowedJoin[K, A, B, W]{cg: j.k.Window(assigner)}
}

// WindowedJoin is a windowed join, ready for Apply.
type WindowedJoin[K comparable, A, B any, W Window] struct {
	cg *WindowedCoGroup[K, A, B, W]
}

// AllowedLateness: see WindowedCoGroup.AllowedLateness.
func (j *WindowedJoin[K, A, B, W]) AllowedLateness(d time.Duration) *WindowedJoin[K, A, B, W] {
	j.cg.AllowedLateness(d)
	return j
}

// Apply joins: fn gets every pair of records of the two sides with the
// same key in the same window, as Flink's join(...).apply(JoinFunction).
// The results carry the window's max timestamp.
func (j *WindowedJoin[K, A, B, W]) Apply[OUT any](name string, fn func(left A, right B) OUT) *Stream[OUT] {
	if fn == nil {
		j.cg.k.w.c.left.env.fail(fmt.Errorf("operator %q: nil join function", name))
	}
	return j.cg.Apply(name, CoGroupFunction[A, B, OUT](func(as []A, bs []B, out Collector[OUT]) error {
		for _, a := range as {
			for _, b := range bs {
				out.Collect(fn(a, b))
			}
		}
		return nil
	}))
}

// FlatApply joins like Apply; fn may collect any number of results per
// pair, as Flink's FlatJoinFunction.
func (j *WindowedJoin[K, A, B, W]) FlatApply[OUT any](name string, fn func(left A, right B, out Collector[OUT]) error) *Stream[OUT] {
	if fn == nil {
		j.cg.k.w.c.left.env.fail(fmt.Errorf("operator %q: nil join function", name))
	}
	return j.cg.Apply(name, CoGroupFunction[A, B, OUT](func(as []A, bs []B, out Collector[OUT]) error {
		for _, a := range as {
			for _, b := range bs {
				if err := fn(a, b, out); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// CoGroup starts a window co-group of s with other, as Flink's
// DataStream.coGroup: when a window fires, each key's records of both
// sides in it are handed to the function together (one side may be empty).
func CoGroup[A, B any](s *Stream[A], other *Stream[B]) *CoGroupedStreams[A, B] {
	return &CoGroupedStreams[A, B]{left: s, right: other}
}

// CoGroupedStreams are two streams to be joined or co-grouped by window.
type CoGroupedStreams[A, B any] struct {
	left  *Stream[A]
	right *Stream[B]
}

// Where sets the key of the first stream's records.
func (c *CoGroupedStreams[A, B]) Where[K comparable](key func(A) K) *CoGroupWhere[K, A, B] {
	return &CoGroupWhere[K, A, B]{c: c, keyA: key}
}

// CoGroupWhere is a join or co-group with the first side's key.
type CoGroupWhere[K comparable, A, B any] struct {
	c    *CoGroupedStreams[A, B]
	keyA func(A) K
}

// EqualTo sets the key of the second stream's records.
func (w *CoGroupWhere[K, A, B]) EqualTo(key func(B) K) *CoGroupKeyed[K, A, B] {
	return &CoGroupKeyed[K, A, B]{w: w, keyB: key}
}

// CoGroupKeyed is a join or co-group with both keys.
type CoGroupKeyed[K comparable, A, B any] struct {
	w    *CoGroupWhere[K, A, B]
	keyB func(B) K
}

// Window sets the windows records are grouped in (event-time windows need
// timestamps and watermarks on both inputs).
func (k *CoGroupKeyed[K, A, B]) Window[W Window](assigner WindowAssigner[W]) *WindowedCoGroup[K, A, B, W] {
	return &WindowedCoGroup[K, A, B, W]{k: k, assigner: assigner}
}

// WindowedCoGroup is a windowed join or co-group, ready for Apply.
type WindowedCoGroup[K comparable, A, B any, W Window] struct {
	k        *CoGroupKeyed[K, A, B]
	assigner WindowAssigner[W]
	lateness time.Duration
}

// AllowedLateness keeps each window's records for d after the window's end,
// so that late records fire it again (joining with everything the window
// holds, as in Flink).
func (w *WindowedCoGroup[K, A, B, W]) AllowedLateness(d time.Duration) *WindowedCoGroup[K, A, B, W] {
	w.lateness = d
	return w
}

// Either is one record of a window join's inputs: of the first input when
// IsLeft, of the second otherwise.
type Either[A, B any] struct {
	IsLeft bool
	Left   A
	Right  B
}

// CoGroupFunction receives, for each key and window, the records of both
// inputs (either slice may be empty), as Flink's CoGroupFunction.
type CoGroupFunction[A, B, OUT any] func(left []A, right []B, out Collector[OUT]) error

// Apply co-groups: fn gets each key's records of both sides in each window
// that fires. Records it collects carry the window's max timestamp.
func (w *WindowedCoGroup[K, A, B, W]) Apply[OUT any](name string, fn CoGroupFunction[A, B, OUT]) *Stream[OUT] {
	c := w.k.w.c
	if fn == nil {
		c.left.env.fail(fmt.Errorf("operator %q: nil co-group function", name))
	}
	if c.left.env != c.right.env {
		c.left.env.fail(fmt.Errorf("operator %q: the two inputs belong to different environments", name))
	}
	keyA, keyB := w.k.w.keyA, w.k.keyB
	left := c.left.Map(name+"/left", func(a A) Either[A, B] { return Either[A, B]{IsLeft: true, Left: a} })
	right := c.right.Map(name+"/right", func(b B) Either[A, B] { return Either[A, B]{Right: b} })
	ws := left.Union(right).KeyBy(func(e Either[A, B]) K {
		if e.IsLeft {
			return keyA(e.Left)
		}
		return keyB(e.Right)
	}).Window(w.assigner)
	if w.lateness != 0 {
		ws = ws.AllowedLateness(w.lateness)
	}
	return ws.Process(name, ProcessWindowFunction[K, Either[A, B], OUT, W](&coGroupWindow[K, A, B, OUT, W]{fn: fn}))
}

// coGroupWindow splits a window's records by side and calls the co-group
// function.
type coGroupWindow[K comparable, A, B, OUT any, W Window] struct {
	fn CoGroupFunction[A, B, OUT]
	as []A
	bs []B
}

func (c *coGroupWindow[K, A, B, OUT, W]) Process(_ *WindowContext[K, W], elems []Either[A, B], out Collector[OUT]) error {
	c.as, c.bs = c.as[:0], c.bs[:0]
	for _, e := range elems {
		if e.IsLeft {
			c.as = append(c.as, e.Left)
		} else {
			c.bs = append(c.bs, e.Right)
		}
	}
	return c.fn(c.as, c.bs, out)
}
