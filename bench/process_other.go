//go:build !linux

package bench

import (
	"errors"
	"time"
)

// PeakRSS returns the peak resident set size of the process in bytes; it is
// implemented on Linux only.
func PeakRSS() (int64, error) {
	return 0, errors.New("peak rss: only measured on Linux (VmHWM)")
}

// CPUTime returns the CPU time the process has used so far; it is measured
// on Linux only, and is 0 elsewhere.
func CPUTime() time.Duration { return 0 }
