package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// The scalar codecs below serve twice: their Append and Decode methods are
// the direct codecs returned by String, Int64 and friends (no reflection, no
// interface call), and their appendAt and decodeAt methods are the leaves of
// the codec trees that Of builds for composite and named types.

// String returns the codec for string: the uvarint byte length followed by
// the bytes. The length prefix lets Decode find the end of the value inside
// a larger buffer; it also means that byte order is not string order.
func String() Codec[string] { return stringCodec{} }

// Bytes returns the codec for []byte: the uvarint length followed by the
// bytes, as for String. Decode copies, so the result does not alias src.
// Nil and empty slices encode alike and both decode as nil.
func Bytes() Codec[[]byte] { return bytesCodec{} }

// Bool returns the codec for bool: one byte, 0 or 1. Decode rejects other
// bytes with ErrMalformed.
func Bool() Codec[bool] { return boolCodec{} }

// Int64 returns the codec for int64: 8 bytes big-endian with the sign bit
// flipped, so that byte order (bytes.Compare) is numeric order.
func Int64() Codec[int64] { return int64Codec{} }

// Int32 returns the codec for int32: 4 bytes big-endian with the sign bit
// flipped, so that byte order is numeric order.
func Int32() Codec[int32] { return int32Codec{} }

// Int returns the codec for int. It always writes 8 bytes, as Int64 does, so
// that 32-bit and 64-bit machines share one format; on a 32-bit machine
// Decode rejects values that do not fit with ErrMalformed.
func Int() Codec[int] { return intCodec{} }

// Uint64 returns the codec for uint64: 8 bytes big-endian, so that byte
// order is numeric order.
func Uint64() Codec[uint64] { return uint64Codec{} }

// Uint32 returns the codec for uint32: 4 bytes big-endian, so that byte
// order is numeric order.
func Uint32() Codec[uint32] { return uint32Codec{} }

// Float64 returns the codec for float64: the IEEE 754 bits, big-endian, with
// the sign bit flipped for positive numbers and all bits flipped for
// negative ones, so that byte order is numeric order (-Inf < ... < -0 < +0 <
// ... < +Inf). Every bit pattern round-trips: -0 and +0 differ, and so do
// NaNs with different payloads.
func Float64() Codec[float64] { return float64Codec{} }

const (
	sign8  = 1 << 7
	sign16 = 1 << 15
	sign32 = 1 << 31
	sign64 = 1 << 63
)

var (
	_ Codec[string]  = stringCodec{}
	_ Codec[[]byte]  = bytesCodec{}
	_ Codec[bool]    = boolCodec{}
	_ Codec[int64]   = int64Codec{}
	_ Codec[int32]   = int32Codec{}
	_ Codec[int]     = intCodec{}
	_ Codec[uint64]  = uint64Codec{}
	_ Codec[uint32]  = uint32Codec{}
	_ Codec[float64] = float64Codec{}

	_ AliasDecoder[string] = stringCodec{}
	_ AliasDecoder[[]byte] = bytesCodec{}

	_ valueCodec = stringCodec{}
	_ valueCodec = bytesCodec{}
	_ valueCodec = boolCodec{}
	_ valueCodec = int8Codec{}
	_ valueCodec = int16Codec{}
	_ valueCodec = int32Codec{}
	_ valueCodec = int64Codec{}
	_ valueCodec = intCodec{}
	_ valueCodec = uint8Codec{}
	_ valueCodec = uint16Codec{}
	_ valueCodec = uint32Codec{}
	_ valueCodec = uint64Codec{}
	_ valueCodec = uintCodec{}
	_ valueCodec = uintptrCodec{}
	_ valueCodec = float32Codec{}
	_ valueCodec = float64Codec{}
	_ valueCodec = complex64Codec{}
	_ valueCodec = complex128Codec{}
)

