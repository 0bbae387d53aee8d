package codec

import (
	"bytes"
	"fmt"
	"testing"
)

// TestStackMoveAtEveryDepth encodes and decodes composite values (through
// reflectCodec and noescape) on fresh goroutines whose stacks are used down
// to every depth, in steps finer than any frame, so that some call grows and
// moves the stack at each point of Append and Decode, including between the
// two statements of noescape.
//
// Under -race (which turns on the compiler's checkptr instrumentation) the
// unsafe.Pointer conversion in noescape is a call to
// runtime.checkptrAlignment, which may grow the stack: without
// //go:nocheckptr on noescape, the pointer it read back still pointed into
// the old, freed stack, so Decode wrote the value there and returned a zero
// value, and Append encoded whatever the freed stack held by then (a
// pebble aggregating state's accumulator was lost under -race this way,
// and one run died with "found bad pointer in Go heap"). Without the
// instrumentation nothing runs between the two statements and this test
// passes either way: run it with -race.
func TestStackMoveAtEveryDepth(t *testing.T) {
	pair, err := Of[[2]int64]()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := Of[reading]()
	if err != nil {
		t.Fatal(err)
	}
	wantPair := [2]int64{1234567, 89}
	wantPairEnc := pair.Append(nil, wantPair)
	wantReading := sampleReading()
	wantReadingEnc := rd.Append(nil, wantReading)
	check := func() error {
		if enc := pair.Append(nil, wantPair); !bytes.Equal(enc, wantPairEnc) {
			return fmt.Errorf("[2]int64: Append gave %x, want %x", enc, wantPairEnc)
		}
		if got, _, err := pair.Decode(wantPairEnc); err != nil || got != wantPair {
			return fmt.Errorf("[2]int64: Decode gave %v, %v; want %v", got, err, wantPair)
		}
		return checkReading(rd, wantReading, wantReadingEnc)
	}
	// descend uses a small frame per level (its size depends on the
	// architecture and the instrumentation) and descendPadded a frame of
	// another size: together they move the stack's low end through every
	// point of Append and Decode, whatever the frame sizes are.
	for depth := range 1500 {
		for pad := range 4 {
			done := make(chan error)
			go func() { done <- descendPadded(pad, func() error { return descend(depth, check) }) }()
			if err := <-done; err != nil {
				t.Fatalf("stack depth %d, padding %d: %v", depth, pad, err)
			}
		}
	}
}

//go:noinline
func descend(depth int, f func() error) error {
	if depth == 0 {
		return f()
	}
	return descend(depth-1, f)
}

// descendPadded calls f below pad frames of its own, which are larger
// than descend's: it shifts the depths descend reaches.
//
//go:noinline
func descendPadded(pad int, f func() error) error {
	if pad == 0 {
		return f()
	}
	var b [8]byte
	b[pad%8] = byte(pad)
	err := descendPadded(pad-1, f)
	_ = b
	return err
}
