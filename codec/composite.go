package codec

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"
)

// --- structs ---

// structCodec encodes the fields in declaration order with nothing between
// them. Fields are reached by their offsets, so unexported fields work and no
// reflect.Value is needed.
type structCodec struct {
	fields []structField
	min    int
}

type structField struct {
	name   string
	offset uintptr
	codec  valueCodec
}

func (c *structCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	for i := range c.fields {
		f := &c.fields[i]
		dst = f.codec.appendAt(dst, unsafe.Add(p, f.offset))
	}
	return dst
}

func (c *structCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	off := 0
	for i := range c.fields {
		f := &c.fields[i]
		n, err := f.codec.decodeAt(src[off:], unsafe.Add(p, f.offset))
		if err != nil {
			return 0, fmt.Errorf("field %s: %w", f.name, err)
		}
		off += n
	}
	return off, nil
}

func (c *structCodec) minSize() int { return c.min }

// --- arrays ---

// arrayCodec encodes the n elements one after the other, without a length:
// the length is part of the type.
type arrayCodec struct {
	elem     valueCodec
	elemSize uintptr
	n        int
}

func (c arrayCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	for i := range c.n {
		dst = c.elem.appendAt(dst, unsafe.Add(p, uintptr(i)*c.elemSize))
	}
	return dst
}

func (c arrayCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	off := 0
	for i := range c.n {
		n, err := c.elem.decodeAt(src[off:], unsafe.Add(p, uintptr(i)*c.elemSize))
		if err != nil {
			return 0, fmt.Errorf("element %d: %w", i, err)
		}
		off += n
	}
	return off, nil
}

func (c arrayCodec) minSize() int {
	if c.n == 0 {
		return 0
	}
	return c.n * c.elem.minSize()
}

// byteArrayCodec copies [n]byte as it is.
type byteArrayCodec struct{ n int }

func (c byteArrayCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return append(dst, unsafe.Slice((*byte)(p), c.n)...)
}

func (c byteArrayCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < c.n {
		return 0, errTruncated(fmt.Sprintf("[%d]byte", c.n), c.n, len(src))
	}
	copy(unsafe.Slice((*byte)(p), c.n), src)
	return c.n, nil
}

func (c byteArrayCodec) minSize() int { return c.n }

// --- slices ---

// sliceHeader is the memory layout of every slice type.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// sliceCodec encodes the uvarint length followed by the elements. Nil and
// empty slices both encode as length 0 and decode as nil.
type sliceCodec struct {
	typ      reflect.Type
	elem     valueCodec
	elemSize uintptr
	// elemMin is elem.minSize(). It is 0 only for elements that occupy no
	// memory and always encode to nothing, such as struct{}: only the length
	// of such a slice is encoded, and the element loops are skipped, as they
	// could run for 2^63 iterations.
	elemMin int
}

func (c sliceCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	h := (*sliceHeader)(p)
	dst = binary.AppendUvarint(dst, uint64(h.len))
	if c.elemMin == 0 {
		return dst
	}
	for i := range h.len {
		dst = c.elem.appendAt(dst, unsafe.Add(h.data, uintptr(i)*c.elemSize))
	}
	return dst
}

func (c sliceCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	length, off, err := decodeUvarint(src, c.typ.String())
	if err != nil {
		return 0, err
	}
	if length == 0 {
		*(*sliceHeader)(p) = sliceHeader{}
		return off, nil
	}
	n, err := checkCount(length, c.elemMin, len(src)-off, c.typ)
	if err != nil {
		return 0, err
	}
	data := reflect.MakeSlice(c.typ, n, n).UnsafePointer()
	for i := 0; i < n && c.elemMin > 0; i++ {
		k, err := c.elem.decodeAt(src[off:], unsafe.Add(data, uintptr(i)*c.elemSize))
		if err != nil {
			return 0, fmt.Errorf("element %d: %w", i, err)
		}
		off += k
	}
	*(*sliceHeader)(p) = sliceHeader{data: data, len: n, cap: n}
	return off, nil
}