// --- string and []byte ---

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (stringCodec) Decode(src []byte) (string, int, error) {
	n, k, err := decodeByteLength(src, "string")
	if err != nil {
		return "", 0, err
	}
	return string(src[k : k+n]), k + n, nil
}

// DecodeAlias is Decode without the copy: the string points into src.
func (stringCodec) DecodeAlias(src []byte) (string, int, error) {
	n, k, err := decodeByteLength(src, "string")
	if err != nil || n == 0 {
		return "", k, err
	}
	return unsafe.String(&src[k], n), k + n, nil
}

func (c stringCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*string)(p))
}

func (c stringCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*string)(p) = v
	return n, err
}

func (stringCodec) minSize() int { return 1 }

// bytesCodec also serves named byte-slice types such as json.RawMessage,
// which share []byte's memory layout.
type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (bytesCodec) Decode(src []byte) ([]byte, int, error) {
	n, k, err := decodeByteLength(src, "[]byte")
	if err != nil || n == 0 {
		return nil, k, err
	}
	// append to nil, unlike make and copy, does not zero the new slice
	// before filling it (a megabyte value pays twice otherwise).
	v := append([]byte(nil), src[k:k+n]...)
	return v, k + n, nil
}

// DecodeAlias is Decode without the copy: the slice is part of src, its
// capacity cut to its length (an append to it never writes into src).
func (bytesCodec) DecodeAlias(src []byte) ([]byte, int, error) {
	n, k, err := decodeByteLength(src, "[]byte")
	if err != nil || n == 0 {
		return nil, k, err
	}
	return src[k : k+n : k+n], k + n, nil
}

func (c bytesCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*[]byte)(p))
}

func (c bytesCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*[]byte)(p) = v
	return n, err
}

func (bytesCodec) minSize() int { return 1 }

// decodeUvarint reads a uvarint from the start of src and returns it with
// its encoded size.
func decodeUvarint(src []byte, what string) (uint64, int, error) {
	v, k := binary.Uvarint(src)
	switch {
	case k == 0:
		return 0, 0, fmt.Errorf("decode %s: length prefix cut short after %d bytes: %w", what, len(src), ErrTruncated)
	case k < 0:
		return 0, 0, errMalformed(what, "length prefix overflows 64 bits")
	}
	return v, k, nil
}

// decodeByteLength reads the uvarint length of a byte string and checks
// that the bytes follow in src. It returns the length and the size of the
// prefix.
func decodeByteLength(src []byte, what string) (n, k int, err error) {
	length, k, err := decodeUvarint(src, what)
	if err != nil {
		return 0, 0, err
	}
	if length > uint64(len(src)-k) {
		return 0, 0, fmt.Errorf("decode %s: length %d exceeds the %d bytes left: %w",
			what, length, len(src)-k, ErrTruncated)
	}
	return int(length), k, nil
}

// --- bool ---

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (boolCodec) Decode(src []byte) (bool, int, error) {
	if len(src) < 1 {
		return false, 0, errTruncated("bool", 1, len(src))
	}
	switch src[0] {
	case 0:
		return false, 1, nil
	case 1:
		return true, 1, nil
	}
	return false, 0, errMalformed("bool", fmt.Sprintf("byte %#x is neither 0 nor 1", src[0]))
}

func (c boolCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*bool)(p))
}

func (c boolCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*bool)(p) = v
	return n, err
}

func (boolCodec) minSize() int { return 1 }

// --- fixed-width integers ---

type int64Codec struct{}

func (int64Codec) Append(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^sign64)
}

func (int64Codec) Decode(src []byte) (int64, int, error) {
	if len(src) < 8 {
		return 0, 0, errTruncated("int64", 8, len(src))
	}
	return int64(binary.BigEndian.Uint64(src) ^ sign64), 8, nil
}

func (c int64Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*int64)(p))
}

func (c int64Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*int64)(p) = v
	return n, err
}

func (int64Codec) minSize() int { return 8 }

type intCodec struct{}

