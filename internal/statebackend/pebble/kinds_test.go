package pebble

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/heap"
)

// TestRestoredMapOrListWithWrongCodec: registering a restored map or list
// with codecs that do not decode its bytes fails, naming the state, and
// leaves the restored bytes as they were, so that registering with the
// right codecs still finds every entry.
func TestRestoredMapOrListWithWrongCodec(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	hb := heap.New(r, kc)
	hm, err := heap.NewMapState(hb, "m", codec.String(), codec.Int64())
	must(t, err)
	hl, err := heap.NewListState(hb, "l", codec.Int64())
	must(t, err)
	for i, k := range []string{"a", "b", "c", "d"} {
		hb.SetCurrentKey(k, groupOf(kc, k))
		hm.Put("x", int64(i))
		hm.Put("y", 1<<40)
		hl.AddAll([]int64{int64(i), 1 << 40})
	}
	f := checkpointTo[string](t, hb, 1)

	b := newPebble(t, r, kc, Options{})
	_, err = restoreFiles[string](b, []file{f})
	must(t, err)
	// A user value codec that reads fewer bytes than were written: every
	// entry decodes, but bytes are left over.
	_, err = NewMapState(b, "m", codec.String(), codec.Bool())
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), `state "m"`) {
		t.Fatalf("map with a wrong value codec: err = %v", err)
	}
	_, err = NewListState(b, "l", codec.String())
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), `state "l"`) {
		t.Fatalf("list with a wrong element codec: err = %v", err)
	}
	m, err := NewMapState(b, "m", codec.String(), codec.Int64())
	must(t, err)
	l, err := NewListState(b, "l", codec.Int64())
	must(t, err)
	for i, k := range []string{"a", "b", "c", "d"} {
		b.SetCurrentKey(k, groupOf(kc, k))
		if v, ok := m.Get("x"); !ok || v != int64(i) || m.Len() != 2 {
			t.Errorf("key %s: map x = %d, %v, len %d", k, v, ok, m.Len())
		}
		if got := l.Get(); len(got) != 2 || got[0] != int64(i) {
			t.Errorf("key %s: list %v", k, got)
		}
	}
	// Converted and snapshot again, the state is the heap's, byte for byte.
	if p := checkpointTo[string](t, b, 2); string(p.data) != string(checkpointTo[string](t, hb, 2).data) {
		t.Errorf("snapshot after conversion differs from the heap's:\n%s\n%s", dump(p), dump(f))
	}
}
