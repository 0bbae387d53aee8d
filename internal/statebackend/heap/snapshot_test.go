package heap

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const maxPar = 128

// groupOf computes a key's group the way the runtime does.
func groupOf[K any](kc codec.Codec[K], k K) int {
	return keygroup.Of(kc.Append(nil, k), maxPar)
}

type deviceKey struct {
	Region string
	ID     int64
}

type reading struct {
	Celsius float64
	Tags    []string
}

// file is a written snapshot.
type file struct {
	h    checkpoint.KeyedStateHandle
	data []byte
}

// write runs WriteState on another goroutine, as the runtime does, then
// releases the snapshot.
func write(t testing.TB, snap statebackend.Snapshot, path string) file {
	t.Helper()
	var buf bytes.Buffer
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(&buf)
		done <- result{h, err}
	}()
	r := <-done
	snap.Release()
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.h.Path = path
	return file{r.h, buf.Bytes()}
}

func checkpointTo[K comparable](t testing.TB, b *Backend[K], id int64) file {
	t.Helper()
	snap, err := b.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, snap, fmt.Sprintf("chk-%d/%v", id, b.KeyGroups()))
}

// restore returns a backend for r restored from files, and the paths open
// was asked for.
func restore[K comparable](t testing.TB, r keygroup.Range, kc codec.Codec[K], files []file) (*Backend[K], []string) {
	t.Helper()
	b := New(r, kc)
	var opened []string
	handles := make([]checkpoint.KeyedStateHandle, len(files))
	byPath := map[string][]byte{}
	for i, f := range files {
		handles[i] = f.h
		byPath[f.h.Path] = f.data
	}
	err := b.Restore(handles, func(h checkpoint.KeyedStateHandle) ([]byte, error) {
		opened = append(opened, h.Path)
		return byPath[h.Path], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, opened
}

func mustValue[K comparable, V any](t testing.TB, b *Backend[K], name string) *ValueState[K, V] {
	t.Helper()
	c, err := codec.Of[V]()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewValueState(b, name, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// contents returns every entry of s with its key group, checking that each
// sits in the table of its key group.
func contents[K comparable, V any](t testing.TB, s *ValueState[K, V]) map[K]V {
	t.Helper()
	out := map[K]V{}
	for slot, tb := range s.s.tables {
		for i, sl := range tb.flat.slots {
			if !tb.flat.isUsed(i) {
				continue
			}
			k, v := sl.key, sl.val
			if g := groupOf(s.s.b.keyCodec, k); g != s.s.b.groups.Start+slot {
				t.Errorf("key %v of key group %d is in the table of key group %d", k, g, s.s.b.groups.Start+slot)
			}
			out[k] = v
		}
	}
	return out
}

func set[K comparable, V any](s *ValueState[K, V], k K, v V) {
	s.s.b.SetCurrentKey(k, groupOf(s.s.b.keyCodec, k))
	s.Update(v)
}

func clearKey[K comparable, V any](s *ValueState[K, V], k K) {
	s.s.b.SetCurrentKey(k, groupOf(s.s.b.keyCodec, k))
	s.Clear()
}

func equal[K comparable, V any](t testing.TB, what string, got, want map[K]V) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	n := 0
	for k, w := range want {
		g, ok := got[k]
		if !ok || !reflect.DeepEqual(g, w) {
			if n++; n <= 5 {
				t.Errorf("%s: key %v = %v (present %v), want %v", what, k, g, ok, w)
			}
		}
	}
}

func TestRoundTripSameRange(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	b := New(r, codec.String())
	counts := mustValue[string, int](t, b, "count")
	readings := mustValue[string, reading](t, b, "last")
	mustValue[string, string](t, b, "unused") // registered, never written
	wantCounts, wantReadings := map[string]int{}, map[string]reading{}
	for i := range 1000 {
		k := fmt.Sprintf("device-%d", i)
		set(counts, k, i)
		wantCounts[k] = i
		if i%3 == 0 {
			rd := reading{Celsius: float64(i) / 4, Tags: []string{"t", k}}
			set(readings, k, rd)
			wantReadings[k] = rd
		}
	}
	f := checkpointTo(t, b, 1)
	if f.h.Backend != "heap" || f.h.StartGroup != 0 || f.h.EndGroup != maxPar || f.h.Size != int64(len(f.data)) {
		t.Errorf("handle = %+v", f.h)
	}

	b2, _ := restore(t, r, codec.String(), []file{f})
	equal(t, "count", contents(t, mustValue[string, int](t, b2, "count")), wantCounts)
	equal(t, "last", contents(t, mustValue[string, reading](t, b2, "last")), wantReadings)

	// The format is canonical: the restored state writes the same bytes.
	if f2 := checkpointTo(t, b2, 2); !bytes.Equal(f2.data, f.data) {
		t.Error("a restored backend snapshots to different bytes")
	}
}

func TestRescaleStringKeys(t *testing.T) {
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	testRescale(t, codec.String(), keys)
}

func TestRescaleStructKeys(t *testing.T) {
	kc, err := codec.Of[deviceKey]()
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]deviceKey, 3000)
	for i := range keys {
		keys[i] = deviceKey{Region: []string{"eu", "us", "ap"}[i%3], ID: int64(i * 7919)}
	}
	testRescale(t, kc, keys)
}

// testRescale writes state from 4 subtasks over [0, 128) and restores it
// into 3, into 1, and back into 4.
func testRescale[K comparable](t *testing.T, kc codec.Codec[K], keys []K) {
	wantCount, wantName := map[K]int{}, map[K]string{}
	var files []file
	for sub := range 4 {
		b := New(keygroup.RangeFor(maxPar, 4, sub), kc)
		count := mustValue[K, int](t, b, "count")
		name := mustValue[K, string](t, b, "name")
		for i, k := range keys {
			if keygroup.SubtaskFor(groupOf(kc, k), maxPar, 4) != sub {
				continue
			}
			set(count, k, i)
			wantCount[k] = i
			if i%2 == 0 {
				set(name, k, fmt.Sprint("n", i))
				wantName[k] = fmt.Sprint("n", i)
			}
		}
		files = append(files, checkpointTo(t, b, 7))
	}
	if len(wantCount) != len(keys) {
		t.Fatalf("%d distinct keys, want %d", len(wantCount), len(keys))
	}

	for _, par := range []int{3, 1, 4} {
		gotCount, gotName := map[K]int{}, map[K]string{}
		for sub := range par {
			r := keygroup.RangeFor(maxPar, par, sub)
			b, opened := restore(t, r, kc, files)
			// Only the handles that overlap r are read.
			var want []string
			for _, f := range files {
				if f.h.StartGroup < r.End && r.Start < f.h.EndGroup {
					want = append(want, f.h.Path)
				}
			}
			if !reflect.DeepEqual(opened, want) {
				t.Errorf("p=%d subtask %d %v: opened %v, want %v", par, sub, r, opened, want)
			}
			// Registered in the other order than written, on purpose.
			name := mustValue[K, string](t, b, "name")
			count := mustValue[K, int](t, b, "count")
			for k, v := range contents(t, count) {
				if !r.Contains(groupOf(kc, k)) {
					t.Errorf("p=%d: key %v restored into subtask %d %v", par, k, sub, r)
				}
				gotCount[k] = v
			}
			maps.Copy(gotName, contents(t, name))
			if par == 4 {
				if f := checkpointTo(t, b, 8); !bytes.Equal(f.data, files[sub].data) {
					t.Errorf("p=4 subtask %d: restored state snapshots to different bytes", sub)
				}
			}
		}
		equal(t, fmt.Sprintf("count at p=%d", par), gotCount, wantCount)
		equal(t, fmt.Sprintf("name at p=%d", par), gotName, wantName)
	}
}

// slowWriter sleeps on every Write, so that the task goroutine's writes
// interleave with the snapshot's.
type slowWriter struct {
	buf    bytes.Buffer
	delay  time.Duration
	writes int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	w.writes++
	return w.buf.Write(p)
}

func TestCopyOnWriteKeepsSnapshotFrozen(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	b := New(r, kc)
	count := mustValue[string, int](t, b, "count")
	tags := mustValue[string, []string](t, b, "tags")
	live, liveTags := map[string]int{}, map[string][]string{}
	for i := range 20000 {
		k := fmt.Sprint("k", i)
		set(count, k, i)
		live[k] = i
		if i%5 == 0 {
			set(tags, k, []string{k})
			liveTags[k] = []string{k}
		}
	}
	atSnapshot, tagsAtSnapshot := maps.Clone(live), maps.Clone(liveTags)
	snap, err := b.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}

	w := &slowWriter{delay: 100 * time.Microsecond}
	type result struct {
		h   checkpoint.KeyedStateHandle
		err error
	}
	done := make(chan result)
	go func() {
		h, err := snap.WriteState(w)
		done <- result{h, err}
	}()

	// Keep processing until the snapshot is written: overwrite, clear, add,
	// read, for every key group over and over.
	rng := rand.New(rand.NewPCG(1, 2))
	var res result
	ops := 0
	for running := true; running; ops++ {
		select {
		case res = <-done:
			running = false
		default:
		}
		k := fmt.Sprint("k", rng.IntN(25000))
		switch rng.IntN(4) {
		case 0, 1:
			set(count, k, -ops)
			live[k] = -ops
		case 2:
			clearKey(count, k)
			delete(live, k)
		case 3:
			v := []string{k, fmt.Sprint(ops)} // a new value: never mutate one in place
			set(tags, k, v)
			liveTags[k] = v
		}
		b.SetCurrentKey(k, groupOf(kc, k))
		want, wantOK := live[k]
		if v, ok := count.Value(); v != want || ok != wantOK {
			t.Fatalf("live read of %s = %d, %v; want %d, %v", k, v, ok, want, wantOK)
		}
	}
	snap.Release()
	if res.err != nil {
		t.Fatal(res.err)
	}
	if w.writes < maxPar || ops < 1000 {
		t.Fatalf("only %d writes and %d operations interleaved", w.writes, ops)
	}
	t.Logf("%d operations during %d writes", ops, w.writes)

	// The live state has every update.
	equal(t, "live count", contents(t, count), live)
	equal(t, "live tags", contents(t, tags), liveTags)

	// The snapshot has the state as it was at Snapshot, exactly.
	res.h.Path = "chk-1"
	got, _ := restore(t, r, kc, []file{{res.h, w.buf.Bytes()}})
	equal(t, "snapshot count", contents(t, mustValue[string, int](t, got, "count")), atSnapshot)
	equal(t, "snapshot tags", contents(t, mustValue[string, []string](t, got, "tags")), tagsAtSnapshot)

	// Byte for byte what a backend holding that state writes.
	ref := New(r, kc)
	refCount := mustValue[string, int](t, ref, "count")
	refTags := mustValue[string, []string](t, ref, "tags")
	for k, v := range atSnapshot {
		set(refCount, k, v)
	}
	for k, v := range tagsAtSnapshot {
		set(refTags, k, v)
	}
	if f := checkpointTo(t, ref, 1); !bytes.Equal(f.data, w.buf.Bytes()) {
		t.Error("the snapshot's bytes differ from those of the state at snapshot time")
	}
}

