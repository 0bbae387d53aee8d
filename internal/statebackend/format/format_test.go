package format

import (
	"bytes"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/keygroup"
)

type entry struct{ k, v string }

type state struct {
	name    string
	entries []entry
}

// write writes blocks (by key group) covering r and returns the bytes and the
// handle.
func write(t *testing.T, r keygroup.Range, blocks map[int][]state) ([]byte, checkpoint.KeyedStateHandle) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, r)
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// read returns every block of the file as states.
func read(t *testing.T, h checkpoint.KeyedStateHandle, data []byte) map[int][]state {
	t.Helper()
	f, err := Open(h, data)
	must(t, err)
	out := map[int][]state{}
	for g := h.StartGroup; g < h.EndGroup; g++ {
		blk, err := f.Block(g)
		must(t, err)
		for _, sb := range blk.States {
			s := state{name: sb.Name}
			must(t, sb.ForEach(func(k, v []byte) error {
				s.entries = append(s.entries, entry{string(k), string(v)})
				return nil
			}))
			out[g] = append(out[g], s)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	r := keygroup.Range{Start: 5, End: 9}
	blocks := map[int][]state{
		5: {{"a", []entry{{"k1", "v1"}, {"k2", ""}}}, {"b", []entry{{"", "x"}}}},
		7: {{"b", []entry{{"k", strings.Repeat("v", 300)}}}},
		8: {{"", []entry{{"z", "1"}}}, {"zz", []entry{{"a", "2"}, {"b", "3"}}}},
	}
	data, h := write(t, r, blocks)
	if h.StartGroup != 5 || h.EndGroup != 9 || len(h.Offsets) != 4 || h.Size != int64(len(data)) {
		t.Fatalf("handle = %+v for %d bytes", h, len(data))
	}
	if want := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); h.CRC != want {
		t.Errorf("CRC = %08x, want %08x", h.CRC, want)
	}
	got := read(t, h, data)
	if len(got) != len(blocks) {
		t.Fatalf("read %d non-empty groups, want %d", len(got), len(blocks))
	}
	for g, want := range blocks {
		if !equalStates(got[g], want) {
			t.Errorf("group %d: read %v, want %v", g, got[g], want)
		}
	}
}

func equalStates(a, b []state) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || len(a[i].entries) != len(b[i].entries) {
			return false
		}
		for j := range a[i].entries {
			if a[i].entries[j] != b[i].entries[j] {
				return false
			}
		}
	}
	return true
}

func TestEmptyRange(t *testing.T) {
	data, h := write(t, keygroup.Range{Start: 3, End: 3}, nil)
	if _, err := Open(h, data); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h, append(data, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: err = %v", err)
	}
}

func TestCopyStateIsVerbatim(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 1}
	data, h := write(t, r, map[int][]state{0: {{"a", []entry{{"k", "v"}, {"l", "w"}}}}})
	f, err := Open(h, data)
	must(t, err)
	blk, err := f.Block(0)
	must(t, err)
	var buf bytes.Buffer
	w := NewWriter(&buf, r)
	must(t, w.StartGroup(0, 1))
	must(t, w.CopyState(blk.States[0]))
	must(t, w.EndGroup())
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("copy differs:\n%x\n%x", buf.Bytes(), data)
	}
}

