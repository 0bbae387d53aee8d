package weir

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/storage"
)

// checkInitialRestore reads the checkpoint or savepoint the job is told to
// start from (Options.Restore) and checks that the job can take its state
// (checkRestoreCoverage: operator uids, MaxParallelism) before the job
// master starts. The job master checks again at every deployment, but an
// error there counts as a failure of the attempt and is retried by the
// restart strategy, forever for an incompatibility that no retry can cure.
// A restore point that cannot be read is left to the job master, which
// reports it (or starts without state for "latest" with no checkpoint).
func checkInitialRestore(ctx context.Context, e *Environment, opts Options, jmOpts jobmaster.Options) error {
	var r *jobmaster.Restored
	switch opts.Restore {
	case "":
		return nil
	case "latest":
		dir, md, _, err := storage.CheckpointStorage{Store: jmOpts.Storage, JobID: jmOpts.JobID}.Latest(ctx)
		if err != nil {
			return nil
		}
		r = &jobmaster.Restored{Metadata: md, Store: jmOpts.Storage, Dir: dir}
	default:
		store, dir, md, err := storage.ResolveRestore(ctx, opts.Restore)
		if err != nil {
			return nil
		}
		r = &jobmaster.Restored{Metadata: md, Store: store, Dir: dir}
	}
	bc := &buildCtx{ctx: ctx, opts: opts, restore: r}
	if err := bc.checkRestoreCoverage(e); err != nil {
		return fmt.Errorf("weir: Options.Restore: %w", err)
	}
	return nil
}
