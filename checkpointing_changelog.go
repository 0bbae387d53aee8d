package weir

import "time"

// Changelog-based incremental checkpoints of the pebble backend
// (Options.Checkpointing.Changelog; Flink's FLIP-158, state.changelog.*):
// each checkpoint uploads the log of the writes made since the previous one,
// and the state is materialized (a native checkpoint uploaded in the
// background) from time to time. The strategy itself — the log's cuts, the
// materializations, which files a checkpoint refers to, restore by replay —
// is internal/statebackend/incremental's (changelog.go there).

// ChangelogOptions configures changelog-based incremental checkpoints
// (Options.Checkpointing.Changelog), as Flink's state.changelog.* options.
type ChangelogOptions struct {
	// Enabled turns the changelog on (Flink's state.changelog.enabled): each
	// checkpoint uploads the writes made since the previous one, whatever
	// the database compacted, and the state is materialized (a native
	// checkpoint uploaded in the background) from time to time. Needs
	// StateBackend "pebble" and Incremental. Default: false.
	Enabled bool
	// MaterializationInterval is the time between two materializations
	// (Flink's state.changelog.periodic-materialize.interval): at the first
	// checkpoint after it elapsed since the last one started, a new one is
	// taken. Default (0): 10 minutes. Negative: only the size trigger.
	MaterializationInterval time.Duration
	// MaterializationLogRatio triggers a materialization when the log
	// since the last one exceeds this fraction of the last
	// materialization's size: it bounds the log a restore replays and the
	// storage the log takes. Default (0): 0.5. Negative: only the interval.
	MaterializationLogRatio float64
}
