package snapshot

import (
	"testing"

	"github.com/weirstream/weir/internal/testutil/purity"
)

// TestPurity fails if a non-test file of the package does I/O, reads the
// clock, locks, logs or starts a goroutine.
func TestPurity(t *testing.T) {
	purity.Check(t, "snapshot", "take it as an event and let the incremental state do it")
}
