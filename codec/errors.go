package codec

import (
	"errors"
	"fmt"
)

var (
	// ErrTruncated is returned, wrapped with what was being decoded, when
	// src ends before the value does.
	ErrTruncated = errors.New("codec: truncated input")

	// ErrMalformed is returned, wrapped with what was being decoded, when src
	// holds bytes that no Append produces, such as a bool byte other than 0
	// or 1 or a length that overflows 64 bits.
	ErrMalformed = errors.New("codec: malformed input")

	// ErrUnsupported is returned, wrapped with the type and the path to it,
	// by Of when it cannot build a codec for a type.
	ErrUnsupported = errors.New("codec: unsupported type")
)

func errTruncated(what string, need, have int) error {
	return fmt.Errorf("decode %s: need %d bytes, have %d: %w", what, need, have, ErrTruncated)
}

func errMalformed(what, why string) error {
	return fmt.Errorf("decode %s: %s: %w", what, why, ErrMalformed)
}
