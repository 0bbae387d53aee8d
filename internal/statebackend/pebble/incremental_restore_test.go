package pebble

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/state"
)

// TestRestoreNativeRescaled restores key groups [32, 96) from two native
// checkpoints, [0, 64) and [64, 128), whose databases gave their states
// different ids (registered in another order): the first is adopted and
// cut to the range, the second's groups are copied with their ids mapped
// by name. Every key of the range comes back with its values, none of the
// others; a state only one checkpoint has is restored too.
func TestRestoreNativeRescaled(t *testing.T) {
	kc := codec.String()
	type vals struct{ a, b, c string }
	want := map[string]vals{}
	take := func(r keygroup.Range, order []string, dir string) NativeCheckpoint {
		b := newPebble(t, r, kc, Options{})
		st := map[string]state.Value[string]{}
		for _, name := range order {
			st[name] = mustValue[string, string](t, b, name)
		}
		for i := range 6000 {
			k := fmt.Sprint("k", i)
			if !r.Contains(groupOf(kc, k)) {
				continue
			}
			v := vals{a: "a" + k, b: "b" + k}
			set(b, kc, st["a"], k, v.a)
			set(b, kc, st["b"], k, v.b)
			if c := st["c"]; c != nil {
				v.c = "c" + k
				set(b, kc, c, k, v.c)
			}
			want[k] = v
		}
		if _, err := b.SnapshotIncremental(1, dir); err != nil {
			t.Fatal(err)
		}
		return NativeCheckpoint{Dir: dir, Groups: r}
	}
	r := keygroup.Range{Start: 32, End: 96}
	b := newPebble(t, r, kc, Options{})
	cps := []NativeCheckpoint{
		take(keygroup.Range{Start: 0, End: 64}, []string{"a", "b"}, filepath.Join(b.opts.Dir, "cp0")),
		take(keygroup.Range{Start: 64, End: 128}, []string{"c", "b", "a"}, filepath.Join(b.opts.Dir, "cp1")),
	}
	base, err := b.RestoreNative(cps)
	if err != nil {
		t.Fatal(err)
	}
	if base != 0 {
		t.Fatalf("adopted checkpoint %d, want 0 (the first of two equal overlaps)", base)
	}
	sa, sb, sc := mustValue[string, string](t, b, "a"), mustValue[string, string](t, b, "b"), mustValue[string, string](t, b, "c")
	n := 0
	for k, v := range want {
		if !r.Contains(groupOf(kc, k)) {
			continue
		}
		n++
		for _, c := range []struct {
			s    state.Value[string]
			want string
		}{{sa, v.a}, {sb, v.b}, {sc, v.c}} {
			got, ok := get(b, kc, c.s, k)
			if got != c.want || ok != (c.want != "") {
				t.Fatalf("key %s (group %d): %q %v, want %q", k, groupOf(kc, k), got, ok, c.want)
			}
		}
	}
	// Nothing outside the range is left: a full snapshot holds only ours.
	f := checkpointTo(t, b, 2)
	if f.h.StartGroup != 32 || f.h.EndGroup != 96 {
		t.Fatalf("snapshot of key groups [%d, %d)", f.h.StartGroup, f.h.EndGroup)
	}
	c := newPebble(t, keygroup.Range{Start: 0, End: 128}, kc, Options{})
	if _, err := restoreFiles(c, []file{f}); err != nil {
		t.Fatal(err)
	}
	ca := mustValue[string, string](t, c, "a")
	for k, v := range want {
		got, ok := get(c, kc, ca, k)
		if in := r.Contains(groupOf(kc, k)); ok != in || (in && got != v.a) {
			t.Fatalf("after a canonical round trip, key %s (group %d): %q %v", k, groupOf(kc, k), got, ok)
		}
	}
	if n == 0 {
		t.Fatal("no key in the range")
	}

	// Overlapping checkpoints and a second restore are refused.
	d := newPebble(t, r, kc, Options{})
	if _, err := d.RestoreNative([]NativeCheckpoint{{Dir: "x", Groups: keygroup.Range{Start: 0, End: 64}}, {Dir: "y", Groups: keygroup.Range{Start: 40, End: 128}}}); err == nil {
		t.Fatal("overlapping checkpoints restored")
	}
	if _, err := b.RestoreNative(nil); err == nil {
		t.Fatal("a second restore succeeded")
	}
}
