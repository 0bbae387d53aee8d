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