func (intCodec) Append(dst []byte, v int) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^sign64)
}

func (intCodec) Decode(src []byte) (int, int, error) {
	if len(src) < 8 {
		return 0, 0, errTruncated("int", 8, len(src))
	}
	v := int64(binary.BigEndian.Uint64(src) ^ sign64)
	if int64(int(v)) != v { // only on 32-bit machines
		return 0, 0, errMalformed("int", fmt.Sprintf("%d does not fit in int", v))
	}
	return int(v), 8, nil
}

func (c intCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*int)(p))
}

func (c intCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*int)(p) = v
	return n, err
}

func (intCodec) minSize() int { return 8 }

type int32Codec struct{}

func (int32Codec) Append(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v)^sign32)
}

func (int32Codec) Decode(src []byte) (int32, int, error) {
	if len(src) < 4 {
		return 0, 0, errTruncated("int32", 4, len(src))
	}
	return int32(binary.BigEndian.Uint32(src) ^ sign32), 4, nil
}

func (c int32Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*int32)(p))
}

func (c int32Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*int32)(p) = v
	return n, err
}

func (int32Codec) minSize() int { return 4 }

type int16Codec struct{}

func (int16Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(*(*int16)(p))^sign16)
}

func (int16Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 2 {
		return 0, errTruncated("int16", 2, len(src))
	}
	*(*int16)(p) = int16(binary.BigEndian.Uint16(src) ^ sign16)
	return 2, nil
}

func (int16Codec) minSize() int { return 2 }

type int8Codec struct{}

func (int8Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return append(dst, uint8(*(*int8)(p))^sign8)
}

func (int8Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 1 {
		return 0, errTruncated("int8", 1, len(src))
	}
	*(*int8)(p) = int8(src[0] ^ sign8)
	return 1, nil
}

func (int8Codec) minSize() int { return 1 }

type uint64Codec struct{}

func (uint64Codec) Append(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

func (uint64Codec) Decode(src []byte) (uint64, int, error) {
	if len(src) < 8 {
		return 0, 0, errTruncated("uint64", 8, len(src))
	}
	return binary.BigEndian.Uint64(src), 8, nil
}

func (c uint64Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*uint64)(p))
}

func (c uint64Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*uint64)(p) = v
	return n, err
}

func (uint64Codec) minSize() int { return 8 }

// uintCodec, like intCodec, always writes 8 bytes.
type uintCodec struct{}

func (uintCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(*(*uint)(p)))
}

func (uintCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 8 {
		return 0, errTruncated("uint", 8, len(src))
	}
	v := binary.BigEndian.Uint64(src)
	if uint64(uint(v)) != v { // only on 32-bit machines
		return 0, errMalformed("uint", fmt.Sprintf("%d does not fit in uint", v))
	}
	*(*uint)(p) = uint(v)
	return 8, nil
}

func (uintCodec) minSize() int { return 8 }

// uintptrCodec, like intCodec, always writes 8 bytes.
type uintptrCodec struct{}

func (uintptrCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(*(*uintptr)(p)))
}

func (uintptrCodec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 8 {
		return 0, errTruncated("uintptr", 8, len(src))
	}
	v := binary.BigEndian.Uint64(src)
	if uint64(uintptr(v)) != v { // only on 32-bit machines
		return 0, errMalformed("uintptr", fmt.Sprintf("%d does not fit in uintptr", v))
	}
	*(*uintptr)(p) = uintptr(v)
	return 8, nil
}

func (uintptrCodec) minSize() int { return 8 }

type uint32Codec struct{}

func (uint32Codec) Append(dst []byte, v uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, v)
}

func (uint32Codec) Decode(src []byte) (uint32, int, error) {
	if len(src) < 4 {
		return 0, 0, errTruncated("uint32", 4, len(src))
	}
	return binary.BigEndian.Uint32(src), 4, nil
}

func (c uint32Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*uint32)(p))
}

