package jobstate

import (
	"testing"

	"github.com/weirstream/weir/internal/testutil/purity"
)

// TestPurity fails if a non-test file of the package imports a package
// that does I/O, reads the clock, locks or logs, or starts a goroutine.
func TestPurity(t *testing.T) {
	purity.Check(t, "jobstate", "pass `now` and let the JobMaster do it")
}
