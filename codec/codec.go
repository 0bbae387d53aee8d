package codec

// Codec encodes and decodes values of type T. Encodings of keys must be
// deterministic: equal keys give equal bytes, because key bytes decide the key
// group of a record and the order of keys in the pebble backend.
//
// A Codec must be safe for concurrent use by several goroutines.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended slice.
	Append(dst []byte, v T) []byte
	// Decode decodes one value from the start of src and returns it with the
	// number of bytes it used. A truncated or malformed input gives an error,
	// never a panic.
	Decode(src []byte) (v T, n int, err error)
}

// AliasDecoder is implemented by codecs that can decode without copying:
// DecodeAlias is Decode, except that the value may share memory with src
// (a string or []byte of it pointing into src). The caller promises not to
// modify src for as long as the value is in use; it is for a buffer
// handed over for good, or for a consumer that keeps no value past a call
// (object reuse). The String and Bytes codecs implement it.
type AliasDecoder[T any] interface {
	DecodeAlias(src []byte) (v T, n int, err error)
}

// PointerCodec is implemented by codecs that encode from and decode into
// memory the caller holds, without copying the value on the way:
// AppendFrom(dst, &v) is Append(dst, v), and DecodeInto(src, &v) stores in
// v what Decode(src) returns (on an error, v is left zero). For a large
// value (a struct of many fields, an array) that saves the copies a call
// by value makes; the network data plane encodes from its callers' slices
// and decodes into its batches with them. Of's codecs of structs, arrays,
// slices, maps and pointers implement it (those of scalars and strings,
// small by value, do not).
type PointerCodec[T any] interface {
	AppendFrom(dst []byte, v *T) []byte
	DecodeInto(src []byte, v *T) (n int, err error)
}
