package heap_test

import (
	"testing"

	"github.com/weirstream/weir/internal/statebackend/statetest"
)

// TestSuite runs the backends' conformance suite on heap, with pebble as
// the reference.
func TestSuite(t *testing.T) { statetest.Run(t, statetest.Heap, statetest.Pebble) }
