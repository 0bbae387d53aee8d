package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// The readers and writers start franz-go clients and goroutines of their
// own; Close must end them all.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