func (c sliceCodec) minSize() int { return 1 }

// checkCount checks that count elements of at least minSize bytes each can
// fit in the left bytes of the input, before anything is allocated for them.
// Elements of minSize 0 occupy no memory (see buildSlice), so any count that
// fits in an int is fine for them.
func checkCount(count uint64, minSize, left int, t reflect.Type) (int, error) {
	if minSize == 0 {
		if count > uint64(maxInt) {
			return 0, errMalformed(t.String(), fmt.Sprintf("length %d does not fit in int", count))
		}
		return int(count), nil
	}
	if count > uint64(left/minSize) {
		return 0, fmt.Errorf("decode %v: length %d exceeds the %d bytes left (elements take at least %d bytes each): %w",
			t, count, left, minSize, ErrTruncated)
	}
	return int(count), nil
}

const maxInt = int(^uint(0) >> 1)

// --- pointers ---

// pointerCodec encodes a nil pointer as 0 and any other as 1 followed by the
// value it points to. Two pointers to one value are encoded twice and
// decode as two values.
type pointerCodec struct {
	elemType reflect.Type
	elem     valueCodec
}

func (c pointerCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	q := *(*unsafe.Pointer)(p)
	if q == nil {
		return append(dst, 0)
	}
	return c.elem.appendAt(append(dst, 1), q)
}

func (c pointerCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 1 {
		return 0, errTruncated("*"+c.elemType.String(), 1, 0)
	}
	switch src[0] {
	case 0:
		*(*unsafe.Pointer)(p) = nil
		return 1, nil
	case 1:
		q := reflect.New(c.elemType).UnsafePointer()
		n, err := c.elem.decodeAt(src[1:], q)
		if err != nil {
			return 0, err
		}
		*(*unsafe.Pointer)(p) = q
		return 1 + n, nil
	}
	return 0, errMalformed("*"+c.elemType.String(), fmt.Sprintf("nil flag %#x is neither 0 nor 1", src[0]))
}

func (c pointerCodec) minSize() int { return 1 }

// --- maps ---

// mapCodec encodes the uvarint length followed by the entries, key then
// value, sorted by the encoded key (then by the encoded value, for keys such
// as NaN that encode alike), so that equal maps encode to equal bytes. Nil
// and empty maps both encode as length 0 and decode as nil.
type mapCodec struct {
	typ      reflect.Type
	key, val valueCodec
}

type mapEntrySpan struct{ start, keyEnd, end int }

type mapScratch struct {
	buf   []byte
	spans []mapEntrySpan
}

// mapScratchPool recycles the buffers in which entries are encoded before
// they are sorted.
var mapScratchPool = sync.Pool{New: func() any { return new(mapScratch) }}

// maxPooledScratch keeps one huge map from pinning its buffer forever.
const maxPooledScratch = 64 << 10

func (c *mapCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	m := reflect.NewAt(c.typ, p).Elem()
	if m.Len() == 0 {
		return append(dst, 0)
	}
	// Detach from p before iterating: MapRange keeps m in a heap object,
	// which must not point into the stack frame that p may point to (see
	// noescape). A map is a pointer, so this copies no entries.
	m = reflect.ValueOf(m.Interface())

	s := mapScratchPool.Get().(*mapScratch)
	buf, spans := s.buf[:0], s.spans[:0]
	k := reflect.New(c.typ.Key())
	v := reflect.New(c.typ.Elem())
	for it := m.MapRange(); it.Next(); {
		k.Elem().SetIterKey(it)
		v.Elem().SetIterValue(it)
		start := len(buf)
		buf = c.key.appendAt(buf, k.UnsafePointer())
		keyEnd := len(buf)
		buf = c.val.appendAt(buf, v.UnsafePointer())
		spans = append(spans, mapEntrySpan{start: start, keyEnd: keyEnd, end: len(buf)})
	}
	slices.SortFunc(spans, func(a, b mapEntrySpan) int {
		if byKey := bytes.Compare(buf[a.start:a.keyEnd], buf[b.start:b.keyEnd]); byKey != 0 {
			return byKey
		}
		return bytes.Compare(buf[a.keyEnd:a.end], buf[b.keyEnd:b.end])
	})

	dst = binary.AppendUvarint(dst, uint64(len(spans)))
	for _, e := range spans {
		dst = append(dst, buf[e.start:e.end]...)
	}

	if cap(buf) <= maxPooledScratch {
		s.buf, s.spans = buf[:0], spans[:0]
		mapScratchPool.Put(s)
	}
	return dst
}

