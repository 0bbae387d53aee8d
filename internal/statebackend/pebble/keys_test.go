package pebble

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/statebackend/format"
)

func TestEntryKeyRoundTrip(t *testing.T) {
	tests := []struct {
		g  int
		id uint64
		ek string
	}{
		{0, 1, ""},
		{0, 1, "a"},
		{127, 127, "\x00\x00"},
		{128, 128, "key"},
		{1<<15 - 1, 1 << 40, "\xff\xff\xff"},
	}
	for _, tc := range tests {
		k := appendEntryKey([]byte("junk"), tc.g, tc.id, []byte(tc.ek))[4:]
		g, id, ek, err := splitEntryKey(k)
		if err != nil || g != tc.g || id != tc.id || string(ek) != tc.ek {
			t.Errorf("split(append(%d, %d, %q)) = %d, %d, %q, %v", tc.g, tc.id, tc.ek, g, id, ek, err)
		}
	}
}

func TestSplitEntryKeyRejectsMalformed(t *testing.T) {
	for _, k := range []string{"", "\x00", "\x00\x01", "\x00\x01\x80", "\x00\x01\x00x"} {
		if _, _, _, err := splitEntryKey([]byte(k)); !errors.Is(err, errBadKey) {
			t.Errorf("split(%x): err = %v", k, err)
		}
	}
}

// TestKeyOrder checks the properties the backend relies on: the key groups
// of a range are one contiguous key range, a state's entries in a group
// share a prefix no other state's entries have, entries sort by their entry
// keys, and meta keys sort after every entry.
func TestKeyOrder(t *testing.T) {
	ordered := [][]byte{
		appendEntryKey(nil, 0, 1, nil),
		appendEntryKey(nil, 0, 1, []byte("a")),
		appendEntryKey(nil, 0, 1, []byte("a\x00")),
		appendEntryKey(nil, 0, 1, []byte("b")),
		appendEntryKey(nil, 0, 2, []byte("a")),
		appendEntryKey(nil, 0, 3, []byte("a")),
		appendEntryKey(nil, 0, 300, []byte("a")), // uvarint ac 02: ids do not sort numerically, which nothing needs
		appendEntryKey(nil, 1, 1, []byte("")),
		appendEntryKey(nil, 255, 1, []byte("\xff")),
		appendEntryKey(nil, 256, 1, []byte("")),
		appendEntryKey(nil, 1<<15-1, 1<<40, []byte("\xff\xff")),
		metaStateKey(""),
		metaStateKey("a"),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Errorf("key %d (%x) does not sort before key %d (%x)", i-1, ordered[i-1], i, ordered[i])
		}
	}
	lo, hi := appendGroupPrefix(nil, 1), appendGroupPrefix(nil, 256)
	for _, k := range ordered {
		g, _, _, err := splitEntryKey(k)
		in := bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0
		if k[0] != metaPrefix && err == nil && in != (g >= 1 && g < 256) {
			t.Errorf("key %x of group %d: in [1, 256) key range = %v", k, g, in)
		}
	}
	p := appendStatePrefix(nil, 4, 1)
	if hasPrefix(appendEntryKey(nil, 4, 129, []byte("x")), p) { // 129 = 81 01 starts with 0x81, not 0x01
		t.Error("the prefix of state 1 matches an entry of state 129")
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ p, want string }{
		{"a", "b"},
		{"a\xff", "b"},
		{"\x00\x01", "\x00\x02"},
		{"\xff\xff", ""},
		{"", ""},
	}
	for _, tc := range tests {
		if got := prefixEnd([]byte(tc.p)); string(got) != tc.want {
			t.Errorf("prefixEnd(%x) = %x, want %x", tc.p, got, tc.want)
		}
	}
}

func TestMetaStateRoundTrip(t *testing.T) {
	infos := []format.StateInfo{
		format.PlainInfo("v"),
		{Name: "l", Kind: format.KindList, Namespaced: true},
		{Name: "m", Kind: format.KindMap, TTL: true},
		{Name: "a", Kind: format.KindAggregating, Namespaced: true, TTL: true},
	}
	for i, in := range infos {
		id, got, err := parseMetaState(in.Name, appendMetaState(nil, uint64(i+1), in))
		if err != nil || id != uint64(i+1) || got != in {
			t.Errorf("meta of %+v read back as %d, %+v, %v", in, id, got, err)
		}
	}
	for _, v := range []string{"", "\x01", "\x00\x01\x00", "\x01\x01\x04", "\x01\x01\x00\x00"} {
		if _, _, err := parseMetaState("x", []byte(v)); !errors.Is(err, errBadKey) {
			t.Errorf("parse(%x): err = %v", v, err)
		}
	}
}
