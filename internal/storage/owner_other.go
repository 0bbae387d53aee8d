//go:build !unix

package storage

import "os"

// flockExclusive does not lock where flock is missing: a second owner is
// then not detected.
func flockExclusive(*os.File) error { return nil }
