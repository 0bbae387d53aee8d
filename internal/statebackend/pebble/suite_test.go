package pebble_test

import (
	"testing"

	"github.com/weirstream/weir/internal/statebackend/statetest"
)

// TestSuite runs the backends' conformance suite on pebble, with heap as
// the reference.
func TestSuite(t *testing.T) { statetest.Run(t, statetest.Pebble, statetest.Heap) }
