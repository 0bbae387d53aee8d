// Package codec turns values into bytes and back: keys, whose bytes decide
// the key group of a record and the order of keys in the pebble backend, and
// the records and state values that cross the network or go to disk.
//
// A Codec[T] appends the encoding of a T to a buffer and decodes one T from
// the start of a buffer. The common scalars have direct codecs (String,
// Bytes, Bool, Int, Int32, Int64, Uint32, Uint64, Float64) that use no
// reflection and no interface calls. Of[T] returns those for exactly those
// types and, for any other supported type, builds a codec by reflection once;
// that codec reaches struct fields by offset and does no reflection per
// value, except to iterate and fill maps.
//
// Every codec in this package is safe for concurrent use. Decode never
// retains src: strings and slices are copied out of it. String and Bytes
// also implement AliasDecoder, whose DecodeAlias returns a value pointing
// into src, for callers that will not modify src while the value lives.
// The codecs Of builds for composite types also implement PointerCodec,
// whose AppendFrom and DecodeInto read and write the value through a
// pointer, without the copies a large value passed by value costs.
//
// # Format
//
// Encodings are written to checkpoints and savepoints, so they must never
// change. They carry no type information and no field names: a value must be
// decoded by a codec for the type that encoded it, and adding, removing or
// reordering struct fields changes the format of the struct.
//
//   - bool: one byte, 0 or 1.
//   - Integers: fixed width, big-endian; signed integers have their sign bit
//     flipped. int, uint and uintptr always take 8 bytes, on every machine.
//   - float32, float64: the IEEE 754 bits, big-endian, with the sign bit
//     flipped for positive numbers and every bit flipped for negative ones.
//     complex64 and complex128: the real part, then the imaginary part.
//   - string, []byte: uvarint length, then the bytes. The top-level String
//     and Bytes codecs write the length too, so that Decode knows where the
//     value ends in a longer buffer.
//   - struct: its fields in declaration order, exported or not, with nothing
//     between them. Blank (_) and zero-size fields are skipped.
//   - [N]T: the N elements; the length is part of the type.
//   - []T: uvarint length, then the elements.
//   - map[K]V: uvarint length, then the key/value pairs sorted by the bytes of
//     the encoded keys, so that the same map always encodes the same way.
//   - *T: the byte 0 for nil, or 1 followed by the value pointed to.
//   - Types with AppendBinary (on T or *T) and UnmarshalBinary (on *T), such
//     as time.Time: uvarint length, then the bytes of AppendBinary.
//
// Named types are encoded as their underlying type, unless they have the
// binary methods above.
//
// # Order
//
// Integers and floats encode so that bytes.Compare of two encodings agrees
// with the numeric order of the values (-Inf < negative < -0 < +0 < positive
// < +Inf; NaNs sort outside the infinities by sign). A struct or array made
// only of such fields therefore sorts lexicographically by field. Anything
// with a length prefix (strings, slices, maps) does not keep its order: "b"
// encodes below "aa".
//
// # Equality
//
// Equal values encode to equal bytes, so a key's bytes, and so its key
// group, depend only on its value. Two cases deserve care:
//
//   - Nil and empty slices and maps encode alike (length 0) and both decode
//     as nil. A nil pointer and a pointer to a zero value do differ.
//   - -0.0 and +0.0 are == but encode differently, so that every float
//     round-trips bit for bit. Normalize them before keying by a float.
//
// # Errors
//
// Decode returns an error wrapping ErrTruncated when src ends too early and
// ErrMalformed when it holds bytes that no Append writes; it never panics.
// A decoded length is checked against the bytes left before anything is
// allocated for it. Of returns an error wrapping ErrUnsupported for types it
// cannot encode: channels, functions, interfaces, unsafe.Pointer and
// recursive types. Give those a hand-written Codec.
//
// # Usage
//
//	type Reading struct {
//		Device  string
//		At      int64
//		Celsius float64
//	}
//
//	c, err := codec.Of[Reading]()
//	if err != nil {
//		return err // Reading has a field that codec cannot encode
//	}
//	buf = c.Append(buf[:0], Reading{Device: "d1", At: 1700000000, Celsius: 21.5})
//	r, n, err := c.Decode(buf)
//	if err != nil {
//		return fmt.Errorf("decode reading: %w", err)
//	}
//	buf = buf[n:] // the next value, if any, starts here
package codec
