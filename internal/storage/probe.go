package storage

import (
	"context"
	"fmt"
)

// Probe checks, without writing anything, that st can be used: it lists a
// prefix that holds nothing. For an s3 store that is the first request to
// the service, so a missing bucket, wrong credentials or an unreachable
// endpoint are reported now, when a job starts, and not at its first
// checkpoint. Memory and file stores always pass (a file store's directory
// is created by its first write).
func Probe(ctx context.Context, st Store) error {
	if _, err := st.List(ctx, "weir-probe/"); err != nil {
		return fmt.Errorf("%s is not usable: %w", st.URL(), err)
	}
	return nil
}
