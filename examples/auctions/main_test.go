package main

import (
	"context"
	"testing"
)

// TestAuctions runs the example: checkpoint, savepoint and stop succeed
// and windows fire.
func TestAuctions(t *testing.T) {
	if err := run(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
