package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

// writeDescribed is write with a Describe call first.
func writeDescribed(t *testing.T, r keygroup.Range, infos []StateInfo, blocks map[int][]state) ([]byte, checkpoint.KeyedStateHandle) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, r)
	must(t, w.Describe(infos...))
	for g := r.Start; g < r.End; g++ {
		must(t, w.StartGroup(g, len(blocks[g])))
		for _, s := range blocks[g] {
			must(t, w.StartState(s.name, len(s.entries)))
			for _, e := range s.entries {
				must(t, w.Entry([]byte(e.k), []byte(e.v)))
			}
		}
		must(t, w.EndGroup())
	}
	h, err := w.Finish()
	must(t, err)
	return buf.Bytes(), h
}

func TestDescribedRoundTrip(t *testing.T) {
	r := keygroup.Range{Start: 2, End: 5}
	infos := []StateInfo{
		{Name: "agg", Kind: KindAggregating, TTL: true},
		{Name: "count", Kind: KindValue}, // plain: left out
		{Name: "list", Kind: KindList, Namespaced: true},
		{Name: "map", Kind: KindMap, Namespaced: true, TTL: true},
		{Name: "red", Kind: KindReducing},
		{Name: "ttl", Kind: KindValue, TTL: true},
	}
	blocks := map[int][]state{
		2: {{"agg", []entry{{"k", "v"}}}, {"count", []entry{{"k", "1"}}}, {"list", []entry{{"kw", "l"}}}},
		4: {{"map", []entry{{"k", "m"}}}, {"red", []entry{{"k", "r"}}}, {"ttl", []entry{{"k", "t"}}}},
	}
	data, h := writeDescribed(t, r, infos, blocks)
	f, err := Open(h, data)
	must(t, err)
	if f.Version() != 2 {
		t.Errorf("version %d, want 2", f.Version())
	}
	want := slices.DeleteFunc(slices.Clone(infos), StateInfo.Plain)
	if got := f.Infos(); !slices.Equal(got, want) {
		t.Errorf("Infos = %v, want %v", got, want)
	}
	for _, in := range infos {
		if got := f.Info(in.Name); got != in {
			t.Errorf("Info(%q) = %+v, want %+v", in.Name, got, in)
		}
	}
	if got := f.Info("other"); got != PlainInfo("other") {
		t.Errorf("Info of an undescribed state = %+v", got)
	}
	blk, err := f.Block(4)
	must(t, err)
	for _, sb := range blk.States {
		if sb.Info != f.Info(sb.Name) {
			t.Errorf("block state %q has info %+v", sb.Name, sb.Info)
		}
	}
	if got := read(t, h, data); !equalStates(got[2], blocks[2]) || !equalStates(got[4], blocks[4]) {
		t.Errorf("read %v", got)
	}
}

// TestPlainFilesStayVersion1: describing only plain states (or nothing)
// writes the version-1 bytes, so jobs with value states only write what
// they always wrote.
func TestPlainFilesStayVersion1(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 2}
	blocks := map[int][]state{0: {{"a", []entry{{"k", "v"}}}}, 1: {{"b", []entry{{"k", "v"}}}}}
	plain, h := write(t, r, blocks)
	described, h2 := writeDescribed(t, r, []StateInfo{PlainInfo("a"), PlainInfo("b")}, blocks)
	if !bytes.Equal(plain, described) || h.CRC != h2.CRC {
		t.Fatal("describing plain states changed the bytes")
	}
	if plain[len(Magic)] != 1 {
		t.Errorf("version byte %d, want 1", plain[len(Magic)])
	}
	f, err := Open(h, plain)
	must(t, err)
	if f.Version() != 1 || len(f.Infos()) != 0 || f.Info("a") != PlainInfo("a") {
		t.Errorf("version %d, infos %v", f.Version(), f.Infos())
	}
}