// mapID identifies the entries array of a dense table, to tell a copy from
// the original.
func mapID[K comparable, V any](t flatTable[K, V]) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.slots)))
}

// TestOverlappingSnapshots keeps three snapshots in flight and releases them
// in every order. Between the snapshots only part of the key groups change,
// so the snapshots share frozen maps: those of key groups in part 2 are held
// by all three, part 0's by the two newer ones, part 1's by the newest. After
// each release one part is rewritten; every snapshot still held must keep
// its maps frozen.
func TestOverlappingSnapshots(t *testing.T) {
	orders := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		t.Run(fmt.Sprintf("release %v", order), func(t *testing.T) {
			r := keygroup.Range{Start: 0, End: 12}
			kc := codec.String()
			b := New(r, kc)
			s := mustValue[string, int](t, b, "v")
			keys := make([]string, 0, 600)
			for i := 0; len(keys) < cap(keys); i++ {
				if k := fmt.Sprint("k", i); r.Contains(groupOf(kc, k)) {
					keys = append(keys, k)
				}
			}
			state := map[string]int{}
			// rewrite sets, changes and clears keys of the key groups in part
			// (group % 3 == part; -1 for all).
			rewrite := func(round, part int) {
				for i, k := range keys {
					if g := groupOf(kc, k); part >= 0 && g%3 != part {
						continue
					}
					switch (i + round) % 3 {
					case 0, 1:
						set(s, k, round*1000+i)
						state[k] = round*1000 + i
					case 2:
						clearKey(s, k)
						delete(state, k)
					}
				}
			}
			rewrite(1, -1)
			var snaps [3]statebackend.Snapshot
			var want [3]map[string]int
			for i := range snaps {
				want[i] = maps.Clone(state)
				snap, err := b.Snapshot(int64(i + 1))
				if err != nil {
					t.Fatal(err)
				}
				snaps[i] = snap
				if i < 2 {
					rewrite(2+i, i)
				}
			}
			for step, i := range order {
				f := write(t, snaps[i], "f") // and released
				b2, _ := restore(t, r, kc, []file{f})
				equal(t, fmt.Sprintf("snapshot %d, released as number %d", i+1, step+1), contents(t, mustValue[string, int](t, b2, "v")), want[i])
				rewrite(10+step, step)
			}
			equal(t, "live", contents(t, s), state)

			// With all released, writes no longer clone.
			if len(b.live) != 0 || b.frozenBelow != 0 {
				t.Fatalf("live snapshots %v, frozenBelow %d after all releases", b.live, b.frozenBelow)
			}
			for slot := range s.s.tables {
				before := mapID(s.s.tables[slot].flat)
				for _, k := range keys {
					if groupOf(kc, k) == slot {
						set(s, k, 1)
						break
					}
				}
				if before != 0 && mapID(s.s.tables[slot].flat) != before {
					t.Fatalf("key group %d: a write cloned the map with no snapshot in flight", slot)
				}
			}
		})
	}
}