func TestWriterRejectsMisuse(t *testing.T) {
	tests := []struct {
		name string
		use  func(w *Writer) error
		want string
	}{
		{"group out of order", func(w *Writer) error { return w.StartGroup(1, 0) }, "expected key group 0"},
		{"states unsorted", func(w *Writer) error {
			w.StartGroup(0, 2)
			w.StartState("b", 1)
			w.Entry([]byte("k"), nil)
			return w.StartState("a", 1)
		}, "sorted by name"},
		{"keys unsorted", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 2)
			w.Entry([]byte("k"), nil)
			return w.Entry([]byte("k"), nil)
		}, "out of order or repeated"},
		{"8-byte keys unsorted", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 2)
			w.Entry([]byte("\x00\x00\x00\x00\x00\x00\x01\x00"), nil)
			return w.Entry([]byte("\x00\x00\x00\x00\x00\x00\x00\xff"), nil)
		}, "out of order or repeated (00000000000000ff after 0000000000000100)"},
		{"8-byte keys repeated", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 2)
			w.Entry([]byte("abcdefgh"), []byte("v"))
			return w.Entry([]byte("abcdefgh"), []byte("w"))
		}, "out of order or repeated"},
		{"8-byte key after a longer one it prefixes", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 2)
			w.Entry([]byte("abcdefgh\x00"), nil)
			return w.Entry([]byte("abcdefgh"), nil)
		}, "out of order or repeated"},
		{"too few entries", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 2)
			w.Entry([]byte("k"), nil)
			return w.EndGroup()
		}, "1 entries missing"},
		{"too many entries", func(w *Writer) error {
			w.StartGroup(0, 1)
			w.StartState("a", 1)
			w.Entry([]byte("k"), nil)
			return w.Entry([]byte("l"), nil)
		}, "beyond the count"},
		{"too many states", func(w *Writer) error {
			w.StartGroup(0, 0)
			return w.StartState("a", 1)
		}, "more states than announced"},
		{"empty state", func(w *Writer) error {
			w.StartGroup(0, 1)
			return w.StartState("a", 0)
		}, "leave out states without entries"},
		{"finish early", func(w *Writer) error {
			_, err := w.Finish()
			return err
		}, "Finish after"},
		{"errors stick", func(w *Writer) error {
			w.StartGroup(1, 0)
			return w.StartGroup(0, 0)
		}, "expected key group 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.use(NewWriter(&bytes.Buffer{}, keygroup.Range{Start: 0, End: 2}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after == 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

func TestWriterReportsWriteErrors(t *testing.T) {
	w := NewWriter(&failingWriter{after: 1}, keygroup.Range{Start: 0, End: 3})
	must(t, w.StartGroup(0, 0))
	must(t, w.EndGroup())
	must(t, w.StartGroup(1, 0))
	err := w.EndGroup()
	if err == nil || !strings.Contains(err.Error(), "write key group 1: disk full") {
		t.Fatalf("err = %v", err)
	}
	if _, err2 := w.Finish(); err2 != err {
		t.Errorf("Finish err = %v, want the write error", err2)
	}
}

func TestReadRejectsCorruptInput(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 2}
	data, h := write(t, r, map[int][]state{
		0: {{"a", []entry{{"k1", "v1"}, {"k2", "v2"}}}},
		1: {{"a", []entry{{"k3", "v3"}}}, {"b", []entry{{"k", "v"}}}},
	})
	with := func(f func(h *checkpoint.KeyedStateHandle, d []byte) []byte) (checkpoint.KeyedStateHandle, []byte) {
		h2 := h
		h2.Offsets = append([]int64(nil), h.Offsets...)
		d := f(&h2, bytes.Clone(data))
		if h2.Size == h.Size {
			h2.Size = int64(len(d))
		}
		return h2, d
	}
	tests := []struct {
		name string
		h    checkpoint.KeyedStateHandle
		data []byte
		want string
	}{
		{"bad magic", h, append([]byte("XKST"), data[4:]...), "does not start with"},
		{"size mismatch", func() checkpoint.KeyedStateHandle { h2 := h; h2.Size++; return h2 }(), data, "its handle says"},
		{"range mismatch", func() checkpoint.KeyedStateHandle {
			h2 := h
			h2.StartGroup, h2.EndGroup = 1, 3
			return h2
		}(), data, "its handle says [1, 3)"},
		{"offset count", func() checkpoint.KeyedStateHandle { h2 := h; h2.Offsets = h.Offsets[:1]; return h2 }(), data, "has 1 offsets"},
		{"offset beyond file", func() checkpoint.KeyedStateHandle {
			h2 := h
			h2.Offsets = []int64{h.Offsets[0], 1 << 40}
			return h2
		}(), data, "outside the file"},
		{"first offset not after header", func() checkpoint.KeyedStateHandle {
			h2 := h
			h2.Offsets = []int64{h.Offsets[0] + 1, h.Offsets[1]}
			return h2
		}(), data, "header ends at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.h, tc.data)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrCorrupt containing %q", err, tc.want)
			}
		})
	}

	// Versions from the future are their own error.
	h2, d := with(func(_ *checkpoint.KeyedStateHandle, d []byte) []byte { d[4] = Version + 1; return d })
	if _, err := Open(h2, d); !errors.Is(err, ErrVersion) {
		t.Errorf("version %d: err = %v", Version+1, err)
	}

	// Blocks are checked when read.
	blockTests := []struct {
		name  string
		mod   func(h *checkpoint.KeyedStateHandle, d []byte) []byte
		group int
		want  string
	}{
		{"blocks swapped", func(h *checkpoint.KeyedStateHandle, d []byte) []byte {
			hdr, b0, b1 := d[:h.Offsets[0]], d[h.Offsets[0]:h.Offsets[1]], d[h.Offsets[1]:]
			h.Offsets[1] = h.Offsets[0] + int64(len(b1))
			return slices.Concat(hdr, b1, b0)
		}, 0, "belongs to key group 1"},
		{"truncated last block", func(_ *checkpoint.KeyedStateHandle, d []byte) []byte { return d[:len(d)-1] }, 1, "only 0 bytes are left"},
		{"trailing bytes", func(_ *checkpoint.KeyedStateHandle, d []byte) []byte { return append(d, 0) }, 1, "after the block's last state"},
		{"huge state count", func(h *checkpoint.KeyedStateHandle, d []byte) []byte {
			d[h.Offsets[1]+1] = 0x7f
			return d
		}, 1, "state count 127"},
	}
	for _, tc := range blockTests {
		t.Run(tc.name, func(t *testing.T) {
			h2, d := with(tc.mod)
			f, err := Open(h2, d)
			must(t, err)
			_, err = f.Block(tc.group)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrCorrupt containing %q", err, tc.want)
			}
		})
	}
}

// TestEveryTruncationFails cuts a file at every length: Open or a block read
// must fail, and nothing panics.
func TestEveryTruncationFails(t *testing.T) {
	r := keygroup.Range{Start: 0, End: 3}
	data, h := write(t, r, map[int][]state{
		0: {{"a", []entry{{"k1", "v1"}}}},
		2: {{"a", []entry{{"k3", "v3"}}}, {"b", []entry{{"k", "v"}, {"l", "w"}}}},
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
