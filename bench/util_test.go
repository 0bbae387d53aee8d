package bench

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func verifyNoLeaks(m *testing.M) { goleak.VerifyTestMain(m) }

// parseSizes parses a comma-separated list of record counts.
func parseSizes(s string) ([]int64, error) {
	var sizes []int64
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad record count %q in %q: want positive integers separated by commas", f, s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// sizeLabel writes a record count the short way: 1M, 10M, 500k, 1234.
func sizeLabel(n int64) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.FormatInt(n, 10)
}