func TestWriteAfterSnapshotClonesOncePerGroup(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 4}
	kc := codec.Int()
	b := New(r, kc)
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 2)
	s.Update(1)
	m0 := mapID(s.s.tables[2].flat)
	snap, _ := b.Snapshot(1)
	defer snap.Release()
	s.Value()
	if mapID(s.s.tables[2].flat) != m0 {
		t.Fatal("a read cloned the map")
	}
	b.SetCurrentKey(99, 2)
	s.Clear() // absent key: nothing to copy
	if mapID(s.s.tables[2].flat) != m0 {
		t.Fatal("clearing an absent key cloned the map")
	}
	b.SetCurrentKey(1, 2)
	s.Update(2)
	m1 := mapID(s.s.tables[2].flat)
	if m1 == m0 {
		t.Fatal("the first write after the snapshot did not clone")
	}
	s.Update(3)
	if mapID(s.s.tables[2].flat) != m1 {
		t.Fatal("the second write cloned again")
	}
}

func TestUnregisteredStateIsCarried(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 32}
	kc := codec.String()
	b := New(r, kc)
	kept := mustValue[string, int](t, b, "kept")
	dropped := mustValue[string, string](t, b, "old-feature")
	wantKept, wantOld := map[string]int{}, map[string]string{}
	for i := range 500 {
		k := fmt.Sprint("k", i)
		if !r.Contains(groupOf(kc, k)) {
			continue
		}
		set(kept, k, i)
		wantKept[k] = i
		set(dropped, k, "x"+k)
		wantOld[k] = "x" + k
	}
	f1 := checkpointTo(t, b, 1)

	// A new version of the function registers only "kept".
	b2, _ := restore(t, r, kc, []file{f1})
	clear(f1.data) // Restore kept none of the bytes it was given
	kept2 := mustValue[string, int](t, b2, "kept")
	for k := range wantKept {
		set(kept2, k, wantKept[k]+1)
		wantKept[k]++
	}
	f2 := checkpointTo(t, b2, 2)

	// The next restore still has the old state, unchanged.
	b3, _ := restore(t, r, kc, []file{f2})
	equal(t, "kept", contents(t, mustValue[string, int](t, b3, "kept")), wantKept)
	equal(t, "carried", contents(t, mustValue[string, string](t, b3, "old-feature")), wantOld)
}

