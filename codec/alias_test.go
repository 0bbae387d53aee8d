package codec

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// TestDecodeAlias: String's and Bytes' DecodeAlias decode what Decode
// does, pointing into src (an append to the []byte does not write into
// src), and fail alike on a truncated input.
func TestDecodeAlias(t *testing.T) {
	for _, v := range []string{"", "a", strings.Repeat("x", 200)} {
		src := append(String().Append(nil, v), "tail"...)
		want, wn, _ := String().Decode(src)
		got, n, err := String().(AliasDecoder[string]).DecodeAlias(src)
		if err != nil || got != want || n != wn {
			t.Fatalf("DecodeAlias(%q) = %q, %d, %v; Decode gives %q, %d", v, got, n, err, want, wn)
		}
		if len(v) > 0 && unsafe.StringData(got) != &src[n-len(v)] {
			t.Fatalf("DecodeAlias(%q) copied: the string does not point into src", v)
		}
		b, bn, err := Bytes().(AliasDecoder[[]byte]).DecodeAlias(src)
		if err != nil || string(b) != v || bn != wn || (len(v) == 0) != (b == nil) {
			t.Fatalf("Bytes DecodeAlias(%q) = %q (nil %v), %d, %v", v, b, b == nil, bn, err)
		}
		if len(v) > 0 {
			if &b[0] != &src[bn-len(v)] || cap(b) != len(v) {
				t.Fatalf("Bytes DecodeAlias(%q): not a slice of src capped at its length (cap %d)", v, cap(b))
			}
			_ = append(b, '!')
			if !bytes.HasSuffix(src, []byte("tail")) {
				t.Fatal("an append to the decoded slice wrote into src")
			}
		}
	}
	short := String().Append(nil, "truncated")[:5]
	if _, n, err := String().(AliasDecoder[string]).DecodeAlias(short); !errors.Is(err, ErrTruncated) || n != 0 {
		t.Fatalf("String DecodeAlias of a truncated input: %d, %v; want 0 and ErrTruncated", n, err)
	}
	if _, n, err := Bytes().(AliasDecoder[[]byte]).DecodeAlias(short); !errors.Is(err, ErrTruncated) || n != 0 {
		t.Fatalf("Bytes DecodeAlias of a truncated input: %d, %v; want 0 and ErrTruncated", n, err)
	}
}