func (c uint32Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*uint32)(p) = v
	return n, err
}

func (uint32Codec) minSize() int { return 4 }

type uint16Codec struct{}

func (uint16Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return binary.BigEndian.AppendUint16(dst, *(*uint16)(p))
}

func (uint16Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 2 {
		return 0, errTruncated("uint16", 2, len(src))
	}
	*(*uint16)(p) = binary.BigEndian.Uint16(src)
	return 2, nil
}

func (uint16Codec) minSize() int { return 2 }

type uint8Codec struct{}

func (uint8Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return append(dst, *(*uint8)(p))
}

func (uint8Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 1 {
		return 0, errTruncated("uint8", 1, len(src))
	}
	*(*uint8)(p) = src[0]
	return 1, nil
}

func (uint8Codec) minSize() int { return 1 }

// --- floats ---

// float64Key maps the bits of f to an unsigned integer with the same order
// as f: positive numbers get their sign bit set, negative numbers have all
// bits flipped so that larger magnitudes sort lower.
func float64Key(f float64) uint64 {
	b := math.Float64bits(f)
	return b ^ (uint64(int64(b)>>63) | sign64)
}

func float64FromKey(k uint64) float64 {
	return math.Float64frombits(k ^ (uint64(int64(^k)>>63) | sign64))
}

func float32Key(f float32) uint32 {
	b := math.Float32bits(f)
	return b ^ (uint32(int32(b)>>31) | sign32)
}

func float32FromKey(k uint32) float32 {
	return math.Float32frombits(k ^ (uint32(int32(^k)>>31) | sign32))
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, float64Key(v))
}

func (float64Codec) Decode(src []byte) (float64, int, error) {
	if len(src) < 8 {
		return 0, 0, errTruncated("float64", 8, len(src))
	}
	return float64FromKey(binary.BigEndian.Uint64(src)), 8, nil
}

func (c float64Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return c.Append(dst, *(*float64)(p))
}

func (c float64Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	v, n, err := c.Decode(src)
	*(*float64)(p) = v
	return n, err
}

func (float64Codec) minSize() int { return 8 }

type float32Codec struct{}

func (float32Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	return binary.BigEndian.AppendUint32(dst, float32Key(*(*float32)(p)))
}

func (float32Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 4 {
		return 0, errTruncated("float32", 4, len(src))
	}
	*(*float32)(p) = float32FromKey(binary.BigEndian.Uint32(src))
	return 4, nil
}

func (float32Codec) minSize() int { return 4 }

// Complex numbers are their real and imaginary parts, each encoded as a
// float of half the size.
type complex128Codec struct{}

func (complex128Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	v := *(*complex128)(p)
	dst = binary.BigEndian.AppendUint64(dst, float64Key(real(v)))
	return binary.BigEndian.AppendUint64(dst, float64Key(imag(v)))
}

func (complex128Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 16 {
		return 0, errTruncated("complex128", 16, len(src))
	}
	re := float64FromKey(binary.BigEndian.Uint64(src))
	im := float64FromKey(binary.BigEndian.Uint64(src[8:]))
	*(*complex128)(p) = complex(re, im)
	return 16, nil
}

func (complex128Codec) minSize() int { return 16 }

type complex64Codec struct{}

func (complex64Codec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	v := *(*complex64)(p)
	dst = binary.BigEndian.AppendUint32(dst, float32Key(real(v)))
	return binary.BigEndian.AppendUint32(dst, float32Key(imag(v)))
}

func (complex64Codec) decodeAt(src []byte, p unsafe.Pointer) (int, error) {
	if len(src) < 8 {
		return 0, errTruncated("complex64", 8, len(src))
	}
	re := float32FromKey(binary.BigEndian.Uint32(src))
	im := float32FromKey(binary.BigEndian.Uint32(src[4:]))
	*(*complex64)(p) = complex(re, im)
	return 8, nil
}

func (complex64Codec) minSize() int { return 8 }
