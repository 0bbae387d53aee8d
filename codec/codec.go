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