func TestRestoreErrors(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 8}
	kc := codec.String()
	b := New(r, kc)
	s := mustValue[string, int](t, b, "n")
	for i := range 500 {
		if k := fmt.Sprint("k", i); r.Contains(groupOf(kc, k)) {
			set(s, k, i)
		}
	}
	if s.Len() < 10 {
		t.Fatalf("only %d keys in %v", s.Len(), r)
	}
	good := checkpointTo(t, b, 1)
	open := func(f file) func(checkpoint.KeyedStateHandle) ([]byte, error) {
		return func(checkpoint.KeyedStateHandle) ([]byte, error) { return f.data, nil }
	}

	t.Run("value codec mismatch names state and key group", func(t *testing.T) {
		b := New(r, kc)
		if err := b.Restore([]checkpoint.KeyedStateHandle{good.h}, open(good)); err != nil {
			t.Fatal(err)
		}
		_, err := NewValueState(b, "n", codec.Bool())
		if err == nil || !strings.Contains(err.Error(), `restore state "n", key group `) {
			t.Fatalf("err = %v", err)
		}
		// The bytes are still there: registering with the right codec works.
		if _, err := NewValueState(b, "n", codec.Int()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("key codec mismatch", func(t *testing.T) {
		b := New(r, codec.Int64())
		if err := b.Restore([]checkpoint.KeyedStateHandle{good.h}, open(good)); err != nil {
			t.Fatal(err)
		}
		_, err := NewValueState(b, "n", codec.Int())
		if err == nil || !strings.Contains(err.Error(), "decode key") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		for n := range len(good.data) {
			h := good.h
			h.Size = int64(n)
			err := New(r, kc).Restore([]checkpoint.KeyedStateHandle{h}, open(file{h, good.data[:n]}))
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("truncated to %d of %d bytes: err = %v", n, len(good.data), err)
			}
		}
	})
	t.Run("open fails", func(t *testing.T) {
		err := New(r, kc).Restore([]checkpoint.KeyedStateHandle{good.h}, func(checkpoint.KeyedStateHandle) ([]byte, error) {
			return nil, errors.New("no such file")
		})
		if err == nil || !strings.Contains(err.Error(), `"chk-1/[0, 8)", key groups [0, 8)): no such file`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("overlapping handles", func(t *testing.T) {
		err := New(r, kc).Restore([]checkpoint.KeyedStateHandle{good.h, good.h}, open(good))
		if err == nil || !strings.Contains(err.Error(), "key group 0 is also in handle 0") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("restore after register", func(t *testing.T) {
		b := New(r, kc)
		mustValue[string, int](t, b, "x")
		if err := b.Restore(nil, nil); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("restore twice", func(t *testing.T) {
		b := New(r, kc)
		if err := b.Restore(nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Restore(nil, nil); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("corrupt group outside the range is not read", func(t *testing.T) {
		d := bytes.Clone(good.data)
		for i := good.h.Offsets[4]; i < int64(len(d)); i++ {
			d[i] = 0xff
		}
		b := New(keygroup.Range{Start: 0, End: 4}, kc)
		if err := b.Restore([]checkpoint.KeyedStateHandle{good.h}, open(file{good.h, d})); err != nil {
			t.Fatal(err)
		}
		if err := New(keygroup.Range{Start: 3, End: 5}, kc).Restore([]checkpoint.KeyedStateHandle{good.h}, open(file{good.h, d})); !errors.Is(err, format.ErrCorrupt) {
			t.Fatalf("reading the corrupt group: err = %v", err)
		}
	})
}

func TestSnapshotMisuse(t *testing.T) {
	b := New(keygroup.Range{Start: 0, End: 2}, codec.Int())
	s := mustValue[int, int](t, b, "v")
	b.SetCurrentKey(1, 0)
	s.Update(1)

	snap, _ := b.Snapshot(1)
	write(t, snap, "x")
	if _, err := snap.WriteState(&bytes.Buffer{}); !errors.Is(err, ErrSnapshotUsed) {
		t.Errorf("second WriteState: err = %v", err)
	}
	snap.Release() // a second Release is a no-op

	// Release while WriteState runs is a bug, caught.
	snap, _ = b.Snapshot(2)
	w := &blockingWriter{started: make(chan struct{}), unblock: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := snap.WriteState(w)
		done <- err
	}()
	<-w.started
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Release while WriteState runs") {
				t.Errorf("recovered %v", r)
			}
		}()
		snap.Release()
	}()
	close(w.unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if len(b.live) != 0 {
		t.Errorf("live = %v", b.live)
	}
}

type blockingWriter struct {
	started, unblock chan struct{}
	once             bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.started)
		<-w.unblock
	}
	return len(p), nil
}

// panickyCodec fails to encode, as codec.Of's binary-method codecs do when
// AppendBinary fails.
type panickyCodec struct{ codec.Codec[int] }

func (panickyCodec) Append([]byte, int) []byte { panic("cannot encode") }

func TestEncodingPanicIsAnError(t *testing.T) {
	b := New(keygroup.Range{Start: 0, End: 1}, codec.Int())
	s, _ := NewValueState[int, int](b, "v", panickyCodec{codec.Int()})
	b.SetCurrentKey(1, 0)
	s.Update(1)
	snap, _ := b.Snapshot(1)
	defer snap.Release()
	_, err := snap.WriteState(&bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "encoding panicked: cannot encode") {
		t.Fatalf("err = %v", err)
	}
}

func TestWriteErrorIsReturned(t *testing.T) {
	b := New(keygroup.Range{Start: 0, End: 4}, codec.Int())
	snap, _ := b.Snapshot(3)
	defer snap.Release()
	_, err := snap.WriteState(errWriter{})
	if err == nil || !strings.Contains(err.Error(), "checkpoint 3") || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err = %v", err)
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("cancelled") }