func TestDescribeMisuse(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	list := StateInfo{Name: "l", Kind: KindList}
	tests := []struct {
		name string
		use  func(w *Writer) error
		want string
	}{
		{"after StartGroup", func(w *Writer) error {
			w.StartGroup(0, 0)
			return w.Describe(list)
		}, "Describe after StartGroup"},
		{"twice", func(w *Writer) error {
			w.Describe()
			return w.Describe(list)
		}, "twice"},
		{"unsorted", func(w *Writer) error {
			return w.Describe(StateInfo{Name: "m", Kind: KindMap}, list)
		}, "sorted by name"},
		{"unknown kind", func(w *Writer) error {
			return w.Describe(StateInfo{Name: "x", Kind: 9})
		}, "unknown kind 9"},
		{"described without entries", func(w *Writer) error {
			w.Describe(list)
			w.StartGroup(0, 0)
			w.EndGroup()
			_, err := w.Finish()
			return err
		}, `state "l" is described but has no entries`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.use(NewWriter(&bytes.Buffer{}, r))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// header builds a version-2 header with raw infos.
func header(r keygroup.Range, infos ...[]byte) []byte {
	b := append([]byte(Magic), 2)
	b = binary.AppendUvarint(b, uint64(r.Start))
	b = binary.AppendUvarint(b, uint64(r.End))
	b = binary.AppendUvarint(b, uint64(len(infos)))
	for _, in := range infos {
		b = append(b, in...)
	}
	return b
}

func info(name string, kind, flags uint64) []byte {
	b := binary.AppendUvarint(nil, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, kind)
	return binary.AppendUvarint(b, flags)
}

func TestReadRejectsBadDescriptions(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 0}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"unsorted", header(r, info("b", 2, 0), info("a", 2, 0)), "not sorted"},
		{"repeated", header(r, info("a", 2, 0), info("a", 3, 0)), "not sorted"},
		{"unknown kind", header(r, info("a", 6, 0)), "unknown kind 6"},
		{"kind zero", header(r, info("a", 0, 0)), "unknown kind 0"},
		{"huge kind", header(r, info("a", 257, 0)), "unknown kind 257"},
		{"unknown flags", header(r, info("a", 2, 4)), "unknown flags 0x4"},
		{"plain described", header(r, info("a", 1, 0)), "plain value state"},
		{"count beyond bytes", append(header(r)[:len(header(r))-1], 50), "exceeds"},
		{"truncated", header(r, info("a", 2, 0))[:len(header(r, info("a", 2, 0)))-1], "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := checkpoint.KeyedStateHandle{Size: int64(len(tc.data)), StartGroup: r.Start, EndGroup: r.End}
			_, err := Open(h, tc.data)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrCorrupt containing %q", err, tc.want)
			}
		})
	}
	// The good version of the same header opens.
	good := header(r, info("a", 2, 3))
	f, err := Open(checkpoint.KeyedStateHandle{Size: int64(len(good))}, good)
	must(t, err)
	if got := f.Info("a"); got != (StateInfo{Name: "a", Kind: KindList, Namespaced: true, TTL: true}) {
		t.Errorf("Info = %+v", got)
	}
}

// TestEveryTruncationFailsDescribed is TestEveryTruncationFails for a
// version-2 file.
func TestEveryTruncationFailsDescribed(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 2}
	data, h := writeDescribed(t, r, []StateInfo{{Name: "a", Kind: KindMap, TTL: true}}, map[int][]state{
		1: {{"a", []entry{{"k1", "v1"}, {"k2", "v2"}}}},
	})
	for n := range len(data) {
		h2 := h
		h2.Size = int64(n)
		f, err := Open(h2, data[:n])
		if err != nil {
			continue
		}
		failed := false
		for g := r.Start; g < r.End; g++ {
			if _, err := f.Block(g); err != nil {
				failed = true
			}
		}
		if !failed {
			t.Errorf("truncated to %d of %d bytes: no error", n, len(data))
		}
	}
}

func TestTTLPrefix(t *testing.T) {
	stamps := []int64{math.MinInt64, -1, 0, 1, 1_700_000_000_000, math.MaxInt64}
	var prev []byte
	for i, ts := range stamps {
		b := AppendTTL([]byte("x"), ts)[1:]
		if len(b) != TTLPrefixLen {
			t.Fatalf("%d: %d bytes", ts, len(b))
		}
		got, rest, err := SplitTTL(append(b, "value"...))
		if err != nil || got != ts || string(rest) != "value" {
			t.Errorf("SplitTTL(AppendTTL(%d)) = %d, %q, %v", ts, got, rest, err)
		}
		if i > 0 && bytes.Compare(prev, b) >= 0 {
			t.Errorf("bytes of %d do not sort after those of %d", ts, stamps[i-1])
		}
		prev = b
	}
	if _, _, err := SplitTTL(make([]byte, 7)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("7 bytes: err = %v", err)
	}
	// codec.Int64's bytes, as documented.
	if got := AppendTTL(nil, 1); !bytes.Equal(got, []byte{0x80, 0, 0, 0, 0, 0, 0, 1}) {
		t.Errorf("AppendTTL(1) = %x", got)
	}
}

func TestExpiresAt(t *testing.T) {
	tests := []struct{ last, ttl, want int64 }{
		{0, 10, 10},
		{-20, 10, -10},
		{math.MaxInt64 - 5, 10, math.MaxInt64},
		{math.MinInt64, 1, math.MinInt64 + 1},
	}
	for _, tc := range tests {
		if got := ExpiresAt(tc.last, tc.ttl); got != tc.want {
			t.Errorf("ExpiresAt(%d, %d) = %d, want %d", tc.last, tc.ttl, got, tc.want)
		}
	}
}