func (c *mapCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	length, off, err := decodeUvarint(src, c.typ.String())
	if err != nil {
		return 0, err
	}
	if length == 0 {
		reflect.NewAt(c.typ, p).Elem().SetZero()
		return off, nil
	}
	keyMin := c.key.minSize()
	if keyMin == 0 && length > 1 {
		// All keys of a type that encodes to nothing are equal.
		return 0, errMalformed(c.typ.String(), fmt.Sprintf("%d entries, but the key type has only one value", length))
	}
	n, err := checkCount(length, keyMin+c.val.minSize(), len(src)-off, c.typ)
	if err != nil {
		return 0, err
	}

	m := reflect.MakeMapWithSize(c.typ, n)
	k := reflect.New(c.typ.Key())
	v := reflect.New(c.typ.Elem())
	for i := range n {
		kn, err := c.key.decodeAt(src[off:], k.UnsafePointer())
		if err != nil {
			return 0, fmt.Errorf("key %d: %w", i, err)
		}
		off += kn
		vn, err := c.val.decodeAt(src[off:], v.UnsafePointer())
		if err != nil {
			return 0, fmt.Errorf("value %d: %w", i, err)
		}
		off += vn
		m.SetMapIndex(k.Elem(), v.Elem())
	}
	reflect.NewAt(c.typ, p).Elem().Set(m)
	return off, nil
}

func (c *mapCodec) minSize() int { return 1 }

// --- AppendBinary / UnmarshalBinary ---

// binaryMethodsCodec encodes a type with its own AppendBinary and
// UnmarshalBinary methods, as the uvarint length of their bytes followed by
// the bytes. The value is copied to the heap before the methods see it,
// because p may point into a stack frame that user code must not retain.
type binaryMethodsCodec struct{ typ reflect.Type }

func (c binaryMethodsCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	v := reflect.New(c.typ)
	v.Elem().Set(reflect.NewAt(c.typ, p).Elem())
	start := len(dst)
	out, err := v.Interface().(encoding.BinaryAppender).AppendBinary(dst)
	if err != nil {
		panic(fmt.Sprintf("codec: %v.AppendBinary failed: %v; Codec.Append cannot return errors, so pass a custom Codec for %v",
			c.typ, err, c.typ))
	}
	// Move the bytes right to make room for their length in front.
	n := len(out) - start
	var prefix [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(prefix[:], uint64(n))
	out = append(out, prefix[:k]...)
	copy(out[start+k:], out[start:start+n])
	copy(out[start:], prefix[:k])
	return out
}

func (c binaryMethodsCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	n, k, err := decodeByteLength(src, c.typ.String())
	if err != nil {
		return 0, err
	}
	v := reflect.New(c.typ)
	if err := v.Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary(src[k : k+n]); err != nil {
		return 0, fmt.Errorf("decode %v: UnmarshalBinary: %w: %w", c.typ, ErrMalformed, err)
	}
	reflect.NewAt(c.typ, p).Elem().Set(v.Elem())
	return k + n, nil
}

func (c binaryMethodsCodec) minSize() int { return 1 }
