package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// TestMemoryChunks writes objects of many sizes in writes of awkward sizes,
// so that they span chunk boundaries, and reads them back every way a
// caller can: the bytes, their size, reads of one byte, io.Copy (which uses
// WriteTo), and twice, since readers share the chunks.
func TestMemoryChunks(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		size   int
		writes []int // sizes of the writes, repeated until size is written
	}{
		{name: "empty", size: 0, writes: []int{1}},
		{name: "one byte", size: 1, writes: []int{1}},
		{name: "first chunk exactly", size: memFirstChunkSize, writes: []int{memFirstChunkSize}},
		{name: "first chunk and one", size: memFirstChunkSize + 1, writes: []int{memFirstChunkSize + 1}},
		{name: "small writes over chunks", size: 3*memChunkSize + 17, writes: []int{1, 7, 4093, 100_003}},
		{name: "one write larger than a chunk", size: 2*memChunkSize + 5, writes: []int{2*memChunkSize + 5}},
		{name: "large then small", size: 4*memChunkSize + 9, writes: []int{memChunkSize + 3, 5, memChunkSize - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := make([]byte, tt.size)
			for i := range want {
				want[i] = byte(i*7 + i>>11)
			}
			s := NewMemoryStore()
			w, err := s.Create(ctx, "obj")
			if err != nil {
				t.Fatal(err)
			}
			for rest, i := want, 0; len(rest) > 0; i++ {
				n := min(tt.writes[i%len(tt.writes)], len(rest))
				if m, err := w.Write(rest[:n]); m != n || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", n, m, err)
				}
				rest = rest[n:]
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			o := s.(*memStore).objs.objects["obj"]
			for i, c := range o.chunks {
				if len(c) == 0 || (cap(c) > memChunkSize && len(o.chunks) > 1 && len(c) != cap(c)) {
					t.Errorf("chunk %d of %d: len %d cap %d", i, len(o.chunks), len(c), cap(c))
				}
			}
			if n, err := s.Stat(ctx, "obj"); n != int64(tt.size) || err != nil {
				t.Errorf("Stat = %d, %v; want %d", n, err, tt.size)
			}
			read := map[string]func(io.Reader) ([]byte, error){
				"ReadAll": io.ReadAll,
				"one byte at a time": func(r io.Reader) ([]byte, error) {
					return io.ReadAll(iotest.OneByteReader(r))
				},
				"io.Copy": func(r io.Reader) ([]byte, error) {
					var b bytes.Buffer
					_, err := io.Copy(&b, r)
					return b.Bytes(), err
				},
			}
			for _, how := range []string{"ReadAll", "one byte at a time", "io.Copy", "ReadAll"} {
				r, err := s.Open(ctx, "obj")
				if err != nil {
					t.Fatal(err)
				}
				got, err := read[how](r)
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: read %d bytes that differ from the %d written", how, len(got), len(want))
				}
			}
		})
	}
}

// TestMemoryReaderConforms runs the standard library's reader checks on an
// object of several chunks.
func TestMemoryReaderConforms(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789abcdef"), (memChunkSize+memFirstChunkSize)/16+3)
	w := &memWriter{store: NewMemoryStore().(*memStore), ctx: context.Background(), name: "x"}
	if _, err := w.Write(want[:10]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(want[10:]); err != nil {
		t.Fatal(err)
	}
	if len(w.chunks) < 2 {
		t.Fatalf("%d chunks: the test wants an object of several", len(w.chunks))
	}
	if err := iotest.TestReader(memObject{chunks: w.chunks, size: w.size}.open(), want); err != nil {
		t.Fatal(err)
	}
}

// shortWriter accepts at most n bytes per Write and says nothing of the
// rest.
type shortWriter struct{ n int }

func (w shortWriter) Write(p []byte) (int, error) { return min(len(p), w.n), nil }

func TestMemoryWriteToShortWrite(t *testing.T) {
	r := memObject{chunks: [][]byte{[]byte("abc"), []byte("def")}, size: 6}.open()
	n, err := r.WriteTo(shortWriter{n: 2})
	if n != 2 || err != io.ErrShortWrite {
		t.Fatalf("WriteTo = %d, %v; want 2, io.ErrShortWrite", n, err)
	}
}

// BenchmarkMemoryStateFile writes and deletes a state file of 17 MiB in
// writes of one key group (~270 KiB), as a checkpoint of the checkpoint
// overhead benchmark does (bench/checkpoint_test.go), keeping the previous
// one as a retained checkpoint would.
func BenchmarkMemoryStateFile(b *testing.B) {
	ctx := context.Background()
	s := NewMemoryStore()
	block := bytes.Repeat([]byte{0xab}, 270<<10)
	const blocks = 17 << 20 / (270 << 10)
	b.SetBytes(blocks * int64(len(block)))
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("chk-%d/state", i)
		w, err := s.Create(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		for range blocks {
			if _, err := w.Write(block); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		if i > 0 {
			if err := s.DeletePrefix(ctx, fmt.Sprintf("chk-%d", i-1)); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}

// TestMemoryChunkReuse shows that the chunks of a deleted object are
// written again, but never while a reader has the object open.
func TestMemoryChunkReuse(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	objs := s.(*memStore).objs
	put := func(name string, b byte) {
		t.Helper()
		w, err := s.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		piece := bytes.Repeat([]byte{b}, 64<<10)
		for range 3 * memChunkSize / len(piece) {
			if _, err := w.Write(piece); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 'a')
	r, err := s.Open(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if objs.freeChunks() != 0 {
		t.Fatalf("%d chunks freed of an object a reader has open", objs.freeChunks())
	}
	put("b", 'b')
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte{'a'}, 3*memChunkSize); !bytes.Equal(got, want) {
		t.Fatal("the reader of a deleted object read bytes written after the delete")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Read after Close = %d, %v; want 0, EOF", n, err)
	}

	// A reader closed before the delete: the chunks are reused.
	r, err = s.Open(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if objs.freeChunks() == 0 {
		t.Fatal("no chunk of a deleted object with no readers kept for reuse")
	}
	free := objs.freeChunks()
	put("c", 'c')
	if objs.freeChunks() >= free {
		t.Errorf("%d free chunks before a write of 3 MiB, %d after: none reused", free, objs.freeChunks())
	}
	r, err = s.Open(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{'c'}, 3*memChunkSize)) {
		t.Errorf("an object over reused chunks reads back wrong (%d bytes, %v)", len(got), err)
	}
}

// TestMemoryStoreReusesSmallChunks: the chunks of a small deleted object
// (a checkpoint's channel state file, tens of KiB) are reused by the next
// object of that size, not only those of memChunkSize.
func TestMemoryStoreReusesSmallChunks(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryStore()
	objs := s.(*memStore).objs
	put := func(name string) {
		t.Helper()
		w, err := s.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if _, err := w.Write(bytes.Repeat([]byte(name), 40<<10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	free := objs.freeChunks()
	if free == 0 {
		t.Fatal("no chunk of a deleted 160 KiB object kept for reuse")
	}
	put("b")
	if n := objs.freeChunks(); n != 0 {
		t.Errorf("%d free chunks before an object of the same size, %d after: want all reused", free, n)
	}
	r, err := s.Open(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, bytes.Repeat([]byte("b"), 160<<10)) {
		t.Errorf("an object over reused small chunks reads back wrong (%d bytes, %v)", len(got), err)
	}
}
